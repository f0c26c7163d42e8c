"""The info protocol: tool records, end reasons and outcome classes."""

from __future__ import annotations

import pytest

from envaudit.protocol import END_REASONS, OUTCOMES, end_reason, outcome_class, read_tool_info


def test_read_tool_info_normalises():
    assert read_tool_info({}) is None
    assert read_tool_info({"tool": None}) is None
    assert read_tool_info({"tool": {"name": "search", "status": "ok"}}) == {
        "name": "search", "status": "ok", "latency_s": None, "error": None, "injected": False,
    }
    got = read_tool_info({"call": {"name": "db", "status": "timeout", "latency_s": 2, "error": "slow",
                                   "injected": 1}}, key="call")
    assert got == {"name": "db", "status": "timeout", "latency_s": 2.0, "error": "slow", "injected": True}


def test_unknown_status_is_kept_as_an_error():
    got = read_tool_info({"tool": {"name": "x", "status": "crashed", "error": "segfault"}})
    assert got["status"] == "error"
    assert got["error"] == "unknown tool status 'crashed': segfault"
    assert read_tool_info({"tool": {"name": "x", "status": "OK"}})["error"] == "unknown tool status 'OK'"


def test_non_mapping_tool_info_names_the_fix():
    with pytest.raises(TypeError, match=r"info\['tool'\] must be a mapping.*got str.*tool_key="):
        read_tool_info({"tool": "search"})


@pytest.mark.parametrize(
    ("terminated", "truncated", "status", "exception", "expected"),
    [
        (True, False, "ok", False, "terminated"),
        (True, False, None, False, "terminated"),
        (False, True, "ok", False, "truncated"),
        (False, True, "timeout", False, "truncated"),  # the step limit wins over the last call
        (True, False, "timeout", False, "tool_timeout"),
        (True, False, "error", False, "tool_error"),
        (True, True, "ok", False, "truncated"),  # both flags: a limit cut it (issue 11; GEM at its turn limit)
        (True, False, "ok", True, "env_exception"),
    ],
)
def test_end_reason(terminated, truncated, status, exception, expected):
    got = end_reason(terminated=terminated, truncated=truncated, tool_status=status, exception=exception)
    assert got == expected and got in END_REASONS


@pytest.mark.parametrize(
    ("reason", "success", "ret", "threshold", "expected"),
    [
        ("truncated", True, 10.0, None, "timeout"),  # a pipeline sees a timeout whatever it earned
        ("tool_timeout", None, 0.0, None, "timeout"),
        ("tool_error", True, 1.0, None, "error"),
        ("env_exception", None, 0.0, 0.0, "error"),
        ("terminated", True, -5.0, 0.0, "success"),  # the env's own flag beats the threshold
        ("terminated", False, 5.0, 0.0, "failure"),
        ("terminated", None, 1.0, 1.0, "success"),  # at the threshold counts as success
        ("terminated", None, 0.99, 1.0, "failure"),
        ("terminated", None, 1.0, None, "unknown"),
    ],
)
def test_outcome_class(reason, success, ret, threshold, expected):
    got = outcome_class(reason, success=success, episode_return=ret, success_threshold=threshold)
    assert got == expected and (got in OUTCOMES or got == "unknown")
