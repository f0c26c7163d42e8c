"""What the bundled environments share: simulated latency reported exactly, status encoding, oracles.

The bundled envs model slow and flaky backends without sleeping: a tool returns
``ToolOutput(value, latency_s)`` and a latency past the tool's deadline is a timeout, exactly as a
real overrun. ``BundledToolEnv`` reports that simulated latency alone in ``info["tool"]`` (not
simulated plus the microseconds of wall time the call really took), so the same seed and actions
give the same ``info`` too, and Gymnasium's ``check_env`` step-determinism check holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT
from envaudit.rollout import Policy
from envaudit.toolenv import ToolEnv, ToolOutput, ToolResult

# One-hot slots for the status of the last tool call; "none" before the first call.
STATUS_SLOTS = ("none", TOOL_OK, TOOL_ERROR, TOOL_TIMEOUT)

# Simulated latencies keep a wide gap around each deadline, so the few microseconds of real
# overhead a call takes can never flip a call from "ok" to "timeout" between two replays.
FAST_LATENCY_S = (0.02, 0.6)
SLOW_OVERRUN = (1.2, 2.5)  # multiples of the deadline for a call that overruns it
ERROR_LATENCY_S = 0.05  # a simulated backend answers its errors fast


class ToolFailure(RuntimeError):
    """Raised inside a tool when the simulated backend fails; ToolEnv reports it as ``"error"``
    with the backend's (simulated) error latency."""

    latency_s = ERROR_LATENCY_S


def check_probability(name: str, value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return value


def check_at_least(name: str, value: int, low: int) -> int:
    if int(value) != value or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


class BundledToolEnv(ToolEnv):
    """``ToolEnv`` with exact simulated latencies and a shared observation tail."""

    # render_fps only keeps Gymnasium's render checker quiet; "ansi" renders the transcript.
    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, *, max_steps: int, render_mode: str | None = None) -> None:
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self.last_status = "none"
        self.n_failures = 0

    # -- simulated latency ------------------------------------------------------------------
    def respond(self, value: Any, latency_s: float) -> ToolOutput:
        """What a tool returns: its value after ``latency_s`` simulated seconds."""
        return ToolOutput(value, float(latency_s))

    def latency(self, tool: str, overrun: bool, uniform: Callable[[float, float], float]) -> float:
        """A simulated latency for ``tool``: inside its deadline, or well past it when ``overrun``.

        ``uniform(low, high)`` is the draw to use (normally ``self.np_random.uniform``).
        """
        if overrun:
            deadline = self.tools[tool].deadline_s or 1.0
            return float(uniform(*SLOW_OVERRUN)) * deadline
        return float(uniform(*FAST_LATENCY_S))

    # -- shared bookkeeping -----------------------------------------------------------------
    def begin_episode(self) -> None:
        self.last_status = "none"
        self.n_failures = 0

    def note_result(self, result: ToolResult) -> None:
        self.last_status = result.status
        if not result.ok:
            self.n_failures += 1

    def steps_after_this(self) -> int:
        """Inside ``transition``: how many steps the episode has had once this one counts."""
        return self._t + 1

    def is_last_step(self) -> bool:
        """Inside ``transition``: True when this step will be truncated unless it terminates."""
        return self.steps_after_this() >= self.max_steps

    def status_tail(self, steps_done: int) -> list[float]:
        """Last status one-hot, failures so far and time used, each in [0, 1]."""
        onehot = [1.0 if self.last_status == s else 0.0 for s in STATUS_SLOTS]
        return onehot + [min(1.0, self.n_failures / self.max_steps), min(1.0, steps_done / self.max_steps)]

    @staticmethod
    def pack(values: list[float]) -> np.ndarray:
        return np.asarray(values, dtype=np.float32)

    # -- scripted policies ------------------------------------------------------------------
    def oracle(self) -> Policy:
        raise NotImplementedError

    def exploits(self) -> dict[str, Policy]:
        """Scripted exploits this env class's flaws invite, by name (they also run on clean twins)."""
        return {}


class ObservationPolicy(Policy):
    """A policy that decides from the observation alone; ``choose(obs)`` returns an action index."""

    def act(self, obs: Any, info: Mapping[str, Any]) -> int:
        return int(self.choose(np.asarray(obs)))

    def choose(self, obs: np.ndarray) -> int:
        raise NotImplementedError
