"""``CatalogueEnv``: the Gymnasium face every adapter gives its ecosystem's env.

The action is either an index into the state's strategy catalogue (``Discrete``, with
``action_labels``; what exploration, scripted policies and the GRPO engine drive) or any string
(what a language model writes; it is passed to the ecosystem as is). The observation is the
ecosystem's own prompt text. Subclasses map the ecosystem's signals onto the info protocol:
``info["success"]`` from its correctness signal, ``info["tool"]`` for a move or answer the
ecosystem rejected, termination vs truncation from its turn limit.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.adapters.catalogue import REFERENCE, Strategy
from envaudit.rollout import SequencePolicy

MAX_OBSERVATION_CHARS = 200_000
TEXT_LABEL = "(text)"
"""Label of a string action that is none of the state's catalogue texts (a model's own words)."""


class AnyText(gym.spaces.Text):
    """Text of any characters (prompts carry Unicode), up to ``max_length``."""

    def __init__(self, max_length: int = MAX_OBSERVATION_CHARS, seed: Any = None) -> None:
        super().__init__(max_length, min_length=0, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText(max_length={self.max_length})"


@dataclasses.dataclass
class _Episode:
    """The episode in progress, as its replay needs it: the reset's arguments, the reset generator
    as it was before the reset (a seedless reset draws from it), and the texts stepped since."""

    seed: int | None
    options: Mapping[str, Any] | None
    generator: np.random.Generator | None
    texts: list[str]


class CatalogueEnv(gym.Env):
    """Base of the adapter envs. Subclasses implement ``_reset``, ``_step_text`` and ``_strategies``.

    ``adapter_info`` lands in the report's fingerprint (ecosystem, package version, target,
    replayability notes such as global-``random`` seeding).
    """

    metadata: dict[str, Any] = {"render_modes": []}
    ecosystem = ""
    has_reference = False
    """True when every state's catalogue starts with the reference answer or move (an oracle)."""
    measured_check: str | None = None
    """The ``adapter_info`` key (``"catalogue_check"``, ``"playability"``) of the check that plays the
    catalogue against the env (``measure_check``). It is measured when ``adapter_info`` is first read
    (the scan's fingerprint), never when an env is made: the envs the workers make, and every reset,
    must not pay for it. Read in the middle of an episode, the check (which plays episodes of its
    own) is followed by a replay of that episode's reset and steps, so the episode goes on where it
    was (an env replayable by its seed comes back to the same state)."""

    def __init__(self, labels: tuple[str, ...], max_steps: int) -> None:
        super().__init__()
        self.action_labels = tuple(labels)
        self.action_space = gym.spaces.Discrete(len(self.action_labels))
        self.observation_space = AnyText()
        self.max_steps = int(max_steps)
        self.adapter_info: dict[str, Any] = {"ecosystem": self.ecosystem}
        self._current: list[Strategy] = []
        self._labels_by_text: dict[str, str] = {}
        self.prompt = ""
        self._episode: _Episode | None = None

    @property
    def adapter_info(self) -> dict[str, Any]:
        if self.measured_check is not None and self.measured_check not in self._info:
            episode = self._episode
            self._info[self.measured_check] = self.measure_check()
            if episode is not None:
                self._replay(episode)
        return self._info

    @adapter_info.setter
    def adapter_info(self, value: dict[str, Any]) -> None:
        self._info = value

    def measure_check(self) -> dict[str, Any]:
        """The ``measured_check`` entry: what share of the catalogue the env accepts, and whether
        exploration can play it (adapters that set ``measured_check`` provide it)."""
        raise NotImplementedError

    # -- what subclasses provide --------------------------------------------------------------
    def _reset(self, seed: int | None, options: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def _step_text(self, text: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        raise NotImplementedError

    def _strategies(self) -> list[Strategy]:
        """The catalogue of the current state, one strategy per label in ``action_labels`` order."""
        raise NotImplementedError

    # -- the catalogue ------------------------------------------------------------------------
    def _refresh(self) -> None:
        strategies = self._strategies()
        got = tuple(s.label for s in strategies)
        if got != self.action_labels:
            raise RuntimeError(f"{type(self).__name__} gave catalogue labels {got}; expected {self.action_labels}")
        self._current = strategies
        for s in strategies:
            self._labels_by_text.setdefault(s.text, s.label)

    def candidates(self) -> dict[str, str]:
        """The current state's catalogue: label -> text."""
        return {s.label: s.text for s in self._current}

    def text_of(self, action: Any) -> str:
        """The text an action stands for: a catalogue index's text, or the string itself."""
        if isinstance(action, (str, np.str_)):
            return str(action)
        if isinstance(action, bytes):
            return action.decode("utf-8", "replace")
        index = int(np.asarray(action).item())
        if not 0 <= index < len(self._current):
            raise ValueError(f"action {index} is outside the catalogue of {len(self._current)} strategies "
                             f"({', '.join(self.action_labels)})")
        return self._current[index].text

    def label_of(self, action: Any) -> str | None:
        """The strategy label of an action of this episode (``(text)`` for a model's own text)."""
        if isinstance(action, (str, np.str_, bytes)):
            text = action.decode("utf-8", "replace") if isinstance(action, bytes) else str(action)
            return self._labels_by_text.get(text, TEXT_LABEL)
        try:
            return self.action_labels[int(action)]
        except (TypeError, ValueError, IndexError):
            return None

    # -- Gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        # ``np_random``, not ``_np_random``: a first seedless reset would otherwise draw from a
        # generator made inside ``super().reset`` from OS entropy, which no replay can restore.
        before = copy.deepcopy(self.np_random)
        super().reset(seed=seed)
        self._labels_by_text = {}
        self._episode = None
        obs, info = self._reset(seed, options)
        self.prompt = obs
        self._refresh()
        self._episode = _Episode(seed, options, before, [])
        return obs, info

    def step(self, action: Any):
        text = self.text_of(action)
        obs, reward, terminated, truncated, info = self._step_text(text)
        if terminated or truncated:
            self._episode = None
        else:
            self._refresh()
            if self._episode is not None:
                self._episode.texts.append(text)
        return obs, float(reward), bool(terminated), bool(truncated), info

    def _replay(self, episode: _Episode) -> None:
        self._np_random = episode.generator
        self.reset(seed=episode.seed, options=episode.options)
        for text in episode.texts:
            self.step(text)

    # -- the oracle, for the probes -----------------------------------------------------------
    @property
    def oracle(self):
        """``oracle()`` plays the reference answer or move in every state; None (no oracle) where
        the adapter knows no reference. Delaying a success (wrong attempts, then the reference) is
        built from it by the length probe, which inserts non-ending strategies before the success."""
        if not self.has_reference:
            return None
        index = self.action_labels.index(REFERENCE)
        return lambda: SequencePolicy([index], name="oracle")


# -- the text view, for the language-model engine ----------------------------------------------
class CatalogueText(AnyText):
    """Text actions of an adapter env; ``sample()`` is one of the current state's catalogue texts.

    A uniform draw over the catalogue is the random agent in text: the tiny model's warm-up corpus
    (``envaudit.grpo.lm_model.collect_turns``) is made of these draws, so the model starts by
    writing the strategies the catalogue names, about uniformly, before GRPO moves it.
    """

    def __init__(self, env: CatalogueEnv, max_length: int = MAX_OBSERVATION_CHARS) -> None:
        super().__init__(max_length)
        self._env = env

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        texts = list(self._env.candidates().values())
        if not texts:
            raise RuntimeError("sample() before reset(): the catalogue is made per state")
        return texts[int(self.np_random.integers(len(texts)))]


class TextView(gym.Wrapper):
    """An adapter env seen with ``Text`` actions: what ``--engine vllm`` drives. Steps pass the
    model's text to the ecosystem unchanged; labels and the info protocol are the env's own."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.action_space = CatalogueText(env.unwrapped)


def _needs_view(env: gym.Env) -> bool:
    return isinstance(env.unwrapped, CatalogueEnv) and not isinstance(env.action_space, gym.spaces.Text)


def text_view(env: gym.Env) -> gym.Env:
    """``env`` with text actions: an adapter env's ``TextView``; any other env as it is."""
    return TextView(env) if _needs_view(env) else env


def _viewed(make_env: Any) -> gym.Env:
    return TextView(make_env())


def text_factory(make_env: Any, *, sample: gym.Env | None = None) -> Any:
    """``make_env`` for the language-model engine: an adapter env (a ``CatalogueEnv`` with a
    ``Discrete`` catalogue) gets its text view; any other env's factory is returned as it is.
    ``sample`` is an env the factory already made (saves building one to look at)."""
    env = sample if sample is not None else make_env()
    try:
        needs = _needs_view(env)
    finally:
        if sample is None:
            env.close()
    return functools.partial(_viewed, make_env) if needs else make_env
