"""The OpenEnv adapter's in-process parts, one at a time (openenv 0.10.0, run in ``.venv-alt``):
resolving ``openenv:MODULE:CLASS``, the backend around OpenEnv's ``Environment`` (options, reset and
step results, the MCP actions, close), and the text field of an action model.

The env is ``tests/fixtures/openenv_envs.py``'s ``ArithmeticToolEnvironment`` (OpenEnv's own
``MCPEnvironment``, read in that file): reset asks for ``a + b`` in ``metadata["task"]`` with reward
None; a call leaves reward None; ``submit`` ends the episode, reward 1.0 and ``correct`` true for
the right sum. Every message asserted is the adapter's contract: it names the fix.
"""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("openenv")

from envaudit.adapters import openenv as O  # noqa: E402
from envaudit.errors import UsageError  # noqa: E402

MCP = "tests.fixtures.openenv_envs:ArithmeticToolEnvironment"


def _usage(target: str, **options) -> str:
    with pytest.raises(UsageError) as caught:
        O.check(target, **options)
    return str(caught.value)


@pytest.mark.parametrize("target", ["echo_env", ":Env", "echo_env:", ""])
def test_a_target_must_name_a_module_and_a_class(target):
    assert _usage(target) == (f"openenv:{target!r}: expected openenv:MODULE:CLASS, e.g. "
                              "openenv:echo_env.server.echo_env_environment:EchoEnvEnvironment")


def test_each_way_a_target_can_miss_is_named():
    assert _usage("no_such_pkg_xyz.env:Env") == (
        "openenv:no_such_pkg_xyz.env:Env: cannot import 'no_such_pkg_xyz.env' (No module named 'no_such_pkg_xyz'); "
        "run the scan from the folder that holds the env's package or install it")
    assert _usage("tests.fixtures.openenv_envs:Nope") == \
        "openenv:tests.fixtures.openenv_envs:Nope: module 'tests.fixtures.openenv_envs' has no 'Nope'"
    assert _usage("tests.fixtures.openenv_envs:make_app") == \
        "openenv:tests.fixtures.openenv_envs:make_app: make_app is not an openenv Environment subclass"
    assert _usage("json:JSONDecoder") == "openenv:json:JSONDecoder: JSONDecoder is not an openenv Environment subclass"
    assert O.check(MCP) is None


def test_an_env_scaffolded_in_the_working_folder_is_found_there(tmp_path, monkeypatch):
    package = tmp_path / "my_env_pkg_xyz"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from tests.fixtures.openenv_envs import ArithmeticToolEnvironment as Env\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    try:
        assert O.check("my_env_pkg_xyz:Env") is None
        assert str(tmp_path) in sys.path
    finally:
        sys.modules.pop("my_env_pkg_xyz", None)


def test_without_the_package_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openenv.core.env_server", None)
    assert _usage(MCP) == ("the openenv adapter needs the 'openenv' package, which is not installed; "
                           "install it with: pip install 'envaudit-rl[openenv]'")


def test_the_backend_maps_openenvs_observations():
    from tests.fixtures.openenv_envs import ArithmeticToolEnvironment

    with pytest.raises(UsageError, match=r"^ArithmeticToolEnvironment rejected the options \{'top': 3\}: .*'top'"):
        O.InProcess(ArithmeticToolEnvironment, {"top": 3})
    backend = O.InProcess(ArithmeticToolEnvironment, {"low": 2, "high": 2})
    assert backend.mcp is True and backend.description == "tests.fixtures.openenv_envs.ArithmeticToolEnvironment"
    first = backend.reset(seed=0, episode_id="e0")
    assert first == O.Result({}, None, False, {"task": "What is 2 + 2?"})
    assert backend.env.state.episode_id == "e0"
    call = backend.step({"type": "call_tool", "tool_name": "add", "arguments": {"a": 2, "b": 3}}, None)
    assert call.reward is None and call.done is False and O.result_text(call.fields["result"]) == "5"
    assert call.fields["tool_name"] == "add" and call.fields["error"] is None
    done = backend.step({"type": "call_tool", "tool_name": "submit", "arguments": {"answer": 4}}, 5.0)
    assert (done.reward, done.done, done.metadata["correct"]) == (1.0, True, True)
    assert isinstance(done.reward, float)
    assert [t["name"] for t in backend.tools()] == ["add", "divide", "slow_lookup", "submit"]
    assert backend.tools()[0]["input_schema"]["required"] == ["a", "b"]
    closed = []
    backend.env.close = lambda: closed.append(True)
    backend.close()
    assert closed == [True]


def test_the_backend_passes_the_seed_and_make_names_the_target_and_options():
    import random

    from tests.fixtures.openenv_envs import ArithmeticToolEnvironment

    backend = O.InProcess(ArithmeticToolEnvironment, {})
    for seed in (3, 4):
        rng = random.Random(seed)  # the fixture draws a and b from the reset seed
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        assert backend.reset(seed=seed, episode_id="e").metadata == {"task": f"What is {a} + {b}?"}
    env = O.make(MCP, low=2, high=2, max_steps=3)
    try:
        info = env.adapter_info
        assert (info["target"], info["options"], info["max_steps"]) == (f"openenv:{MCP}", {"low": "2", "high": "2"}, 3)
        obs, _ = env.reset(seed=0)
        assert "What is 2 + 2?" in obs
    finally:
        env.close()


