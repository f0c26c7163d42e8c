"""OpenEnv end to end: the env ``openenv init`` scaffolds, in process and behind a real server.

openenv 0.10.0's fastmcp needs mcp<2, which the main venv's verifiers pins away from, so this
module runs in the second venv (``scripts/setup --alt-only``; ``.ci/run`` runs it there) and
skips where openenv is not installed.

The echo env of ``openenv init echo_env`` (the package's own template, the env every OpenEnv
project starts from): ``step(EchoAction(message=...))`` echoes the message with reward
``min(0.1 * len(message), 1.0)`` and never sets ``done``; there is no success signal. So every
episode runs to the adapter's step cap (truncated: outcome timeout) and earns 0.1 per character
up to 1 per step: ``answer_long`` (over 10 characters) earns 1 per step, ``answer_short`` ("42")
0.2, ``empty`` 0.

The MCP mapping runs on ``tests/fixtures/openenv_envs.py`` (OpenEnv ships no MCP env that runs
offline), through OpenEnv's own ``MCPEnvironment`` call path.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openenv")

from envaudit.adapters import resolve_adapter  # noqa: E402
from envaudit.adapters.openenv import OpenEnvEnv, make  # noqa: E402
from envaudit.adapters.openenv_server import make as make_remote  # noqa: E402
from envaudit.errors import UsageError  # noqa: E402
from envaudit.rollout import Runner, SequencePolicy  # noqa: E402
from envaudit.scan import run_scan  # noqa: E402

ECHO = "echo_env.server.echo_env_environment:EchoEnvironment"
MCP = "tests.fixtures.openenv_envs:ArithmeticToolEnvironment"
CAP = 5
SEEDS = [0, 1, 2]
PROBES = ["api", "replay", "length", "intent"]
TIMEOUT_S = 2.0
"""The tool timeout the MCP tests pass: far below slow_lookup's sleep, far above what an ordinary
call takes even on a loaded machine (a failing call logs a traceback before it returns)."""


@pytest.fixture(scope="module")
def echo_root(tmp_path_factory):
    """``openenv init echo_env`` into a temporary folder, importable as ``echo_env``."""
    import openenv.cli.commands.init as init_cmd

    root = tmp_path_factory.mktemp("openenv")
    # init ends by running `uv lock`, which needs the network; the env's files are written before.
    original, init_cmd._generate_uv_lock = init_cmd._generate_uv_lock, lambda env_dir: False
    try:
        init_cmd.init("echo_env", output_dir=str(root))
    finally:
        init_cmd._generate_uv_lock = original
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))
    for name in [m for m in sys.modules if m == "echo_env" or m.startswith("echo_env.")]:
        del sys.modules[name]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(app: list[str], cwd):
    """Start ``uvicorn APP`` on a free local port; yields its URL once ``/schema`` answers."""
    port = _free_port()
    # A graceful shutdown waits for open WebSockets; a test's server need not outlive its module.
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", *app, "--host", "127.0.0.1", "--port", str(port),
                             "--timeout-graceful-shutdown", "5"],
                            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):  # up to 60 s for the server's imports on a loaded machine
        if proc.poll() is not None:
            raise RuntimeError(f"the OpenEnv server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            urllib.request.urlopen(url + "/schema", timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("the OpenEnv server did not answer /schema within 60 s")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # still shutting down on a loaded machine: end it
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def echo_server(echo_root):
    """The same echo env behind OpenEnv's own server (the scaffold's ``server/app.py``)."""
    yield from _serve(["echo_env.server.app:app"], echo_root)


@pytest.fixture(scope="module")
def mcp_server():
    yield from _serve(["--factory", "tests.fixtures.openenv_envs:make_app"], Path(__file__).parents[2])


def _run(make_env, labels, seeds=SEEDS):
    env = make_env()
    actions = [env.action_labels.index(label) for label in labels]
    env.close()
    return Runner(make_env).run(SequencePolicy(actions, name="+".join(labels)), seeds,
                                rng=np.random.default_rng(0)).records


def _check_echo_mapping(make_env):
    for label, per_step in (("answer_long", 1.0), ("answer_short", 0.2), ("empty", 0.0)):
        eps = _run(make_env, [label]).episodes
        # The echo env never ends an episode: the adapter's cap truncates it (a timeout).
        assert (eps["end_reason"] == "truncated").all() and (eps["outcome"] == "timeout").all()
        assert (eps["length"] == CAP).all()
        assert eps["return"].to_numpy() == pytest.approx(np.full(len(SEEDS), CAP * per_step))
        assert eps["success"].isna().all()  # no correctness signal: no success flag


def test_echo_env_in_process_mapping(echo_root):
    _check_echo_mapping(lambda: make(ECHO, max_steps=CAP))
    env = make(ECHO, max_steps=CAP)
    obs, _ = env.reset(seed=0)
    assert env.text_field == "message" and env.adapter_info["kind"] == "text"
    assert "echo_env environment ready" in obs.lower() or "ready" in obs
    _, reward, *_ = env.step("hello")  # a model's own text goes into the message field as written
    assert reward == pytest.approx(0.5)


def test_echo_env_over_the_server_maps_the_same(echo_server):
    _check_echo_mapping(lambda: make_remote("//" + echo_server.split("//", 1)[1], max_steps=CAP))


def test_targets_resolve_and_bad_ones_are_usage_errors(echo_root, echo_server):
    env_id, factory = resolve_adapter("openenv:" + ECHO, {"max_steps": CAP})
    assert isinstance(factory(), OpenEnvEnv)
    _, remote = resolve_adapter("openenv+" + echo_server)
    assert remote().adapter_info["kind"] == "text"
    with pytest.raises(UsageError, match="has no 'Nope'"):
        resolve_adapter("openenv:echo_env.server.echo_env_environment:Nope")
    with pytest.raises(UsageError, match="expected openenv:MODULE:CLASS"):
        resolve_adapter("openenv:echo_env")
    with pytest.raises(UsageError, match="max_steps"):
        resolve_adapter("openenv:" + ECHO, {"max_steps": 0})
    with pytest.raises(UsageError, match="no OpenEnv server answered"):
        resolve_adapter(f"openenv+http://127.0.0.1:{_free_port()}")


def _echo_scan(make_env):
    return run_scan(make_env, env_id="openenv:echo", quick=True, seed=0, probes=PROBES)


def test_quick_scan_in_process_and_over_the_server_agree(echo_root, echo_server):
    local = _echo_scan(lambda: make(ECHO, max_steps=CAP))
    remote = _echo_scan(lambda: make_remote("//" + echo_server.split("//", 1)[1], max_steps=CAP))
    found = {(f.code, f.severity.name.lower()) for f in local.findings}
    assert found == {(f.code, f.severity.name.lower()) for f in remote.findings}
    assert local.fingerprint["adapter"]["ecosystem"] == "openenv"
    # Verified by hand from the scaffold's source: step() never sets done and its reward depends
    # on the message alone. So every episode is cut by the step cap (the length probe can only say
    # so), there is no success flag (reward-without-success says the scan cannot tell earned
    # reward from any other), and the same seed and actions replay exactly (no non-replayable).
    assert set(local.records.episodes["outcome"]) == {"timeout"}
    assert found == {("length-bias", "info"), ("reward-without-success", "info")}, local.findings
    assert "truncated" in next(f.summary for f in local.findings if f.code == "length-bias")


# -- MCP tool calls -----------------------------------------------------------------------------
def _mcp(**options):
    return make(MCP, timeout_s=TIMEOUT_S, max_steps=8, **options)


def test_mcp_tool_statuses_come_from_openenvs_error_types():
    env = _mcp()
    assert env.adapter_info["tools"] == ["add", "divide", "slow_lookup", "submit"]
    env.reset(seed=0)
    # Valid calls rotate over the tools (turn t starts at tool t), failing and malformed calls hit
    # tool t: so turn by turn this reaches add, divide(0, 0), slow_lookup, submit("not a number").
    plan = [("call_1", "add", "ok", None),
            ("failing_call", "divide", "error", "execution_error"),  # ZeroDivisionError in the tool
            ("call_1", "slow_lookup", "timeout", "timeout"),  # sleeps 60 s; timeout_s is 2
            ("malformed_call", "submit", "error", "execution_error"),  # FastMCP rejects the argument type
            ("unknown_tool", "envaudit_no_such_tool", "error", "tool_not_found"),
            ("list_tools", "list_tools", "ok", None),
            ("repeat_last", "list_tools", "ok", None)]
    for label, tool, status, error_type in plan:
        _, reward, terminated, truncated, info = env.step(env.action_labels.index(label))
        assert (info["tool"]["name"], info["tool"]["status"]) == (tool, status), label
        assert (info["tool"].get("error") or "").startswith(error_type or ""), label
        if tool == "slow_lookup":  # the adapter's timeout_s reached the env's step (OpenEnv's default is 30 s)
            assert info["tool"]["error"] == f"timeout: Tool 'slow_lookup' timed out after {TIMEOUT_S} seconds"
        assert reward == 0.0 and not terminated and not truncated
        if label not in ("list_tools", "repeat_last"):
            assert info.get("reward_none") is True  # OpenEnv leaves reward None on tool calls
    # The step cap (8) truncates an episode that never submits.
    _, _, terminated, truncated, _ = env.step(env.action_labels.index("list_tools"))
    assert (terminated, truncated) == (False, True)


def test_mcp_submit_maps_the_envs_correctness_flag():
    env = _mcp()
    env.reset(seed=3)
    base = env.backend.env
    right = json.dumps({"type": "call_tool", "tool_name": "submit", "arguments": {"answer": base.a + base.b}})
    _, reward, terminated, truncated, info = env.step(right)
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    env.reset(seed=3)
    wrong = json.dumps({"type": "call_tool", "tool_name": "submit", "arguments": {"answer": -1}})
    _, reward, terminated, _, info = env.step(wrong)
    assert (reward, terminated, info["success"]) == (0.0, True, False)
    env.reset(seed=3)
    _, _, _, _, info = env.step("just some prose")  # not a tool call: OpenEnv's tool_not_found
    assert info["tool"]["status"] == "error" and "tool_not_found" in info["tool"]["error"]


def test_mcp_over_the_server_maps_the_wire_format(mcp_server):
    env = make_remote("//" + mcp_server.split("//", 1)[1], max_steps=8)
    assert env.adapter_info["kind"] == "mcp" and env.adapter_info["tools"] == ["add", "divide", "slow_lookup", "submit"]
    env.reset(seed=3)
    # On the wire error and result are JSON: the same statuses as in process (no timeout here:
    # OpenEnv's WebSocket step carries no timeout_s, and the server's 30 s default is not waited out).
    for label, tool, status in (("call_1", "add", "ok"), ("failing_call", "divide", "error"),
                                ("unknown_tool", "envaudit_no_such_tool", "error")):
        _, reward, terminated, _, info = env.step(env.action_labels.index(label))
        assert (info["tool"]["name"], info["tool"]["status"], reward, terminated) == (tool, status, 0.0, False)
    task = json.loads(env.prompt.split("\n")[0])["metadata"]["task"]  # "What is A + B?"
    a, b = (int(x) for x in task.removeprefix("What is ").removesuffix("?").split(" + "))
    right = json.dumps({"type": "call_tool", "tool_name": "submit", "arguments": {"answer": a + b}})
    _, reward, terminated, truncated, info = env.step(right)
    assert (reward, terminated, truncated, info["success"], info["tool"]["status"]) == (1.0, True, False, True, "ok")
    env.close()
