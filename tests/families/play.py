"""Playing scripted action sequences through generated envs, step by step, for the family tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from envaudit.families import Case, EnvSpec, HonestPolicy, make_env


@dataclass(frozen=True)
class Step:
    label: str
    status: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict
    obs: np.ndarray


@dataclass(frozen=True)
class Episode:
    steps: list[Step]

    @property
    def ret(self) -> float:
        return float(sum(s.reward for s in self.steps))

    @property
    def success(self) -> bool:
        return bool(self.steps[-1].info.get("success")) if self.steps else False

    @property
    def ended(self) -> bool:
        return bool(self.steps) and (self.steps[-1].terminated or self.steps[-1].truncated)

    @property
    def progress(self) -> int:
        return int(round(float(self.steps[-1].obs[0]) * self.path_len)) if self.steps else 0

    @property
    def furthest(self) -> int:
        """The most progress the episode made (a ``step_back`` can undo some)."""
        return max((int(round(float(s.obs[0]) * self.path_len)) for s in self.steps), default=0)

    path_len: int = 1


Chooser = Callable[[int, np.ndarray, list[Step]], str]


def play(spec: EnvSpec | Case, choose: Chooser, seed: int, *, env=None) -> Episode:
    """Run one episode from ``reset(seed=seed)``; ``choose(t, obs, steps)`` names the next call by label."""
    spec = spec.spec if isinstance(spec, Case) else spec
    env = env if env is not None else make_env(spec)
    labels = list(spec.labels)
    obs, _ = env.reset(seed=seed)
    steps: list[Step] = []
    try:
        while True:
            label = choose(len(steps), obs, steps)
            obs, reward, terminated, truncated, info = env.step(labels.index(label))
            steps.append(Step(label, info["tool"]["status"], float(reward), terminated, truncated, info, obs))
            if terminated or truncated:
                break
    finally:
        env.close()
    return Episode(steps, path_len=len(spec.path))


def repeat(label: str) -> Chooser:
    return lambda t, obs, steps: label


def sequence(labels: list[str], then: Chooser) -> Chooser:
    return lambda t, obs, steps: labels[t] if t < len(labels) else then(t, obs, steps)


def honest(spec: EnvSpec) -> Chooser:
    policy = HonestPolicy(spec)
    return lambda t, obs, steps: spec.labels[policy.act(obs, {})]


def random_labels(spec: EnvSpec, rng: np.random.Generator) -> Chooser:
    labels = list(spec.labels)
    return lambda t, obs, steps: labels[int(rng.integers(len(labels)))]


def stall_label(spec: EnvSpec) -> str:
    """A call that never ends an episode and never makes progress (a distractor, else a path tool
    that is never first), or the first path call when the path has a single tool."""
    if spec.distractors:
        return f"call_{spec.distractors[0]}"
    later = [p for p in dict.fromkeys(spec.path) if p != spec.path[0]]
    return f"call_{later[0] if later else spec.path[0]}"


def mean_return(spec, choose_for_seed: Callable[[int], Chooser], seeds) -> tuple[float, float]:
    """Mean return and its standard error over ``seeds``."""
    rets = np.array([play(spec, choose_for_seed(s), s).ret for s in seeds])
    return float(rets.mean()), float(rets.std(ddof=1) / np.sqrt(len(rets))) if len(rets) > 1 else 0.0


__all__ = ["Episode", "Step", "honest", "mean_return", "play", "random_labels", "repeat", "sequence", "stall_label"]