def test_the_action_model_of_an_mcp_env_is_openenvs_call_tool_action():
    from openenv.core.env_server.mcp_types import CallToolAction

    from tests.fixtures.openenv_envs import ArithmeticToolEnvironment

    assert O.action_class_of(ArithmeticToolEnvironment) is CallToolAction
    with pytest.raises(UsageError, match=r"cannot tell the Action model of .*: annotate step"):
        from openenv.core.env_server.interfaces import Environment

        class Bare(Environment):
            def reset(self, seed=None, episode_id=None, **kwargs):
                return None

            def step(self, action, timeout_s=None, **kwargs):
                return None

            @property
            def state(self):
                return None

        O.action_class_of(Bare)


def test_the_action_model_of_a_text_env_is_its_type_parameter_or_steps_annotation():
    """``Environment[Act, Obs, State]`` names the action model (through a subclass of a subclass too);
    without one, ``step``'s annotation does; a type parameter that is no Action is passed over."""
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Observation, State

    from tests.fixtures.openenv_envs import Annotated, Generic, Say, Shout, StateOnly

    class Deeper(Generic):
        pass

    assert O.action_class_of(Generic) is Say and O.action_class_of(Deeper) is Say
    assert O.action_class_of(Annotated) is Shout

    class Plain(StateOnly, Environment[int, Observation, State]):  # a parameter that is no Action
        step = Generic.step

    with pytest.raises(UsageError) as caught:
        O.action_class_of(Plain)
    assert str(caught.value) == ("cannot tell the Action model of test_the_action_model_of_a_text_env_is_its_type_"
                                 "parameter_or_steps_annotation.<locals>.Plain: annotate step(self, action: MyAction) "
                                 "or subclass Environment[MyAction, MyObservation, State]")


def _call(tool: str, arguments: dict) -> str:
    return json.dumps({"arguments": arguments, "tool_name": tool, "type": "call_tool"}, sort_keys=True)


def test_the_mcp_catalogue_rotates_over_the_tools_turn_by_turn():
    """The fixture's tools, in listed order: add(a, b), divide(a, b), slow_lookup(key), submit(answer).
    At turn t the three valid calls start at tool t (wrapping round); the failing call (edge values:
    zeros) and the malformed one (a string for each integer) hit tool t; repeat_last is the last
    action played, before any the first valid call. Arguments from ``arguments(schema, kind)``."""
    env = O.make(MCP, low=2, high=2, max_steps=6)
    try:
        env.reset(seed=0)
        first = env.candidates()
        assert [first[f"call_{k}"] for k in (1, 2, 3)] == [
            _call("add", {"a": 1, "b": 1}), _call("divide", {"a": 1, "b": 1}), _call("slow_lookup", {"key": "test"})]
        assert first["failing_call"] == _call("add", {"a": 0, "b": 0})
        assert first["malformed_call"] == _call("add", {"a": "not a number", "b": "not a number"})
        assert first["repeat_last"] == first["call_1"] and first["list_tools"] == '{"type": "list_tools"}'
        assert first["unknown_tool"] == '{"type": "call_tool", "tool_name": "envaudit_no_such_tool", "arguments": {}}'
        for _ in range(3):
            env.step(env.action_labels.index("list_tools"))
        third = env.candidates()
        assert [third[f"call_{k}"] for k in (1, 2, 3)] == [
            _call("submit", {"answer": 1}), _call("add", {"a": 1, "b": 1}), _call("divide", {"a": 1, "b": 1})]
        assert third["failing_call"] == _call("submit", {"answer": 0}) and third["repeat_last"] == first["list_tools"]
    finally:
        env.close()


def test_the_text_field_is_named_or_chosen_and_a_wrong_name_lists_the_fields():
    schema = {"title": "Move", "required": ["text"], "properties": {
        "metadata": {"type": "string"}, "note": {"type": "string"}, "text": {"type": "string"}, "n": {"type": "integer"}}}
    assert O.text_field_of(schema) == "text"  # required first
    assert O.text_field_of({**schema, "required": []}) == "note"  # else the first string, never metadata
    assert O.text_field_of(schema, "n") == "n"
    with pytest.raises(UsageError) as caught:
        O.text_field_of(schema, "body")
    assert str(caught.value) == "--env-arg text_field='body': the action has no such field (it has metadata, n, note, text)"
    with pytest.raises(UsageError) as caught:
        O.text_field_of({"title": "Nums", "properties": {"n": {"type": "integer"}, "metadata": {"type": "string"}}})
    assert str(caught.value) == ("the env's action Nums has no string field (metadata, n): the adapter drives text "
                                 "and MCP tool actions; name one with --env-arg text_field=NAME")
    with pytest.raises(UsageError, match=r"has no such field \(it has none\)"):
        O.text_field_of({}, "x")
    with pytest.raises(UsageError, match=r"the env's action model has no string field \(no fields\)"):
        O.text_field_of({})
