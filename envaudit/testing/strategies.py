"""Hypothesis strategies for environments: actions, action sequences, fault schedules, episodes.

They follow Hypothesis's own conventions: options are keyword-only, a value or a strategy is
accepted where both make sense (``seeds=7``, ``seeds=[1, 2]`` or ``seeds=st.integers(0, 9)``), bad
arguments raise ``hypothesis.errors.InvalidArgument`` naming the argument, and every strategy
shrinks toward the simplest case: short action sequences of low action indices, seed 0, no faults.
An env argument is an env id string or a zero-argument factory; envs are only built when the
strategy is first drawn from, never at import time.

>>> from hypothesis import given
>>> from envaudit.testing import episodes
>>> @given(episodes("envaudit/FlakySearch-v0", faults=True))
... def test_answers_end_the_episode(episode):
...     if episode.steps and episode.steps[-1].label.startswith("answer"):
...         assert episode.finished
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from envaudit.testing.trajectory import (
    DEFAULT_MAX_STEPS,
    FAULT_KINDS,
    EnvSession,
    Episode,
    FaultSchedule,
    Plan,
    as_schedule,
    resolve_target,
)
from envaudit.toolenv import ToolEnv

UNBOUNDED = 1e3
"""Unbounded ``Box`` dimensions draw finite floats in ``[-UNBOUNDED, UNBOUNDED]``."""

DEFAULT_SEEDS = st.integers(min_value=0, max_value=2**16 - 1)


# -- actions -----------------------------------------------------------------------------------
def actions(space: gym.Space | gym.Env) -> SearchStrategy[Any]:
    """Actions of a Gymnasium space (or of an env's ``action_space``), shrinking toward the lowest.

    ``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Box``, ``Text``, ``Tuple`` and ``Dict`` are
    generated natively; any other space falls back to ``space.sample()`` seeded by Hypothesis.

    >>> import gymnasium as gym
    >>> from envaudit.testing import actions
    >>> strategy = actions(gym.spaces.Discrete(4))   # integers 0..3, shrinking toward 0
    """
    if isinstance(space, gym.Env):
        space = space.action_space
    if not isinstance(space, gym.spaces.Space):
        raise InvalidArgument(f"actions(space) needs a gymnasium.spaces.Space or an env, got {type(space).__name__}")
    return _space_strategy(space)


def _space_strategy(space: gym.spaces.Space) -> SearchStrategy[Any]:
    if isinstance(space, gym.spaces.Discrete):
        start = int(space.start)
        return st.integers(start, start + int(space.n) - 1)
    if isinstance(space, gym.spaces.MultiBinary):
        shape = space.shape
        return _array(space.dtype, shape, [st.integers(0, 1)] * int(np.prod(shape)))
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec, start = np.asarray(space.nvec).ravel(), np.asarray(space.start).ravel()
        elements = [st.integers(int(s), int(s) + int(n) - 1) for n, s in zip(nvec, start, strict=True)]
        return _array(space.dtype, space.shape, elements)
    if isinstance(space, gym.spaces.Box):
        return _box(space)
    if isinstance(space, gym.spaces.Text):
        alphabet = st.sampled_from(sorted(space.character_set))
        return st.text(alphabet=alphabet, min_size=space.min_length, max_size=space.max_length)
    if isinstance(space, gym.spaces.Tuple):
        return st.tuples(*(_space_strategy(s) for s in space.spaces))
    if isinstance(space, gym.spaces.Dict):
        return st.fixed_dictionaries({k: _space_strategy(s) for k, s in space.spaces.items()})
    return st.integers(0, 2**32 - 1).map(lambda seed: _sample(space, seed))


def _sample(space: gym.spaces.Space, seed: int) -> Any:
    other = copy.deepcopy(space)
    other.seed(seed)
    return other.sample()


def _array(dtype: Any, shape: tuple[int, ...], elements: list[SearchStrategy]) -> SearchStrategy[np.ndarray]:
    return st.tuples(*elements).map(lambda xs: np.asarray(xs, dtype=dtype).reshape(shape))


def _box(space: gym.spaces.Box) -> SearchStrategy[np.ndarray]:
    low, high = np.asarray(space.low).ravel(), np.asarray(space.high).ravel()
    if np.issubdtype(space.dtype, np.integer):
        info = np.iinfo(space.dtype)
        bound = lambda x, d: int(np.clip(x, info.min, info.max)) if np.isfinite(x) else d  # noqa: E731
        elements = [st.integers(bound(lo, info.min), bound(hi, info.max)) for lo, hi in zip(low, high, strict=True)]
        return _array(space.dtype, space.shape, elements)
    width = {2: 16, 4: 32}.get(np.dtype(space.dtype).itemsize, 64)

    def floats(lo: float, hi: float) -> SearchStrategy[float]:
        lo = float(lo) if np.isfinite(lo) else -UNBOUNDED
        hi = float(hi) if np.isfinite(hi) else UNBOUNDED
        if lo > hi:  # one-sided bound beyond the default range
            lo, hi = (hi - 2 * UNBOUNDED, hi) if lo == -UNBOUNDED else (lo, lo + 2 * UNBOUNDED)
        return st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=width)

    return _array(space.dtype, space.shape, [floats(lo, hi) for lo, hi in zip(low, high, strict=True)])


# -- sequences, schedules, seeds ---------------------------------------------------------------
def _check_size(name: str, value: Any, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InvalidArgument(f"{name} must be an int >= 0{' or None' if allow_none else ''}, got {value!r}")


def _session_info(make_env: Any, max_steps: int = DEFAULT_MAX_STEPS) -> EnvSession:
    """Build one env to read its action space, tools and step limit; the caller closes it."""
    try:
        return EnvSession(make_env, max_steps=max_steps)
    except TypeError as exc:
        raise InvalidArgument(str(exc)) from None


def action_sequences(make_env: Any, *, min_size: int = 0, max_size: int | None = None) -> SearchStrategy[list]:
    """Lists of actions for the env, shrinking toward short sequences of low-index actions.

    ``max_size`` defaults to the env's step limit (``max_steps``, or its spec's
    ``max_episode_steps``; 50 when it has none).

    >>> from envaudit.testing import action_sequences
    >>> strategy = action_sequences("envaudit/Helpdesk-v0", max_size=4)
    """
    resolve_target(make_env)  # fail now on a wrong argument, build the env later
    _check_size("min_size", min_size)
    _check_size("max_size", max_size, allow_none=True)
    if max_size is not None and max_size < min_size:
        raise InvalidArgument(f"max_size={max_size} is below min_size={min_size}")

    def build() -> SearchStrategy[list]:
        session = _session_info(make_env)
        try:
            limit = max_size if max_size is not None else max(session.limit, min_size)
            # int(): the sizes may be numpy ints, which st.lists refuses
            return st.lists(actions(session.space), min_size=int(min_size), max_size=int(limit))
        finally:
            session.close()

    return st.deferred(build)


def _tool_names(tools: Any) -> frozenset[str] | None:
    if tools is None:
        return None
    if isinstance(tools, gym.Env):
        base = tools.unwrapped
        if not isinstance(base, ToolEnv):
            raise InvalidArgument(f"fault_schedules(tools=...) got a {type(base).__name__}, which is not an "
                                  "envaudit.ToolEnv; faults can only be injected into ToolEnvs")
        return None  # every tool of that env
    if isinstance(tools, str) or not isinstance(tools, Iterable):
        raise InvalidArgument(f"tools must be a list of tool names, a ToolEnv, or None (every tool), got {tools!r}")
    names = frozenset(tools)
    if not names or not all(isinstance(n, str) for n in names):
        raise InvalidArgument(f"tools must name at least one tool, as strings, got {tools!r}")
    return names


def fault_schedules(
    tools: Iterable[str] | gym.Env | None = None,
    *,
    max_rate: float = 0.5,
    max_calls: int = 20,
    kinds: Sequence[str] = FAULT_KINDS,
) -> SearchStrategy[FaultSchedule]:
    """Fault schedules for a ``ToolEnv``: which of the first ``max_calls`` tool calls fail or time out.

    At most ``ceil(max_rate * max_calls)`` calls are faulted, each with a status from ``kinds``;
    ``tools`` restricts faults to calls of those tools (None: every tool). Schedules shrink toward
    no faults, then fewer and earlier ones, with ``kinds[0]`` preferred. Apply one with
    ``FaultInjector(env, schedule=schedule)``, or pass it to ``play``/``episodes``.

    >>> from envaudit.testing import fault_schedules
    >>> strategy = fault_schedules(["search"], max_rate=0.3, kinds=["timeout"])
    """
    names = _tool_names(tools)
    if isinstance(max_rate, bool) or not isinstance(max_rate, (int, float)) or not 0.0 <= max_rate <= 1.0:
        raise InvalidArgument(f"max_rate must be a fraction of tool calls in [0, 1], got {max_rate!r}")
    _check_size("max_calls", max_calls)
    kinds = tuple(kinds)
    if not kinds or any(k not in FAULT_KINDS for k in kinds):
        raise InvalidArgument(f"kinds must be a non-empty list of 'error' and/or 'timeout', got {list(kinds)!r}")
    most = math.ceil(max_rate * max_calls)
    if most == 0:
        return st.just(FaultSchedule(tools=names))
    faulted = st.dictionaries(st.integers(0, max_calls - 1), st.sampled_from(kinds), max_size=most)
    return faulted.map(lambda faults: FaultSchedule(faults, tools=names))


def seeds_strategy(seeds: Any, *, name: str = "seeds") -> SearchStrategy[int]:
    """Reset seeds from an int, a list of ints or a strategy (None: 0..65535, shrinking to 0)."""
    if seeds is None:
        return DEFAULT_SEEDS
    if isinstance(seeds, SearchStrategy):
        return seeds
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        return st.just(int(seeds))
    if isinstance(seeds, Sequence) and not isinstance(seeds, str) and seeds and all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in seeds
    ):
        return st.sampled_from([int(s) for s in seeds])
    raise InvalidArgument(f"{name} must be an int, a non-empty list of ints or a strategy, got {seeds!r}")


def _faults_strategy(faults: Any, session: EnvSession, max_calls: int) -> SearchStrategy[FaultSchedule | None]:
    if faults is None or faults is False:
        return st.none()
    if faults is True:
        return fault_schedules(max_calls=max_calls) if session.injects else st.none()
    if isinstance(faults, SearchStrategy):
        if not session.injects:
            raise InvalidArgument(f"{session.name} is not an envaudit.ToolEnv, so faults cannot be injected; "
                                  "drop faults= (or pass faults=True to inject only where possible)")
        return faults.map(as_schedule)
    try:
        schedule = as_schedule(faults)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"faults: {exc}") from None
    if not session.injects:
        raise InvalidArgument(f"{session.name} is not an envaudit.ToolEnv, so the fault schedule {schedule!r} "
                              "cannot be injected")
    return st.just(schedule)


def _actions_strategy(value: Any, session: EnvSession, max_size: int) -> SearchStrategy[tuple]:
    if value is None:
        return st.lists(actions(session.space), max_size=max_size).map(tuple)
    if isinstance(value, SearchStrategy):
        return value.map(tuple)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return st.just(tuple(value))
    raise InvalidArgument(f"actions must be None, a list of actions or a strategy of lists, got {value!r}")


def plans(
    session: EnvSession,
    *,
    actions: Any = None,
    seeds: Any = None,
    faults: Any = None,
    finish: bool | None = None,
    max_size: int | None = None,
) -> SearchStrategy[Plan]:
    """Plans for ``session``'s env: seed, actions, an optional action repeated to the end, faults.

    ``finish=True`` always repeats a drawn action after the sequence until the episode ends,
    ``False`` never does, ``None`` lets Hypothesis choose (shrinking toward not repeating).
    """
    size = max_size if max_size is not None else min(session.limit, session.max_steps)
    tail: SearchStrategy[Any]
    if finish is None:
        tail = st.one_of(st.none(), _space_strategy(session.space))
    elif finish:
        tail = _space_strategy(session.space)
    else:
        tail = st.none()
    return st.builds(
        Plan,
        seed=seeds_strategy(seeds),
        actions=_actions_strategy(actions, session, size),
        then_repeat=tail,
        faults=_faults_strategy(faults, session, max_calls=min(session.limit, session.max_steps)),
    )


def episodes(
    make_env: Any,
    *,
    actions: Any = None,
    faults: Any = None,
    seeds: Any = None,
    finish: bool = True,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> SearchStrategy[Episode]:
    """Recorded episodes of a fresh env under generated seeds, actions and (optionally) faults.

    ``actions``: None (generated), a list, or a strategy of lists. ``faults``: None (no faults),
    True (generated schedules where the env is a ``ToolEnv``, none otherwise), a schedule, or a
    strategy of schedules. ``seeds``: an int, a list or a strategy. With ``finish`` (default) a
    generated action is repeated after the sequence until the episode ends, so episodes finish
    within ``max_steps`` when the env's step limit allows. Each ``Episode`` has its steps, return,
    end reason, outcome class, success flag and ``records`` (the ``AuditWrapper`` tables).

    >>> from hypothesis import given
    >>> from envaudit.testing import episodes
    >>> @given(episodes("envaudit/CodeFix-v0", faults=True))
    ... def test_reward_needs_success(episode):
    ...     assert episode.episode_return <= (1.0 if episode.success else 0.0)
    """
    resolve_target(make_env)
    seeds_strategy(seeds)
    if not isinstance(finish, bool):
        raise InvalidArgument(f"finish must be True or False, got {finish!r}")

    def build() -> SearchStrategy[Episode]:
        session = _session_info(make_env, max_steps)
        try:
            plan_strategy = plans(session, actions=actions, seeds=seeds, faults=faults, finish=finish)
        finally:
            session.close()
        return plan_strategy.map(lambda plan: _play_fresh(make_env, plan, max_steps))

    return st.deferred(build)


def _play_fresh(make_env: Any, plan: Plan, max_steps: int) -> Episode:
    with EnvSession(make_env, max_steps=max_steps) as session:
        return session.play(plan)


__all__ = [
    "action_sequences",
    "actions",
    "episodes",
    "fault_schedules",
    "plans",
    "seeds_strategy",
]
