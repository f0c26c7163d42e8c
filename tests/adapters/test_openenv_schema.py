"""The OpenEnv adapter's pure parts (no openenv needed, so these run in the main venv too): tool
arguments from a JSON schema, the text field of an action model, limits and options."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from envaudit.adapters.openenv import (
    SUCCESS_KEYS,
    Backend,
    OpenEnvEnv,
    Result,
    arguments,
    at_limit,
    result_text,
    split_options,
    text_field_of,
    tool_info,
)
from envaudit.errors import UsageError

# The input schema FastMCP writes for `def f(a: int, note: str, scale: float = 2.0, mode: Literal["x", "y"])`.
SCHEMA = {"type": "object", "required": ["a", "note", "mode"], "properties": {
    "a": {"type": "integer"}, "note": {"type": "string"}, "scale": {"type": "number", "default": 2.0},
    "mode": {"enum": ["x", "y"], "type": "string"},
    "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}}}


def test_valid_arguments_fill_what_is_required_and_leave_defaults_alone():
    assert arguments(SCHEMA, "valid") == {"a": 1, "note": "test", "mode": "x"}


def test_edge_and_wrong_arguments_keep_and_break_the_types():
    assert arguments(SCHEMA, "edge") == {"a": 0, "note": "", "scale": 0.0, "mode": "", "maybe": 0}
    wrong = arguments(SCHEMA, "wrong")
    assert isinstance(wrong["a"], str) and isinstance(wrong["note"], int) and isinstance(wrong["scale"], str)
    # A tool that takes nothing gets an argument it does not take.
    assert arguments({"type": "object", "properties": {}}, "wrong") == {"envaudit_unexpected": 12345}


def test_text_field_is_the_first_required_string():
    schema = {"title": "A", "required": ["count", "message"], "properties": {
        "metadata": {"type": "object"}, "hint": {"type": "string"}, "count": {"type": "integer"},
        "message": {"type": "string"}}}
    assert text_field_of(schema) == "message"
    assert text_field_of(schema, "hint") == "hint"
    with pytest.raises(UsageError, match="no such field"):
        text_field_of(schema, "nope")
    with pytest.raises(UsageError, match="no string field"):
        text_field_of({"title": "B", "properties": {"x": {"type": "integer"}}})


def test_a_limit_named_by_the_env_is_a_truncation():
    assert at_limit({"truncated": True}) and at_limit({"reason": "Reached max_steps"})
    assert at_limit({"termination_reason": "turn limit"}) and at_limit({"reason": "timed out"})
    assert not at_limit({}) and not at_limit({"reason": "solved"}) and not at_limit({"truncated": False})


def test_result_text_reads_both_shapes():
    assert result_text({"content": [{"type": "text", "text": "2"}], "is_error": False}) == "2"
    assert result_text(None) == "" and result_text({"x": 1}) == '{"x": 1}'


def test_options_are_checked():
    mine, rest = split_options({"max_steps": 3, "timeout_s": 1.5, "size": 4})
    assert mine == {"max_steps": 3, "timeout_s": 1.5} and rest == {"size": 4}
    for bad in ({"max_steps": 0}, {"max_steps": True}, {"timeout_s": -1}, {"success_key": 3}):
        with pytest.raises(UsageError):
            split_options(bad)


def test_success_is_a_boolean_flag_never_a_score_or_a_word():
    # An env's correctness signal is a bool under one of SUCCESS_KEYS, in the metadata or the
    # observation's fields; a reward-like number (correct=1.0) or text is not a success flag.
    holder = SimpleNamespace(success_keys=SUCCESS_KEYS)

    def read(fields=None, **metadata):
        return OpenEnvEnv._success(holder, Result(dict(fields or {}), 1.0, True, metadata))

    assert read(correct=True) is True and read(success=False) is False and read({"solved": True}) is True
    assert read(correct=1.0) is None and read(success="yes") is None and read(score=1) is None and read() is None
    assert OpenEnvEnv._success(SimpleNamespace(success_keys=("ok",)), Result({}, 0.0, True, {"ok": True})) is True


def test_tool_status_follows_openenvs_error_type():
    # OpenEnv's ToolErrorType values as they come on the wire (a dict): timeout is a tool timeout,
    # the four others tool errors; a result flagged is_error is an error; anything else is ok.
    call = {"type": "call_tool", "tool_name": "lookup"}

    def tool(error=None, result=None):
        return tool_info(call, Result({"tool_name": "lookup", "error": error, "result": result}, None, False))

    assert tool({"error_type": "timeout", "message": "no answer in 2 s"}) == {
        "name": "lookup", "status": "timeout", "error": "timeout: no answer in 2 s"}
    for kind in ("execution_error", "tool_not_found", "invalid_args", "transport_error", "something_new"):
        assert tool({"error_type": kind, "message": "x"})["status"] == "error", kind
    flagged = tool(result={"is_error": True, "content": [{"type": "text", "text": "boom"}]})
    assert flagged["status"] == "error" and flagged["error"] == "boom"
    assert tool(result={"is_error": False, "content": []}) == {"name": "lookup", "status": "ok"}
    assert tool_info({"type": "list_tools"}, Result({}, None, False)) == {"name": "list_tools", "status": "ok"}
    assert tool_info({"message": "hi"}, Result({}, None, False)) is None  # a text env: no tool call


class NeverDone(Backend):
    """A text env behind envaudit's own Backend interface that never ends an episode (as the echo
    env of ``openenv init`` never does) and names a limit when told to stop."""

    action_schema = {"title": "Say", "required": ["message"], "properties": {"message": {"type": "string"}}}

    def __init__(self, stop_after: int | None = None, metadata: dict | None = None) -> None:
        self.stop_after, self.metadata, self.steps = stop_after, metadata or {}, 0

    def reset(self, seed, episode_id):
        self.steps = 0
        return Result({"echoed": ""}, None, False)

    def step(self, payload, timeout_s):
        self.steps += 1
        done = self.stop_after is not None and self.steps >= self.stop_after
        return Result({"echoed": payload["message"]}, 0.5, done, self.metadata if done else {})


def _ends(env):
    env.reset(seed=0)
    for n in range(1, 50):
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            return n, terminated, truncated
    return None


def test_the_step_cap_truncates_on_the_capped_step_and_a_named_limit_is_a_truncation():
    assert _ends(OpenEnvEnv(NeverDone(), "t", max_steps=3)) == (3, False, True)
    assert _ends(OpenEnvEnv(NeverDone(stop_after=2), "t", max_steps=3)) == (2, True, False)
    limited = NeverDone(stop_after=2, metadata={"reason": "max_steps reached"})
    assert _ends(OpenEnvEnv(limited, "t", max_steps=5)) == (2, False, True)


class Recording(Backend):
    """A text env behind the Backend interface whose action has required fields beside the text,
    recording what the adapter sends; its reset echoes the seed and episode id it was given."""

    action_schema = {"title": "Order", "required": ["count", "message", "mode"], "properties": {
        "count": {"type": "integer"}, "message": {"type": "string"}, "mode": {"enum": ["fast", "slow"]},
        "note": {"type": "string", "default": ""}}}

    def __init__(self) -> None:
        self.sent, self.resets = [], []

    def reset(self, seed, episode_id):
        self.resets.append((seed, episode_id))
        return Result({"greeting": "hi", "tools": [{"name": "a"}, SimpleNamespace(name="b"), "c"]}, None, False,
                      {"task": f"seed {seed}"})

    def step(self, payload, timeout_s):
        self.sent.append(payload)
        return Result({"result": {"content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}},
                      0.0, False)


def test_a_text_action_fills_only_the_required_fields_and_the_observation_is_its_fields_as_json():
    backend = Recording()
    env = OpenEnvEnv(backend, "t", max_steps=4)
    obs, info = env.reset(seed=7)
    assert backend.resets == [(7, "envaudit-seed7")] and info == {"metadata": {"task": "seed 7"}}
    # tool names read from dicts, objects and plain names; the metadata joins the fields
    assert obs == '{"greeting": "hi", "metadata": {"task": "seed 7"}, "tools": ["a", "b", "c"]}'
    obs, *_ = env.step("hello")
    assert backend.sent == [{"count": 1, "mode": "fast", "message": "hello"}]  # arguments(schema, "valid")
    assert obs == '{"result": "one\\ntwo"}'  # a tool result's texts, one per line


def test_a_reset_without_a_seed_draws_one_from_the_envs_generator():
    import numpy as np

    backend = Recording()
    env = OpenEnvEnv(backend, "t")
    env.reset(seed=3)
    env.reset()
    drawn = int(np.random.default_rng(3).integers(2**31))  # Gymnasium seeds np_random with the first seed
    assert backend.resets == [(3, "envaudit-seed3"), (drawn, f"envaudit-seed{drawn}")]


def test_a_tool_results_error_flag_is_read_in_every_shape():
    call = {"type": "call_tool", "tool_name": "t"}

    def status(result):
        return tool_info(call, Result({"tool_name": "t", "error": None, "result": result}, None, False))["status"]

    text = [{"type": "text", "text": "no"}]
    assert status(SimpleNamespace(is_error=True, content=[SimpleNamespace(text="no")])) == "error"  # fastmcp's object
    assert status({"isError": True, "content": text}) == "error"  # MCP's wire name
    assert status({"is_error": True, "content": text}) == "error"
    assert status({"isError": False, "content": text}) == "ok" and status({"content": text}) == "ok"
    assert status(SimpleNamespace(is_error=False, content=[])) == "ok" and status(None) == "ok"
    assert result_text({"b": 1, "a": SimpleNamespace}) == '{"a": "' + str(SimpleNamespace) + '", "b": 1}'


class Ending(NeverDone):
    """NeverDone that counts the episodes the adapter ends and records each step's timeout_s."""

    def __init__(self, stop_after: int | None = None) -> None:
        super().__init__(stop_after)
        self.ended, self.timeouts = 0, []

    def step(self, payload, timeout_s):
        self.timeouts.append(timeout_s)
        return super().step(payload, timeout_s)

    def end_episode(self) -> None:
        self.ended += 1


