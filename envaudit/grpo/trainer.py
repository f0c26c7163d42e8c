"""The GRPO loop, top to bottom (CleanRL style; names from the GRPO paper).

Each iteration:

1. collect ``groups_per_iteration`` groups of ``group_size`` rollouts, each group from one
   ``reset(seed=s)``, with the current policy (sampling);
2. give every rollout its training reward: the env return by default, or a search target's
   (``reward``), then the rollout pipeline's handling of its outcome class (keep / zero / penalty /
   drop, group masking, zero-variance filtering) and group-relative advantages, all through
   ``envaudit.pipeline.group_advantages``; dropped rollouts leave the loss and leave or stay in the
   baseline as the pipeline says;
3. update the policy with the clipped policy-gradient objective over every step of every trained
   rollout (plus the entropy bonus and the optional KL to the initial policy);
4. log one row of behaviour: return, training reward, success / timeout / tool-failure rates,
   length, action mix, entropy, KL, and ``learning_groups``: the groups with a trained rollout whose
   advantage is not zero (a group whose rollouts all got the same training reward teaches nothing).

With ``config.barren_rollouts`` = n, training stops before ``config.iterations`` once n rollouts
in a row (whole iterations) gave no learning group, in either of two cases:

- *barren*: the policy stayed the uniform explorer it started as (the update's mean entropy at least
  ``UNIFORM`` of the catalogue's log size). There the update is zero: no advantage, and the entropy
  bonus's gradient vanishes at the uniform policy, so every further iteration draws from the same
  policy;
- *settled*: the policy learned something and has nothing left to learn: no advantage, and its mean
  entropy did not rise over those n rollouts by more than ``SETTLED_RISE`` of the catalogue's log
  size. The update is then the entropy bonus alone, whose gradient vanishes as the policy saturates
  (a policy at 3e-5 nats a step stays there for 50 iterations), so the policy stays what it is; one
  whose entropy climbs back towards exploring is not settled and trains on.

Either way a behaviour that would give the policy as it stands a signal (a target reached, a reward
that differs within a group) shows in fewer than r of its rollouts, where (1 - r) ** n is the chance
of having missed it. A caller may also stop a run whose answer is decided (``decided``: a targeted
search whose best return stays below what its verdict reads, ``search.Ceiling``). The rules count
rollouts, never time, so the same seed stops at the same iteration on any machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.grpo.config import GRPOConfig
from envaudit.grpo.engine import PolicyEngine, Trajectory
from envaudit.grpo.rollouts import LockstepCollector, Rollouts
from envaudit.pipeline import Pipeline, group_advantages
from envaudit.protocol import FAILURE, SUCCESS, TIMEOUT
from envaudit.recording import Records
from envaudit.rollout import EnvFactory, Problem
from envaudit.seeding import child_rng, child_seed
from envaudit.textmode import UNPARSED

RewardFn = Callable[[pd.DataFrame], np.ndarray]
"""Episodes table -> per-episode training return, before the pipeline's handling."""


RICHEST_KEPT = 3


@dataclass(frozen=True)
class Met:
    """One training episode the env ended without success, with the actions that led there."""

    ret: float
    episode_id: int
    mode: str
    iteration: int
    actions: tuple[Any, ...]


@dataclass
class TrainResult:
    engine: PolicyEngine
    curves: pd.DataFrame
    """One row per iteration (see ``behaviour_row``)."""
    episodes: pd.DataFrame
    """Every training episode, with its ``advantage``, ``trained`` and ``training_reward``."""
    problems: list[Problem] = field(default_factory=list)
    stopped: str | None = None
    """``"hang"``, ``"deadline"`` (the safety cap) or ``"no episodes"`` when training stopped before
    ``config.iterations``; None when it ran them all (or ``on_iteration`` asked it to stop)."""
    env_steps: int = 0
    first: Records | None = None
    """Steps and episodes of the first iteration (the untrained policy), with pipeline columns."""
    richest: list[Met] = field(default_factory=list)
    """The best-paying training episodes the env ended without success (``RICHEST_KEPT``, richest
    first): what the search met on its way, whatever it was trained to reach."""
    barren: bool = False
    """Training stopped early because it found nothing to learn from (``barren_rollouts``, see the
    module docstring)."""
    settled: bool = False
    """Training stopped early because the policy had learned what it could and settled (``barren_rollouts``,
    see the module docstring)."""
    decided: bool = False
    """Training stopped early because ``decided`` said that what it could still reach would change
    nothing (a targeted run whose best return stays below what its verdict reads, see
    ``search.Ceiling``)."""


UNIFORM = 0.95
"""A policy whose mean entropy is at least this share of log(catalogue size) is the uniform explorer."""


