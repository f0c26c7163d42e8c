"""The OpenEnv adapter's pure parts (no openenv needed, so these run in the main venv too): tool
arguments from a JSON schema, the text field of an action model, limits and options."""

from __future__ import annotations

import pytest

from envaudit.adapters.openenv import (
    OpenEnvEnv,
    arguments,
    result_text,
    split_options,
    text_field_of,
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
    at_limit = OpenEnvEnv._at_limit
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