def test_an_episode_is_ended_once_when_it_ends_and_each_step_gets_the_timeout():
    backend = Ending(stop_after=2)
    env = OpenEnvEnv(backend, "t", max_steps=5, timeout_s=1.5)
    env.reset(seed=0)
    _, _, terminated, _, info = env.step("first")
    assert not terminated and backend.ended == 0 and info == {"metadata": {}}
    _, _, terminated, _, _ = env.step("second")
    assert terminated and backend.ended == 1 and backend.timeouts == [1.5, 1.5]
    capped = Ending()
    assert _ends(OpenEnvEnv(capped, "t", max_steps=2)) == (2, False, True) and capped.ended == 1


def test_the_text_catalogue_repeats_the_last_reply_or_answers_short():
    env = OpenEnvEnv(NeverDone(), "t", max_steps=5)
    env.reset(seed=0)
    assert env.candidates()["repeat_last"] == "42" and env.candidates()["give_up"] == "I give up. I forfeit this game."
    env.step("my own reply")
    assert env.candidates()["repeat_last"] == "my own reply"


def test_a_calls_name_is_the_results_or_else_the_actions():
    call = {"type": "call_tool", "tool_name": "asked"}
    assert tool_info(call, Result({"tool_name": "ran", "error": None}, None, False))["name"] == "ran"
    assert tool_info(call, Result({"error": None}, None, False))["name"] == "asked"
    assert tool_info({"type": "call_tool"}, Result({}, None, False))["name"] == ""
    failed = tool_info(call, Result({"error": SimpleNamespace(error_type=SimpleNamespace(value="timeout"),
                                                                message="slow")}, None, False))
    assert failed == {"name": "asked", "status": "timeout", "error": "timeout: slow"}  # OpenEnv's objects in process


