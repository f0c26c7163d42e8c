"""The OpenEnv server adapter's parts that need no running env server (openenv 0.10.0, in
``.venv-alt``): the target's URL, the schema fetch (from a throwaway local HTTP server), how a
step's wire result becomes a ``Result``, and the usage errors. The end-to-end runs against OpenEnv's
own server are in ``test_openenv.py``."""

from __future__ import annotations

import http.server
import json
import sys
import threading
from types import SimpleNamespace

import pytest

pytest.importorskip("openenv")

from envaudit.adapters import openenv_server as S  # noqa: E402
from envaudit.adapters.openenv import Result  # noqa: E402
from envaudit.errors import UsageError  # noqa: E402


@pytest.mark.parametrize("name, url", [("//127.0.0.1:8000", "http://127.0.0.1:8000"),
                                       ("//127.0.0.1:8000/", "http://127.0.0.1:8000"),
                                       ("//localhost:9///", "http://localhost:9"),
                                       ("127.0.0.1:8000", "http://127.0.0.1:8000")])
def test_the_target_is_a_host_and_port(name, url):
    assert S.url_of(name) == url


@pytest.mark.parametrize("name", ["//", "", "//host:1/path", "/host:1/", "//host:1/a/"])
def test_anything_more_or_less_is_a_usage_error(name):
    with pytest.raises(UsageError) as caught:
        S.url_of(name)
    assert str(caught.value) == (f"openenv+http:{name!r}: expected openenv+http://HOST:PORT, "
                                 "e.g. openenv+http://127.0.0.1:8000")


@pytest.fixture
def schema_server():
    """A local HTTP server answering ``/schema`` with a UTF-8 JSON body (OpenEnv's server's route)."""
    body = json.dumps({"action": {"title": "Échange", "properties": {"message": {"type": "string"}}}},
                      ensure_ascii=False).encode("utf-8")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/schema" else 404)
            self.end_headers()
            self.wfile.write(body if self.path == "/schema" else b"")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_schema_is_read_from_the_server(schema_server):
    assert S.fetch_schema(schema_server) == {"action": {"title": "Échange",
                                                        "properties": {"message": {"type": "string"}}}}


def test_no_server_is_a_usage_error_saying_how_to_start_one():
    with pytest.raises(UsageError) as caught:
        S.fetch_schema("http://127.0.0.1:9")
    message = str(caught.value)
    assert message.startswith("no OpenEnv server answered at http://127.0.0.1:9/schema (")
    assert message.endswith("); start it first, e.g. `uvicorn my_env.server.app:app --port 8000` in the env's folder")
    with pytest.raises(UsageError, match="no OpenEnv server answered at http://127.0.0.1:9/schema"):
        S.check("//127.0.0.1:9")


def test_a_wire_step_becomes_a_result():
    step = SimpleNamespace(observation={"echoed": "hi", "metadata": {"len": 2}}, metadata=None, reward=1, done=0)
    assert S._result(step) == Result({"echoed": "hi"}, 1.0, False, {"len": 2})
    own = SimpleNamespace(observation={"echoed": "hi", "metadata": {"len": 2}}, metadata={"kept": True},
                          reward=None, done=True)
    assert S._result(own) == Result({"echoed": "hi"}, None, True, {"kept": True})  # the step's own wins
    bare = SimpleNamespace(observation=None, metadata=None, reward=0.5, done=False)
    assert S._result(bare) == Result({}, 0.5, False, {})
    assert isinstance(S._result(step).reward, float)


def test_a_step_before_any_reset_names_the_closed_session():
    remote = S.Remote.__new__(S.Remote)  # no server: the session is not open
    remote._client = None
    with pytest.raises(RuntimeError) as caught:
        remote.step({"message": "hi"}, None)
    assert str(caught.value) == "step() before reset(): the episode's WebSocket session is closed"


