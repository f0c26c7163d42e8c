"""The bridge that turns a verifiers rollout (control inverted) into steps envaudit drives.

verifiers 0.4 drives the agent: ``Env.run_episode(task, ctx)`` runs ``Env.run(task, agents)``,
whose agents run a *harness* program that reaches the model through verifiers' interception
server, which asks a ``Client`` for each completion. The bridge sits at both ends:

- ``BridgeHarness`` is an in-process chat loop (verifiers' own contract: "a harness may run its
  loop in-process ... as long as every model call goes through ``endpoint`` + ``secret``"), so the
  trace, the turn limits, ``@stop`` hooks and scoring are verifiers' own. It runs the task's MCP
  tools itself and reports each call's status (ok / error / timeout) to the bridge.
- ``BridgeClient`` answers each completion with the next envaudit action: it hands the request
  to ``step()``'s caller and blocks until ``step(action)`` supplies the reply.

The rollout runs on the bridge's own event loop, driven by the thread that calls the env: each
``reset``/``step`` runs the loop until the rollout asks for the next completion or finishes
(``EpisodeBridge.next_event``), and between two calls the loop is idle, as the rollout is waiting on
the action anyway. So verifiers' scoring runs on the thread that steps the env -- the main thread of
a worker process under the process executor -- where graders that bound their work with
``signal.alarm`` (math-verify's ``parse``, and so verifiers' ``verify_boxed_math_answer``) work:
on another thread they raise, and verifiers' grader scores the correct answer 0. This module
imports verifiers at the top: only ``envaudit.adapters.verifiers``
imports it, after checking that the package is installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import sys
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import verifiers.v1 as vf
from verifiers.v1.configs.agent import agent_config_fields
from verifiers.v1.interception import InterceptionServer, InterceptionServerConfig
from verifiers.v1.runtimes import ProgramResult, SubprocessConfig

HARNESS_ID = "envaudit_verifiers_bridge"
"""The id verifiers' plugin loader resolves to this module (registered in ``sys.modules`` under
it: the loader probes ``verifiers.v1.harnesses.<id>`` first, which a dotted id would break)."""
BRIDGE_KEY = "ENVAUDIT_BRIDGE"
MODEL = "envaudit-bridge"
CLIENT = vf.EvalClientConfig(base_url="http://envaudit.invalid/v1")
"""Never contacted: the bridge's own client answers every completion in process."""
TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
"""A tool call written as text, the way chat models without native tool calling write one:
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""
NO_TIMEOUT = 10**9
"""Seconds: stands in for "no deadline" where verifiers falls back to a task's own deadline
when the agent's is unset (see ``patched_config``)."""

_BRIDGES: weakref.WeakValueDictionary[str, EpisodeBridge] = weakref.WeakValueDictionary()
_IDS = itertools.count()


# -- the model side ------------------------------------------------------------------------
@dataclass
class Request:
    """One model request the env made: the conversation so far and the tools it offers."""

    messages: list[Any]
    tools: list[dict[str, Any]]
    tool_statuses: list[dict[str, Any]] = field(default_factory=list)
    """The statuses of the tool calls the harness ran since the previous request."""


@dataclass
class Finished:
    episode: Any = None
    error: BaseException | None = None


