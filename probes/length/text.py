"""The words of the ``length`` probe's findings: titles, summaries and fixes, written from what was
measured (the finding's evidence, and the few facts a sentence needs beyond it).
``decisions.decide_length_bias`` chooses the severity and assembles the finding; nothing here
decides anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envaudit.probes._shared.endings import fmt


def _per_step(evidence: Mapping[str, Any]) -> str:
    return f"{evidence['length_effect']['estimate']:+.3g}"


# -- every step pays the same --------------------------------------------------------------------
def constant_words(c: float) -> str:
    return "length" if c == 1 else f"{c:g} × length"


def constant_title(c: float) -> str:
    return f"Return equals {constant_words(c)}"


def constant_summary(c: float) -> str:
    words = constant_words(c)
    return f"Every step pays {c:g}, so the return equals {words}; if that is intended, ignore."


FIX_CONSTANT = ("Nothing to change if surviving longer is the task (as in CartPole); otherwise pay for "
                "progress rather than for steps.")


# -- random play never ends the env ----------------------------------------------------------------
UNENDING_TITLE = "Every exploration episode ran to the step limit"


def unending_summary(evidence: Mapping[str, Any]) -> str:
    return (f"All {evidence['n']} exploration episodes were truncated at {evidence['length']} steps: random play "
            "never finishes this env, so whether return depends on length could not be measured.")


FIX_UNENDING = ("Nothing to change if the task is meant to be hard to stumble on; the trained (grpo) "
                "probe and scripted policies still check the incentives.")


# -- farming: a long strategy on the ladder --------------------------------------------------------
PROGRESS_TITLE = "Long episodes keep their progress, extra steps add nothing"


def progress_summary(evidence: Mapping[str, Any]) -> str:
    return (f"{evidence['policy'].capitalize()} earns {fmt(evidence['mean_strategy'])} without succeeding, "
            f"more than failing outright ({fmt(evidence['mean_failure'])}), but the idle steps of those "
            f"episodes add {fmt(evidence['marginal'].get('mean_tail_pay'))} in all: the return comes from progress "
            "made on the way (shaped or partial credit), not from stalling, so there is nothing to farm.")


FIX_PROGRESS = ("Nothing to change if partial progress is meant to pay; potential-based shaping keeps the "
                "optimal policy unchanged.")


def farming_title(level: str) -> str:
    return "Step farming pays as much as success" if level == "at_least_success" else "Step farming pays more than failing"


def farming_summary(level: str, evidence: Mapping[str, Any]) -> str:
    what = (f"Dragging episodes out ({evidence['policy']}, {fmt(evidence['mean_strategy_length'])} steps) "
            f"earns {fmt(evidence['mean_strategy'])} without succeeding")
    idle = f"{evidence['marginal']['pay_per_tail_step']:+.3g}"
    if level == "at_least_success":
        return (f"{what}, at least as much as succeeding ({fmt(evidence['mean_success'])}): each extra step "
                f"pays {idle} once progress stops, so an agent learns to farm steps instead of finishing the task.")
    return (f"{what}, more than failing outright ({fmt(evidence['mean_failure'])}): each extra "
            f"step pays {idle} once progress stops, so an agent that cannot finish learns to stall for reward.")


FIX_FARMING = ("Stop paying per step (or pay only for measurable progress, once per milestone), "
               "so that a longer episode earns nothing by being longer.")

CORRELATION_TITLE = "Return rises with episode length"


def correlation_summary(evidence: Mapping[str, Any]) -> str:
    held = ("Beyond success, each" if "success" in evidence["regression"]["coef"]
            else "With no success signal to hold fixed, each")
    return (f"{held} extra step adds {_per_step(evidence)} to the return on average, but no scripted long strategy "
            "out-earned an honest failure, so this is a correlation to keep an eye on.")


FIX_CORRELATION = "If longer episodes are not meant to pay more, look for per-step rewards."


# -- brevity: quitting at once on the ladder -------------------------------------------------------
def cycle_title(level: str) -> str:
    return ("Pacing back and forth pays as much as succeeding" if level == "at_least_success"
            else "Pacing back and forth pays")


def cycle_summary(level: str, evidence: Mapping[str, Any]) -> str:
    cycle = " then ".join(f"'{a}'" for a in evidence["cycle"])
    test = evidence["cycle_vs_end_now"]
    head = (f"Repeating {cycle} {evidence['laps']} more times and then ending with '{evidence['honest_ending']}' "
            f"earns {test['mean']:.3g} more than ending that way at once from the same state "
            f"({test['n_pairs']} paired replays, p={test['p_value']:.2g}); each lap comes back to the same "
            f"observation, so the loop can be run until the step limit")
    if level == "at_least_success":
        return (f"{head}, and it earns {evidence['mean_cycle']:.3g}, at least what honest success earns "
                f"({evidence['mean_success']:.3g}, {evidence['success_source']}): a return maximiser loops "
                "instead of finishing.")
    success = evidence.get("mean_success")
    if success is None:
        return f"{head}; no honest success was found to weigh it against, so it is not graded as beating success."
    if evidence["mean_cycle"] < success:
        return f"{head}, though less than succeeding ({success:.3g})."
    return (f"{head}; it earns {evidence['mean_cycle']:.3g} against honest success's {success:.3g} "
            f"({evidence['success_source']}), too few or too spread for the replays to show it at least as much.")


FIX_CYCLE = ("Pay for progress only once (potential-based shaping: charge a step back what the step forward "
             "paid, or pay each milestone the first time it is reached), so a loop nets nothing.")


QUIT_TITLE = "Quitting at once pays as much as success"


def quit_summary(evidence: Mapping[str, Any]) -> str:
    return (f"Ending the episode at once ({evidence['policy']}) earns {fmt(evidence['mean_strategy'])} "
            f"without succeeding, at least as much as succeeding ({fmt(evidence['mean_success'])}): a brevity "
            "bonus that teaches an agent to stop before doing the task.")


FIX_QUIT = ("Make any bonus for short episodes conditional on success, and keep it smaller than "
            "the success reward.")

STEP_COST_TITLE = "A step cost shortens episodes"


def step_cost_summary(evidence: Mapping[str, Any]) -> str:
    return (f"A typical step pays {evidence['typical_step_reward']:+.3g} (each extra step lowers the return by "
            f"{_per_step(evidence)} on average, larger penalties included), so shorter episodes earn more; "
            "fine if intended.")


FIX_STEP_COST = "Nothing to change if a step cost is intended; keep it small next to the success reward."


# -- delaying a success ----------------------------------------------------------------------------
DELAY_TITLE = "Delaying success pays"


def delay_summary(evidence: Mapping[str, Any]) -> str:
    where = "before the final action" if evidence["at"] == "end" else "before starting the task"
    return (f"Succeeding after taking '{evidence['delay_action']}' {evidence['k']} more times {where} earns "
            f"{evidence['mean_delayed']:.3g}, more than succeeding at once ({evidence['mean_at_once']:.3g}) on the "
            "same starts, so a return maximiser learns to hold a success back and collect the extra steps' pay first.")


def delay_fix(evidence: Mapping[str, Any]) -> str:
    return (f"Pay '{evidence['delay_action']}' nothing (or a cost) when it does not complete the task — e.g. give "
            "a format score only on the final answer — so that succeeding later never earns more than succeeding now.")


# -- farming and a delayed success: one reward path ------------------------------------------------
def farming_also(farming: Mapping[str, Any]) -> str:
    """Farming's corroboration inside a delayed-success finding (``farming``: its evidence)."""
    return (f" Farming the same steps without succeeding earns {fmt(farming.get('mean_strategy'))}, "
            f"more than failing outright.")