def test_constructor_options_belong_to_the_server_and_the_package_is_named(monkeypatch):
    with pytest.raises(UsageError) as caught:
        S.make("//127.0.0.1:9", low=2, max_steps=3)
    assert str(caught.value) == ("openenv+http://127.0.0.1:9: the options ['low'] would go to the env's constructor, "
                                 "which runs on the server; start the server with them instead")
    monkeypatch.setitem(sys.modules, "openenv.core.generic_client", None)
    with pytest.raises(UsageError) as caught:
        S.check("//127.0.0.1:9")
    assert str(caught.value) == ("the openenv adapter needs the 'openenv' package, which is not installed; "
                                 "install it with: pip install 'envaudit-rl[openenv]'")


class _Client:
    """A stand-in for OpenEnv's sync ``GenericEnvClient``: it answers ``reset`` after ``busy`` refusals
    with OpenEnv's capacity error, and records what it was sent."""

    def __init__(self, busy: int = 0, error: str = "", tools=None):
        self.busy, self.error, self.tools, self.sent, self.closed = busy, error, tools, [], False

    def reset(self, seed=None, episode_id=None):
        self.sent.append(("reset", seed, episode_id))
        if self.error:
            raise RuntimeError(self.error)
        if self.busy:
            self.busy -= 1
            raise RuntimeError("Server error: no session available (code: CAPACITY_REACHED)")
        return SimpleNamespace(observation={"task": "What is 2 + 2?"}, metadata=None, reward=None, done=False)

    def step(self, payload):
        self.sent.append(("step", payload))
        if self.tools is None:
            raise RuntimeError("Server error: Invalid message (code: VALIDATION_ERROR)")
        return SimpleNamespace(observation={"tools": self.tools}, metadata=None, reward=None, done=False)

    def close(self):
        self.closed = True


def _remote(client: _Client, monkeypatch) -> S.Remote:
    remote = S.Remote.__new__(S.Remote)
    remote._client = None
    opened = []

    def open_session():
        opened.append(True)
        remote._client = client
        return client

    monkeypatch.setattr(remote, "_open", open_session)
    monkeypatch.setattr(S.time, "sleep", lambda s: opened.append(("slept", s)))
    remote.opened = opened
    return remote


def test_a_reset_sends_the_seed_and_waits_out_a_server_at_capacity(monkeypatch):
    client = _Client(busy=2)
    remote = _remote(client, monkeypatch)
    assert remote.reset(7, "e-1") == Result({"task": "What is 2 + 2?"}, None, False, {})
    assert client.sent == [("reset", 7, "e-1")] * 3
    assert remote.opened == [True, ("slept", S.CAPACITY_WAIT_S), True, ("slept", S.CAPACITY_WAIT_S), True]
    hopeless = _Client(busy=S.CAPACITY_RETRIES + 5)
    with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):  # after the retries, the server's own error
        _remote(hopeless, monkeypatch).reset(None, "e-2")
    assert len(hopeless.sent) == S.CAPACITY_RETRIES + 1
    broken = _Client(error="Server error: boom (code: EXECUTION_ERROR)")
    with pytest.raises(RuntimeError, match="boom"):  # any other error at once
        _remote(broken, monkeypatch).reset(None, "e-3")
    assert len(broken.sent) == 1


def test_the_servers_tools_are_listed_in_a_session_of_their_own(monkeypatch):
    listed = [{"name": "add", "inputSchema": {"required": ["a"]}}, {"name": "submit", "input_schema": {"x": 1}},
              {"name": "", "input_schema": {}}, {"description": "no name"}, "junk"]
    client = _Client(tools=listed)
    remote = _remote(client, monkeypatch)
    assert remote._list_tools() == [{"name": "add", "input_schema": {"required": ["a"]}},
                                    {"name": "submit", "input_schema": {"x": 1}}]
    assert client.sent == [("reset", None, "envaudit-list-tools"), ("step", {"type": "list_tools"})]
    assert client.closed and remote._client is None  # the listing's session is closed after it
    plain = _Client(tools=None)  # a text env's server refuses MCP's list action: no tools
    assert _remote(plain, monkeypatch)._list_tools() == []
    odd = _Client(error="Server error: down (code: INTERNAL)")
    with pytest.raises(RuntimeError, match="down"):
        _remote(odd, monkeypatch)._list_tools()
