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

import copy
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

from envaudit.deadline import DeadlineExceeded, DeadlineWorker
from envaudit.execution.slots import note
from envaudit.findings import Finding, Severity
from envaudit.probe import Probe, ProbeContext
from envaudit.protocol import TOOL_KEY, TOOL_STATUSES
from envaudit.rollout import Problem, limit_steps

ROLLOUT_EPISODES = 8
ROLLOUT_STEPS = 1000  # total steps of the probe's own rollouts (before --quick scaling)
EPISODE_STEPS = 200  # step cap of one of its rollouts
CHECKER_CALLS = 20  # check_env makes about 15 reset/step calls; its deadline is this many step deadlines


@dataclass(frozen=True)
class Defect:
    """One kind of API defect: how bad it is and what to change."""

    severity: str
    title: str
    what: str  # what happened, as the start of a sentence
    why: str  # what it does to training
    fix: str


DEFECTS: dict[str, Defect] = {
    "make_hang": Defect(
        "fail", "Creating the env hangs", "creating the env did not return in time",
        "no rollout can even start",
        "Put a deadline on every blocking call in the env's constructor (downloads, servers, "
        "subprocesses); most likely it waits for a backend that never answers."),
    "make_exception": Defect(
        "fail", "Creating the env raises", "creating the env raised",
        "no rollout can even start",
        "Make the env factory work without arguments; most likely it needs a resource or an "
        "argument that is missing."),
    "reset_hang": Defect(
        "fail", "reset() hangs", "reset() did not return in time",
        "a rollout worker blocks for good and the batch never completes",
        "Put a deadline on every blocking call in reset(); most likely it waits for a backend "
        "(a sandbox, a server, a subprocess) that never answers."),
    "reset_exception": Defect(
        "fail", "reset() raises an exception", "reset() raised",
        "a training run crashes or silently loses those rollouts",
        "Make reset(seed=...) work on a fresh and on a used instance; most likely reset() relies "
        "on state from a previous episode or mishandles seed/options."),
    "step_hang": Defect(
        "fail", "step() hangs", "step() did not return in time",
        "a rollout worker blocks for good and the batch never completes",
        "Put a deadline on every blocking call inside step() and report an overrun as "
        "info['tool'] = {'name': ..., 'status': 'timeout'}; most likely a tool call or a "
        "subprocess waits forever (envaudit.ToolEnv gives registered tools a real deadline)."),
    "step_exception": Defect(
        "fail", "step() raises an exception", "step() raised",
        "a training run crashes or silently loses those rollouts",
        "Catch the failure inside step() and report it as info['tool'] = {'name': ..., "
        "'status': 'error'} (or end the episode) instead of raising; most likely an unhandled "
        "edge case in the transition code. Replay the seed and actions to reproduce it."),
    "bad_return": Defect(
        "fail", "reset() or step() returns the wrong shape",
        "reset() or step() did not return (obs, info) / (obs, reward, terminated, truncated, info)",
        "every training loop unpacks these tuples and crashes",
        "Return (obs, info) from reset() and (obs, reward, terminated, truncated, info) from "
        "step(); most likely the env still follows the old Gym API."),
    "reward_not_number": Defect(
        "fail", "Reward is not a number", "step() returned a reward that float() rejects",
        "the loss cannot be computed",
        "Return the reward as a Python float; most likely it is None, a string or an array "
        "with more than one element."),
    "nan_reward": Defect(
        "fail", "Reward is NaN or inf", "step() returned a NaN or infinite reward",
        "one such reward turns the GRPO advantages and the loss into NaN",
        "Guard the reward computation so step() always returns a finite float; most likely a "
        "division by zero, a log of zero or an overflow in the reward."),
    "nonfinite_obs": Defect(
        "fail", "Observation contains NaN or inf", "an observation contained NaN or inf",
        "a policy network fed such an input outputs NaN and the update diverges",
        "Guard the computation of the observation (or clip it); most likely an unguarded "
        "division, log or overflow."),
    "info_not_dict": Defect(
        "fail", "info is not a dict", "reset() or step() returned an info that is not a dict",
        "wrappers and trainers write into info and crash",
        "Return a dict as info from reset() and step(); most likely a list, None or a custom "
        "object is returned instead."),
    "obs_outside_space": Defect(
        "warn", "Observation outside observation_space",
        "an observation was not in the declared observation_space",
        "policies and preprocessing built from the space (bounds, shape, dtype) misread it",
        "Make observation_space describe what reset()/step() return; most likely its bounds, "
        "shape or dtype differ from the observation (e.g. float64 values in a float32 Box)."),
    "nonbool_done": Defect(
        "warn", "terminated/truncated are not bools",
        "terminated or truncated was not a bool",
        "vectorised envs and trainers that test `is True` or stack them as bools misread endings",
        "Return Python bools (bool(...)) for terminated and truncated; most likely they are "
        "ints or numpy arrays."),
    "bad_tool_info": Defect(
        "warn", "Malformed info['tool']",
        "info['tool'] was not a mapping with 'name' and a status of ok, error or timeout",
        "envaudit (and any pipeline keyed on tool status) counts those calls as errors",
        "Set info['tool'] = {'name': <tool>, 'status': 'ok' | 'error' | 'timeout'}; most likely "
        "a typo or a custom status name. If the env uses another key, scan it through "
        "envaudit.wrap(env, tool_key=...)."),
}