def test_valid_arguments_take_examples_and_a_required_fields_default_and_odd_types_get_fallbacks():
    schema = {"type": "object", "required": ["city", "units", "blob"], "properties": {
        "city": {"type": "string", "examples": ["Oslo", "Lima"]},
        "units": {"type": "string", "default": "metric"},  # required, with a default: the default
        "days": {"type": "integer"},  # optional without a default: a plain value
        "blob": {"type": "binary"},  # a type the adapter has no value for
        "odd": "not a schema"}}
    assert arguments(schema, "valid") == {"city": "Oslo", "units": "metric", "days": 1, "blob": "test", "odd": "test"}
    assert arguments(schema, "edge") == {"city": "", "units": "", "days": 0, "blob": "", "odd": ""}
    assert arguments(schema, "wrong") == {"city": 12345, "units": 12345, "days": "not a number", "blob": 12345,
                                          "odd": 12345}


def test_the_info_names_what_the_adapter_was_given():
    from envaudit.adapters import package_version

    env = OpenEnvEnv(Recording(), "openenv:my_env:Env", max_steps=4, timeout_s=2.0, success_key="won",
                     text_field="note", options={"size": 3})
    info = env.adapter_info
    assert {k: info[k] for k in ("package", "version", "target", "kind", "action", "text_field", "tools", "options",
                                 "max_steps", "timeout_s", "success")} == {
        "package": "openenv", "version": package_version("openenv"), "target": "openenv:my_env:Env", "kind": "text",
        "action": "Order", "text_field": "note", "tools": None, "options": {"size": "3"}, "max_steps": 4,
        "timeout_s": 2.0, "success": "a boolean won in the observation's metadata or fields"}
    assert info["reward_none"] == "a step whose observation has reward=None counts 0 (info['reward_none'] marks it)"
    assert OpenEnvEnv(Recording(), "t").adapter_info["success"] == (
        f"a boolean {' / '.join(SUCCESS_KEYS)} in the observation's metadata or fields")


class NoTools(Backend):
    mcp = True


def test_an_mcp_env_without_tools_is_a_usage_error():
    with pytest.raises(UsageError) as caught:
        OpenEnvEnv(NoTools(), "openenv:x:Env")
    assert str(caught.value) == "openenv:x:Env: the MCP env lists no tools, so there is nothing to call"