def learning_groups(episodes: pd.DataFrame) -> int:
    """How many groups of one iteration carry a learning signal: a trained rollout whose advantage
    is not zero."""
    moving = episodes["trained"].to_numpy(bool) & (np.abs(episodes["advantage"].to_numpy(float)) > 1e-12)
    return int(episodes.loc[moving, "group"].nunique())


SETTLED_RISE = 0.01
"""Over a settled run's quiet rollouts its mean entropy rose by at most this share of log(catalogue size)."""


def barren(curves: list[dict[str, Any]], config: GRPOConfig, n_actions: int, prior: int = 0) -> bool:
    """Whether the last ``config.barren_rollouts`` rollouts (whole iterations) gave no learning group
    while the policy stayed uniform over ``n_actions`` (see the module docstring). ``prior``: rollouts
    of the uniform explorer played before training (the scan's exploration) that would have given no
    learning group either; they count while every iteration so far was quiet and uniform."""
    if not config.barren_rollouts or n_actions < 2 or config.engine != "torch":
        return False
    uniform = UNIFORM * float(np.log(n_actions))
    quiet = 0
    for row in reversed(curves):
        if row["learning_groups"] or not row["entropy"] >= uniform:
            break
        quiet += 1
    rollouts = quiet * config.rollouts_per_iteration + (prior if quiet == len(curves) else 0)
    return rollouts >= config.barren_rollouts


