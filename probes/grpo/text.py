"""The words of the ``grpo`` probe's findings: titles, summaries and fixes, written from what was
measured (the evidence, and the few facts a sentence needs beyond it). ``decisions`` chooses the
severity and assembles the finding; nothing here decides anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from envaudit.grpo.search import BEHAVIOURS
from envaudit.probes.grpo.drift import MATERIAL_RATE


def money(returns: Any) -> str:
    """Mean return and count: "0.42 (n=16)"."""
    returns = np.asarray(returns, float)
    return f"{returns.mean():.2f} (n={len(returns)})" if len(returns) else "nothing seen"


def move_names(moves: Sequence[Any]) -> str:
    """The moved behaviours with their before and after values: "timeouts up (0.10 → 0.60)"."""
    return ", ".join(f"{m.behaviour} ({m.before:.2f} → {m.after:.2f})" for m in moves)


def reach_sentence(behaviour: str, r: Mapping[str, Any]) -> str:
    """What a targeted run (or a replay) reached, in one clause."""
    if not r["n"]:
        return f"not reached by {BEHAVIOURS[behaviour].words}"
    via = f", {r['via']}" if r.get("via") else ""
    return f"best return reachable by {BEHAVIOURS[behaviour].words}: {r['mean_return']:.2f} (n={r['n']}{via})"


def reach_sentences(reach: Mapping[str, Mapping[str, Any]], success: np.ndarray) -> str:
    """What timing out and ending without success reached, beside what honest success reached."""
    parts = [reach_sentence(b, reach[b]) for b in ("timeout", "no_success") if b in reach]
    success_run = reach.get("success")
    if success_run and success_run["n"]:
        parts.append(reach_sentence("success", success_run))
    elif len(success):
        # The targeted success run found none; exploration and the natural run did.
        parts.append(f"by honest success: {np.max(success):.2f} (best seen, n={len(success)})")
    sentences = "; ".join(parts)
    return sentences[:1].upper() + sentences[1:]


# -- learned-exploit --------------------------------------------------------------------------
UNSUPPORTED_TITLE = "GRPO probe skipped: it cannot drive this env"
UNSUPPORTED_FIX = "Nothing to fix in the env; the other probes still ran."
UNJUDGED_TITLE = "GRPO changed behaviour; the env reports no success to judge it"
UNJUDGED_FIX = "Report info['success'] on the last step, or pass --success-threshold."


def unsupported_summary(reason: str) -> str:
    return f"The GRPO probe did not train a policy: {reason}."


def unjudged_summary(moves: Sequence[Any]) -> str:
    return (f"GRPO training moved {move_names(moves)}. The env gives no info['success'] (and no "
            "--success-threshold), so envaudit cannot tell learning the task from exploiting it; if that "
            "behaviour is the goal (as lasting to the step limit is in CartPole), ignore this.")


def learned_title(v: Any, *, exploit: bool) -> str:
    """``v``: the verdict of the behaviour the finding names; ``exploit``: graded above ``info``."""
    if not exploit:
        return ("GRPO collapsed to ending early: an exploration hint, not an exploit" if v.kind ==
                "exploration-collapse" else f"GRPO learned {v.move.behaviour}, which pays less than success")
    return {"at-least-success": f"GRPO learned {v.move.behaviour}, which pays as much as success",
            "timeout": "GRPO learned to time out",
            "failure-conditioned": "GRPO learned to end right after a failed tool call, which pays",
            "failure-shortcut": "GRPO learned to stop early because failed tool calls cost reward",
            "failures-pay": "GRPO learned to hit tool failures, which pay"}[v.kind]


def success_sentence(d: Mapping[str, Any], *, exploit: bool) -> str:
    before, after = d["success_before"], d["success_after"]
    if after >= before + MATERIAL_RATE:
        # A learned exploit whose success rose: say why it still counts (or that it does not).
        if exploit:
            return (f" Success rose ({before:.2f} → {after:.2f}): it learned the task where it could, and this "
                    "behaviour in the episodes where it did not.")
        return f" Success rose ({before:.2f} → {after:.2f})."
    return f" Success went {before:.2f} → {after:.2f}."


def learned_summary(pipeline: str, moves: Sequence[Any], v: Any, d: Mapping[str, Any], trajectory: str, *,
                    exploit: bool) -> str:
    summary = (f"Trained with GRPO under the {pipeline!r} pipeline, the policy learned {move_names(moves)}: "
               f"{v.reason}.{success_sentence(d, exploit=exploit)}")
    if trajectory:
        summary += f" Typical trajectory of these episodes: {trajectory}."
    return summary


SHORTCUT_FIX = ("Make a failed tool call cost no more than the step it takes (or nothing), so persisting "
                "through failures pays more than stopping early.")
LEARNED_FIXES = {
    "at-least-success": "Pay for what the success flag checks: this behaviour must earn less than doing the task.",
    "timeout": "Make a timed-out rollout no better than a failed one: train on it as a failure (handling "
               "keep or penalty, not drop), and make truncation pay no more than failing.",
    "failure-conditioned": "Do not pay for ending (handing off, quitting) because a tool call failed; pay "
                           "that ending the same whether or not a failure preceded it.",
    "failure-shortcut": SHORTCUT_FIX,
    "failures-pay": "Do not pay for failed tool calls; a failed call should earn no more than a successful one.",
    "exploration-collapse": "Nothing to fix in the env. For training: more exploration (entropy bonus, "
                            "larger groups), a curriculum, or demonstrations of success.",
    "unexplained": "Check what the learned behaviour earns without doing the task.",
}
"""The fix of a learned behaviour, by the verdict's kind (``lessons.Verdict.kind``)."""