# check_env assertion messages that describe a defect training survives: (phrase, severity, fix).
# Other assertion failures and every other exception are `fail`.
CHECKER_SOFT = (
    ("share an object", "warn",
     "Return fresh observation and info objects on every call (e.g. obs.copy()); most likely "
     "reset()/step() hand out an internal buffer that later calls overwrite, which corrupts "
     "stored rollouts."),
    ("info are not equivalent", "info",  # info is not trained on; replay checks tool statuses
     "Most likely info carries wall-clock values (timestamps, measured durations) or draws from a "
     "generator other than self.np_random; keep such values out of info or make them replayable."),
    ("deterministic", "warn",
     "Most likely reset() does not call super().reset(seed=seed) or the env draws from a "
     "generator other than self.np_random; the replay probe shows where replays diverge."),
    ("random generat", "warn", "Call super().reset(seed=seed) at the start of reset() and draw every random "
     "choice from self.np_random."),
    ("np_random", "warn", "Call super().reset(seed=seed) at the start of reset() and draw every random choice "
     "from self.np_random."),
    ("not within the observation space", "warn",
     "Make observation_space describe what reset()/step() return; most likely its bounds, shape "
     "or dtype differ from the observation."),
    ("truncates after 1 step", "warn",
     "Most likely truncated is set on every step or the step limit is 1."),
)
CHECKER_IGNORED = ("is different from the unwrapped version",)  # we check the env as it is made
# check_env assertions that say the same seed and action gave a different observation, reward,
# ending or random-generator state: that is the catalogue's `non-replayable` (seen by Gymnasium's
# two-reset replay), not an API defect, and it must read as the replay probe's incentive, not as a
# second problem beside it. Not here: a step's info differing (training does not read info), and a
# reset that never seeds np_random (a deterministic env without randomness still replays).
CHECKER_NON_REPLAYABLE = (
    "non-deterministic as the observations are not equivalent",
    "step observations are not equivalent",
    "step rewards are not equivalent",
    "step termination are not equivalent",
    "np_random` is not properly been updated after step",
    "random generates are not same when the same seeds",
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Seen:
    """Where a defect showed up."""

    source: str  # "exploration" | "api rollouts"
    seed: int | None
    step: int | None
    message: str
    episode_id: int | None = None


@dataclass
class Tally:
    seen: dict[str, list[Seen]] = field(default_factory=dict)
    episodes: int = 0
    steps: int = 0

    def add(self, key: str, source: str, seed, step, message: str, episode_id=None) -> None:
        self.seen.setdefault(key, []).append(Seen(source, _int(seed), _int(step), message, _int(episode_id)))

    def messages(self) -> set[str]:
        return {s.message for seen in self.seen.values() for s in seen}


def _int(value: Any) -> int | None:
    try:
        return None if value is None or value != value else int(value)
    except (TypeError, ValueError):
        return None


# -- what the exploration already saw ----------------------------------------------------------
def _from_exploration(ctx: ProbeContext, tally: Tally) -> None:
    for p in ctx.exploration_problems:
        if p.kind == "hang":
            key = f"{p.where}_hang"
        elif p.kind == "reset_exception":
            key = "reset_exception"
        elif "must be a mapping with 'name' and 'status'" in p.message:
            key = "bad_tool_info"  # the recorder rejected info['tool'], the env itself did not raise
        else:
            key = f"{p.where}_exception"
        tally.add(key if key in DEFECTS else "step_exception", "exploration", p.seed, p.step, p.message, p.episode_id)
    steps, episodes = ctx.exploration.steps, ctx.exploration.episodes
    if steps.empty:
        return
    # The recorder writes a NaN reward on the step that raised; that is an exception, not a reward.
    crashed = episodes.loc[episodes["end_reason"] == "env_exception", ["episode_id", "length"]]
    crash_rows = set(zip(crashed["episode_id"], crashed["length"] - 1, strict=True))
    seeds = dict(zip(episodes["episode_id"], episodes["seed"], strict=True))
    rewards = steps["reward"].to_numpy(dtype=float)
    for i in np.flatnonzero(~np.isfinite(rewards)):
        row = steps.iloc[i]
        if (row["episode_id"], row["step"]) in crash_rows:
            continue
        tally.add("nan_reward", "exploration", seeds.get(row["episode_id"]), row["step"],
                  f"reward {float(rewards[i])}", row["episode_id"])
    if "error" in steps:
        unknown = steps["error"].astype(str).str.startswith("unknown tool status")
        for _, row in steps[unknown].iterrows():
            tally.add("bad_tool_info", "exploration", seeds.get(row["episode_id"]), row["step"],
                      str(row["error"]), row["episode_id"])
    tally.steps += len(steps)
    tally.episodes += len(episodes)


# -- the probe's own rollouts, reading the raw 5-tuples ---------------------------------------
def _nonfinite(x: Any) -> bool:
    if isinstance(x, Mapping):
        return any(_nonfinite(v) for v in x.values())
    if isinstance(x, (tuple, list)):
        return any(_nonfinite(v) for v in x)
    if isinstance(x, (str, bytes)):
        return False
    try:
        arr = np.asarray(x)
    except Exception:
        return False
    return bool(np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)))


