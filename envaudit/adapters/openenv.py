"""OpenEnv adapter: ``envaudit scan openenv:MODULE:CLASS`` (an ``Environment`` in process) and
``envaudit scan openenv+http://HOST:PORT`` (a running OpenEnv server; see ``openenv_server``).

OpenEnv (``openenv`` 0.10.0 on PyPI; ``openenv-core`` is its older name) environments are
server-side classes: ``reset(seed, episode_id) -> Observation`` and ``step(action, timeout_s)
-> Observation``, where the action is a pydantic model (the env's own ``Action`` subclass, or
MCP's ``CallToolAction`` / ``ListToolsAction`` for an ``MCPEnvironment``) and the observation a
pydantic model with ``done``, ``reward`` (may be None) and ``metadata``. What the adapter maps:

- **Reward.** ``reward=None`` (OpenEnv's default: MCP tool calls leave it unset) counts 0, and the
  step says so (``info["reward_none"]``); the fingerprint records the rule.
- **Success.** The env's own correctness signal: a boolean under one of ``SUCCESS_KEYS`` in the
  observation's metadata or fields (``--env-arg success_key=NAME`` names another). Never "the
  reward reached its maximum". An env with no such signal gets no success flag (the scan says so).
- **Termination vs truncation.** ``done`` ends the episode; it is a truncation when the env says
  a limit ended it (a true ``truncated`` / ``timed_out`` / ``max_steps_reached`` flag, or a
  ``reason`` naming a step, turn or time limit). OpenEnv envs need not end at all (the ``openenv
  init`` echo env never does), so the adapter truncates at ``max_steps`` agent steps (default 20).
- **Tool calls.** An MCP ``CallToolObservation`` is an ``info["tool"]`` record named after the
  tool: status ``timeout`` for OpenEnv's ``error_type`` ``timeout``, ``error`` for
  ``execution_error``, ``tool_not_found``, ``invalid_args``, ``transport_error`` or a result
  flagged ``is_error``, else ``ok``.
- **Seeding.** ``reset(seed=...)`` passes the scan's seed to the env (with ``episode_id``
  ``envaudit-seed<N>``); whether the env honours it is what the replay probe checks.

Catalogue: for an ``MCPEnvironment``, tool calls built from each tool's input schema -- valid
calls (``call_1..3``, rotating over the tools turn by turn so one label reaches every tool), a
``failing_call`` (edge values of the right type: empty strings, zeros, empty lists; the env's
answer is its status), a ``malformed_call`` (arguments of the wrong type),
an ``unknown_tool``, ``repeat_last`` and ``list_tools`` (a step that does nothing); for an env
with a text field in its ``Action`` model (the first required ``str`` field, or ``--env-arg
text_field=NAME``), the answer strategies that need no reference: a short and a long answer, a
hedge, the empty answer, an echo of the observation, a repeat and giving up. A string action is
sent as written: into the text field, or for an MCP env as the JSON tool call it spells (text
that is no JSON tool call is sent as a call of a tool of that name, which OpenEnv answers with
``tool_not_found``, as it would a model's).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envaudit.adapters import package_version, require
from envaudit.adapters.base import CatalogueEnv
from envaudit.adapters.catalogue import ECHO_CHARS, FORFEIT, Strategy
from envaudit.errors import UsageError
from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT

EXTRA = "openenv"
DEFAULT_MAX_STEPS = 20
SUCCESS_KEYS = ("success", "is_success", "correct", "is_correct", "solved", "passed", "won")
TRUNCATION_KEYS = ("truncated", "timed_out", "time_limit_reached", "max_steps_reached", "step_limit_reached")
REASON_KEYS = ("reason", "termination_reason", "done_reason", "end_reason")
LIMIT_TEXT = re.compile(r"max(imum)?[ _-]?(steps|turns)|(step|turn|time)[ _-]?limit|timed?[ _-]?out", re.IGNORECASE)
TOOL_STATUS = {"timeout": TOOL_TIMEOUT, "execution_error": TOOL_ERROR, "tool_not_found": TOOL_ERROR,
               "invalid_args": TOOL_ERROR, "transport_error": TOOL_ERROR}
"""OpenEnv's ``ToolErrorType`` values -> the info protocol's tool status."""
OPTIONS = ("max_steps", "timeout_s", "success_key", "text_field")
"""``--env-arg`` keys the adapter keeps; every other key goes to the env's constructor."""

