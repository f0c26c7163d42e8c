"""The length probe's ``analyse`` half: what it judges from a logged run's episodes alone.

Two measurements, no episodes to run: the regression of return on length with outcome and tool
failures held fixed (a correlation in the trainer's own episodes, ``info``), and, from GRPO groups,
whether successes reached later earn more than the fastest success from the same start
(``probes.grpo.verdicts.delayed_success``). ``decide_length_bias`` grades both (kinds
``logged-correlation`` and ``logged-delay``).
"""

from __future__ import annotations

import pandas as pd

from envaudit.findings import Finding
from envaudit.probe import ProbeContext
from envaudit.probes._shared.delays import delayed_success
from envaudit.probes.length.bias import regress
from envaudit.probes.length.decisions import decide_length_bias
from envaudit.protocol import FAILURE, SUCCESS
from envaudit.stats import MIN_SAMPLES, reward_scale

MIN_EFFECT = 0.1
"""A delayed success counts when it earns at least this share of the success-minus-failure gap more."""


def analyse(ctx: ProbeContext) -> list[Finding]:
    eps = ctx.exploration.episodes
    if len(eps) < MIN_SAMPLES:
        ctx.notes["skipped"] = f"only {len(eps)} logged episodes (need {MIN_SAMPLES})"
        return []
    fit = regress(eps, ctx.rng("regression"))
    ctx.notes["regression"] = fit
    found = decide_length_bias("logged-correlation", {"fit": fit, "alpha": ctx.config.alpha})
    if eps["success"].notna().any() and "group" in eps and eps["group"].notna().all():
        success = eps.loc[eps["outcome"] == SUCCESS, "return"].to_numpy(float)
        failure = eps.loc[eps["outcome"] == FAILURE, "return"].to_numpy(float)
        margin = MIN_EFFECT * reward_scale(success, failure)
        d = delayed_success({"logged": _with_late_successes(eps)}, ctx.rng("delay"), margin=margin,
                            alpha=ctx.config.alpha)
        ctx.notes["delayed_success"] = {k: v for k, v in d.items() if k != "examples"}
        found += decide_length_bias("logged-delay", {"delay": d})
    return found


def _with_late_successes(eps: pd.DataFrame) -> pd.DataFrame:
    """The successes of the (iteration, group, failed calls) sets where some success came later than
    the fastest: the only sets ``delayed_success`` can pair (the others it passes over one by one)."""
    wins = eps[eps["outcome"] == SUCCESS]
    key = [wins["iteration"], wins["group"], wins["n_tool_errors"] + wins["n_tool_timeouts"]]
    spread = wins.groupby(key)["length"].transform(lambda x: x.max() > x.min())
    return wins[spread.astype(bool).to_numpy()]
