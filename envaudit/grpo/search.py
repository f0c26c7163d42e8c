"""Two ways to use GRPO on an env: what training will teach, and what an agent could reach.

- ``natural``: maximise the training reward under the configured rollout pipeline, exactly as a
  real run would; the question is what behaviour it teaches.
- ``targeted``: for one behaviour (timing out, hitting tool failures, finishing in few steps,
  ending without success; and honest success or failure as references), maximise the env return
  over the episodes that show the behaviour, every other episode getting a floor below anything
  the env pays. What the trained policy then earns through the behaviour is the best return
  reachable that way: "by timing out: 0.99; by honest success: 0.94".

Both end with an evaluation on fixed seeds (the same seeds for every mode, so runs compare pair
by pair), G sampled rollouts per seed, so the pipeline's group advantages apply to it too.

The work of a run is at most ``config.iterations`` and ``eval_groups``; a run stops sooner when it
is barren or settled (``trainer``), and a targeted run when its verdict is decided (``Ceiling``). A
barren run given the uniform explorer's records (``prior``) is evaluated on them: its policy is
still that explorer, so new episodes would only repeat them. ``deadline`` is only a safety cap: a
run it cuts says so in ``SearchResult.stopped`` and its numbers are not comparable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.grpo.config import GRPOConfig
from envaudit.grpo.engine import PolicyEngine
from envaudit.grpo.trainer import (
    TrainResult,
    make_collector,
    quiet_iterations,
    train,
    with_advantages,
)
from envaudit.pipeline import Pipeline
from envaudit.protocol import FAILURE, SUCCESS, TIMEOUT
from envaudit.recording import Records
from envaudit.rollout import EnvFactory
from envaudit.seeding import child_rng, child_seed


@dataclass(frozen=True)
class Behaviour:
    name: str
    words: str
    """The behaviour in the user's words, for sentences such as 'best return reachable by ...'."""
    shows: Callable[[pd.DataFrame, Reference], np.ndarray]


@dataclass(frozen=True)
class Reference:
    """What the targets are measured against, read once from the exploration episodes."""

    floor: float
    """Training return of episodes that do not show the target behaviour: below any env return seen."""
    spread: float
    """Range of returns seen (at least a small positive number); sets the floor's margin."""
    short_length: int
    """Episodes that end (not time out) within this many steps 'finish in few steps'."""

    @classmethod
    def from_episodes(cls, episodes: pd.DataFrame) -> Reference:
        returns = episodes["return"].to_numpy(float) if len(episodes) else np.zeros(1)
        returns = returns[np.isfinite(returns)] if np.isfinite(returns).any() else np.zeros(1)
        spread = max(float(np.ptp(returns)), 1e-3)
        lengths = episodes["length"].to_numpy(int) if len(episodes) else np.ones(1, int)
        wins = episodes["length"][episodes["outcome"] == SUCCESS].to_numpy(int) if len(episodes) else []
        # Shorter than any honest success seen; without one, the shortest quarter of episodes.
        short = int(np.min(wins)) - 1 if len(wins) else int(np.quantile(lengths, 0.25))
        return cls(floor=float(returns.min()) - spread, spread=spread, short_length=max(1, short))


def _ended(e: pd.DataFrame) -> np.ndarray:
    return (e["outcome"] != TIMEOUT).to_numpy()


BEHAVIOURS: dict[str, Behaviour] = {b.name: b for b in (
    Behaviour("success", "honest success", lambda e, r: (e["outcome"] == SUCCESS).to_numpy()),
    Behaviour("failure", "failing outright", lambda e, r: (e["outcome"] == FAILURE).to_numpy()),
    Behaviour("timeout", "timing out", lambda e, r: (e["outcome"] == TIMEOUT).to_numpy()),
    Behaviour("tool_failure", "hitting tool failures",
              lambda e, r: ((e["n_tool_errors"] + e["n_tool_timeouts"]) > 0).to_numpy()),
    Behaviour("short", "finishing in few steps",
              lambda e, r: _ended(e) & (e["length"] <= r.short_length).to_numpy()),
    Behaviour("no_success", "ending without success", lambda e, r: (e["outcome"] != SUCCESS).to_numpy()),
)}
TARGETS = ("success", "timeout", "tool_failure", "short", "no_success")


