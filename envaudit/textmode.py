"""Text mode for ``ToolEnv``: the agent writes its tool calls as text and reads a transcript.

Any ``ToolEnv`` class gets a text twin with ``text_env_class(cls)`` (or ``make_text_env``, the
Gymnasium entry point of the bundled ``envaudit/*-Text-v0`` ids). The twin is the same env with
two spaces swapped:

- the **action** is a ``Text``: one tool call as a JSON object ::

      {"tool": "apply_patch", "args": {"patch": 2}}

  ``"args"`` may be left out when the call takes none. Whitespace around the object and a Markdown
  code fence around it (```` ```json ... ``` ````) are ignored. A call is accepted when it names a
  tool of the env with the arguments of one of the env's catalogue calls (the observation lists
  them). Anything else -- not JSON, not an object, an unknown tool, arguments the env does not
  offer -- is a tool ``"error"`` whose ``info["tool"]["error"]`` starts with ``parse:``, and its
  tool name is ``(unparsed)``; the step counts and the episode goes on, so every probe sees a
  call that could not be parsed as the failed call it is. Catalogue indices (ints) are still
  accepted, so scripted policies written against the catalogue run unchanged.
- the **observation** is the transcript text: the task (``describe_task()`` when the env defines
  it, else its class docstring), the tool list with every accepted call, the call syntax, then one
  line per step (the call as written, and what came back: ``describe_result(result)`` when the env
  defines it and it returns text, else ``ok: <value as JSON>`` or ``error: <message>``), then the
  step count.

``action_space.sample()`` writes a uniformly random catalogue call, so the scan's random explorer
behaves on the text twin as it does on the original. The env's ``oracle()`` and ``exploits()``
keep working (on twins made by ``text_env_class``): they read the original (vector) observation,
kept in ``vector_observation``.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import string
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.protocol import TOOL_ERROR, TOOL_OK
from envaudit.rollout import Policy
from envaudit.toolenv import ToolCall, ToolEnv, ToolResult

UNPARSED = "(unparsed)"
"""Tool name and label of a step whose text did not parse into a call."""
PARSE_PREFIX = "parse: "
CHARSET = frozenset(string.printable)
MAX_CALL_CHARS = 4096
MAX_LINE_CHARS = 200
MAX_WRITTEN_CHARS = 60
"""An unparsed call's text in the transcript is cut here (the transcript is every later prompt)."""
MAX_OBSERVATION_CHARS = 200_000
EXPECTED = '{"tool": NAME, "args": {...}}'
SYNTAX = f'Reply with one tool call as JSON: {EXPECTED} ("args" may be left out when empty).'

_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.DOTALL)


class CallSyntaxError(ValueError):
    """A text action that is not one of the env's calls; the message says what was expected."""


# -- the call syntax ----------------------------------------------------------------------------
def format_call(tool: str, args: Mapping[str, Any] | None = None) -> str:
    """The canonical text of a call: ``{"tool": "t", "args": {...}}``, without empty ``args``."""
    body: dict[str, Any] = {"tool": tool}
    if args:
        body["args"] = dict(args)
    return json.dumps(body)


