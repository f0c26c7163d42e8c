"""The embedded engine: a small torch MLP over the flattened observation plus the step fraction.

CPU only, one thread, deterministic for a seed: the weights are initialised from a private
``torch.Generator`` seeded with the config seed (the global torch RNG is never touched), actions
are sampled with the numpy generator the trainer hands over, and the thread count is set to one
for each call and restored afterwards. ``Text`` observations become hashed bag-of-words counts.
"""

from __future__ import annotations

import contextlib
import copy
import re
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from envaudit.grpo.config import GRPOConfig
from envaudit.grpo.engine import ActionSample, Trajectory, aggregate, grpo_loss
from envaudit.seeding import child_rng, child_seed

_TOKEN = re.compile(r"[a-z0-9_]+")


class UnsupportedSpace(TypeError):
    """The embedded engine cannot read or drive this space."""


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run torch on one thread (small MLPs are fastest so, and results do not depend on cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Featurizer:
    """Turns observations of a Gymnasium space into flat float vectors of a fixed size."""

    def __init__(self, space: gym.Space, text_features: int = 64) -> None:
        self.text_features = text_features
        self._batch_box = _box_features(space) if isinstance(space, gym.spaces.Box) else None
        self._discrete = (int(space.n), int(space.start)) if isinstance(space, gym.spaces.Discrete) else None
        self._parts = self._plan(space, "observation_space")
        self.size = sum(size for _, size in self._parts)

    def _plan(self, space: gym.Space, where: str) -> list[tuple[Any, int]]:
        s = gym.spaces
        if isinstance(space, s.Box):
            box = _box_features(space)
            return [(lambda x: box(np.ravel(x)), int(np.prod(space.shape)))]
        if isinstance(space, s.Discrete):
            n, start = int(space.n), int(space.start)

            def onehot(x: Any) -> np.ndarray:
                out = np.zeros(n)
                out[int(x) - start] = 1.0
                return out
            return [(onehot, n)]
        if isinstance(space, s.MultiDiscrete):
            nvec, start = space.nvec.ravel().astype(int), np.asarray(space.start).ravel().astype(int)
            offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])

            def multi(x: Any) -> np.ndarray:
                out = np.zeros(int(nvec.sum()))
                out[offsets + np.asarray(x).ravel().astype(int) - start] = 1.0
                return out
            return [(multi, int(nvec.sum()))]
        if isinstance(space, s.MultiBinary):
            n = int(np.prod(space.shape))
            return [(lambda x: np.asarray(x, dtype=np.float64).ravel(), n)]
        if isinstance(space, s.Text):
            return [(self._text, self.text_features)]
        if isinstance(space, s.Dict):
            parts = []
            for key, sub in space.spaces.items():
                for fn, size in self._plan(sub, f"{where}[{key!r}]"):
                    parts.append((lambda x, fn=fn, key=key: fn(x[key]), size))
            return parts
        if isinstance(space, s.Tuple):
            parts = []
            for i, sub in enumerate(space.spaces):
                for fn, size in self._plan(sub, f"{where}[{i}]"):
                    parts.append((lambda x, fn=fn, i=i: fn(x[i]), size))
            return parts
        raise UnsupportedSpace(
            f"the embedded GRPO engine cannot read {where} of type {type(space).__name__}; it reads "
            "Box, Discrete, MultiDiscrete, MultiBinary, Text and Dict/Tuple of those"
        )

    def _text(self, x: Any) -> np.ndarray:
        out = np.zeros(self.text_features)
        for token in _TOKEN.findall(str(x).lower()):
            # crc32, not hash(): Python salts str hashes per process, which would break replay.
            out[zlib.crc32(token.encode()) % self.text_features] += 1.0
        return np.log1p(out)

    def __call__(self, obs: Any) -> np.ndarray:
        if len(self._parts) == 1:
            return self._parts[0][0](obs)
        return np.concatenate([fn(obs) for fn, _ in self._parts])

    def batch(self, observations: Sequence[Any]) -> np.ndarray:
        """Features of many observations, shape (n, size); Box and Discrete spaces in one vectorised call."""
        if self._batch_box is not None:
            return self._batch_box(np.asarray(observations, dtype=np.float64).reshape(len(observations), -1))
        if self._discrete is not None:
            n, start = self._discrete
            out = np.zeros((len(observations), n))
            out[np.arange(len(observations)), np.asarray(observations, dtype=np.int64) - start] = 1.0
            return out
        if not len(observations):
            return np.zeros((0, self.size))
        return np.stack([self(obs) for obs in observations])