def _steps_toward_limit(e: pd.DataFrame) -> np.ndarray:
    """How far each episode got toward the step limit: its length over the longest of its group."""
    lengths = e["length"].to_numpy(float)
    longest = e.groupby("group")["length"].transform("max").to_numpy(float)
    return lengths / np.maximum(longest, 1.0)


TOWARD: dict[str, Callable[[pd.DataFrame], np.ndarray]] = {"timeout": _steps_toward_limit}
"""Per sparse target, how close an episode that does not show it came to it, in [0, 1]. Where
random play never reaches the behaviour (every step of a large catalogue risks an action that
ends the episode, so the step limit is out of reach), a group whose rollouts all get the floor
has no variance and GRPO learns nothing; a floor graded by closeness (kept below every episode
that shows the behaviour) gives the search a direction. Surviving longer also plays more calls
in a row, so the search meets multi-call sequences that random play ends too early to meet."""


@dataclass(frozen=True)
class Ceiling:
    """A return under which a targeted run's episodes cannot change what its verdict reads.

    ``behaviour``: whose episodes it bounds (a key of ``BEHAVIOURS``); ``below``: the lowest return
    at which those episodes would reach a rung of the verdict (what honest success pays, less the
    ladder's margin, for reward without success; what failing outright pays, plus the margin, for
    timing out); ``margin``: the ladder's margin, the least rise of the best return that counts.
    The run stops once the best return its training reached through ``behaviour`` lies below
    ``below`` and has not risen by ``margin`` over the last ``config.barren_rollouts`` rollouts
    (whole iterations): a rollout that would raise it is then rarer than the barren rule's rate at
    its chance of a miss. Every ceiling of a run must hold (``decided_by``)."""

    behaviour: str
    below: float
    margin: float


def best_through(episodes: pd.DataFrame, behaviour: str, reference: Reference) -> float:
    """The best env return of the ``episodes`` that show ``behaviour`` (-inf when none does)."""
    if episodes.empty:
        return float("-inf")
    returns = episodes["return"].to_numpy(float)
    shown = BEHAVIOURS[behaviour].shows(episodes, reference) & np.isfinite(returns)
    return float(returns[shown].max()) if shown.any() else float("-inf")


def decided_by(ceilings: Sequence[Ceiling], reference: Reference, config: GRPOConfig
               ) -> Callable[[list[pd.DataFrame]], bool] | None:
    """The stopping rule of a targeted run under ``ceilings`` (``trainer.train``'s ``decided``):
    True once, for every ceiling, the best return through its behaviour over every iteration so far
    is below ``below`` and rose by less than ``margin`` over the last ``config.barren_rollouts``
    rollouts. None (never decided) without ceilings or with ``barren_rollouts`` 0."""
    if not ceilings or not config.barren_rollouts:
        return None
    need = quiet_iterations(config)

    def decided(iterations: list[pd.DataFrame]) -> bool:
        if len(iterations) <= need:  # the window needs a best return before it to compare with
            return False
        for c in ceilings:
            best = [best_through(e, c.behaviour, reference) for e in iterations]
            now, before = max(best), max(best[:-need])
            if not now < c.below or now - before >= c.margin:
                return False
        return True

    return decided


