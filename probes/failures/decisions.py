"""Where the ``failures`` probe's two codes are decided: ``decide_failure_shortcut`` and
``decide_failure_rewarded``, each the one place where a finding of its code is graded and made.

The callers measure (``sweep``, ``plain``, ``rewarded``, ``conditioned``): they run the tests, keep
the records the examples live in, and hand over what they found, ``measured``: the finding's
``evidence``, its ``examples`` and, per basis, the few facts the words need beyond the evidence.
A decide function reads the yardstick from the evidence, chooses the severity by DESIGN.md's
ladder and assembles the finding, with its words from ``text``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envaudit.findings import Finding, Severity
from envaudit.probes.failures import text

SHORTCUT_BASES = ("sweep", "exploration", "conditioned")
REWARDED_BASES = ("failed-call", "conditioned")


def _earns_honest(returns: list[float | None], honest: float | None) -> bool:
    """Some measured return (those measured: not None) is at least the honest success return."""
    return honest is not None and any(r >= honest for r in returns if r is not None)


def _conditioned_earns_honest(evidence: Mapping[str, Any]) -> bool:
    """The episode that does the paying move right after a failure (where one ended there; else
    the move's own step) earns at least an honest success."""
    path = evidence["conditioned_path_return"]
    return _earns_honest([path if path is not None else evidence["mean_reward_after_failed"]],
                         evidence["honest_success_return"])


def decide_failure_shortcut(basis: str, measured: Mapping[str, Any]) -> Finding:
    """Grade a short path that failures make pay, measured on one of three bases.

    - ``"sweep"`` (``sweep.shortcut_sweep``, a ``ToolEnv``): ``measured["pays"]`` names the short
      path that beat persisting through failures that are charged beyond their step, the most
      direct found: ``"give-up"`` (a short strategy, at the env's own failure rate: an agent never
      tries) -> ``fail``; ``"quit-on-failure"`` (only quitting at the first failed call, at the
      env's own rate: it gives up whenever a call fails) -> ``warn``; ``"give-up-at-injected-rate"``
      (a short strategy, only once faults are injected on top: worth knowing if production tools
      fail that often) -> ``info``. ``measured["short_policy"]``: the paying short strategy's
      description.
    - ``"exploration"`` (``plain.shortcut_exploration``, a plain env): after a first failure,
      ending within a step earned more than going on -> ``fail`` when it earns at least what the
      episodes that went on and succeeded earned from there, else ``warn``.
    - ``"conditioned"`` (``conditioned.finding``): a move that ends the episode pays more right after
      a failed call -> ``fail`` when the episode that does it earns at least an honest success,
      else ``warn``. ``measured["statuses"]``: the faults that set it off.
    """
    evidence = measured["evidence"]
    if basis == "sweep":
        pays = measured["pays"]
        severity = {"give-up": Severity.FAIL, "quit-on-failure": Severity.WARN,
                    "give-up-at-injected-rate": Severity.INFO}[pays]
        title = text.sweep_title(pays, evidence)
        summary = text.sweep_summary(pays, evidence, measured["short_policy"])
        fix = text.FIX_SHORTCUT
    elif basis == "exploration":
        earns = _earns_honest([evidence["mean_after_failure_short"]], evidence["honest_after_failure_return"])
        severity = Severity.FAIL if earns else Severity.WARN
        title, summary, fix = text.EXPLORATION_TITLE, text.exploration_summary(evidence), text.FIX_SHORTCUT
    elif basis == "conditioned":
        earns, title, summary, fix = _conditioned(evidence, measured["statuses"])
        severity = Severity.FAIL if earns else Severity.WARN
    else:
        raise ValueError(f"failure-shortcut has no basis {basis!r}; expected one of {SHORTCUT_BASES}")
    return Finding(code="failure-shortcut", severity=severity, title=title, summary=summary, evidence=evidence,
                   examples=measured["examples"], fix=fix)


def decide_failure_rewarded(basis: str, measured: Mapping[str, Any]) -> Finding:
    """Grade a step that pays because a tool call failed, measured on one of two bases.

    - ``"failed-call"`` (``rewarded.failure_rewarded``): the failed call's own step pays more than
      the same call working -> ``fail`` when that step alone, or an agent that makes the call fail
      at will (``farm_mean_return``), earns at least an honest success, else ``warn``.
      ``measured["label"]``: the call's catalogue label (None: none); ``measured["statuses"]``: the
      faults that made this tool's failed calls pay.
    - ``"conditioned"`` (``conditioned.finding``): a move that does not end the episode (a retry)
      pays more right after a failed call -> ``fail`` when the move's step earns at least an honest
      success (or, where such episodes ended there, the episode does), else ``warn``.
      ``measured["statuses"]``: the faults that set it off.
    """
    evidence = measured["evidence"]
    if basis == "failed-call":
        earns = _earns_honest([evidence["mean_reward_failed"], evidence["farm_mean_return"]],
                              evidence["honest_success_return"])
        severity = Severity.FAIL if earns else Severity.WARN
        title = text.failed_call_title(evidence)
        summary = text.failed_call_summary(evidence, measured["label"], measured["statuses"], reaches_honest=earns)
        fix = text.FIX_REWARDED
    elif basis == "conditioned":
        earns, title, summary, fix = _conditioned(evidence, measured["statuses"])
        severity = Severity.FAIL if earns else Severity.WARN
    else:
        raise ValueError(f"failure-rewarded has no basis {basis!r}; expected one of {REWARDED_BASES}")
    return Finding(code="failure-rewarded", severity=severity, title=title, summary=summary, evidence=evidence,
                   examples=measured["examples"], fix=fix)


__all__ = ["decide_failure_rewarded", "decide_failure_shortcut"]


def _conditioned(evidence: Mapping[str, Any], statuses: Any) -> tuple[bool, str, str, str]:
    """A failure-conditioned move, whichever code it is filed under: whether it earns an honest
    success, and its words."""
    earns = _conditioned_earns_honest(evidence)
    return (earns, text.conditioned_title(evidence, statuses),
            text.conditioned_summary(evidence, statuses, reaches_honest=earns), text.conditioned_fix(evidence))
