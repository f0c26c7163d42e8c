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