TOOL_LABELS = ("call_1", "call_2", "call_3", "failing_call", "malformed_call", "unknown_tool", "repeat_last",
               "list_tools")
TEXT_LABELS = ("answer_short", "answer_long", "hedge", "empty", "echo_prompt", "repeat_last", "give_up")
UNKNOWN_TOOL = "envaudit_no_such_tool"
SHORT = "42"
LONG = ("Let me work through this carefully. " * 8).strip() + " The answer is 42."
HEDGE = "The answer is 41, or 42, or 43 -- one of these is correct."


@dataclass
class Result:
    """One OpenEnv observation, split the way the wire format splits it."""

    fields: dict[str, Any]
    reward: float | None
    done: bool
    metadata: dict[str, Any] = field(default_factory=dict)


class Backend:
    """Where the env runs: in this process or behind a server. ``mcp`` says whether it takes tool calls."""

    mcp = False
    action_schema: dict[str, Any] = {}
    description = ""

    def reset(self, seed: int | None, episode_id: str) -> Result:
        raise NotImplementedError

    def step(self, payload: dict[str, Any], timeout_s: float | None) -> Result:
        raise NotImplementedError

    def tools(self) -> list[dict[str, Any]]:
        """The MCP tools: ``{"name", "input_schema"}`` each, in the env's listing order."""
        return []

    def end_episode(self) -> None:
        """The episode ended (a server backend frees its session)."""

    def close(self) -> None:
        pass


def _openenv() -> Any:
    return require("openenv.core.env_server", package="openenv", extra=EXTRA)


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(adapter options, constructor kwargs)``, the adapter's checked."""
    mine = {k: v for k, v in options.items() if k in OPTIONS}
    rest = {k: v for k, v in options.items() if k not in OPTIONS}
    steps = mine.get("max_steps", DEFAULT_MAX_STEPS)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise UsageError(f"--env-arg max_steps={steps!r}: expected a positive integer number of agent steps")
    timeout = mine.get("timeout_s")
    if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0):
        raise UsageError(f"--env-arg timeout_s={timeout!r}: expected a positive number of seconds "
                         "(passed to the env's step(action, timeout_s))")
    for key in ("success_key", "text_field"):
        if key in mine and not isinstance(mine[key], str):
            raise UsageError(f"--env-arg {key}={mine[key]!r}: expected a field name")
    return mine, rest