def parse_call(text: str) -> tuple[str, dict[str, Any]]:
    """``(tool, args)`` of a call written as text; raises ``CallSyntaxError`` naming the problem."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        value = json.loads(body)
    except ValueError:
        raise CallSyntaxError(f"not a JSON object: {_clip(text, 40)!r}; expected {EXPECTED}") from None
    if not isinstance(value, dict):
        raise CallSyntaxError(f"expected a JSON object {EXPECTED}, got {type(value).__name__}")
    extra = sorted(set(value) - {"tool", "args"})
    if extra:
        raise CallSyntaxError(f"unexpected keys {extra}; a call has only 'tool' and 'args'")
    tool, args = value.get("tool"), value.get("args", {})
    if not isinstance(tool, str):
        raise CallSyntaxError(f"'tool' must be a tool name (a string), got {tool!r}")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise CallSyntaxError(f"'args' must be a JSON object, got {type(args).__name__}")
    return tool, args


def _canonical_args(args: Mapping[str, Any]) -> str:
    return json.dumps(dict(args), sort_keys=True)


def _clip(text: str, n: int) -> str:
    text = "".join(c if c in CHARSET and c not in "\r\x0b\x0c" else "?" for c in str(text))
    return text if len(text) <= n else text[: n - 3] + "..."


# -- the spaces ---------------------------------------------------------------------------------
class ToolCallText(gym.spaces.Text):
    """Text actions whose ``sample()`` writes a uniformly random catalogue call (a random agent
    that knows the syntax); ``contains`` accepts any printable text up to ``max_length``."""

    def __init__(self, calls: list[str], max_length: int = MAX_CALL_CHARS, seed: Any = None) -> None:
        super().__init__(max_length, min_length=0, charset=CHARSET, seed=seed)
        self.calls = list(calls)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        return self.calls[int(self.np_random.integers(len(self.calls)))]

    def __repr__(self) -> str:
        return f"ToolCallText({len(self.calls)} calls, max_length={self.max_length})"


# -- the mixin ----------------------------------------------------------------------------------
class TextMode:
    """Mix in before a ``ToolEnv`` class (``class T(TextMode, MyEnv)``) to get its text twin."""

    text_mode = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        env: ToolEnv = self  # type: ignore[assignment]
        for call in env.catalogue:
            try:
                json.dumps(dict(call.args))
            except TypeError:
                raise TypeError(
                    f"catalogue call {call.label!r} of {type(self).__name__} has arguments {dict(call.args)!r} "
                    "that are not JSON values; text mode needs JSON arguments (numbers, strings, lists, "
                    "dicts, None)") from None
        self.vector_observation_space = env.observation_space
        self.observation_space = gym.spaces.Text(MAX_OBSERVATION_CHARS, min_length=0, charset=CHARSET)
        self.call_texts = [format_call(c.tool, c.args) for c in env.catalogue]
        self.action_space = ToolCallText(self.call_texts)
        self._by_call = {(c.tool, _canonical_args(c.args)): i for i, c in enumerate(env.catalogue)}
        self.vector_observation: Any = None
        self._task_text = ""
        self._history: list[str] = []
        self._last_result: ToolResult | None = None

    # -- parsing ----------------------------------------------------------------------------
    def parse_action(self, text: str) -> int:
        """The catalogue index of a call written as text; raises ``CallSyntaxError`` otherwise."""
        env: ToolEnv = self  # type: ignore[assignment]
        tool, args = parse_call(text)
        if tool not in env.tools:
            raise CallSyntaxError(f"unknown tool {tool!r}; the tools are {', '.join(env.tools)}")
        try:
            key = (tool, _canonical_args(args))
        except TypeError:  # pragma: no cover - json.loads only yields JSON values
            key = (tool, repr(args))
        if key not in self._by_call:
            offered = [t for t, c in zip(self.call_texts, env.catalogue, strict=True) if c.tool == tool]
            raise CallSyntaxError(f"{tool!r} does not take args {json.dumps(args)}; its calls are "
                                  + " or ".join(offered))
        return self._by_call[key]

    def label_of(self, action: Any) -> str | None:
        """The catalogue label an action (index or text) stands for; ``(unparsed)`` for text that is
        not a call, None for anything else."""
        env: ToolEnv = self  # type: ignore[assignment]
        if isinstance(action, (str, bytes, np.str_)):
            try:
                return env.catalogue[self.parse_action(_text(action))].label
            except CallSyntaxError:
                return UNPARSED
        try:
            return env.catalogue[int(action)].label
        except (TypeError, ValueError, IndexError):
            return None

    # -- the tool path: remember the last result, for its line in the transcript -------------
    def call_tool(self, name: str, **args: Any) -> ToolResult:
        result = super().call_tool(name, **args)  # type: ignore[misc]
        self._last_result = result
        return result

    # -- Gymnasium API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = super().reset(seed=seed, options=options)  # type: ignore[misc]
        self.vector_observation = obs
        self._history = []
        self._task_text = self._describe_task()
        return self.transcript(), info

    def step(self, action: Any):
        env: ToolEnv = self  # type: ignore[assignment]
        if env._done:
            raise gym.error.ResetNeeded("step() called after the episode ended; call reset() first")
        self._last_result = None
        if isinstance(action, (str, bytes, np.str_)):
            text = _text(action)
            try:
                index = self.parse_action(text)
            except CallSyntaxError as exc:
                result = ToolResult(UNPARSED, TOOL_ERROR, error=f"{PARSE_PREFIX}{exc}")
                out = env.run_call(ToolCall(UNPARSED, UNPARSED), result)
                return self._after(_clip(text.strip(), MAX_WRITTEN_CHARS) or "(empty)", result, out)
            written = self.call_texts[index]
            out = super().step(index)  # type: ignore[misc]
        else:
            out = super().step(action)  # type: ignore[misc]
            written = self.call_texts[int(np.asarray(action).item())]
        return self._after(written, self._last_result, out)

    def _after(self, written: str, result: ToolResult | None, out: tuple) -> tuple:
        obs, reward, terminated, truncated, info = out
        self.vector_observation = obs
        self._history.append(f"{len(self._history) + 1}. {written} -> {self._describe_result(result, info)}")
        return self.transcript(), reward, terminated, truncated, info

    # -- the transcript ---------------------------------------------------------------------
    def transcript(self) -> str:
        """The observation: task, tools and calls, syntax, history, step count."""
        env: ToolEnv = self  # type: ignore[assignment]
        lines = [f"Task: {self._task_text}", "Tools:"]
        for name, tool in env.tools.items():
            calls = [t for t, c in zip(self.call_texts, env.catalogue, strict=True) if c.tool == name]
            if calls:
                lines.append(f"- {name}: {_clip(tool.description, MAX_LINE_CHARS)}. Calls: " + " ".join(calls))
        lines += [SYNTAX, "History:" if self._history else "History: none yet.", *self._history,
                  f"Step {len(self._history) + 1} of {env.max_steps}."]
        return "\n".join(lines)

    def _describe_task(self) -> str:
        describe = getattr(self, "describe_task", None)
        text = describe() if callable(describe) else default_task_description(type(self))
        return _clip(" ".join(str(text).split()), 2000)

    def _describe_result(self, result: ToolResult | None, info: Mapping[str, Any]) -> str:
        if result is not None and result.name == UNPARSED:  # the text is on the line already
            return _clip(f"error: {(result.error or '').split(':')[0]}: {_parse_problem(result.error or '')}",
                         MAX_LINE_CHARS)
        describe = getattr(self, "describe_result", None)
        text = describe(result) if result is not None and callable(describe) else None
        if text is not None:
            return _clip(str(text), MAX_LINE_CHARS)
        if result is None:  # a call that ran no tool through call_tool: read the info protocol
            tool = info.get("tool") or {}
            status, error, value = tool.get("status", TOOL_OK), tool.get("error"), None
        else:
            status, error, value = result.status, result.error, result.value
        if status == TOOL_OK:
            text = "ok" if value is None else f"ok: {_json_value(value)}"
        else:
            text = f"{status}: {error}" if error else status
        return _clip(text, MAX_LINE_CHARS)


def _parse_problem(error: str) -> str:
    """What was wrong with an unparsed call, without the quoted text: its first clause."""
    problem = error.removeprefix(PARSE_PREFIX).split(";")[0]
    return problem.split(": '")[0] if problem.startswith("not a JSON object") else problem


def _text(action: Any) -> str:
    return action.decode("utf-8", errors="replace") if isinstance(action, bytes) else str(action)


def _json_value(value: Any) -> str:
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


def default_task_description(cls: type) -> str:
    """The generic task text of an env without ``describe_task()``: its class docstring's first
    paragraph (or the class name), so every ``ToolEnv`` has some task to show."""
    for klass in cls.__mro__:
        if klass is TextMode or klass is ToolEnv or not issubclass(klass, ToolEnv):
            continue
        doc = (klass.__doc__ or "").strip()
        if doc:
            return f"{klass.__name__}: " + " ".join(doc.split("\n\n")[0].split())
    return f"{cls.__name__}: use the tools to complete the task."


class VectorObservationPolicy(Policy):
    """Runs a policy written for the original observation on the text twin of the env."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        super().reset(env, rng)
        self.inner.reset(env, rng)

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        return self.inner(self.env.unwrapped.vector_observation, info)

    def describe(self) -> str:
        return self.inner.describe()