def split_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The prose of a reply and the tool calls it writes as ``<tool_call>`` blocks. A block that
    is not a JSON object with a ``name`` is still a call (named ``?``), with its raw text as the
    arguments: the harness then answers it with a malformed-call error, as a chat harness would."""
    calls = []
    for i, block in enumerate(TOOL_CALL.findall(text)):
        try:
            parsed = json.loads(block)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("name"), str):
            args = parsed.get("arguments", {})
            arguments = args if isinstance(args, str) else json.dumps(args)
            name = parsed["name"]
        else:
            name, arguments = "?", block.strip()
        calls.append({"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}})
    return TOOL_CALL.sub("", text).strip() if calls else text, calls


class BridgeClient(vf.Client):
    """A verifiers ``Client`` whose completions are envaudit's actions."""

    def __init__(self, bridge: EpisodeBridge) -> None:
        self._bridge = weakref.ref(bridge)
        self._ids = itertools.count()

    async def get_response(self, dialect, body, sampling, session_id=None, turn=None, headers=None):
        bridge = self._bridge()
        if bridge is None:
            raise RuntimeError("the envaudit bridge of this rollout is gone")
        request = dialect.parse_request(body)
        text = await bridge.ask(Request(list(request.messages), list(body.get("tools") or []),
                                        bridge.take_tool_statuses()))
        content, calls = split_tool_calls(text)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        raw = {"id": f"envaudit-{next(self._ids)}", "object": "chat.completion", "created": 0,
               "model": str(body.get("model", MODEL)),
               "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
               "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}
        response = dialect.parse_response(dialect.validate_response(raw))
        response.raw = raw
        return response


# -- the harness side ----------------------------------------------------------------------
class BridgeHarnessConfig(vf.HarnessConfig):
    pass


class BridgeHarness(vf.Harness[BridgeHarnessConfig]):
    """An in-process chat loop: ask the model (the bridge), run its tool calls, until a reply
    without tool calls. Resumable (multi-turn envs relaunch it on the conversation)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_MCP = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):
        bridge = _BRIDGES.get(self.config.env.get(BRIDGE_KEY, ""))
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt:
            from verifiers.v1.dialects.chat import message_to_wire

            messages.extend(message_to_wire(m) for m in prompt)
        async with contextlib.AsyncExitStack() as stack:
            tools, dispatch, servers = [], {}, {}
            if mcp_urls:
                from verifiers.v1.harnesses.utils.mcp import connect_mcp

                spec = {"mcpServers": {n: {"url": u, "timeout": self.config.tool_timeout} for n, u in mcp_urls.items()}}
                tools, dispatch, servers = await connect_mcp(spec, stack)
            # One loopback client per bridge: building one per launch loads a CA bundle each time.
            http = bridge.http if bridge is not None else await stack.enter_async_context(httpx.AsyncClient(timeout=None))
            while True:
                body: dict[str, Any] = {"model": ctx.model, "messages": messages}
                if tools:
                    body["tools"] = tools
                reply = await http.post(f"{endpoint.rstrip('/')}/chat/completions", json=body,
                                        headers={"Authorization": f"Bearer {secret}"})
                if reply.status_code >= 400:
                    # A refused turn (a limit or @stop) ends the program; verifiers records why.
                    return ProgramResult(exit_code=0 if trace.stop_condition else 1, stdout="", stderr=reply.text)
                message = reply.json()["choices"][0]["message"]
                messages.append({k: v for k, v in message.items() if v is not None})
                calls = message.get("tool_calls") or []
                if not calls:
                    return ProgramResult(exit_code=0, stdout="", stderr="")
                for call in calls:
                    content, status = await self._call(call, dispatch, servers)
                    if bridge is not None:
                        bridge.tool_statuses.append({"name": call["function"]["name"], **status})
                    messages.append({"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"],
                                     "content": content})

    async def _call(self, call, dispatch, servers) -> tuple[str, dict[str, Any]]:
        name = call["function"]["name"]
        try:
            args = json.loads(call["function"].get("arguments") or "{}")
        except json.JSONDecodeError as exc:
            return (f"error: invalid JSON in tool arguments ({exc})",
                    {"status": "error", "error": "malformed arguments"})
        if not isinstance(args, dict):
            return "error: tool arguments must be a JSON object", {"status": "error", "error": "arguments not an object"}
        if name not in dispatch:
            return f"error: unknown tool {name!r}", {"status": "error", "error": "unknown tool"}
        server, raw = dispatch[name]
        try:
            result = await asyncio.wait_for(servers[server].run(lambda client: client.call_tool(raw, args)),
                                            timeout=self.config.tool_timeout)
        except TimeoutError:
            return f"error: tool {name!r} timed out", {"status": "timeout", "error": "tool call timed out"}
        except Exception as exc:  # noqa: BLE001 - a failing tool is data for the audit
            return f"error: {exc}", {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:300]}
        from verifiers.v1.harnesses.utils.mcp import mcp_content_to_chat_content

        content = mcp_content_to_chat_content(result.content)
        text = content if isinstance(content, str) else json.dumps(content)
        if result.is_error:  # mcp's CallToolResult (``isError`` on the wire)
            return text, {"status": "error", "error": text[:300]}
        return text, {"status": "ok"}


# -- the loop the rollouts run on ----------------------------------------------------------
def patched_config(config: Any, bridge_id: str, max_turns: int | None) -> Any:
    """The env's config with every agent seat played through the bridge: the bridge harness in
    a local subprocess runtime, the bridge's model, one interception server on loopback, and no
    wall-clock deadlines (an audited episode waits on the auditor, so a seconds budget would make
    outcomes depend on machine load). ``max_turns`` (when given) caps every seat's turns.

    A seat keeps its own harness's ``tool_timeout``: how long a tool call may take is the env's
    behaviour, not the auditor's, and a call that outlasts it must reach the audit as a tool timeout,
    as it reaches the trained model (a seat without a harness has verifiers' default)."""
    updates: dict[str, Any] = {}
    for name, spec in agent_config_fields(config).items():
        own = {"tool_timeout": spec.harness.tool_timeout} if spec.harness is not None else {}
        harness = BridgeHarnessConfig(id=HARNESS_ID, env={BRIDGE_KEY: bridge_id}, **own)
        timeout = type(spec.timeout)(setup=NO_TIMEOUT, rollout=NO_TIMEOUT, finalize=NO_TIMEOUT, scoring=NO_TIMEOUT)
        seat = {"harness": harness, "runtime": SubprocessConfig(), "model": MODEL, "client": CLIENT,
                "timeout": timeout}
        if max_turns is not None:
            seat["max_turns"] = max_turns
        updates[name] = spec.model_copy(update=seat)
    updates["timeout"] = type(config.timeout)(episode=None, finalize=None)
    updates["interception"] = InterceptionServerConfig()
    updates["retries"] = type(config.retries)()
    return config.model_copy(update=updates)


class EpisodeBridge:
    """One verifiers ``Env`` served on a private event loop, one episode at a time. The loop runs
    only inside the bridge's calls, on the caller's thread (see the module's docstring)."""

    def __init__(self, build_env: Any, *, max_turns: int | None, event_cap_s: float) -> None:
        self.id = f"bridge-{next(_IDS)}"
        _BRIDGES[self.id] = self
        sys.modules.setdefault(HARNESS_ID, sys.modules[__name__])
        self.event_cap_s = event_cap_s
        self.tool_statuses: list[dict[str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self._events: asyncio.Queue = asyncio.Queue()
        self._actions: asyncio.Queue | None = None
        self._episode: Any = None
        self._closing: asyncio.Event | None = None
        self._served: Any = None
        self.client = BridgeClient(self)
        try:
            self.env = self._call(self._build(build_env, max_turns))
        except TimeoutError:
            self._stop_loop()
            raise TimeoutError(
                f"building and serving the verifiers env did not finish within {event_cap_s:g}s (the adapter's "
                "safety cap, --env-arg event_cap_s); a toolset without a url is built and launched by verifiers "
                "with uv, which needs the network: give it the url of a running server") from None
        except BaseException:
            self._stop_loop()
            raise

    # -- serving -----------------------------------------------------------------------------
    def _call(self, coro: Any, timeout: float | None = None) -> Any:
        """Run the loop on this thread until ``coro`` is done (at most ``timeout`` seconds)."""
        cap = timeout if timeout is not None else self.event_cap_s
        return self._loop.run_until_complete(asyncio.wait_for(coro, cap))

    async def _build(self, build_env: Any, max_turns: int | None) -> Any:
        env = build_env(lambda config: patched_config(config, self.id, max_turns))
        self.http = httpx.AsyncClient(timeout=None)
        ready: asyncio.Future = self._loop.create_future()
        self._closing = asyncio.Event()
        self._served = asyncio.ensure_future(self._serve(env, ready))
        await ready
        return env

    async def _serve(self, env: Any, ready: asyncio.Future) -> None:
        try:
            async with env.serving():
                server = env._interception  # noqa: SLF001
                if not isinstance(server, InterceptionServer):
                    raise RuntimeError(f"expected verifiers' InterceptionServer, got {type(server).__name__}")
                # verifiers builds one Client per client config and caches it on the server; the
                # cache is the one seam where a Client that is not an HTTP endpoint can go in.
                server.clients[CLIENT.model_dump_json()] = self.client
                ready.set_result(None)
                await self._closing.wait()
                await self.http.aclose()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                raise

    # -- episodes ----------------------------------------------------------------------------
    def begin(self, task: Any) -> None:
        """Start an episode of ``task`` (abandoning one still running); it runs from the next
        ``next_event``."""
        self.abandon()
        self._events = events = asyncio.Queue()
        self._actions = asyncio.Queue()
        self.tool_statuses = []
        ctx = vf.ModelContext(model=MODEL, client=CLIENT)
        future = self._loop.create_task(self.env.run_episode(task, ctx))
        self._episode = future

        def finished(done: asyncio.Future) -> None:
            if done.cancelled():
                events.put_nowait(Finished(error=asyncio.CancelledError()))
            elif done.exception() is not None:
                events.put_nowait(Finished(error=done.exception()))
            else:
                events.put_nowait(Finished(episode=done.result()))

        future.add_done_callback(finished)

    async def ask(self, request: Request) -> str:
        """Called on the loop by the client: hand the request over, wait for the action."""
        self._events.put_nowait(request)
        assert self._actions is not None
        return await self._actions.get()

    def take_tool_statuses(self) -> list[dict[str, Any]]:
        taken, self.tool_statuses = self.tool_statuses, []
        return taken

    def next_event(self) -> Request | Finished:
        """Run the rollout on this thread until it asks for a completion or finishes."""
        try:
            return self._call(self._events.get())
        except TimeoutError:
            raise TimeoutError(
                f"the verifiers rollout neither asked for a completion nor finished within "
                f"{self.event_cap_s:g}s (the adapter's safety cap, --env-arg event_cap_s)") from None

    def act(self, text: str) -> None:
        assert self._actions is not None
        self._actions.put_nowait(text)

    def abandon(self) -> None:
        future, self._episode = self._episode, None
        if future is not None and not future.done():
            future.cancel()
            with contextlib.suppress(Exception):
                while not isinstance(self._call(self._events.get()), Finished):
                    pass

    # -- teardown ----------------------------------------------------------------------------
    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(BaseException):
            self.abandon()
        if self._closing is not None:
            self._closing.set()
            if self._served is not None:
                with contextlib.suppress(BaseException):
                    self._call(asyncio.shield(self._served))
        self._stop_loop()

    def _stop_loop(self) -> None:
        if self._loop.is_closed():
            return
        pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            with contextlib.suppress(BaseException):
                self._loop.run_until_complete(asyncio.wait(pending, timeout=self.event_cap_s))
        with contextlib.suppress(BaseException):
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()


def task_list(env: Any, size: int) -> list[Any]:
    """The first ``size`` tasks of the env's taskset (an infinite taskset is cut there)."""
    return list(itertools.islice(iter(env.taskset), size))


def env_from_config(config: Any) -> Any:
    return vf.load_environment(config)


def rebuild(env: Any) -> Any:
    """A builder that remakes a ready ``vf.Env`` under the bridge's patched config."""
    return lambda patch: type(env)(patch(env.config))


def is_env(obj: Any) -> bool:
    return isinstance(obj, vf.Env)


def is_env_config(obj: Any) -> bool:
    return isinstance(obj, vf.EnvConfig)


def resolve_config(raw: Mapping[str, Any]) -> Any:
    return vf.resolve_env_config(dict(raw))


__all__ = ["BridgeHarness"]
"""verifiers' loader takes the one ``Harness`` subclass a plugin module exports."""
