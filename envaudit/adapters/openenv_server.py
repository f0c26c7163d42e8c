"""OpenEnv over the wire: ``envaudit scan openenv+http://HOST:PORT`` (a running OpenEnv server).

The server's ``/schema`` says what its action looks like; episodes run over OpenEnv's own
WebSocket client (``GenericEnvClient``, the session API every OpenEnv client uses: the plain HTTP
``/step`` route builds a fresh env per request, so it cannot hold an episode). Each episode is one
WebSocket session, opened at reset and closed when the episode ends: a server started with
``max_concurrent_envs=1`` (what ``openenv init`` scaffolds) serves a scan, and every episode gets a
fresh server-side env, as every OpenEnv client's session does. An MCP server is told apart by
answering a ``list_tools`` step with tools. The mapping onto the info protocol is the in-process
adapter's (``envaudit.adapters.openenv``). OpenEnv's WebSocket step carries no ``timeout_s``, so
``--env-arg timeout_s`` only applies in process; the server's own default holds here.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from envaudit.adapters import require
from envaudit.adapters.openenv import EXTRA, Backend, OpenEnvEnv, Result, split_options
from envaudit.errors import UsageError

SCHEMA_TIMEOUT_S = 10.0
"""How long the server may take to answer ``/schema`` before the target counts as unreachable."""
CAPACITY_RETRIES = 50
CAPACITY_WAIT_S = 0.1
"""A session closed at an episode's end is freed by the server a moment later; a reset that finds
the server still at capacity (``max_concurrent_envs``) waits and retries this often."""


def url_of(name: str) -> str:
    rest = name[2:] if name.startswith("//") else name
    if not rest or "/" in rest.rstrip("/"):
        raise UsageError(f"openenv+http:{name!r}: expected openenv+http://HOST:PORT, e.g. openenv+http://127.0.0.1:8000")
    return "http://" + rest.rstrip("/")


def fetch_schema(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url + "/schema", timeout=SCHEMA_TIMEOUT_S) as response:  # noqa: S310 (the user's URL)
            return json.loads(response.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise UsageError(f"no OpenEnv server answered at {url}/schema ({exc}); start it first, e.g. "
                         "`uvicorn my_env.server.app:app --port 8000` in the env's folder") from None


def _result(step: Any) -> Result:
    observation = dict(step.observation or {})
    metadata = dict(step.metadata or observation.pop("metadata", None) or {})
    observation.pop("metadata", None)
    reward = step.reward
    return Result(observation, None if reward is None else float(reward), bool(step.done), metadata)


class Remote(Backend):
    """An OpenEnv server, one WebSocket session per episode."""

    def __init__(self, url: str) -> None:
        require("openenv.core.generic_client", package="openenv", extra=EXTRA)
        self.url = url
        self.schema = fetch_schema(url)
        self.action_schema = dict(self.schema.get("action") or {})
        self.description = f"server at {url}"
        self._client: Any = None
        self._tools: list[dict[str, Any]] = self._list_tools()
        self.mcp = bool(self._tools)

    def _open(self) -> Any:
        from openenv.core.generic_client import GenericEnvClient

        self.close()
        self._client = GenericEnvClient(base_url=self.url).sync()
        self._client.connect()
        return self._client

    def _list_tools(self) -> list[dict[str, Any]]:
        """The server's MCP tools; none when its action model is not MCP's (the step is refused)."""
        try:
            self.reset(None, "envaudit-list-tools")
            listed = self._client.step({"type": "list_tools"})
        except RuntimeError as exc:  # "Server error: Invalid message (code: VALIDATION_ERROR)": not MCP
            if "VALIDATION_ERROR" not in str(exc):
                raise
            return []
        finally:
            self.close()
        tools = (listed.observation or {}).get("tools") or []
        return [{"name": t["name"], "input_schema": dict(t.get("input_schema") or t.get("inputSchema") or {})}
                for t in tools if isinstance(t, Mapping) and t.get("name")]

    def reset(self, seed: int | None, episode_id: str) -> Result:
        for _ in range(CAPACITY_RETRIES):
            try:
                return _result(self._open().reset(seed=seed, episode_id=episode_id))
            except RuntimeError as exc:
                if "CAPACITY_REACHED" not in str(exc):
                    raise
                time.sleep(CAPACITY_WAIT_S)
        return _result(self._open().reset(seed=seed, episode_id=episode_id))

    def step(self, payload: dict[str, Any], timeout_s: float | None) -> Result:
        if self._client is None:
            raise RuntimeError("step() before reset(): the episode's WebSocket session is closed")
        return _result(self._client.step(payload))

    def tools(self) -> list[dict[str, Any]]:
        return list(self._tools)

    def end_episode(self) -> None:
        self.close()

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # the server may have dropped the session already; nothing to keep
                pass


def check(name: str, **options: Any) -> None:
    require("openenv.core.generic_client", package="openenv", extra=EXTRA)
    split_options(options)
    url = url_of(name)
    fetch_schema(url)


def make(name: str, **options: Any) -> OpenEnvEnv:
    mine, rest = split_options(options)
    if rest:
        raise UsageError(f"openenv+http:{name}: the options {sorted(rest)} would go to the env's constructor, "
                         "which runs on the server; start the server with them instead")
    url = url_of(name)
    return OpenEnvEnv(Remote(url), f"openenv+{url}", **mine)