def _in_space(space: gym.Space, obs: Any) -> bool:
    try:
        return bool(space.contains(obs))
    except Exception:
        return False


def _check_obs(tally, space, obs, seed, step) -> None:
    if _nonfinite(obs):
        tally.add("nonfinite_obs", "api rollouts", seed, step, f"observation {_short(obs)}")
    elif not _in_space(space, obs):
        tally.add("obs_outside_space", "api rollouts", seed, step,
                  f"observation {_short(obs)} is not in {space}")


def _check_info(tally, info, seed, step) -> None:
    if not isinstance(info, dict):
        tally.add("info_not_dict", "api rollouts", seed, step, f"info is a {type(info).__name__}")
        return
    tool = info.get(TOOL_KEY)
    if tool is None:
        return
    if not isinstance(tool, Mapping):
        problem = f"info['tool'] is a {type(tool).__name__}"
    elif "name" not in tool or "status" not in tool:
        problem = f"info['tool'] lacks {'name' if 'name' not in tool else 'status'}: {_short(dict(tool))}"
    elif tool["status"] not in TOOL_STATUSES:
        problem = f"unknown tool status {tool['status']!r}"
    else:
        return
    tally.add("bad_tool_info", "api rollouts", seed, step, problem)


def _short(x: Any, n: int = 120) -> str:
    text = repr(x)
    return text if len(text) <= n else text[: n - 3] + "..."


