"""The probes' record analyses, run on a logged run's episodes instead of the scan's exploration.

Each probe splits into what it reads from recorded episodes and what it learns by running its own
policies on the env. A logged run has only the former, so:

- ``timeouts``: the logged timed-out episodes placed on the ladder against the logged failures and
  successes (``timeouts.arm_verdict``, the exploration arm of the probe), ending premium included;
- ``pipeline``: the probe as it is, timeouts counted reachable when the logged policy timed out
  (``pipeline.observed_reach``) instead of by stall runs;
- ``failures``: the probe's plain-env path (exploration statistics: failed steps that pay, steps
  that pay after a failure, failures that make ending early pay), which never runs episodes;
- ``length``: the regression of return on length with outcome held fixed (a correlation: ``info``)
  and, from GRPO groups, whether successes reached later earn more than the fastest success from
  the same start (``grpo.verdicts.delayed_success``: ``fail``);
- ``intent``: the actions whose use raises non-success return beyond length and failures
  (``intent.candidates``), their logged non-success episodes placed on the ladder.

An analysis whose columns the log lacks adds a note naming them and produces nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from envaudit.findings import Finding, Severity
from envaudit.logs.records import Converted, NeedsEnv
from envaudit.probe import ProbeContext, registered_probes
from envaudit.probes.grpo.verdicts import delayed_success
from envaudit.probes.length import bias as length_probe
from envaudit.protocol import FAILURE, SUCCESS
from envaudit.stats import MIN_SAMPLES, reward_scale

MIN_EFFECT = 0.1


def _needs(converted: Converted, *columns: str) -> list[str]:
    have = {"success": converted.has_success, "end_reason": converted.has_end_reason,
            "steps": converted.has_steps, "steps.tool_status": converted.has_tool_status,
            "steps.reward": converted.has_steps and converted.records.steps["reward"].notna().all(),
            "steps.action": converted.has_steps and converted.records.steps["action"].notna().all(),
            "group_id": converted.records.episodes["group"].notna().all(), "length": converted.has_length}
    return [c for c in columns if not have[c]]


def length(ctx: ProbeContext, converted: Converted) -> list[Finding]:
    eps = ctx.exploration.episodes
    if len(eps) < MIN_SAMPLES:
        ctx.notes["skipped"] = f"only {len(eps)} logged episodes (need {MIN_SAMPLES})"
        return []
    found = []
    fit = length_probe.regress(eps, ctx.rng("regression"))
    ctx.notes["regression"] = fit
    coef = fit["coef"].get("length")
    if coef is not None and coef["p_value"] < ctx.config.alpha and (coef["ci"][0] > 0 or coef["ci"][1] < 0):
        longer = coef["ci"][0] > 0
        held = "Beyond success, each" if "success" in fit["coef"] else "With no success signal to hold fixed, each"
        found.append(Finding(
            "length-bias", Severity.INFO,
            "Return rises with episode length in the logged run" if longer
            else "Shorter episodes earn more in the logged run",
            f"{held} extra step changes the logged return by {coef['estimate']:+.3g} on average (outcome and "
            "tool failures held fixed). A correlation in the trainer's own episodes: scan the env "
            "(`envaudit scan`) to see whether a policy can farm it.",
            {"length_effect": coef, "regression": fit, "n": fit["n"], "p_value": coef["p_value"],
             "behaviour": "stall" if longer else "quit", "reward_path": "env", "source": "logs"}, [],
            "If longer (or shorter) episodes are not meant to pay more, look for per-step rewards or "
            "length penalties.", probe="length"))
    if converted.has_success and eps["group"].notna().all():
        success = eps.loc[eps["outcome"] == SUCCESS, "return"].to_numpy(float)
        failure = eps.loc[eps["outcome"] == FAILURE, "return"].to_numpy(float)
        margin = MIN_EFFECT * reward_scale(success, failure)
        d = delayed_success({"logged": _with_late_successes(eps)}, ctx.rng("delay"), margin=margin,
                            alpha=ctx.config.alpha)
        ctx.notes["delayed_success"] = {k: v for k, v in d.items() if k != "examples"}
        if d["holds"]:
            test, fast = d["test"], d["fastest"]
            found.append(Finding(
                "length-bias", Severity.FAIL, "Delaying success pays in the logged run",
                f"Within the logged groups, successes reached after about {d['extra_steps']:.1f} extra steps "
                f"earned {test['mean_delayed']:.2f} on average against {test['mean_fastest']:.2f} for the "
                f"fastest success from the same start ({d['n_sets']} groups with both); a return maximiser "
                "delays a success it could reach at once.",
                {"source": "logs", "behaviour": "delay-success", "reward_path": "env", "p_value": test["p_value"],
                 "delayed_vs_fastest": test, "n_groups": d["n_sets"], "extra_steps": d["extra_steps"],
                 "margin": d["margin"], "fastest_success": fast},
                examples=d["examples"][:5],
                fix="Pay for the outcome once: no per-attempt or per-step credit that a successful episode "
                    "keeps collecting before it succeeds.", probe="length"))
    return found


def _with_late_successes(eps: pd.DataFrame) -> pd.DataFrame:
    """The successes of the (iteration, group, failed calls) sets where some success came later than
    the fastest: the only sets ``delayed_success`` can pair (the others it passes over one by one)."""
    wins = eps[eps["outcome"] == SUCCESS]
    key = [wins["iteration"], wins["group"], wins["n_tool_errors"] + wins["n_tool_timeouts"]]
    spread = wins.groupby(key)["length"].transform(lambda x: x.max() > x.min())
    return wins[spread.astype(bool).to_numpy()]


ANALYSED = ("timeouts", "pipeline", "length", "intent", "failures")
"""The probes whose ``analyse`` half runs on a logged run, in this order."""


def _analysis(name: str) -> tuple[Callable[[ProbeContext, Converted], list[Finding]], tuple[str, ...]]:
    if name == "length":
        return length, ("length",)
    probe = registered_probes([name])[name]
    return (lambda ctx, _converted: list(probe.analyse(ctx))), probe.analyse_needs


ANALYSES: dict[str, tuple[Callable[[ProbeContext, Converted], list[Finding]], tuple[str, ...]]] = {
    name: _analysis(name) for name in ANALYSED}
"""Each analysis and the columns it cannot do without (``steps.X``: the step table's column)."""


def run_analysis(name: str, ctx: ProbeContext, converted: Converted) -> tuple[list[Finding], str | None]:
    """One analysis, or the reason it did not run (the columns it needs, named)."""
    fn, needs = ANALYSES[name]
    absent = _needs(converted, *needs)
    if absent:
        return [], f"not run: the log has no {', '.join(absent)} column{'s' if len(absent) > 1 else ''}"
    try:
        return fn(ctx, converted), None
    except NeedsEnv as exc:
        return [], f"not run: {exc}"
