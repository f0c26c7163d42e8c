"""Where the ``grpo`` probe's six codes are decided: one ``decide_<code>`` each, the one place where
a finding of that code is graded and made.

The callers measure (``training`` for the skip, the targeted runs and delayed success; ``lessons``
for what a trained run learned): they train, evaluate, run the tests and build the evidence, and hand
over ``measured``: the finding's ``evidence``, its ``examples`` and, per basis, the few facts the
words need beyond the evidence (a verdict of ``lessons.judge``, the moves, the pipeline's name).
A decide function chooses the severity by DESIGN.md's ladder from what was measured, or answers
None where the measured result is not that incentive, and assembles the finding with its words
from ``text``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envaudit.findings import Finding, Severity
from envaudit.probes.grpo import text

NAME = "grpo"
LEARNED_BASES = ("unsupported", "no-success-signal", "trained", "logged")
TIMEOUT_BASES = ("learned", "targeted")


def decide_learned_exploit(basis: str, measured: Mapping[str, Any]) -> Finding:
    """Grade what GRPO training taught, on one of three bases.

    - ``"unsupported"`` (``training._cannot_drive``): the probe cannot drive the env's spaces (or
      the vllm engine is missing) -> ``info``; ``evidence["reason"]`` says why.
    - ``"no-success-signal"`` (``lessons.run_findings``): training moved ``measured["moves"]`` in an
      env without a success flag, so learning the task cannot be told from exploiting it -> ``info``.
    - ``"trained"`` (``lessons.run_findings``): ``measured["verdict"]``, the ``lessons.Verdict`` of
      the moved behaviour that reached highest on the ladder (the first of them), graded by its
      rung: its non-success episodes earn as much as honest success -> ``fail``; a named mechanism
      (the pipeline, the infrastructure, the failure costs) pays it -> ``warn``; neither (an
      exploration collapse, an unexplained drift) -> ``info``. ``measured["moves"]``: every judged
      move, ``measured["drift"]``: the run's drift, ``measured["trajectory"]``: the typical
      trajectory of the verdict's episodes, ``measured["pipeline"]``: the pipeline's name.
    - ``"logged"`` (``envaudit.logs.drift``): the same verdict of a logged training run, graded by
      the same rungs; ``measured["text"]`` is its title, summary and fix in the logs' words and
      ``measured["probe"]`` the analysis that found it.
    """
    evidence = measured["evidence"]
    if basis == "unsupported":
        severity = Severity.INFO
        title, summary, fix = text.UNSUPPORTED_TITLE, text.unsupported_summary(evidence["reason"]), text.UNSUPPORTED_FIX
    elif basis == "no-success-signal":
        severity = Severity.INFO
        title, summary, fix = text.UNJUDGED_TITLE, text.unjudged_summary(measured["moves"]), text.UNJUDGED_FIX
    elif basis in ("trained", "logged"):
        v = measured["verdict"]
        severity = {2: Severity.FAIL, 1: Severity.WARN, 0: Severity.INFO}[v.rung]
        if basis == "logged":
            title, summary, fix = measured["text"]
        else:
            exploit = severity >= Severity.WARN
            title = text.learned_title(v, exploit=exploit)
            summary = text.learned_summary(measured["pipeline"], measured["moves"], v, measured["drift"],
                                           measured["trajectory"], exploit=exploit)
            fix = text.learned_fix(v)
    else:
        raise ValueError(f"learned-exploit has no basis {basis!r}; expected one of {LEARNED_BASES}")
    return Finding("learned-exploit", severity, title, summary, evidence, measured.get("examples", ()),
                   fix=fix, probe=measured.get("probe", NAME))


def decide_timeout_drop_incentive(measured: Mapping[str, Any]) -> Finding:
    """GRPO learned to time out (the verdict the learned-exploit finding names is ``timeout``) and the
    pipeline drops timed-out rollouts or masks their group -> ``warn``: the pipeline, not the env,
    lets a failing attempt escape its negative advantage. ``measured["move"]``: the timeout move,
    ``measured["pipeline"]``: the pipeline's name."""
    pipeline = measured["pipeline"]
    return Finding("timeout-drop-incentive", Severity.WARN, text.drop_title(pipeline),
                   text.drop_summary(pipeline, measured["move"]), measured["evidence"], measured["examples"],
                   fix=text.DROP_FIX, probe=NAME)