def quiet_iterations(config: GRPOConfig) -> int:
    """The whole iterations that hold ``config.barren_rollouts`` rollouts: the window of ``settled``
    (and of a targeted run's ``decided``, ``search.decided_by``)."""
    return -(-config.barren_rollouts // config.rollouts_per_iteration)


def settled(curves: list[dict[str, Any]], config: GRPOConfig, n_actions: int) -> bool:
    """Whether the last ``config.barren_rollouts`` rollouts (whole iterations) gave no learning group
    while the policy's mean entropy rose by at most ``SETTLED_RISE`` of log(``n_actions``) over them
    (see the module docstring); an iteration that trained nothing (entropy NaN) ends the window."""
    if not config.barren_rollouts or n_actions < 2 or config.engine != "torch":
        return False
    need = quiet_iterations(config)
    window = curves[-need:]
    if len(window) < need or any(row["learning_groups"] or not np.isfinite(row["entropy"]) for row in window):
        return False
    return window[-1]["entropy"] - window[0]["entropy"] <= SETTLED_RISE * float(np.log(n_actions))


def _richest(kept: list[Met], episodes: pd.DataFrame, steps: dict[int, Any], mode: str,
             iteration: int) -> list[Met]:
    ended = episodes[(episodes["outcome"] == FAILURE) & np.isfinite(episodes["return"].to_numpy(float))]
    met = [Met(float(r), int(e), mode, iteration, tuple(steps[int(e)].actions))
           for e, r in zip(ended["episode_id"], ended["return"], strict=True) if int(e) in steps]
    return sorted(kept + met, key=lambda m: (-m.ret, m.episode_id))[:RICHEST_KEPT]


def group_seeds(config: GRPOConfig, mode: str, iteration: int) -> list[int]:
    """The reset seed of each group of one iteration, repeated G times (one per rollout)."""
    return [child_seed(config.seed, "grpo", mode, iteration, g) % (2**31 - 1)
            for g in range(config.groups_per_iteration) for _ in range(config.group_size)]


def make_collector(make_env: EnvFactory, config: GRPOConfig, *, wrappers: Sequence = (),
                   ids: Any = None, executor: Any = None, spec: str | None = None) -> LockstepCollector:
    """The iteration's rollouts, one lane each on ``executor``'s workers (None: in this process)."""
    return LockstepCollector(make_env, config.rollouts_per_iteration, step_timeout_s=config.step_timeout_s,
                             max_steps=config.max_steps, success_threshold=config.success_threshold,
                             wrappers=wrappers, ids=ids, executor=executor, spec=spec)


def default_engine(collector: LockstepCollector, config: GRPOConfig) -> PolicyEngine:
    if config.engine == "vllm":
        from envaudit.grpo.lm_engine import LMEngine

        return LMEngine.for_env(collector.make_env, config, config.lm_settings())
    from envaudit.grpo.torch_engine import TorchEngine

    observation_space, action_space = collector.spaces()
    return TorchEngine(observation_space, action_space, config)


def train(
    make_env: EnvFactory,
    config: GRPOConfig,
    *,
    mode: str = "natural",
    reward: RewardFn | None = None,
    pipeline: Pipeline | None = None,
    engine: PolicyEngine | None = None,
    collector: LockstepCollector | None = None,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
    ids: Any = None,
    deadline: float | None = None,
    tags: dict[str, Any] | None = None,
    on_iteration: Callable[[int, PolicyEngine, dict[str, Any]], bool | None] | None = None,
    executor: Any = None,
    prior: pd.DataFrame | None = None,
    decided: Callable[[list[pd.DataFrame]], bool] | None = None,
) -> TrainResult:
    """Train a policy with GRPO on ``make_env``; ``mode`` names the run in seeds, tags and logs.

    ``pipeline`` defaults to ``config.rollout_pipeline``; ``reward`` to the env return. Training runs
    ``config.iterations`` iterations; it stops early only when the env hangs, when
    ``on_iteration(iteration, engine, row)`` returns True, once it has found nothing to learn from or
    has settled (``config.barren_rollouts``, see the module docstring), or at ``deadline`` (``time.monotonic()``),
    a safety cap whose cut the result reports as ``stopped="deadline"``, never a way to size work.
    ``executor``: where the envs step (``envaudit.execution``; None: in this process); the policy
    stays here and the result is the same with any executor and any number of workers.
    ``prior``: episodes the uniform explorer already played on this env, in groups of G (the scan's
    exploration); when none of their groups would give a learning signal under ``reward`` and
    ``pipeline``, they count towards ``config.barren_rollouts`` (``quiet_prior``).
    ``decided``: called after every iteration with the episodes of every iteration so far (with
    their ``training_return``); training stops when it returns True (``TrainResult.decided``).
    """
    pipeline = pipeline or config.rollout_pipeline
    own_collector = collector is None
    collector = collector or make_collector(make_env, config, wrappers=wrappers, ids=ids, executor=executor)
    rows: list[dict[str, Any]] = []
    trained_episodes: list[pd.DataFrame] = []
    problems: list[Problem] = []
    stopped: str | None = None
    env_steps = 0
    first: Records | None = None
    richest: list[Met] = []
    stopped_barren = stopped_settled = stopped_decided = False
    try:
        engine = engine or default_engine(collector, config)
        labels = action_labels(collector)
        known_quiet = quiet_prior(prior, reward, pipeline)
        rng = child_rng(config.seed, "grpo", mode, "actions")
        for iteration in range(config.iterations):
            if deadline is not None and time.monotonic() > deadline:
                stopped = "deadline"
                break
            # 1. G rollouts per reset seed, every group stepped together.
            seeds = group_seeds(config, mode, iteration)
            batch_tags = [{"probe": "grpo", "policy": f"grpo-{mode}", "mode": mode, **(tags or {}),
                           "iteration": iteration, "group": i // config.group_size}
                          for i in range(len(seeds))]
            batch = collector.collect(engine, seeds, rng, tags=batch_tags, deadline=deadline)
            problems.extend(batch.problems)
            env_steps += batch.env_steps
            episodes = batch.records.episodes
            if batch.stopped is not None or episodes.empty:
                stopped = batch.stopped or "no episodes"
                break
            # 2. Training rewards, the pipeline's handling, group-relative advantages.
            returns = np.asarray(reward(episodes) if reward is not None else episodes["return"], dtype=float)
            episodes = with_advantages(episodes, returns, pipeline)
            # 3. The clipped policy-gradient update over every step of every trained rollout.
            trajectories = [
                Trajectory(steps.states, np.asarray(steps.actions), np.asarray(steps.logprobs), float(adv))
                for episode_id, adv, trained in zip(episodes["episode_id"], episodes["advantage"],
                                                     episodes["trained"], strict=True)
                if trained and (steps := batch.steps.get(int(episode_id))) is not None
            ]
            stats = engine.update(trajectories)
            # 4. What the policy did this iteration.
            row = {"iteration": iteration, "mode": mode, **behaviour_row(batch, episodes, labels), **stats,
                   "learning_groups": learning_groups(episodes), "env_steps": env_steps}
            rows.append(row)
            trained_episodes.append(episodes)
            richest = _richest(richest, episodes, batch.steps, mode, iteration)
            if first is None:
                first = Records(batch.records.steps, episodes)
            if on_iteration is not None and on_iteration(iteration, engine, row):
                break
            if iteration + 1 < config.iterations and barren(rows, config, len(labels), known_quiet):
                stopped_barren = True
                break
            if iteration + 1 < config.iterations and settled(rows, config, len(labels)):
                stopped_settled = True
                break
            if iteration + 1 < config.iterations and decided is not None and decided(trained_episodes):
                stopped_decided = True
                break
    finally:
        if own_collector:
            collector.close()
    curves = pd.DataFrame(rows)
    all_episodes = pd.concat(trained_episodes, ignore_index=True) if trained_episodes else pd.DataFrame()
    return TrainResult(engine, curves, all_episodes, problems, stopped, env_steps, first, richest, stopped_barren,
                       stopped_settled, stopped_decided)


def quiet_prior(prior: pd.DataFrame | None, reward: RewardFn | None, pipeline: Pipeline) -> int:
    """How many rollouts of ``prior`` count as quiet: all of them when none of their groups (the
    ``group`` column) would give a learning signal under ``reward`` and ``pipeline``, else none."""
    if prior is None or prior.empty or "group" not in prior:
        return 0
    returns = np.asarray(reward(prior) if reward is not None else prior["return"], dtype=float)
    return 0 if learning_groups(with_advantages(prior, returns, pipeline)) else len(prior)


def with_advantages(episodes: pd.DataFrame, returns: np.ndarray, pipeline: Pipeline) -> pd.DataFrame:
    """The episodes table plus ``training_return`` (before handling), ``training_reward`` (after,
    NaN where dropped), ``advantage`` and ``trained``, group by group."""
    n = len(episodes)
    advantage, trained, reward = np.zeros(n), np.zeros(n, dtype=bool), np.full(n, np.nan)
    groups, outcomes = episodes["group"].to_numpy(), episodes["outcome"].to_numpy()
    for group in np.unique(groups):
        idx = np.flatnonzero(groups == group)
        g = group_advantages(returns[idx], list(outcomes[idx]), pipeline)
        advantage[idx], trained[idx], reward[idx] = g.advantages, g.trained, g.training_rewards
    return episodes.assign(training_return=returns, training_reward=reward, advantage=advantage,
                           trained=trained)


def action_labels(collector: LockstepCollector) -> list[str]:
    env = collector.env(0)
    labels = getattr(env.unwrapped, "action_labels", None)
    n = int(env.action_space.n) if isinstance(env.action_space, gym.spaces.Discrete) else 0
    return list(labels) if labels is not None else [str(a) for a in range(n)]


def behaviour_row(batch: Rollouts, episodes: pd.DataFrame, labels: Sequence[str]) -> dict[str, Any]:
    """Per-iteration behaviour: what the log table and the probe's drift tests read."""
    row = episode_behaviour(episodes)
    trained = episodes["training_reward"].dropna() if "training_reward" in episodes else pd.Series(dtype=float)
    row["training_reward"] = float(trained.mean()) if len(trained) else float("nan")
    row["dropped_rate"] = float(1.0 - episodes["trained"].mean()) if "trained" in episodes else 0.0
    row.update(action_mix(batch.records.steps, labels))
    return row


def episode_behaviour(episodes: pd.DataFrame) -> dict[str, float]:
    """Return, success / timeout rates, tool-failure rate and length of a set of episodes."""
    n = len(episodes)
    if n == 0:
        return {"episodes": 0, "return": float("nan"), "success_rate": float("nan"),
                "timeout_rate": float("nan"), "failure_rate": float("nan"), "mean_length": float("nan")}
    success = episodes["success"]
    calls = float(episodes["n_tool_calls"].sum())
    failed = float(episodes["n_tool_errors"].sum() + episodes["n_tool_timeouts"].sum())
    has_success = success.notna().any() or (episodes["outcome"] == SUCCESS).any()
    return {
        "episodes": n,
        "return": float(episodes["return"].mean()),
        "success_rate": float((episodes["outcome"] == SUCCESS).mean()) if has_success else float("nan"),
        "timeout_rate": float((episodes["outcome"] == TIMEOUT).mean()),
        "failure_rate": failed / calls if calls else float("nan"),
        "mean_length": float(episodes["length"].mean()),
    }


def text_actions(steps: pd.DataFrame) -> bool:
    """Whether these steps' actions are text (tool calls written by a language model)."""
    return bool(len(steps)) and bool(steps["action"].map(lambda a: isinstance(a, str)).any())


def action_keys(steps: pd.DataFrame) -> pd.Series:
    """What each step did, comparable across steps: its catalogue index, or for text actions the
    label of the call the text parsed to (``(unparsed)`` when it did not parse)."""
    if text_actions(steps) and "action_label" in steps:
        return steps["action_label"].fillna(UNPARSED)
    return steps["action"]


def action_mix(steps: pd.DataFrame, labels: Sequence[str]) -> dict[str, float]:
    """Share of steps that took each catalogue action, as ``mix:<label>`` columns (text actions by
    the call they parsed to, plus ``mix:(unparsed)``)."""
    if text_actions(steps):
        keys = action_keys(steps)
        return {f"mix:{label}": float((keys == label).mean()) for label in [*labels, UNPARSED]}
    counts = np.bincount(steps["action"].to_numpy(dtype=np.int64), minlength=len(labels))[: len(labels)] \
        if len(steps) else np.zeros(len(labels))
    total = max(1, int(counts.sum()))
    return {f"mix:{label}": float(c) / total for label, c in zip(labels, counts, strict=True)}
