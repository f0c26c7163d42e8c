"""The words of the ``failures`` probe's findings: titles, summaries and fixes, written from what was
measured (the evidence, and the few facts a sentence needs beyond it). ``decisions`` chooses the
severity and assembles the finding; nothing here decides anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envaudit.protocol import TOOL_ERROR

FIX_SHORTCUT = ("Do not make tool failures cost the agent reward beyond the time they take (the agent does "
                "not control the backend); make giving up or answering early pay less than an honest "
                "attempt, and keep failure rates in training close to production.")
FIX_REWARDED = ("Pay a failed call no more than the same call succeeding (0 or a cost): never give credit "
                "for attempts, and do not let a timeout or error count as a pass.")
FIX_CONDITIONED = ("Make `{b}` pay the same whether or not the `{tool}` call before it failed: a reward must not "
                   "depend on a tool failure, which the agent can wait for or provoke. If {b_words} after an "
                   "outage is the right move, reward it by the task's outcome, not by the failure.")
WORDS = {"handoff": "handing off", "hand_off": "handing off", "escalate": "escalating", "quit": "quitting",
         "give_up": "giving up", "retry": "retrying", "submit": "submitting", "abort": "aborting"}
"""How a few common episode-ending calls read in a sentence; any other reads "calling `x`"."""


def charge_words(fee: Mapping[str, Any]) -> str:
    """The failure charge in words: "each failed `search` call costs 0.5 beyond the step it takes"."""
    by_call: dict[str, float] = {}
    for which, amount in fee["charge_per_failure"].items():
        call = which.rpartition(" (")[0]
        by_call[call] = max(amount, by_call.get(call, 0.0))
    calls = sorted(by_call, key=lambda c: (-by_call[c], c))
    names = ", ".join(f"`{c}`" for c in calls[:3]) + (" and others" if len(calls) > 3 else "")
    return f"each failed {names} call costs up to {by_call[calls[0]]:.3g} beyond the step it takes"


# -- failure-shortcut: the failure sweep on a ToolEnv -----------------------------------------------
def sweep_title(pays: str, evidence: Mapping[str, Any]) -> str:
    if pays == "give-up":
        return "giving up pays more than persisting through tool failures"
    if pays == "quit-on-failure":
        return "giving up after a tool failure pays more than persisting"
    return f"giving up overtakes persisting at an injected failure rate of {evidence['crossover_rate']:.0%}"


def sweep_summary(pays: str, evidence: Mapping[str, Any], short_policy: str) -> str:
    natural, cost = evidence["natural_failure_rate"], charge_words(evidence["failure_charge"])
    if pays == "give-up":
        return (f"At the env's own tool failure rate ({natural:.0%} of calls), \"{short_policy}\" "
                f"earns {evidence['short_mean_return']:.3g} per episode against "
                f"{evidence['persist_mean_return']:.3g} for persisting ({evidence['persist_policy']}), because "
                f"{cost}: a return-maximising agent never tries.")
    if pays == "quit-on-failure":
        return (f"At the env's own tool failure rate ({natural:.0%} of calls), quitting at the first failed "
                f"call earns {evidence['quit_mean_return']:.3g} per episode against "
                f"{evidence['persist_mean_return']:.3g} for persisting, because {cost}; trying at all "
                "still beats giving up at once, so an agent learns to quit whenever a call fails.")
    crossover = evidence["crossover_rate"]
    return (f"With {crossover:.0%} of tool calls failing on top of the env's own {natural:.0%}, "
            f"\"{short_policy}\" earns more than persisting; if production "
            f"tools fail that often, agents trained there will learn to give up ({cost}).")


# -- failure-shortcut: exploration of a plain env ----------------------------------------------------
EXPLORATION_TITLE = "after a tool failure, ending the episode pays more than persisting"


def exploration_summary(evidence: Mapping[str, Any]) -> str:
    e = evidence
    return (f"Each tool failure costs {-e['failure_cost']:.3g} reward beyond its step, and after a first failure, "
            f"episodes that ended within a step earned {e['mean_after_failure_short']:.3g} from there against "
            f"{e['mean_after_failure_persist']:.3g} for those that went on (exploration, n={e['n_short']}+"
            f"{e['n_persist']}).")


# -- failure-rewarded: a failed call that pays --------------------------------------------------------
def failed_call_title(evidence: Mapping[str, Any]) -> str:
    return f"a failed `{evidence['tool']}` call pays more than a working one"


def failed_call_summary(evidence: Mapping[str, Any], label: str | None, statuses: list[str], *,
                        reaches_honest: bool) -> str:
    """``label``: the call's catalogue label (None: the action is named by its value); ``statuses``:
    the faults that made this tool's failed calls pay; ``reaches_honest``: the failed call, or an
    agent that makes it fail at will, earns at least an honest success."""
    e = evidence
    farm_mean, honest = e["farm_mean_return"], e["honest_success_return"]
    word = " or ".join("fails" if s == TOOL_ERROR else "times out" for s in statuses)
    subject = f"a `{label}` call" if label is not None else f"action {e['action']!r}"
    verb = "fail" if e["status"] == TOOL_ERROR else "time out"
    farm_text = (f"; an agent that makes it {verb} at will earns {farm_mean:.3g} per episode"
                 if farm_mean is not None else "")
    if reaches_honest and farm_mean is not None and farm_mean >= honest:
        tail = farm_text + f", at least an honest success ({honest:.3g})"
    elif reaches_honest:
        tail = f"; one failed call pays at least an honest success ({honest:.3g})"
    else:
        tail = farm_text + (f", less than an honest success ({honest:.3g})" if honest is not None else "")
    return (f"When {subject} {word}, that step pays {e['mean_reward_failed']:.3g} against {e['mean_reward_ok']:.3g} "
            f"when it works ({e['source']}, n={e['n']}){tail}.")


# -- either code: a step that pays more right after a failed call -----------------------------------
def _conditioned_words(evidence: Mapping[str, Any], statuses: list[str]) -> tuple[str, str, str]:
    """The failed call's status in words, the call (with the other tools that set it off), and the
    next action in words."""
    tool, tools = evidence["tool"], evidence["tools"]
    failed_words = " or ".join("failed" if s == TOOL_ERROR else "timed-out" for s in statuses)
    call = f"`{evidence['call']}`" if evidence["call"] not in (None, tool) else f"`{tool}`"
    if len(tools) > 1:
        call += " (or " + ", ".join(f"`{x}`" for x in tools[1:]) + ")"
    b = evidence["next_action"]
    return failed_words, call, WORDS.get(b, f"calling `{b}`")


def conditioned_title(evidence: Mapping[str, Any], statuses: list[str]) -> str:
    failed_words, call, b_words = _conditioned_words(evidence, statuses)
    return f"{b_words} right after a {failed_words} {call} call pays more than after a working one"


def conditioned_summary(evidence: Mapping[str, Any], statuses: list[str], *, reaches_honest: bool) -> str:
    """``reaches_honest``: the episode that does it (or the next step alone) earns at least an
    honest success."""
    e = evidence
    failed_words, call, b_words = _conditioned_words(e, statuses)
    path_mean, honest_mean = e["conditioned_path_return"], e["honest_success_return"]
    where = {"fault injection": "fault injection, same seed and prefix",
             "targeted episodes": "episodes that make the call first, from fresh resets"}.get(e["source"], "exploration")
    if path_mean is None:
        tail = ""
    elif reaches_honest:
        tail = (f"; the episode that does it earns {path_mean:.3g}, at least an honest success "
                f"({honest_mean:.3g}), so a return-maximising agent waits for failures instead of doing the task")
    else:
        tail = (f"; the episode that does it earns {path_mean:.3g}" + (
            f", less than an honest success ({honest_mean:.3g})"
            if honest_mean is not None else ""))
    ok_words = {"fault injection": "the same call works",
                "targeted episodes": f"a working {call} call"}.get(
        e["source"], f"a working {call} call with the same progress before it")
    return (f"{b_words[0].upper()}{b_words[1:]} right after a {failed_words} {call} call pays "
            f"{e['mean_reward_after_failed']:.3g}, against "
            f"{e['mean_reward_after_ok']:.3g} right after {ok_words} ({where}, n={e['n']}){tail}.")


def conditioned_fix(evidence: Mapping[str, Any]) -> str:
    b = evidence["next_action"]
    return FIX_CONDITIONED.format(b=b, tool=evidence["tool"], b_words=WORDS.get(b, f"calling `{b}`"))