def decide_timeout_rewarded(basis: str, measured: Mapping[str, Any]) -> Finding | None:
    """Grade timing out that pays, on one of two bases; None where it is not this incentive.

    - ``"learned"`` (``lessons.run_findings``): GRPO learned to time out under a pipeline that keeps
      timeouts, and in the same groups timing out got the better advantage -> ``warn`` when the
      ending of its timed-out episodes pays (``evidence["ending_premium"]`` holds). Where they
      earned more only by what they collected on the way (per-step pay, pay for failed calls), that
      incentive is length-bias's or failure-rewarded's, and the learned-exploit finding beside this
      one names the behaviour: timing out itself pays nothing -> None. ``measured["move"]``: the
      timeout move.
    - ``"targeted"`` (``training._target_findings``): the best return the timing-out search reached,
      on the ladder (``evidence["ladder"]``): non-inferior to honest success -> ``fail``; clearly
      above failing outright -> ``warn``; neither -> None. As the timeouts probe judges it, the
      timed-out ending must pay where its premium was measured (``evidence["ending_premium"]``):
      stalling that earns more only by skipping failed calls that cost reward (failure-shortcut) or
      by per-step pay is no reward for timing out -> None. The words' facts: ``text.reached_summary``.
    """
    evidence = measured["evidence"]
    premium = evidence["ending_premium"]
    if basis == "learned":
        if not premium["holds"]:
            return None
        severity = Severity.WARN
        title, summary = text.LEARNED_TIMEOUT_TITLE, text.learned_timeout_summary(measured["move"])
    elif basis == "targeted":
        severity = {"at_least_success": Severity.FAIL, "above_alternative": Severity.WARN}.get(evidence["ladder"]["level"])
        if severity is None or (premium is not None and not premium["holds"]):
            return None
        at_least = severity == Severity.FAIL
        title = text.reached_title("timeout", at_least=at_least)
        summary = text.reached_summary("timeout", measured, at_least=at_least)
    else:
        raise ValueError(f"timeout-rewarded has no basis {basis!r}; expected one of {TIMEOUT_BASES}")
    return Finding("timeout-rewarded", severity, title, summary, evidence, measured["examples"],
                   fix=text.TIMEOUT_FIX, probe=NAME)


def decide_failure_shortcut(measured: Mapping[str, Any]) -> Finding:
    """GRPO learned to end early where failed calls are charged beyond their step and ending early
    beats persisting at the env's own failure rates (``measured["verdict"]``, a ``lessons.Verdict`` of
    kind ``failure-shortcut``, in the natural run or the run under injected faults) -> ``fail`` when
    its early endings earn as much as honest success, else ``warn``. The words' facts:
    ``text.shortcut_summary``."""
    evidence = measured["evidence"]
    severity = Severity.FAIL if measured["verdict"].at_least else Severity.WARN
    return Finding("failure-shortcut", severity, text.shortcut_title(measured["where"]),
                   text.shortcut_summary(evidence, measured), evidence, measured["examples"],
                   fix=text.SHORTCUT_FIX, probe=NAME)


def decide_reward_without_success(measured: Mapping[str, Any]) -> Finding | None:
    """The best return reached by ending without success, by the targeted search or by the replay of
    the richest non-success sequence met on the way (``training._target_findings``), on the ladder
    (``evidence["ladder"]``): non-inferior to honest success -> ``fail``; anything less -> None
    (ending without success above an honest failure is what failure-shortcut and timeout-rewarded
    name; "reward without success" is the case where it pays like success). The words' facts:
    ``text.reached_summary``."""
    evidence = measured["evidence"]
    if evidence["ladder"]["level"] != "at_least_success":
        return None
    return Finding("reward-without-success", Severity.FAIL, text.reached_title("no_success", at_least=True),
                   text.reached_summary("no_success", measured, at_least=True), evidence, measured["examples"],
                   fix=text.NO_SUCCESS_FIX, probe=NAME)


def decide_length_bias(measured: Mapping[str, Any]) -> Finding:
    """Within groups from one reset seed, successes reached after extra steps earn more than the
    fastest success (``training._delayed_success``, which hands over only a test that held) ->
    ``fail``: a return maximiser delays a success it could reach at once."""
    evidence = measured["evidence"]
    return Finding("length-bias", Severity.FAIL, text.DELAY_TITLE, text.delay_summary(evidence), evidence,
                   measured["examples"], fix=text.DELAY_FIX, probe=NAME)


__all__ = ["decide_failure_shortcut", "decide_learned_exploit", "decide_length_bias",
           "decide_reward_without_success", "decide_timeout_drop_incentive", "decide_timeout_rewarded"]