def _box_features(space: gym.spaces.Box) -> Any:
    """Bounded dims scaled to [-1, 1]; unbounded ones squashed so large values cannot dominate."""
    low, high = space.low.astype(np.float64).ravel(), space.high.astype(np.float64).ravel()
    bounded = np.isfinite(low) & np.isfinite(high) & (high > low)
    span = np.where(bounded, high - low, 1.0)
    low = np.where(bounded, low, 0.0)

    def box(x: np.ndarray) -> np.ndarray:  # (size,) or (n, size)
        return np.where(bounded, 2.0 * (x - low) / span - 1.0, np.sign(x) * np.log1p(np.abs(x)))
    return box


def action_count(space: gym.Space) -> int:
    """Size of a ``Discrete`` action catalogue; anything else cannot be driven by this engine."""
    if isinstance(space, gym.spaces.Discrete):
        if int(space.start) != 0:
            raise UnsupportedSpace(f"the embedded GRPO engine drives Discrete(n) starting at 0, got "
                                   f"Discrete({space.n}, start={space.start})")
        return int(space.n)
    raise UnsupportedSpace(
        f"the embedded GRPO engine drives a Discrete action space (a catalogue of actions), got "
        f"{type(space).__name__}; wrap the env to discretise its actions to use the GRPO probe"
    )


class Adam:
    """Adam (Kingma & Ba, 2015) in a few lines. ``torch.optim``'s constructor imports TorchDynamo,
    about a second of start-up that a probe with a budget of seconds cannot spare."""

    def __init__(self, params: Any, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-5) -> None:
        self.params = list(params)
        self.lr, self.betas, self.eps = lr, betas, eps
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            if p.grad is None:
                continue
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            step = self.lr * (m / (1 - b1**self.t)) / ((v / (1 - b2**self.t)).sqrt() + self.eps)
            p.sub_(step)