@dataclass
class SearchResult:
    mode: str
    behaviour: str | None
    training: TrainResult
    evaluation: Records
    """The trained policy's episodes on the evaluation seeds, with pipeline advantages (natural)."""
    reach: dict[str, Any] = field(default_factory=dict)
    """Targeted: how often the behaviour shows and what it earns (see ``reach_of``)."""
    evaluation_stopped: str | None = None
    """Why the evaluation covered fewer seeds than asked (a hang, the safety cap), else None."""
    evaluation_problems: list = field(default_factory=list)
    """What the env did wrong during the evaluation (``rollout.Problem``)."""
    evaluated_on: str = "eval seeds"
    """``"eval seeds"``: the policy played ``evaluation_seeds``; ``"exploration"``: a barren run whose
    policy is still the uniform explorer, evaluated on the explorer's own records (``prior``), which
    the run did not play and the scan already counted and keeps."""

    @property
    def problems(self) -> list:
        """What the env did wrong in training and evaluation: exceptions, hangs, and rollouts whose
        worker process died (``crash``, ``memory``)."""
        return [*self.training.problems, *self.evaluation_problems]

    @property
    def episodes(self) -> pd.DataFrame:
        return self.evaluation.episodes

    @property
    def played(self) -> pd.DataFrame:
        """The evaluation's episodes this run played: none where it was evaluated on exploration's
        own records (``evaluated_on``), which every pool and the scan's cost hold already."""
        return self.episodes if self.evaluated_on == "eval seeds" else self.episodes.iloc[:0]

    @property
    def stopped(self) -> str | None:
        """Why the run did less than its configured work (``"hang"``, ``"deadline"``, ...), else None."""
        return self.training.stopped or self.evaluation_stopped


def evaluation_seeds(config: GRPOConfig, groups: int) -> list[int]:
    """Evaluation reset seeds, the same for every mode (so modes compare seed by seed)."""
    return [child_seed(config.seed, "grpo", "eval", g) % (2**31 - 1)
            for g in range(groups) for _ in range(config.group_size)]


def evaluate(engine: PolicyEngine, collector: Any, config: GRPOConfig, *, mode: str, groups: int,
             deadline: float | None = None, greedy: bool = False,
             tags: dict[str, Any] | None = None, problems: list | None = None) -> tuple[Records, str | None]:
    """Run the policy on the evaluation seeds, ``collector.n_slots`` rollouts at a time; also says
    why it stopped early (a hang, the safety cap), None when every seed ran. What the env did
    wrong on the way (``Problem``) is added to ``problems``."""
    seeds = evaluation_seeds(config, groups)
    rng = child_rng(config.seed, "grpo", mode, "eval")
    parts = []
    for start in range(0, len(seeds), collector.n_slots):
        chunk = seeds[start:start + collector.n_slots]
        batch_tags = [{"probe": "grpo", "policy": f"grpo-{mode}", "mode": mode, **(tags or {}),
                       "iteration": "eval", "group": (start + i) // config.group_size}
                      for i in range(len(chunk))]
        batch = collector.collect(engine, chunk, rng, tags=batch_tags, greedy=greedy, deadline=deadline)
        parts.append(batch.records)
        if problems is not None:
            problems.extend(batch.problems)
        if batch.stopped is not None:
            return Records.concat(parts), batch.stopped
    return Records.concat(parts), None


def natural(
    make_env: EnvFactory,
    config: GRPOConfig,
    *,
    mode: str = "natural",
    pipeline: Pipeline | None = None,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
    eval_groups: int = 4,
    ids: Any = None,
    deadline: float | None = None,
    executor: Any = None,
    spec: str | None = None,
    prior: Records | None = None,
) -> SearchResult:
    """Train under the pipeline (default ``config.rollout_pipeline``) and evaluate the result.
    ``executor``/``spec``: where the rollouts' envs step (``trainer.make_collector``); ``prior``: the
    uniform explorer's records on the same env, its episodes in groups (``trainer.train``), the
    evaluation of a run that stays barren."""
    pipeline = pipeline or config.rollout_pipeline
    return _run(make_env, config, mode=mode, behaviour=None, pipeline=pipeline, reward=None,
                wrappers=wrappers, eval_groups=eval_groups, ids=ids, deadline=deadline, executor=executor, spec=spec,
                prior=prior)


def targeted(
    make_env: EnvFactory,
    config: GRPOConfig,
    behaviour: str,
    reference: Reference,
    *,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
    eval_groups: int = 4,
    ids: Any = None,
    deadline: float | None = None,
    executor: Any = None,
    spec: str | None = None,
    prior: Records | None = None,
    ceilings: Sequence[Ceiling] = (),
) -> SearchResult:
    """Train to earn the most through ``behaviour`` (a key of ``BEHAVIOURS``) and measure it;
    ``prior`` as in ``natural``; ``ceilings``: when the run's verdict is decided (``Ceiling``)."""
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"unknown target behaviour {behaviour!r}; expected one of {', '.join(BEHAVIOURS)}")
    shows = BEHAVIOURS[behaviour].shows

    def reward(episodes: pd.DataFrame) -> np.ndarray:
        returns = episodes["return"].to_numpy(float)
        floor = np.full(len(returns), reference.floor)
        groups = episodes["group"].to_numpy()
        for group in np.unique(groups):
            idx = groups == group
            finite = returns[idx][np.isfinite(returns[idx])]
            if len(finite):  # a group of NaN returns (an env-error) keeps the reference floor
                # Keep the floor below this group's lowest return, whatever the env paid this time.
                floor[idx] = min(reference.floor, float(finite.min()) - reference.spread)
        if behaviour in TOWARD:
            floor = floor + 0.5 * reference.spread * TOWARD[behaviour](episodes)
        return np.where(shows(episodes, reference), returns, floor)

    # Every rollout is trained on its target reward: the pipeline's handling would hide the very
    # behaviours (timeouts, errors) this mode measures.
    pipeline = Pipeline(name=f"target-{behaviour}", advantage_scaling=config.rollout_pipeline.advantage_scaling)
    result = _run(make_env, config, mode=f"target-{behaviour}", behaviour=behaviour, pipeline=pipeline,
                  reward=reward, wrappers=wrappers, eval_groups=eval_groups, ids=ids, deadline=deadline,
                  executor=executor, spec=spec, prior=prior, decided=decided_by(ceilings, reference, config))
    result.reach = reach_of(result.episodes, behaviour, reference)
    return result


