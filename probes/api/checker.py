"""Gymnasium's own ``check_env``, run on a fresh instance under a deadline, its messages sorted by the rules in ``defects``."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from envaudit.deadline import DeadlineExceeded, DeadlineWorker
from envaudit.execution.slots import note
from envaudit.findings import Finding
from envaudit.probe import ProbeContext
from envaudit.probes.api.decisions import decide_env_error, decide_non_replayable
from envaudit.probes.api.defects import (
    ANSI,
    CHECKER_CALLS,
    CHECKER_IGNORED,
    CHECKER_NON_REPLAYABLE,
    soft_rule,
)
from envaudit.protocol import TOOL_KEY
from envaudit.rollout import Problem


# -- Gymnasium's own checker ------------------------------------------------------------------
class _WithoutLatency(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Hide ``info["tool"]["latency_s"]`` from check_env: measured latencies differ between calls."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self._t, self._seed = 0, None

    def reset(self, *, seed=None, options=None):
        self._t, self._seed = 0, seed
        with note("reset", None, seed):  # where a worker process that dies here was
            return self.env.reset(seed=seed, options=options)

    def step(self, action):
        with note("step", self._t, self._seed):
            obs, reward, terminated, truncated, info = self.env.step(action)
        self._t += 1
        if isinstance(info, dict) and isinstance(info.get(TOOL_KEY), Mapping):
            info = {**info, TOOL_KEY: {k: v for k, v in info[TOOL_KEY].items() if k != "latency_s"}}
        return obs, reward, terminated, truncated, info


def run_checker(ctx: ProbeContext, known: set[str], non_finite: bool = False) -> list[Finding]:
    # check_env's calls are not guarded one by one, so the whole check gets one deadline: the
    # calls' worst case. It is a hang detector, never cut to the time left, or a loaded machine
    # would turn a slow check into a hang finding.
    deadline = CHECKER_CALLS * ctx.config.step_timeout_s
    if ctx.over_cap("Gymnasium's check_env"):
        ctx.notes["check_env"] = "skipped: the scan's wall-clock safety cap was reached"
        return []
    worker = DeadlineWorker("envaudit-check-env")
    made: list[gym.Env] = []

    def check() -> None:
        env = ctx.counted(ctx.make_env())
        made.append(env)
        check_env(_WithoutLatency(env), skip_render_check=True)

    error: Exception | None = None
    with warnings.catch_warnings(record=True) as caught:
        # Entered and left on this thread, so a check_env stuck on the worker cannot leave the
        # process's warning filters changed.
        warnings.simplefilter("always")
        try:
            worker.call(check, deadline, what="Gymnasium's check_env")
        except Exception as exc:  # everything check_env raises is a finding
            error = exc
    hung = isinstance(error, DeadlineExceeded)
    if not hung:
        for env in made:
            try:
                worker.call(env.close, ctx.config.step_timeout_s, "close()")
            except Exception:
                pass
    worker.close()

    findings = []
    notes = []
    for w in caught:
        text = ANSI.sub("", str(w.message)).removeprefix("WARN: ").strip()
        if text and text not in notes and not any(p in text for p in CHECKER_IGNORED):
            notes.append(text)
    if notes:
        findings.append(decide_env_error("checker-warnings", checker_warnings=notes))
    if error is None:
        return findings
    message = str(error) if hung else f"{type(error).__name__}: {error}"
    if hung:
        ctx.hangs.append(Problem("hang", "check_env", message, None))
        findings.append(decide_env_error("checker-hang", message=message, deadline_s=deadline))
        return findings
    if message in known:
        return findings  # the same exception was already reported from the rollouts
    if replay_mismatch(error, non_finite):
        findings.append(decide_non_replayable(error, message))
    else:
        findings.append(decide_env_error("checker-error", error=error, message=message))
    return findings


def replay_mismatch(error: Exception, non_finite: bool) -> bool:
    """Whether ``check_env`` stopped because the same seed and action gave another result (one of
    ``CHECKER_NON_REPLAYABLE``, a soft assertion). NaN equals nothing, itself included: where the
    env returns NaN/inf (its own env-error), two equal runs compare unequal, and that says nothing
    about replaying."""
    return (isinstance(error, AssertionError) and soft_rule(error) is not None and not non_finite
            and any(p.lower() in str(error).lower() for p in CHECKER_NON_REPLAYABLE))