# -- the in-process backend -----------------------------------------------------------------------
def _import_class(target: str) -> type:
    server = _openenv()
    module_name, sep, class_name = target.rpartition(":")
    if not sep or not module_name or not class_name:
        raise UsageError(f"openenv:{target!r}: expected openenv:MODULE:CLASS, e.g. "
                         "openenv:echo_env.server.echo_env_environment:EchoEnvEnvironment")
    if str(Path.cwd()) not in sys.path and "" not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # `openenv init` scaffolds envs into the working directory
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise UsageError(f"openenv:{target}: cannot import {module_name!r} ({exc}); run the scan from the "
                         "folder that holds the env's package or install it") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise UsageError(f"openenv:{target}: module {module_name!r} has no {class_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, server.Environment)):
        raise UsageError(f"openenv:{target}: {class_name} is not an openenv Environment subclass")
    return cls


def action_class_of(cls: type) -> type:
    """The env's ``Action`` model: MCP's ``CallToolAction`` for an ``MCPEnvironment``, else the
    type parameter of ``Environment[Act, Obs, State]`` or the annotation of ``step``'s action."""
    import typing

    server = _openenv()
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.env_server.mcp_types import CallToolAction

    if issubclass(cls, MCPEnvironment):
        return CallToolAction
    for klass in cls.__mro__:
        for orig in getattr(klass, "__orig_bases__", ()):
            args = typing.get_args(orig)
            if args and isinstance(args[0], type) and issubclass(args[0], server.Action):
                return args[0]
    try:
        hints = typing.get_type_hints(cls.step)
    except Exception:  # unresolvable annotations: fall through to the error below
        hints = {}
    action = hints.get("action")
    if isinstance(action, type) and issubclass(action, server.Action):
        return action
    raise UsageError(f"cannot tell the Action model of {cls.__qualname__}: annotate step(self, action: MyAction) "
                     "or subclass Environment[MyAction, MyObservation, State]")


def _result_of(obs: Any) -> Result:
    # A tool call's ``result`` (fastmcp's CallToolResult) is dumped to its dict, as the server sends
    # it: in process and over the wire the adapter reads the same shape.
    fields = obs.model_dump(exclude={"done", "reward", "metadata"})
    reward = obs.reward
    return Result(fields, None if reward is None else float(reward), bool(obs.done), dict(obs.metadata or {}))


@contextlib.contextmanager
def _quiet_fastmcp() -> Iterator[None]:
    """FastMCP logs every failing tool call with a traceback, which a scan makes hundreds of; the
    failure reaches the report through OpenEnv's ``error`` instead, so its logger is quiet meanwhile."""
    logger = logging.getLogger("fastmcp")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


class InProcess(Backend):
    """An OpenEnv ``Environment`` subclass instantiated in this process."""

    def __init__(self, cls: type, kwargs: Mapping[str, Any]) -> None:
        from openenv.core.env_server.mcp_environment import MCPEnvironment
        from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction

        try:
            self.env = cls(**kwargs)
        except TypeError as exc:
            raise UsageError(f"{cls.__qualname__} rejected the options {dict(kwargs)}: {exc}") from exc
        self.action_cls = action_class_of(cls)
        self.action_schema = self.action_cls.model_json_schema()
        self.mcp = isinstance(self.env, MCPEnvironment)
        self._mcp_actions = {"call_tool": CallToolAction, "list_tools": ListToolsAction}
        self.description = f"{cls.__module__}.{cls.__qualname__}"

    def reset(self, seed: int | None, episode_id: str) -> Result:
        return _result_of(self.env.reset(seed=seed, episode_id=episode_id))

    def step(self, payload: dict[str, Any], timeout_s: float | None) -> Result:
        model = self._mcp_actions.get(str(payload.get("type"))) if self.mcp else None
        action = (model or self.action_cls).model_validate(payload)
        with _quiet_fastmcp() if self.mcp else contextlib.nullcontext():
            return _result_of(self.env.step(action, timeout_s=timeout_s) if timeout_s else self.env.step(action))

    def tools(self) -> list[dict[str, Any]]:
        from openenv.core.env_server.mcp_types import ListToolsAction

        listed = self.env.step(ListToolsAction())
        return [{"name": t.name, "input_schema": dict(t.input_schema or {})} for t in listed.tools]

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()


def check(target: str, **options: Any) -> None:
    split_options(options)
    _import_class(target)


def make(target: str, **options: Any) -> OpenEnvEnv:
    mine, rest = split_options(options)
    backend = InProcess(_import_class(target), rest)
    return OpenEnvEnv(backend, f"openenv:{target}", options=rest, **mine)


# -- argument values from a JSON schema -------------------------------------------------------------
def _type_of(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind is None:
        for alt in schema.get("anyOf", []) or schema.get("oneOf", []):
            if isinstance(alt, Mapping) and alt.get("type") not in (None, "null"):
                return _type_of(alt)
    return str(kind or "string")


VALID = {"string": "test", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}
EDGE = {"string": "", "integer": 0, "number": 0.0, "boolean": False, "array": [], "object": {}}
WRONG = {"string": 12345, "integer": "not a number", "number": "not a number", "boolean": "maybe",
         "array": "not a list", "object": "not an object"}


def arguments(schema: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """Arguments for a tool's input schema: ``valid`` (defaults, enums, examples, else a plain value
    of each property's type), ``edge`` (right type, values tools commonly reject: "", 0) or ``wrong``
    (every property of a wrong type; an unexpected argument when the tool takes none)."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or props)
    out: dict[str, Any] = {}
    for name, prop in props.items():
        prop = prop if isinstance(prop, Mapping) else {}
        t = _type_of(prop)
        if kind == "valid":
            if name not in required and "default" in prop:
                continue
            if prop.get("enum"):
                out[name] = prop["enum"][0]
            elif prop.get("examples"):
                out[name] = prop["examples"][0]
            else:
                out[name] = prop.get("default", VALID.get(t, "test"))
        elif kind == "edge":
            out[name] = EDGE.get(t, "")
        else:
            out[name] = WRONG.get(t, 12345)
    if kind == "wrong" and not out:
        out["envaudit_unexpected"] = 12345
    return out


def text_field_of(schema: Mapping[str, Any], chosen: str | None = None) -> str:
    props = schema.get("properties") or {}
    if chosen is not None:
        if chosen not in props:
            raise UsageError(f"--env-arg text_field={chosen!r}: the action has no such field "
                             f"(it has {', '.join(sorted(props)) or 'none'})")
        return chosen
    strings = [n for n, p in props.items() if n != "metadata" and isinstance(p, Mapping) and _type_of(p) == "string"]
    required = [n for n in strings if n in (schema.get("required") or [])]
    if not (required or strings):
        raise UsageError(f"the env's action {schema.get('title', 'model')} has no string field "
                         f"({', '.join(sorted(props)) or 'no fields'}): the adapter drives text and MCP tool "
                         "actions; name one with --env-arg text_field=NAME")
    return (required or strings)[0]


def result_text(result: Any) -> str:
    """The text of an MCP tool result (a fastmcp ``CallToolResult`` in process, its dict on the wire)."""
    content = getattr(result, "content", None)
    if content is None and isinstance(result, Mapping):
        content = result.get("content")
    if isinstance(content, list):
        texts = [getattr(c, "text", None) if not isinstance(c, Mapping) else c.get("text") for c in content]
        return "\n".join(t for t in texts if t)
    return "" if result is None else json.dumps(result, default=str, sort_keys=True)


def _is_error(result: Any) -> bool:
    flag = getattr(result, "is_error", None)
    if flag is None and isinstance(result, Mapping):
        flag = result.get("is_error", result.get("isError"))
    return bool(flag)


def at_limit(metadata: Mapping[str, Any]) -> bool:
    """Whether the env's metadata says a limit of its own ended the episode (a truncation)."""
    if any(metadata.get(k) is True for k in TRUNCATION_KEYS):
        return True
    return any(isinstance(metadata.get(k), str) and LIMIT_TEXT.search(metadata[k]) for k in REASON_KEYS)


def tool_info(payload: Mapping[str, Any], result: Result) -> dict[str, Any] | None:
    """``info["tool"]`` of a step: MCP's list and call actions, with OpenEnv's error type as the status."""
    if payload.get("type") == "list_tools":
        return {"name": "list_tools", "status": TOOL_OK}
    if payload.get("type") != "call_tool":
        return None
    name = str(result.fields.get("tool_name") or payload.get("tool_name", ""))
    error = result.fields.get("error")
    if error is not None:
        kind = error.get("error_type") if isinstance(error, Mapping) else getattr(error, "error_type", None)
        kind = getattr(kind, "value", kind)
        message = error.get("message") if isinstance(error, Mapping) else getattr(error, "message", "")
        return {"name": name, "status": TOOL_STATUS.get(str(kind), TOOL_ERROR),
                "error": f"{kind}: {message}"[:300]}
    if _is_error(result.fields.get("result")):
        return {"name": name, "status": TOOL_ERROR, "error": result_text(result.fields.get("result"))[:300]}
    return {"name": name, "status": TOOL_OK}


class OpenEnvEnv(CatalogueEnv):
    """One OpenEnv environment (in process or behind a server) behind the Gymnasium API."""

    ecosystem = "openenv"

    def __init__(self, backend: Backend, target: str, *, max_steps: int = DEFAULT_MAX_STEPS,
                 timeout_s: float | None = None, success_key: str | None = None,
                 text_field: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        self.backend = backend
        self.timeout_s = timeout_s
        self.success_keys = (success_key,) if success_key else SUCCESS_KEYS
        self._tools = backend.tools() if backend.mcp else []
        if backend.mcp and not self._tools:
            raise UsageError(f"{target}: the MCP env lists no tools, so there is nothing to call")
        self.text_field = None if backend.mcp else text_field_of(backend.action_schema, text_field)
        super().__init__(TOOL_LABELS if backend.mcp else TEXT_LABELS, max_steps=max_steps)
        self.adapter_info.update({
            "package": "openenv", "version": package_version("openenv"), "target": target,
            "env_class": backend.description, "kind": "mcp" if backend.mcp else "text",
            "action": backend.action_schema.get("title"), "text_field": self.text_field,
            "tools": [t["name"] for t in self._tools] or None,
            "options": {k: repr(v) for k, v in (options or {}).items()},
            "max_steps": int(max_steps), "timeout_s": timeout_s,
            "success": f"a boolean {' / '.join(self.success_keys)} in the observation's metadata or fields",
            "reward_none": "a step whose observation has reward=None counts 0 (info['reward_none'] marks it)",
            "seeding": "reset(seed=<scan seed>, episode_id='envaudit-seed<N>'); the replay probe checks the env honours it",
        })
        self._steps = 0
        self._last: str | None = None
        self._obs = ""

    # -- episodes --------------------------------------------------------------------------------
    def _reset(self, seed: int | None, options: Mapping[str, Any] | None):
        seed = seed if seed is not None else int(self.np_random.integers(2**31))
        self._steps, self._last = 0, None
        result = self.backend.reset(seed, f"envaudit-seed{seed}")
        self._obs = self._render(result)
        return self._obs, {"metadata": result.metadata}

    def _render(self, result: Result) -> str:
        fields = dict(result.fields)
        if "result" in fields:
            fields["result"] = result_text(fields["result"])
        if "tools" in fields and isinstance(fields["tools"], list):
            fields["tools"] = [t.get("name") if isinstance(t, Mapping) else getattr(t, "name", t) for t in fields["tools"]]
        if result.metadata:
            fields["metadata"] = result.metadata  # where OpenEnv envs often put the task text
        text = json.dumps(fields, default=str, sort_keys=True)
        if self.backend.mcp and self._steps == 0:
            text += "\nTools: " + ", ".join(t["name"] for t in self._tools)
        return text

    def _payload(self, text: str) -> dict[str, Any]:
        if not self.backend.mcp:
            # Other required fields of the action get plain values of their type; the text goes in its field.
            schema = self.backend.action_schema
            required = set(schema.get("required") or ())
            filled = {k: v for k, v in arguments(schema, "valid").items() if k in required}
            return {**filled, self.text_field: text}
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("type") in ("call_tool", "list_tools"):
            return parsed
        return {"type": "call_tool", "tool_name": text.strip()[:200], "arguments": {}}

    def _step_text(self, text: str):
        payload = self._payload(text)
        result = self.backend.step(payload, self.timeout_s)
        self._steps += 1
        self._last = text
        info: dict[str, Any] = {"metadata": result.metadata}
        reward = result.reward
        if reward is None:
            reward, info["reward_none"] = 0.0, True
        tool = tool_info(payload, result)
        if tool is not None:
            info["tool"] = tool
        success = self._success(result)
        if success is not None:
            info["success"] = success
        terminated = truncated = False
        if result.done:
            truncated = at_limit(result.metadata)
            terminated = not truncated
        elif self._steps >= self.max_steps:
            truncated = True  # the adapter's own cap: the env would have gone on
        self._obs = self._render(result)
        if terminated or truncated:
            self.backend.end_episode()
        return self._obs, float(reward), terminated, truncated, info

    def _success(self, result: Result) -> bool | None:
        for source in (result.metadata, result.fields):
            for key in self.success_keys:
                if isinstance(source.get(key), bool):
                    return bool(source[key])
        return None

    # -- the catalogue ---------------------------------------------------------------------------
    def _call(self, tool: Mapping[str, Any], kind: str) -> str:
        return json.dumps({"type": "call_tool", "tool_name": tool["name"],
                           "arguments": arguments(tool["input_schema"], kind)}, sort_keys=True)

    def _strategies(self) -> list[Strategy]:
        if self.backend.mcp:
            # Calls rotate over the tools turn by turn, so an episode of one label reaches every tool.
            tools, turn = self._tools, self._steps
            calls = [self._call(tools[(turn + k) % len(tools)], "valid") for k in range(3)]
            texts = {
                "call_1": calls[0], "call_2": calls[1], "call_3": calls[2],
                "failing_call": self._call(tools[turn % len(tools)], "edge"),
                "malformed_call": self._call(tools[turn % len(tools)], "wrong"),
                "unknown_tool": json.dumps({"type": "call_tool", "tool_name": UNKNOWN_TOOL, "arguments": {}}),
                "repeat_last": self._last if self._last is not None else calls[0],
                "list_tools": json.dumps({"type": "list_tools"}),
            }
        else:
            texts = {
                "answer_short": SHORT, "answer_long": LONG, "hedge": HEDGE, "empty": "",
                "echo_prompt": self._obs[:ECHO_CHARS],
                "repeat_last": self._last if self._last is not None else SHORT, "give_up": FORFEIT,
            }
        return [Strategy(label, texts[label]) for label in self.action_labels]

    def close(self) -> None:
        self.backend.close()
        super().close()