# -- making text twins --------------------------------------------------------------------------
@functools.cache
def text_env_class(cls: type) -> type:
    """The text twin of a ``ToolEnv`` class (made once per class)."""
    if not (isinstance(cls, type) and issubclass(cls, ToolEnv)):
        raise TypeError(f"text mode needs a ToolEnv subclass, got {cls!r}; write the env on "
                        "envaudit.ToolEnv (a tool registry and a call catalogue) to give it a text mode")
    if issubclass(cls, TextMode):
        return cls
    namespace: dict[str, Any] = {"__module__": cls.__module__,
                                 "__doc__": f"{cls.__name__} in text mode.\n\n{cls.__doc__ or ''}"}
    # Scripted policies read the original observation; only envs that have them get them.
    if callable(getattr(cls, "oracle", None)):
        namespace["oracle"] = lambda self: VectorObservationPolicy(cls.oracle(self))
    if callable(getattr(cls, "exploits", None)):
        namespace["exploits"] = lambda self: {name: VectorObservationPolicy(p)
                                              for name, p in cls.exploits(self).items()}
    return type(f"{cls.__name__}Text", (TextMode, cls), namespace)


def make_text_env(env: str | type, **kwargs: Any) -> gym.Env:
    """Build the text twin of ``env`` (a ``ToolEnv`` class or ``"module:Class"``) with ``kwargs``."""
    if isinstance(env, str):
        module, _, attr = env.partition(":")
        if not attr:
            raise ValueError(f"text env entry {env!r} must be 'module:Class'")
        env = getattr(importlib.import_module(module), attr)
    return text_env_class(env)(**kwargs)