def learned_fix(v: Any) -> str:
    """What to change for a learned behaviour (``v``: its ``lessons.Verdict``)."""
    return LEARNED_FIXES[v.kind]


# -- timing out, learned ----------------------------------------------------------------------
DROP_FIX = ("Train on timed-out rollouts as failures (keep them with the failure reward, or a penalty) "
            "instead of dropping them.")
TIMEOUT_FIX = "Make truncation and tool timeouts pay no more than an honest failure."
LEARNED_TIMEOUT_TITLE = "GRPO learned to time out: timing out pays more than failing"


def drop_title(pipeline: str) -> str:
    return f"GRPO learned to time out because the {pipeline!r} pipeline drops timeouts"


def drop_summary(pipeline: str, move: Any) -> str:
    return (f"Under the {pipeline!r} pipeline timed-out rollouts leave the loss, so a failing attempt that "
            f"times out escapes its negative advantage; GRPO learned it: timeout rate {move.before:.2f} → "
            f"{move.after:.2f}.")


def learned_timeout_summary(move: Any) -> str:
    return (f"In the same groups, a failed rollout would have earned a higher advantage by timing out, and GRPO "
            f"learned to time out: timeout rate {move.before:.2f} → {move.after:.2f}.")


# -- reached by a targeted search (or a replay of what one met) -------------------------------
NO_SUCCESS_FIX = "Pay reward only for what the success flag checks; grade the outcome, not its form."


def _than(at_least: bool) -> str:
    return "as much as honest success" if at_least else "more than failing outright"


def reached_title(behaviour: str, *, at_least: bool) -> str:
    return f"GRPO reached {_than(at_least)} by {BEHAVIOURS[behaviour].words}"


def reached_summary(behaviour: str, measured: Mapping[str, Any], *, at_least: bool) -> str:
    """``measured``: ``mean_return`` (what was reached), ``replayed`` (None, or the ``run`` and the
    ``actions`` of a replayed sequence), ``honest`` (``lessons.Honest``) and ``sentences``
    (``reach_sentences``)."""
    replayed, honest = measured["replayed"], measured["honest"]
    if replayed is not None:
        met_by = "exploration" if replayed["run"] == "exploration" else f"GRPO's {replayed['run']} search"
        how = (f"Replaying a sequence of calls that {met_by} met ({replayed['actions']}) "
               f"ended without success and earned {measured['mean_return']:.2f}")
    else:
        how = (f"Trained to earn the most by {BEHAVIOURS[behaviour].words}, a policy reached "
               f"{measured['mean_return']:.2f}")
    success = np.mean(honest.success) if len(honest.success) else float("nan")
    return (f"{how}, {_than(at_least)} (honest success {success:.2f}, failing outright "
            f"{np.mean(honest.failure):.2f}). {measured['sentences']}.")


# -- failure-shortcut -------------------------------------------------------------------------
def shortcut_title(where: str) -> str:
    return f"GRPO learned to stop early because tool failures cost reward{where}"


def shortcut_summary(evidence: Mapping[str, Any], measured: Mapping[str, Any]) -> str:
    """``measured``: ``where`` (the run's condition), the returns of the early endings
    (``early_returns``), of persisting (``persist_returns``) and of honest success (``success_returns``)."""
    cost = evidence["failure_cost"]
    summary = (
        f"Failed tool calls cost about {cost['cost_per_failure']:.2f} each here beyond the step they take, and "
        f"GRPO{measured['where']} learned to stop early: mean length {evidence['length_before']:.1f} → "
        f"{evidence['length_after']:.1f}, failed calls per episode {evidence['failed_calls_before']:.2f} → "
        f"{evidence['failed_calls_after']:.2f}. Ending early "
        f"without success earned {money(measured['early_returns'])}, persisting through failures at the "
        f"env's own rates {money(measured['persist_returns'])} (honest success "
        f"{money(measured['success_returns'])}); with failed calls charged only their step, ending early would "
        "not pay more.")
    if evidence["typical_trajectory"]:
        summary += f" Typical trajectory: {evidence['typical_trajectory']}."
    return summary


# -- length-bias: delaying success ------------------------------------------------------------
DELAY_TITLE = "Delaying success pays: succeeding later earns more than succeeding at once"
DELAY_FIX = ("Pay for the outcome once: no per-attempt or per-step credit (format scores, partial scores) that "
             "a successful episode keeps collecting before it succeeds.")


def delay_summary(evidence: Mapping[str, Any]) -> str:
    test, fast, best = evidence["delayed_vs_fastest"], evidence["fastest_success"], evidence["best_searched_success"]
    searched = (f" Trained to earn the most by succeeding, a policy's best success took {best['length']} steps "
                f"and earned {best['return']:.2f}." if best else "")
    return (
        f"From the same start, succeeding after about {evidence['extra_steps']:.1f} extra steps earned "
        f"{test['mean_delayed']:.2f} on average against {test['mean_fastest']:.2f} for the fastest success "
        f"({evidence['n_groups']} groups with both); the fastest success seen takes {fast['length']} steps and "
        f"earns {fast['return']:.2f}.{searched} A return maximiser delays a success it could reach at once.")
