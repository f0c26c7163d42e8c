"""API probe: does the env keep Gymnasium's contract well enough to train on?

Incentive it detects: none directly. An env that raises, hangs or returns NaN/inf crashes a
training run or poisons its loss, and a broken contract makes every other probe's numbers
suspect, so this probe runs first and its defects are ``env-error`` findings. One exception:
when ``check_env`` stops because the same seed and action gave another result, that is the
``non-replayable`` incentive (the replay probe's), filed under that code so both read as one.
Each code is decided in one place: ``decide_env_error`` (every defect, whether seen in
exploration, in the probe's rollouts or by ``check_env``) and ``decide_non_replayable``.

Signal it reads: Gymnasium's own ``check_env`` (on a fresh instance, under a deadline; its warnings
become ``info``, its assertion failures ``warn`` or ``fail``), plus what ``check_env`` does not
look at: the exploration's hangs and exceptions (``ctx.exploration_problems``) and NaN/inf
rewards, and a few short guarded rollouts of its own that inspect the raw 5-tuples (NaN/inf or
out-of-space observations, non-bool ``terminated``/``truncated``, ``info`` not a dict, an
``info["tool"]`` outside envaudit's protocol).

Known false positives: an env that is deliberately slow (a real backend) reads as hanging when a
call takes longer than ``step_timeout_s``; raise it. ``check_env`` is run on a copy of ``info``
without ``info["tool"]["latency_s"]``, because measured latencies differ between two calls by
nature and would fail its step-determinism check; any other key that carries wall-clock time
does fail it (reported at ``info``: training does not read info).
"""

from __future__ import annotations

from envaudit.findings import Finding
from envaudit.probe import Probe, ProbeContext
from envaudit.probes.api.checker import run_checker
from envaudit.probes.api.decisions import decide_env_error, decide_non_replayable
from envaudit.probes.api.defects import Tally
from envaudit.probes.api.rollouts import from_exploration, own_rollouts


def run(ctx: ProbeContext) -> list[Finding]:
    tally = Tally()
    from_exploration(ctx, tally)
    hung = ctx.env_hung("own rollouts and check_env")  # exploration's hangs are the scan's first
    if not hung:
        hung = not own_rollouts(ctx, tally)
    findings = [decide_env_error("defect", key=key, seen=seen, tally=tally,
                                 step_timeout_s=ctx.config.step_timeout_s)
                for key, seen in tally.seen.items()]
    if not hung:
        findings += run_checker(ctx, tally.messages(), non_finite=bool({"nan_reward", "nonfinite_obs"} & set(tally.seen)))
    return findings


probe = Probe(
    name="api",
    run=run,
    summary="Gymnasium API conformance: check_env, hangs, exceptions, NaN/inf and the info protocol",
    codes=("env-error", "non-replayable"),
    decisions={"env-error": decide_env_error, "non-replayable": decide_non_replayable},
    order=10,
)

__all__ = ["decide_env_error", "decide_non_replayable", "probe", "run"]
