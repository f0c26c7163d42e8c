"""The api probe's looks at the env: what exploration already saw, and a few short guarded rollouts of its own that read the raw 5-tuples."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.deadline import DeadlineExceeded, DeadlineWorker
from envaudit.execution.slots import note
from envaudit.probe import ProbeContext
from envaudit.probes.api.defects import (
    DEFECTS,
    EPISODE_STEPS,
    ROLLOUT_EPISODES,
    ROLLOUT_STEPS,
    Tally,
)
from envaudit.protocol import TOOL_KEY, TOOL_STATUSES
from envaudit.rollout import Problem, limit_steps


# -- what the exploration already saw ----------------------------------------------------------
def from_exploration(ctx: ProbeContext, tally: Tally) -> None:
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


def own_rollouts(ctx: ProbeContext, tally: Tally) -> bool:
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
                    env = worker.call(lambda: ctx.counted(limit_steps(ctx.make_env(), cfg.max_steps)), timeout, "making the env")
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
