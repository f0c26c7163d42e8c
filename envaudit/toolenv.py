"""``ToolEnv``: a Gymnasium base class for multi-step tool environments.

A subclass registers named tools (plain callables, each with a deadline) and a finite catalogue of
tool calls; the action space is ``Discrete`` over that catalogue. ``step`` runs the chosen call
for real under its deadline, turns overruns into ``"timeout"`` and exceptions into ``"error"``,
hands the result to the subclass's ``transition`` and fills in DESIGN.md's info protocol.

Tools may model a slow backend without sleeping by returning ``ToolOutput(value, latency_s=...)``:
a simulated latency past the deadline is a timeout exactly like a real overrun, which keeps scans
of thousands of steps fast and replayable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.deadline import DeadlineExceeded, DeadlineWorker, guarded
from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT

FaultHook = Callable[[str], "str | None"]


SIMULATED_HANG_FACTOR, SIMULATED_HANG_FLOOR_S = 10.0, 10.0
"""A simulated tool's call is abandoned as hung only after ``max(FACTOR * deadline, FLOOR)`` seconds:
its status comes from its declared latency, so the wall clock is only a guard against a real hang.
Inside a step that already runs under a deadline (every runner of a scan guards its steps) the call
runs inline on the step's thread: a hang of the simulation's own code is the env hanging, which
that deadline reports, and a second thread per call would only double the cost of every step."""


@dataclass
class Tool:
    """A named tool: ``fn(**args)`` run under ``deadline_s`` seconds (None: no deadline).

    A *simulated* tool models its backend's latency instead of having one: it returns
    ``ToolOutput(value, latency_s=...)`` (or raises with a ``latency_s``), and its status follows
    that declared latency alone, never how long the Python call took on a loaded machine; that
    keeps scans replayable under any load. ``simulated=True`` says so up front; a tool that returns
    a ``ToolOutput`` is treated as simulated from then on.
    """

    name: str
    fn: Callable[..., Any]
    deadline_s: float | None = 1.0
    description: str = ""
    simulated: bool = False


@dataclass(frozen=True)
class ToolCall:
    """One entry of the action catalogue: a tool with fixed arguments and a readable label."""

    label: str
    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolOutput:
    """What a tool may return instead of a bare value, to declare a (simulated) latency.

    The declared latency is the call's latency: past the tool's deadline it is a timeout. A tool
    that fails after a simulated delay raises an exception with a ``latency_s`` attribute.
    """

    value: Any = None
    latency_s: float = 0.0


@dataclass(frozen=True)
class ToolResult:
    """What happened when a tool was called; ``value`` is None unless ``status == "ok"``."""

    name: str
    status: str
    value: Any = None
    error: str | None = None
    latency_s: float = 0.0
    injected: bool = False

    @property
    def ok(self) -> bool:
        return self.status == TOOL_OK

    def to_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"name": self.name, "status": self.status, "latency_s": self.latency_s}
        if self.error is not None:
            info["error"] = self.error
        if self.injected:
            info["injected"] = True
        return info


@dataclass(frozen=True)
class Transition:
    """A subclass's answer to one tool result."""

    observation: Any
    reward: float = 0.0
    terminated: bool = False
    success: bool | None = None


class InjectedFault(RuntimeError):
    """Raised inside the tool path when fault injection makes a call fail."""