def _rollouts(ctx: ProbeContext, tally: Tally) -> bool:
    """Run a few short episodes; returns False when the env hung (stop using it)."""
    cfg = ctx.config
    timeout = cfg.step_timeout_s
    worker = DeadlineWorker("envaudit-api")
    rng = ctx.rng("actions")
    steps_left = cfg.scaled(ROLLOUT_STEPS)
    env = None

    def hang(key, where, seed, step, exc) -> bool:
        tally.add(key, "api rollouts", seed, step, str(exc))
        ctx.hangs.append(Problem("hang", where, str(exc), seed, step))
        return False

    def drop(env) -> None:
        try:
            worker.call(env.close, timeout, "close()")
        except Exception:  # closing a broken env is best effort
            pass

    try:
        for seed in ctx.seeds(cfg.scaled(ROLLOUT_EPISODES), "rollouts"):
            if steps_left <= 0 or ctx.over_cap(f"{steps_left} of {cfg.scaled(ROLLOUT_STEPS)} api rollout steps"):
                break
            if env is None:
                try:
                    env = worker.call(lambda: limit_steps(ctx.make_env(), cfg.max_steps), timeout, "making the env")
                except DeadlineExceeded as exc:
                    return hang("make_hang", "make", seed, None, exc)
                except Exception as exc:
                    tally.add("make_exception", "api rollouts", seed, None, f"{type(exc).__name__}: {exc}")
                    return True
            try:
                with note("reset", None, seed):
                    result = worker.call(lambda s=seed, e=env: e.reset(seed=s), timeout, "reset()")
            except DeadlineExceeded as exc:
                return hang("reset_hang", "reset", seed, None, exc)
            except Exception as exc:
                tally.add("reset_exception", "api rollouts", seed, None, f"{type(exc).__name__}: {exc}")
                drop(env)
                env = None
                continue
            tally.episodes += 1
            if not (isinstance(result, tuple) and len(result) == 2):
                tally.add("bad_return", "api rollouts", seed, None,
                          f"reset() returned {type(result).__name__} {_short(result, 60)}")
                continue
            obs, info = result
            _check_obs(tally, env.observation_space, obs, seed, None)
            _check_info(tally, info, seed, None)
            space = copy.deepcopy(env.action_space)
            space.seed(int(rng.integers(2**31)))
            for t in range(min(EPISODE_STEPS, steps_left)):
                if ctx.over_cap(f"{steps_left} of {cfg.scaled(ROLLOUT_STEPS)} api rollout steps"):
                    break
                action = space.sample()
                try:
                    with note("step", t, seed):
                        out = worker.call(lambda a=action, e=env: e.step(a), timeout, "step()")
                except DeadlineExceeded as exc:
                    return hang("step_hang", "step", seed, t, exc)
                except Exception as exc:
                    tally.add("step_exception", "api rollouts", seed, t, f"{type(exc).__name__}: {exc}")
                    drop(env)
                    env = None
                    break
                tally.steps += 1
                steps_left -= 1
                if not (isinstance(out, tuple) and len(out) == 5):
                    tally.add("bad_return", "api rollouts", seed, t,
                              f"step() returned {type(out).__name__} of length "
                              f"{len(out) if isinstance(out, tuple) else '-'}")
                    break
                obs, reward, terminated, truncated, info = out
                _check_obs(tally, env.observation_space, obs, seed, t)
                _check_info(tally, info, seed, t)
                try:
                    value = float(reward)
                except (TypeError, ValueError) as exc:
                    tally.add("reward_not_number", "api rollouts", seed, t, f"reward {_short(reward)}: {exc}")
                else:
                    if not np.isfinite(value):
                        tally.add("nan_reward", "api rollouts", seed, t, f"reward {value}")
                bad = [f"{n} is {type(v).__name__} {_short(v, 30)}"
                       for n, v in (("terminated", terminated), ("truncated", truncated))
                       if not isinstance(v, (bool, np.bool_))]
                if bad:
                    tally.add("nonbool_done", "api rollouts", seed, t, "; ".join(bad))
                try:
                    done = bool(terminated) or bool(truncated)
                except Exception:
                    done = True
                if done:
                    break
    finally:
        if env is not None:
            drop(env)
        worker.close()
    return True


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