class TorchEngine:
    """A ``PolicyEngine``: two tanh layers and a softmax over the action catalogue."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: GRPOConfig) -> None:
        self.config = config
        self.n_actions = action_count(action_space)
        self.featurize = Featurizer(observation_space, config.text_features)
        self.n_inputs = self.featurize.size + 1  # + the step fraction
        generator = torch.Generator().manual_seed(child_seed(config.seed, "grpo", "init"))
        h = config.hidden_size
        self.net = nn.Sequential(
            nn.Linear(self.n_inputs, h), nn.Tanh(), nn.Linear(h, h), nn.Tanh(), nn.Linear(h, self.n_actions),
        )
        # One thread: the QR decomposition behind orthogonal_ gives other bits on two threads than
        # on one, so the starting policy (and every GRPO run after it) would depend on the
        # machine's core count; it is also 20x faster on one.
        with single_thread():
            for layer, gain in ((self.net[0], np.sqrt(2)), (self.net[2], np.sqrt(2)), (self.net[4], 0.01)):
                # A tiny last layer starts the policy near uniform: iteration 0 behaves like exploration.
                nn.init.orthogonal_(layer.weight, gain, generator=generator)
                nn.init.zeros_(layer.bias)
        self.reference = copy.deepcopy(self.net).requires_grad_(False)
        self.optimizer = Adam(self.net.parameters(), lr=config.learning_rate)
        self._shuffle = child_rng(config.seed, "grpo", "minibatches")

    # -- acting -------------------------------------------------------------------------------
    def encode(self, observations: Sequence[Any], step_fractions: Sequence[float]) -> np.ndarray:
        x = np.empty((len(observations), self.n_inputs), dtype=np.float32)
        x[:, :-1] = self.featurize.batch(observations)
        x[:, -1] = np.asarray(step_fractions, dtype=np.float32)
        return x

    def sample(self, observations: Sequence[Any], step_fractions: Sequence[float],
               rng: np.random.Generator, *, greedy: bool = False) -> ActionSample:
        x = self.encode(observations, step_fractions)
        with single_thread(), torch.no_grad():
            logp = torch.log_softmax(self.net(torch.from_numpy(x)), dim=-1).numpy().astype(np.float64)
        if greedy:
            actions = logp.argmax(axis=1)
        else:
            cdf = np.cumsum(np.exp(logp), axis=1)
            u = rng.random(len(x))[:, None] * cdf[:, -1:]
            actions = np.minimum((cdf < u).sum(axis=1), self.n_actions - 1)
        return ActionSample(actions, logp[np.arange(len(x)), actions], list(x))

    def probabilities(self, observations: Sequence[Any], step_fractions: Sequence[float]) -> np.ndarray:
        """Action probabilities per observation (for reports and tests)."""
        x = torch.from_numpy(self.encode(observations, step_fractions))
        with single_thread(), torch.no_grad():
            return torch.softmax(self.net(x), dim=-1).numpy()

    # -- learning -----------------------------------------------------------------------------
    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        c = self.config
        trajectories = [t for t in trajectories if len(t)]
        if not trajectories:
            return {"loss": 0.0, "entropy": float("nan"), "kl": float("nan"), "clip_fraction": 0.0}
        lengths = np.array([len(t) for t in trajectories])
        x = torch.from_numpy(np.stack([s for t in trajectories for s in t.states]))
        actions = torch.from_numpy(np.concatenate([t.actions for t in trajectories]).astype(np.int64))
        old = torch.from_numpy(np.concatenate([t.logprobs for t in trajectories]).astype(np.float32))
        adv = torch.from_numpy(np.repeat([t.advantage for t in trajectories], lengths).astype(np.float32))
        owner = np.repeat(np.arange(len(trajectories)), lengths)
        losses, clips = [], []
        with single_thread():
            for _ in range(c.update_epochs):
                order = self._shuffle.permutation(len(trajectories))
                for chosen in np.array_split(order, min(c.num_minibatches, len(trajectories))):
                    rows = np.flatnonzero(np.isin(owner, chosen))
                    # Renumber the chosen trajectories 0..k-1 for the per-trajectory averages.
                    local = np.searchsorted(np.sort(chosen), owner[rows])
                    idx, tix = torch.from_numpy(rows), torch.from_numpy(local)
                    loss, clip = self._loss(x[idx], actions[idx], old[idx], adv[idx], tix, len(chosen))
                    self.optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(self.net.parameters(), c.max_grad_norm)
                    self.optimizer.step()
                    losses.append(float(loss.detach()))
                    clips.append(float(clip))
            with torch.no_grad():
                entropy, kl = self._entropy_kl(x)
        return {"loss": float(np.mean(losses)), "entropy": float(entropy.mean()),
                "kl": float(kl.mean()), "clip_fraction": float(np.mean(clips))}

    def _loss(self, x, actions, old, adv, tix, n):
        c = self.config
        logp_all = torch.log_softmax(self.net(x), dim=-1)
        new = logp_all.gather(1, actions[:, None]).squeeze(1)
        loss, clip = grpo_loss(new, old, adv, tix, n, clip_coef=c.clip_coef, aggregation=c.loss_aggregation)
        p = logp_all.exp()
        entropy = -(p * logp_all).sum(-1)
        loss = loss - c.ent_coef * aggregate(entropy, tix, n, c.loss_aggregation)
        if c.kl_coef > 0:
            ref = torch.log_softmax(self.reference(x), dim=-1)
            kl = (p * (logp_all - ref)).sum(-1)  # exact KL(pi || pi_ref) over the catalogue
            loss = loss + c.kl_coef * aggregate(kl, tix, n, c.loss_aggregation)
        return loss, clip

    def _entropy_kl(self, x):
        logp = torch.log_softmax(self.net(x), dim=-1)
        ref = torch.log_softmax(self.reference(x), dim=-1)
        p = logp.exp()
        return -(p * logp).sum(-1), (p * (logp - ref)).sum(-1)