class ToolEnv(gym.Env):
    """Base class for tool environments. Subclasses implement ``reset_task`` and ``transition``.

    In ``__init__``, call ``super().__init__(max_steps=...)``, then ``add_tool`` and ``add_call``,
    and set ``observation_space``. Use ``self.np_random`` for every random choice so that
    ``reset(seed=s)`` replays. Episodes that reach ``max_steps`` without terminating are
    truncated; ``success_on_truncation`` decides their success flag (default: not a success).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}

    def __init__(self, *, max_steps: int = 20, render_mode: str | None = None) -> None:
        assert max_steps >= 1, f"max_steps must be at least 1, got {max_steps}"
        self.max_steps = int(max_steps)
        self.render_mode = render_mode
        self.tools: dict[str, Tool] = {}
        self.catalogue: list[ToolCall] = []
        self.action_space = gym.spaces.Discrete(1)
        self.fault_hook: FaultHook | None = None
        self.fault_mode = "simulated"
        self._worker = DeadlineWorker("envaudit-tool")
        self._t = 0
        self._done = False
        self._transcript: list[str] = []

    # -- building the catalogue -------------------------------------------------------------
    def add_tool(
        self, name: str, fn: Callable[..., Any], *, deadline_s: float | None = 1.0, description: str = "",
        simulated: bool = False,
    ) -> Tool:
        if name in self.tools:
            raise ValueError(f"tool {name!r} is registered twice; give each tool a unique name")
        tool = Tool(name, fn, deadline_s, description or (fn.__doc__ or "").strip().split("\n")[0], simulated)
        self.tools[name] = tool
        return tool

    def add_call(self, label: str, tool: str, **args: Any) -> int:
        """Add a catalogue entry; returns its action index."""
        if tool not in self.tools:
            raise ValueError(f"call {label!r} names unknown tool {tool!r}; add_tool({tool!r}, ...) first")
        if any(c.label == label for c in self.catalogue):
            raise ValueError(f"catalogue label {label!r} is used twice; labels must be unique")
        self.catalogue.append(ToolCall(label, tool, dict(args)))
        self.action_space = gym.spaces.Discrete(len(self.catalogue))
        return len(self.catalogue) - 1

    @property
    def action_labels(self) -> list[str]:
        return [c.label for c in self.catalogue]

    def action_index(self, label: str) -> int:
        for i, c in enumerate(self.catalogue):
            if c.label == label:
                return i
        raise KeyError(f"no catalogue entry labelled {label!r}; labels are {self.action_labels}")

    # -- the subclass's part ----------------------------------------------------------------
    def reset_task(self, options: Mapping[str, Any] | None) -> Any:
        """Draw a new task with ``self.np_random``; return the first observation."""
        raise NotImplementedError

    def transition(self, call: ToolCall, result: ToolResult) -> Transition:
        """Update the task state from one tool result; return observation, reward and ending."""
        raise NotImplementedError

    def success_on_truncation(self) -> bool:
        return False

    # -- the tool path ----------------------------------------------------------------------
    def call_tool(self, name: str, **args: Any) -> ToolResult:
        """Run one tool under its deadline, through fault injection when a hook is set."""
        tool = self.tools[name]
        fn = lambda: tool.fn(**args)  # noqa: E731
        fault = self.fault_hook(name) if self.fault_hook is not None else None
        if fault == TOOL_ERROR:
            return ToolResult(name, TOOL_ERROR, error=f"injected fault: {name} failed", injected=True)
        if fault == TOOL_TIMEOUT:
            if self.fault_mode == "real" and tool.deadline_s is not None:
                stall = tool.deadline_s * 1.5 + 0.01
                fn = lambda: time.sleep(stall)  # noqa: E731 - overrun the deadline for real
            else:
                return ToolResult(
                    name, TOOL_TIMEOUT, error=f"injected fault: {name} timed out",
                    latency_s=float(tool.deadline_s or 0.0), injected=True,
                )
        simulated = tool.simulated and fault is None
        wait = tool.deadline_s
        if simulated and wait is not None:
            wait = None if guarded() else max(SIMULATED_HANG_FACTOR * wait, SIMULATED_HANG_FLOOR_S)
        timed: list[float] = []

        def run() -> Any:
            # Timed on the worker thread: the wait for the thread to pick the call up is not latency.
            begin = time.perf_counter()
            try:
                return fn()
            finally:
                timed.append(time.perf_counter() - begin)

        start = time.perf_counter()
        try:
            out = self._worker.call(run, wait, what=f"tool {name!r}")
        except DeadlineExceeded:
            return ToolResult(
                name, TOOL_TIMEOUT, error=f"{name} exceeded its {tool.deadline_s:g} s deadline",
                latency_s=time.perf_counter() - start, injected=fault is not None,
            )
        except Exception as exc:  # a tool that raises is a tool error, not a crashed env
            declared = getattr(exc, "latency_s", None)
            measured = 0.0 if simulated else (timed[0] if timed else time.perf_counter() - start)
            return ToolResult(name, TOOL_ERROR, error=f"{type(exc).__name__}: {exc}",
                              latency_s=float(declared) if declared is not None else measured)
        latency = 0.0 if simulated else (timed[0] if timed else time.perf_counter() - start)
        value = out
        if isinstance(out, ToolOutput):
            # A declared latency models the backend; the microseconds the simulation itself took
            # are left out so that replays (and Gymnasium's check_env) see identical info.
            value, latency = out.value, float(out.latency_s)
            tool.simulated = True
        if tool.deadline_s is not None and latency > tool.deadline_s:
            return ToolResult(name, TOOL_TIMEOUT, error=f"{name} took {latency:.3g} s, past its "
                              f"{tool.deadline_s:g} s deadline", latency_s=latency,
                              injected=fault is not None)
        return ToolResult(name, TOOL_OK, value=value, latency_s=latency)

    # -- Gymnasium API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        assert self.catalogue, f"{type(self).__name__} has an empty catalogue; call add_call in __init__"
        self._t = 0
        self._done = False
        self._transcript = []
        obs = self.reset_task(options)
        return obs, {}

    def step(self, action: Any):
        if self._done:
            raise gym.error.ResetNeeded("step() called after the episode ended; call reset() first")
        n = len(self.catalogue)
        try:
            raw = np.asarray(action).item()
            index = int(raw)
            if index != raw:  # 1.7 is not catalogue entry 1
                raise ValueError(raw)
        except (TypeError, ValueError):
            raise ValueError(
                f"action {action!r} is not an index into the catalogue; {type(self).__name__} takes "
                f"an integer 0..{n - 1} (use env.action_index(label) to look a label up)"
            ) from None
        if not 0 <= index < n:
            raise ValueError(
                f"action {action!r} is outside the catalogue of {n} calls; expected 0..{n - 1} "
                f"for {self.action_labels}"
            )
        return self.run_call(self.catalogue[index])

    def run_call(self, call: ToolCall, result: ToolResult | None = None):
        """Make one call and apply it, as ``step`` does; a given ``result`` stands for a call that
        was not made (text mode: a tool call that did not parse is an ``"error"`` result)."""
        result = self.call_tool(call.tool, **call.args) if result is None else result
        tr = self.transition(call, result)
        self._t += 1
        terminated = bool(tr.terminated)
        truncated = not terminated and self._t >= self.max_steps
        info: dict[str, Any] = {"tool": result.to_info()}
        if terminated or truncated:
            self._done = True
            success = tr.success if tr.success is not None else (
                self.success_on_truncation() if truncated else False
            )
            info["success"] = bool(success)
        self._transcript.append(f"{self._t}. {call.label} -> {result.status}, reward {tr.reward:+g}")
        return tr.observation, float(tr.reward), terminated, truncated, info

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return "\n".join(self._transcript)
        return None

    def close(self) -> None:
        self._worker.close()
        super().close()