def _checker(ctx: ProbeContext, known: set[str], non_finite: bool = False) -> list[Finding]:
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
        env = ctx.make_env()
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
        text = _ANSI.sub("", str(w.message)).removeprefix("WARN: ").strip()
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
    if _replay_mismatch(error, non_finite):
        findings.append(decide_non_replayable(error, message))
    else:
        findings.append(decide_env_error("checker-error", error=error, message=message))
    return findings


def _soft_rule(error: Exception) -> tuple[str, str, str] | None:
    """The ``CHECKER_SOFT`` rule (phrase, severity, fix) that ``check_env``'s failure matches first."""
    return next((rule for rule in CHECKER_SOFT if rule[0] in str(error).lower()), None)


def _replay_mismatch(error: Exception, non_finite: bool) -> bool:
    """Whether ``check_env`` stopped because the same seed and action gave another result (one of
    ``CHECKER_NON_REPLAYABLE``, a soft assertion). NaN equals nothing, itself included: where the
    env returns NaN/inf (its own env-error), two equal runs compare unequal, and that says nothing
    about replaying."""
    return (isinstance(error, AssertionError) and _soft_rule(error) is not None and not non_finite
            and any(p.lower() in str(error).lower() for p in CHECKER_NON_REPLAYABLE))


# -- findings ---------------------------------------------------------------------------------
def decide_env_error(basis: str, *, key: str = "", seen: Sequence[Seen] = (), tally: Tally | None = None,
                     step_timeout_s: float = 0.0, checker_warnings: Sequence[str] = (), message: str = "",
                     deadline_s: float = 0.0, error: Exception | None = None) -> Finding:
    """The one place this probe decides ``env-error``, for each way it sees a defect:

    - ``"defect"``: a ``DEFECTS`` entry (``key``) seen in exploration or the probe's own rollouts
      (``seen``, counted in ``tally``): the entry's severity (``fail`` for what crashes or poisons
      training, ``warn`` for what misleads it);
    - ``"checker-warnings"``: ``check_env``'s warnings (``checker_warnings``): ``info``;
    - ``"checker-hang"``: ``check_env`` did not return within ``deadline_s``: ``fail``;
    - ``"checker-error"``: ``check_env`` stopped with ``error`` (``message``): the severity of the
      first ``CHECKER_SOFT`` rule it matches when it is an assertion, ``fail`` otherwise.
    """
    if basis == "defect":
        d = DEFECTS[key]
        title, summary, fix = _defect_text(d, key, seen, step_timeout_s)
        first = seen[0]
        by_source: dict[str, int] = {}
        for s in seen:
            by_source[s.source] = by_source.get(s.source, 0) + 1
        return Finding(
            code="env-error", severity=Severity.parse(d.severity), title=title, summary=summary,
            evidence={
                "count": len(seen), "first_seed": first.seed, "first_step": first.step,
                "first_message": first.message, "messages": list(dict.fromkeys(s.message for s in seen))[:3],
                "by_source": by_source, "episodes_checked": tally.episodes, "steps_checked": tally.steps,
                "behaviour": "env-error",
            },
            examples=list(dict.fromkeys(s.episode_id for s in seen if s.episode_id is not None))[:5], fix=fix,
        )
    if basis == "checker-warnings":
        title, summary, fix = _checker_warnings_text(checker_warnings)
        return Finding(code="env-error", severity=Severity.INFO, title=title, summary=summary,
                       evidence={"warnings": list(checker_warnings), "behaviour": "env-error"}, fix=fix)
    if basis == "checker-hang":
        title, summary, fix = _checker_hang_text(message)
        return Finding(code="env-error", severity=Severity.FAIL, title=title, summary=summary,
                       evidence={"deadline_s": deadline_s, "message": message, "behaviour": "env-error"}, fix=fix)
    if basis == "checker-error":
        soft = _soft_rule(error)
        if isinstance(error, AssertionError) and soft is not None:
            _, severity, fix = soft
            title = "Gymnasium's env checker reports a defect"
        else:
            severity, title = "fail", "Gymnasium's env checker rejects the env"
            fix = ("Fix what the message says; training code calls the env the same way check_env "
                   "does and will fail on it.")
        return Finding(code="env-error", severity=Severity.parse(severity), title=title,
                       summary=_checker_stopped(message),
                       evidence={"message": message, "exception": type(error).__name__, "behaviour": "env-error"},
                       fix=fix)
    raise ValueError(f"unknown basis {basis!r} for env-error; expected defect, checker-warnings, checker-hang "
                     "or checker-error")


