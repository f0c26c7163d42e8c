"""Where the ``length`` probe's code is decided: ``decide_length_bias``, the one place where a
``length-bias`` finding is graded and made, whichever kind of length effect was measured.

The callers measure (``bias``: the regression, the farming and quitting strategies; ``delay``: a
success replayed with a delay): they run the strategies, keep the records the examples live in,
and hand over what they found, ``measured``: the finding's ``evidence``, its ``examples`` and, per
kind, the ladder's level and the few facts the words need beyond the evidence. The decide function
chooses the severity by DESIGN.md's ladder and assembles the finding, with its words from ``text``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from envaudit.findings import Finding, Severity
from envaudit.probes.length import text

CODE = "length-bias"
KINDS = ("constant", "unending", "delay", "farming", "cycle", "brevity", "one-incentive", "logged-correlation", "logged-delay")


def decide_length_bias(kind: str, measured: Mapping[str, Any]) -> list[Finding]:
    """Grade one kind of length effect; the findings it makes (none, one, or two that stand apart).

    - ``"constant"`` (``bias.constant_step_reward``): every step pays the same reward
      (``evidence["reward_per_step"]``) -> ``info`` ("the return equals length"); none when it is 0.
    - ``"unending"``: every exploration episode ran to the step limit, so nothing varies in length
      -> ``info``.
    - ``"delay"`` (``delay.delay_success``): a success delayed by ``k`` extra actions, paired with
      the same success at once; ``measured["holds"]`` (the paired gain is significant, its interval
      above 0 and material) -> ``fail``, else none.
    - ``"farming"`` (``bias._farming``): the best long non-success strategy on the ladder
      (``measured["level"]``; None: no strategy, or none above failing outright) and whether its
      idle steps pay (``evidence["marginal"]["pays"]``): ``fail`` at ``at_least_success``, ``warn`` at
      ``above_alternative``, both only when the idle steps pay; ``info`` when the long episodes earn
      more only by progress made on the way, and ``info`` for the bare correlation.
    - ``"cycle"`` (``cycles.cycle_farming``): repeating an action cycle that comes back to the same
      observation, then ending honestly, against ending at once from the same prefixes (the
      counterfactual engine's pairs); ``measured["level"]``: ``fail`` at ``at_least_success`` (it
      earns at least honest success from the same starts: the oracle's on the same seeds, else the
      honest successes found), ``warn`` at ``above_alternative`` (the laps pay, less than success);
      none when the laps do not pay.
    - ``"brevity"`` (``bias._brevity``): quitting at once on the ladder -> ``fail`` at
      ``at_least_success`` (a brevity bonus); else, when the regression's slope was what sent it
      there (``measured["slope"]``), ``info`` (a step cost); else none.
    - ``"one-incentive"``: a delayed success (``measured["delayed"]``, the ``"delay"`` findings)
      beside farming (``measured["farming"]``, the ``"farming"`` finding): farming at ``warn`` or
      above is the reward path a delayed success is paid by, so the two are one finding, headed by
      the higher rung and corroborated by the other; below ``warn`` they stand apart.
    - ``"logged-correlation"`` (``logged.analyse``): the regression of a logged run's return on length
      (``measured["fit"]``): a length coefficient significant at ``measured["alpha"]`` with its
      interval clear of 0 -> ``info`` (a correlation in the trainer's own episodes), else none.
    - ``"logged-delay"`` (``logged.analyse``): within a logged run's GRPO groups, later successes
      against the fastest from the same start (``measured["delay"]``, ``delayed_success``): when it
      holds -> ``fail``, else none.
    """
    if kind == "constant":
        c = measured["evidence"]["reward_per_step"]
        if c == 0:
            return []
        return [Finding(CODE, Severity.INFO, text.constant_title(c), text.constant_summary(c), measured["evidence"],
                        [], text.FIX_CONSTANT, probe="length")]
    if kind == "unending":
        evidence = measured["evidence"]
        return [Finding(CODE, Severity.INFO, text.UNENDING_TITLE, text.unending_summary(evidence), evidence, [],
                        text.FIX_UNENDING, probe="length")]
    if kind == "delay":
        if not measured["holds"]:
            return []
        evidence = measured["evidence"]
        return [Finding(CODE, Severity.FAIL, text.DELAY_TITLE, text.delay_summary(evidence), evidence,
                        measured["examples"], text.delay_fix(evidence), probe="length")]
    if kind == "farming":
        evidence, level = measured["evidence"], measured["level"]
        tagged = {**evidence, "behaviour": "stall", "reward_path": "env"}
        if level is not None and not evidence["marginal"]["pays"]:
            # Stalling is judged by what the extra steps add once progress stops, not by the average
            # pay per step of a long episode: shaped progress is kept, only a paying tail is farming.
            return [Finding(CODE, Severity.INFO, text.PROGRESS_TITLE, text.progress_summary(evidence), tagged,
                            measured["examples"], text.FIX_PROGRESS, probe="length")]
        if level is not None:
            p_value = max(evidence["test"]["p_value"], evidence["length_effect"]["p_value"])
            graded = {**evidence, "p_value": p_value, "behaviour": "stall", "reward_path": "env"}
            return [Finding(CODE, Severity.FAIL if level == "at_least_success" else Severity.WARN,
                            text.farming_title(level), text.farming_summary(level, evidence), graded,
                            measured["examples"], text.FIX_FARMING, probe="length")]
        return [Finding(CODE, Severity.INFO, text.CORRELATION_TITLE, text.correlation_summary(evidence), tagged, [],
                        text.FIX_CORRELATION, probe="length")]
    if kind == "cycle":
        level = measured["level"]
        if level is None:
            return []
        evidence = {k: v for k, v in measured.items() if k not in ("examples", "level", "holds")}
        evidence.update(behaviour="stall", reward_path="env")
        if level == "at_least_success":
            evidence["p_value"] = max(evidence["p_value"], measured["vs_success"]["p_value"])
        return [Finding(CODE, Severity.FAIL if level == "at_least_success" else Severity.WARN,
                        text.cycle_title(level), text.cycle_summary(level, evidence), evidence,
                        measured["examples"], text.FIX_CYCLE, probe="length")]
    if kind == "brevity":
        evidence = measured["evidence"]
        if measured["level"] == "at_least_success":
            test_p = evidence["test"]["p_value"]
            p_value = max(test_p, evidence["length_effect"]["p_value"]) if measured["slope"] else test_p
            graded = {**evidence, "p_value": p_value, "behaviour": "quit", "reward_path": "env"}
            return [Finding(CODE, Severity.FAIL, text.QUIT_TITLE, text.quit_summary(evidence), graded,
                            measured["examples"], text.FIX_QUIT, probe="length")]
        if not measured["slope"]:
            return []
        costed = {**evidence, "typical_step_reward": measured["typical_step_reward"], "behaviour": "quit",
                  "reward_path": "env"}
        return [Finding(CODE, Severity.INFO, text.STEP_COST_TITLE, text.step_cost_summary(costed), costed, [],
                        text.FIX_STEP_COST, probe="length")]
    if kind == "one-incentive":
        delayed, farming = list(measured["delayed"]), measured["farming"]
        if not delayed or farming.severity < Severity.WARN:
            return delayed + [farming]
        d = delayed[0]
        if d.severity > farming.severity:
            # Farming to the step limit earns less than success, but a delayed success earns more than
            # succeeding at once: the ladder's top rung heads the finding, farming corroborates it.
            # The reward path is the per-step pay farming found: its fix is the one to apply.
            return [dataclasses.replace(d, summary=d.summary + text.farming_also(farming.evidence), fix=farming.fix,
                                        evidence={**d.evidence, "farming": dict(farming.evidence)})]
        return [dataclasses.replace(farming, summary=farming.summary + text.delay_also(d.evidence),
                                    evidence={**farming.evidence, "delay_success": dict(d.evidence)})]
    if kind == "logged-correlation":
        fit = measured["fit"]
        coef = fit["coef"].get("length")
        if coef is None or not (coef["p_value"] < measured["alpha"] and (coef["ci"][0] > 0 or coef["ci"][1] < 0)):
            return []
        longer = coef["ci"][0] > 0
        return [Finding(CODE, Severity.INFO, text.logged_correlation_title(longer),
                        text.logged_correlation_summary(fit, coef),
                        {"length_effect": coef, "regression": fit, "n": fit["n"], "p_value": coef["p_value"],
                         "behaviour": "stall" if longer else "quit", "reward_path": "env", "source": "logs"}, [],
                        text.FIX_LOGGED_CORRELATION, probe="length")]
    if kind == "logged-delay":
        d = measured["delay"]
        if not d["holds"]:
            return []
        test = d["test"]
        return [Finding(CODE, Severity.FAIL, text.LOGGED_DELAY_TITLE, text.logged_delay_summary(d),
                        {"source": "logs", "behaviour": "delay-success", "reward_path": "env",
                         "p_value": test["p_value"], "delayed_vs_fastest": test, "n_groups": d["n_sets"],
                         "extra_steps": d["extra_steps"], "margin": d["margin"], "fastest_success": d["fastest"]},
                        d["examples"][:5], text.FIX_LOGGED_DELAY, probe="length")]
    raise ValueError(f"unknown length-bias kind {kind!r}; expected one of {KINDS}")
