"""The two env classes a spec becomes, and the honest policy (``oracle()``) they may expose.

Both speak DESIGN.md's info protocol: ``info["tool"]`` (name, status, simulated latency, error)
on every step, ``info["success"]`` on the last. Latencies are simulated (no sleeping): a timed-out
call declares a latency past its deadline, as ``envaudit.ToolEnv`` documents.

Observation (float32 in [0, 1]): progress along the path (fraction), path complete, the revealed
answer one-hot (only when there are several candidates), the last tool status one-hot
(none/ok/error/timeout), steps used (fraction of ``max_steps``; 0 when the spec's clock is not
observed).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.families.spec import TOOL_DEADLINE_S, EnvSpec
from envaudit.families.task import Task, tool_of
from envaudit.protocol import TOOL_ERROR, TOOL_TIMEOUT
from envaudit.rollout import Policy
from envaudit.toolenv import ToolCall, ToolEnv, ToolOutput, ToolResult, Transition


class _SimulatedFailure(RuntimeError):
    """A tool error with its simulated latency (``ToolEnv`` reads ``latency_s`` off the exception)."""

    def __init__(self, message: str, latency_s: float) -> None:
        super().__init__(message)
        self.latency_s = latency_s


class FamilyToolEnv(ToolEnv):
    """A generated task on ``envaudit.ToolEnv``: calls run through the tool path, so fault
    injection (``envaudit.inject_faults``) and the per-call deadline apply."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, task_spec: EnvSpec, render_mode: str | None = None) -> None:
        super().__init__(max_steps=task_spec.max_steps, render_mode=render_mode)
        self.task_spec = task_spec  # not `spec`: gymnasium keeps its registration spec there
        self.task = Task(task_spec)
        for tool in task_spec.tools:
            self.add_tool(tool.name, partial(self._call, tool.name), deadline_s=TOOL_DEADLINE_S,
                          description=f"generated tool {tool.name}")
            self.add_call(f"call_{tool.name}", tool.name)
        self.add_tool("submit", self._submit, deadline_s=TOOL_DEADLINE_S, description="hand the answer in")
        for k, label in enumerate(task_spec.submit_labels):
            self.add_call(label, "submit", candidate=k)
        if task_spec.degenerate_action:
            self.add_call("submit_all", "submit", candidate=None)
        if task_spec.quit_action:
            self.add_tool("give_up", self._submit, deadline_s=TOOL_DEADLINE_S, description="end unanswered")
            self.add_call("give_up", "give_up", candidate=None)
        if task_spec.step_back:
            self.add_tool("step_back", self._submit, deadline_s=TOOL_DEADLINE_S, description="undo the last path step")
            self.add_call("step_back", "step_back", candidate=None)
        assert tuple(self.action_labels) == task_spec.labels, "catalogue order must follow EnvSpec.labels"
        self.observation_space = self.task.observation_space

    def _call(self, name: str) -> ToolOutput:
        status, error = self.task.draw_status(name, self.np_random)
        latency = self.task.latency(status, self.np_random)
        if status == TOOL_ERROR:
            raise _SimulatedFailure(error or f"{name} failed", latency)
        return ToolOutput(name, latency)  # a timeout declares a latency past the deadline

    def _submit(self, candidate: int | None) -> ToolOutput:
        return ToolOutput(candidate, self.task.latency("ok", self.np_random))

    def reset_task(self, options: Mapping[str, Any] | None) -> np.ndarray:
        return self.task.start(self.np_random)

    def transition(self, call: ToolCall, result: ToolResult) -> Transition:
        out = self.task.apply(call.label, result.status, last=self._t + 1 >= self.max_steps, rng=self.np_random)
        return Transition(self.task.observation(), out.reward, out.terminated, out.success)


class FamilyGymEnv(gym.Env):
    """The same generated task as a plain ``gymnasium.Env``: it reports tool statuses but has no
    tool path, so it cannot be fault-injected (probes must compare episodes instead)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, task_spec: EnvSpec, render_mode: str | None = None) -> None:
        self.task_spec = task_spec
        self.task = Task(task_spec)
        self.max_steps = task_spec.max_steps
        self.render_mode = render_mode
        self.action_labels = list(task_spec.labels)
        self.action_space = gym.spaces.Discrete(len(self.action_labels))
        self.observation_space = self.task.observation_space
        self._transcript: list[str] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._transcript = []
        return self.task.start(self.np_random), {}

    def step(self, action: Any):
        try:
            raw = np.asarray(action).item()
            index = int(raw)
        except (TypeError, ValueError):
            index, raw = -1, None
        if index != raw or not 0 <= index < len(self.action_labels):
            raise ValueError(f"action {action!r} is not an index into the catalogue; expected an integer "
                             f"0..{len(self.action_labels) - 1} for {self.action_labels}")
        label = self.action_labels[index]
        tool = tool_of(label)
        status, error = self.task.draw_status(tool, self.np_random)
        latency = self.task.latency(status, self.np_random)
        out = self.task.apply(label, status, last=self.task.t + 1 >= self.max_steps, rng=self.np_random)
        truncated = not out.terminated and self.task.t >= self.max_steps
        tool_info: dict[str, Any] = {"name": tool, "status": status, "latency_s": latency}
        if status in (TOOL_ERROR, TOOL_TIMEOUT):
            tool_info["error"] = error
        info: dict[str, Any] = {"tool": tool_info}
        if out.terminated or truncated:
            info["success"] = bool(out.success)
        self._transcript.append(f"{self.task.t}. {label} -> {status}, reward {out.reward:+g}")
        return self.task.observation(), out.reward, out.terminated, truncated, info

    def action_index(self, label: str) -> int:
        return self.action_labels.index(label)

    def render(self) -> str | None:
        return "\n".join(self._transcript) if self.render_mode == "ansi" else None


class _WithOracle:
    """Mixin: ``oracle()`` returns the honest policy (probes look the method up by name)."""

    task_spec: EnvSpec

    def oracle(self) -> Policy:
        return HonestPolicy(self.task_spec)


class FamilyToolEnvWithOracle(_WithOracle, FamilyToolEnv):
    pass


class FamilyGymEnvWithOracle(_WithOracle, FamilyGymEnv):
    pass


class HonestPolicy(Policy):
    """Walk the path (retrying every failed call), then submit the revealed answer."""

    name = "honest"

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec
        self.index = {label: i for i, label in enumerate(spec.labels)}

    def act(self, obs: Any, info: Mapping[str, Any]) -> int:
        obs = np.asarray(obs)
        progress = int(round(float(obs[0]) * len(self.spec.path)))
        if progress < len(self.spec.path):
            return self.index[f"call_{self.spec.path[progress]}"]
        if self.spec.n_answers == 1:
            return self.index["submit"]
        return self.index[f"submit_{int(np.argmax(obs[2:2 + self.spec.n_answers]))}"]

    def describe(self) -> str:
        steps = ", ".join(self.spec.path)
        return f"call {steps} in order (retrying failures), then submit the revealed answer"


def make_env(spec: EnvSpec, render_mode: str | None = None) -> gym.Env:
    """The env a spec describes: its base class, with ``oracle()`` when the spec exposes one."""
    if spec.base == "toolenv":
        cls = FamilyToolEnvWithOracle if spec.has_oracle else FamilyToolEnv
    else:
        cls = FamilyGymEnvWithOracle if spec.has_oracle else FamilyGymEnv
    return cls(spec, render_mode=render_mode)


__all__ = ["FamilyGymEnv", "FamilyToolEnv", "HonestPolicy", "make_env"]