def decide_non_replayable(error: Exception, message: str) -> Finding:
    """The one place this probe decides ``non-replayable``: ``check_env``'s own two-reset replay
    gave another observation, reward, ending or generator state (``_replay_mismatch``), graded as
    the first ``CHECKER_SOFT`` rule it matches (``warn``; grouped with the replay probe's ``fail``)."""
    _, severity, fix = _soft_rule(error)
    return Finding(code="non-replayable", severity=Severity.parse(severity),
                   title="Same seed and action, another result under Gymnasium's env checker",
                   summary=_checker_stopped(message),
                   evidence={"message": message, "exception": type(error).__name__, "behaviour": "non-replayable"},
                   fix=fix)


# -- the findings' words -----------------------------------------------------------------------
def _defect_text(d: Defect, key: str, seen: Sequence[Seen], step_timeout_s: float) -> tuple[str, str, str]:
    first = seen[0]
    where = (f"reset(seed={first.seed})" if first.step is None else f"seed {first.seed}, step {first.step}")
    if key.endswith("_hang"):
        detail = f"{d.what} ({step_timeout_s:g} s deadline) at {where}"
    else:
        detail = f"{d.what} {len(seen)} time(s), first at {where}: {first.message}"
    return d.title, f"{detail}; {d.why}.", d.fix


def _checker_warnings_text(notes: Sequence[str]) -> tuple[str, str, str]:
    return ("Gymnasium's env checker warns",
            f"check_env raised {len(notes)} warning(s); the first: {notes[0]}",
            "Each warning names what Gymnasium expects; none of them stops training by itself.")


def _checker_hang_text(message: str) -> tuple[str, str, str]:
    return ("The env hangs under Gymnasium's env checker",
            f"{message}; a rollout worker calling the env the same way blocks for good.",
            "Put a deadline on every blocking call in reset() and step(); most likely a call "
            "waits for a backend that never answers.")


def _checker_stopped(message: str) -> str:
    return f"gymnasium.utils.env_checker.check_env stopped with {message}"


def run(ctx: ProbeContext) -> list[Finding]:
    tally = Tally()
    _from_exploration(ctx, tally)
    hung = any(p.kind == "hang" for p in ctx.exploration_problems) or bool(ctx.hangs)
    if hung:
        ctx.notes["skipped"] = "own rollouts and check_env skipped: the env already hung"
    else:
        hung = not _rollouts(ctx, tally)
    findings = [decide_env_error("defect", key=key, seen=seen, tally=tally,
                                 step_timeout_s=ctx.config.step_timeout_s)
                for key, seen in tally.seen.items()]
    if not hung:
        findings += _checker(ctx, tally.messages(), non_finite=bool({"nan_reward", "nonfinite_obs"} & set(tally.seen)))
    return findings


probe = Probe(
    name="api",
    run=run,
    summary="Gymnasium API conformance: check_env, hangs, exceptions, NaN/inf and the info protocol",
    codes=("env-error", "non-replayable"),
    decisions={"env-error": decide_env_error, "non-replayable": decide_non_replayable},
    order=10,
)
