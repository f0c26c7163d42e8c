"""TextArena rewards that are not numbers (textarena 0.7.4): where the game set one.

Some games pass their arguments to ``set_invalid_move(reason, reward)`` the wrong way round, so a
game ends with a ``str`` as a player's reward. ``watch_rewards`` makes a game's state record the
first frame of the game's own code that assigns such a reward (an instance-level hook: the state's
class is swapped for a subclass whose ``__setattr__`` looks at ``rewards``), and ``check_rewards``
raises ``RewardTypeError`` naming that ``file:line``, with that frame as the exception's innermost
traceback frame, so the scan's ``env-error`` points at the game, not at the adapter.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ADAPTER = "envaudit.adapters.textarena"


class RewardTypeError(TypeError):
    """A TextArena game set a reward that is not a number; the message names where."""


@dataclass
class BadReward:
    value: Any
    file: str
    line: int
    function: str
    frame: types.FrameType | None
    lasti: int


class RewardSink:
    """Where a watched state leaves its first non-numeric reward; copies of the game get an empty one."""

    def __init__(self) -> None:
        self.bad: BadReward | None = None

    def __deepcopy__(self, memo: dict) -> RewardSink:
        return RewardSink()


def not_a_number(rewards: Any) -> tuple[Any, Any] | None:
    """(player, value) of the first reward that is not a real number, or None."""
    if not isinstance(rewards, Mapping):
        return (None, rewards)
    for pid, value in rewards.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return (pid, value)
    return None


@functools.cache
def _framework_files() -> tuple[str, ...]:
    """TextArena's core.py and state.py, this module and the adapter's: frames there are not the game's."""
    import textarena.core
    import textarena.state

    ours = [sys.modules[__name__], *([sys.modules[ADAPTER]] if ADAPTER in sys.modules else [])]
    return tuple(str(Path(m.__file__).resolve()) for m in (textarena.core, textarena.state, *ours))


def _game_frame(frame: types.FrameType | None) -> types.FrameType | None:
    """The first frame up from ``frame`` in the game's own code (outside TextArena's state/core)."""
    skip = _framework_files()
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()) in skip:
        frame = frame.f_back
    return frame


def _record_rewards(self: Any, name: str, value: Any) -> None:
    sink = self.__dict__.get("_envaudit_sink")
    if name == "rewards" and value is not None and sink is not None and sink.bad is None:
        bad = not_a_number(value)
        if bad is not None:
            frame = _game_frame(sys._getframe(1))
            code = frame.f_code if frame else None
            sink.bad = (BadReward(bad, code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name),
                                  frame, frame.f_lasti) if frame else BadReward(bad, "?", 0, "?", None, 0))
    type(self).__mro__[1].__setattr__(self, name, value)


_WATCHED: dict[type, type] = {}


def watch_rewards(state: Any, sink: RewardSink) -> None:
    """Make ``state`` record where a non-numeric reward is set, into ``sink`` (an instance-level hook:
    the state's class is swapped for a subclass of it whose ``__setattr__`` looks at ``rewards``)."""
    cls = type(state)
    if cls not in _WATCHED.values():
        if cls not in _WATCHED:
            _WATCHED[cls] = type(cls.__name__, (cls,), {"__setattr__": _record_rewards,
                                                       "__module__": cls.__module__, "__qualname__": cls.__qualname__})
        state.__class__ = _WATCHED[cls]
    object.__setattr__(state, "_envaudit_sink", sink)


def check_rewards(rewards: Any, sink: RewardSink, base: Any) -> None:
    """Raise ``RewardTypeError`` when a reward the game (``base``, the unwrapped TextArena env) set is
    not a number, naming the game's line that set it (also as the exception's innermost traceback
    frame, so ``user_frame`` finds it)."""
    if rewards is None:
        return
    bad = not_a_number(rewards)
    if bad is None:
        return
    seen = sink.bad
    if seen is not None:
        where = f"{seen.file}:{seen.line} ({seen.function})"
    else:  # set without assigning state.rewards (mutated in place): name the game's step()
        step = type(base).step
        where = f"{inspect.getsourcefile(step)}:{inspect.getsourcelines(step)[1]} ({step.__qualname__})"
    player, value = bad
    whose = f"player {player}'s reward" if player is not None else "its rewards"
    exc = RewardTypeError(
        f"TextArena's {type(base).__name__} set {whose} to {value!r} ({type(value).__name__}), not a "
        f"number, at {where}; a trainer's float(reward) fails there (most likely an argument passed in "
        "the reward's place)")
    if seen is not None and seen.frame is not None:
        exc = exc.with_traceback(types.TracebackType(None, seen.frame, seen.lasti, seen.line))
    raise exc


__all__ = ["RewardSink", "RewardTypeError", "check_rewards", "not_a_number", "watch_rewards"]