def delay_also(delay: Mapping[str, Any]) -> str:
    """A delayed success's corroboration inside a farming finding (``delay``: its evidence)."""
    return (f" Delaying a success pays too: succeeding after {delay['k']} more '{delay['delay_action']}' "
            f"earns {fmt(delay['mean_delayed'])} against {fmt(delay['mean_at_once'])} at once.")


# -- a logged run (``logged.analyse``) ------------------------------------------------------------
def logged_correlation_title(longer: bool) -> str:
    return ("Return rises with episode length in the logged run" if longer
            else "Shorter episodes earn more in the logged run")


def logged_correlation_summary(fit: Mapping[str, Any], coef: Mapping[str, Any]) -> str:
    held = "Beyond success, each" if "success" in fit["coef"] else "With no success signal to hold fixed, each"
    return (f"{held} extra step changes the logged return by {coef['estimate']:+.3g} on average (outcome and "
            "tool failures held fixed). A correlation in the trainer's own episodes: scan the env "
            "(`envaudit scan`) to see whether a policy can farm it.")


FIX_LOGGED_CORRELATION = ("If longer (or shorter) episodes are not meant to pay more, look for per-step rewards or "
                          "length penalties.")

LOGGED_DELAY_TITLE = "Delaying success pays in the logged run"


def logged_delay_summary(d: Mapping[str, Any]) -> str:
    test = d["test"]
    return (f"Within the logged groups, successes reached after about {d['extra_steps']:.1f} extra steps "
            f"earned {test['mean_delayed']:.2f} on average against {test['mean_fastest']:.2f} for the "
            f"fastest success from the same start ({d['n_sets']} groups with both); a return maximiser "
            "delays a success it could reach at once.")


FIX_LOGGED_DELAY = ("Pay for the outcome once: no per-attempt or per-step credit that a successful episode "
                    "keeps collecting before it succeeds.")