def reach_of(episodes: pd.DataFrame, behaviour: str, reference: Reference) -> dict[str, Any]:
    """How often ``behaviour`` shows in ``episodes`` and the env return of the episodes that show it."""
    if episodes.empty:
        return {"behaviour": behaviour, "n": 0, "rate": 0.0, "mean_return": None, "max_return": None,
                "returns": [], "episode_ids": []}
    mask = BEHAVIOURS[behaviour].shows(episodes, reference)
    hits = episodes[mask]
    returns = hits["return"].to_numpy(float)
    return {
        "behaviour": behaviour,
        "n": int(mask.sum()),
        "rate": float(mask.mean()),
        "mean_return": float(returns.mean()) if len(returns) else None,
        "max_return": float(returns.max()) if len(returns) else None,
        "returns": returns.tolist(),
        "episode_ids": hits["episode_id"].astype(int).tolist(),
    }


def _run(make_env, config, *, mode, behaviour, pipeline, reward, wrappers, eval_groups, ids,
         deadline, executor=None, spec=None, prior=None, decided=None) -> SearchResult:
    collector = make_collector(make_env, config, wrappers=wrappers, ids=ids, executor=executor, spec=spec)
    evaluation_stopped = None
    evaluation_problems: list = []
    evaluated_on = "eval seeds"
    try:
        training = train(make_env, config, mode=mode, reward=reward, pipeline=pipeline, collector=collector,
                         deadline=deadline, tags={"target": behaviour} if behaviour else None,
                         prior=prior.episodes if prior is not None else None, decided=decided)
        evaluation = Records.concat([])
        if training.barren and prior is not None and eval_groups > 0 and len(prior.episodes):
            evaluation, evaluated_on = prior, "exploration"
        elif training.stopped is None and eval_groups > 0 and len(training.curves):
            evaluation, evaluation_stopped = evaluate(training.engine, collector, config, mode=mode,
                                                      groups=eval_groups, deadline=deadline,
                                                      problems=evaluation_problems)
    finally:
        collector.close()
    episodes = evaluation.episodes
    if len(episodes):
        returns = np.asarray(reward(episodes) if reward is not None else episodes["return"], dtype=float)
        evaluation = Records(evaluation.steps, with_advantages(episodes, returns, pipeline))
    return SearchResult(mode, behaviour, training, evaluation, evaluation_stopped=evaluation_stopped,
                        evaluation_problems=evaluation_problems, evaluated_on=evaluated_on)
