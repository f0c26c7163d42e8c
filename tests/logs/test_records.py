"""The logged run as the probes' records: outcome classes from the logged columns only, and the
seeded sample of whole groups a large log is analysed on."""

from __future__ import annotations

import pandas as pd

from envaudit.logs.records import sample_groups, to_records
from envaudit.logs.schema import LoggedRun, check_run


def _run(n_groups: int = 4, size: int = 4, success: bool = True) -> LoggedRun:
    n = n_groups * size
    eps = pd.DataFrame({"episode_id": [f"e{i}" for i in range(n)], "group_id": [f"g{i // size}" for i in range(n)],
                        "iteration": [i // (2 * size) for i in range(n)], "return": [float(i % 3) for i in range(n)],
                        "end_reason": ["terminated", "truncated", "timeout", "error"] * (n // 4)})
    if success:
        eps["success"] = pd.array([i % 4 == 0 for i in range(n)], dtype="boolean")
    steps = pd.DataFrame({"episode_id": [f"e{i}" for i in range(n) for _ in range(2)],
                          "step": [k for _ in range(n) for k in range(2)],
                          "reward": 0.0, "action": "search", "tool_status": ["ok", "error"] * n})
    return check_run(LoggedRun(eps, steps, "generic"))


def test_outcomes_come_from_end_reason_and_success_only():
    c = to_records(_run())
    eps = c.records.episodes
    assert list(eps["outcome"][:4]) == ["success", "timeout", "timeout", "error"]
    assert list(eps["outcome"][4:8]) == ["success", "timeout", "timeout", "error"]
    assert (eps["length"] == 2).all() and (eps["n_tool_errors"] == 1).all()
    assert c.records.steps["truncated"].sum() == 8  # the last step of every truncated or timed-out episode
    # Without success, an episode the env ended is unknown, never read off its return.
    assert set(to_records(_run(success=False)).records.episodes["outcome"]) == {"unknown", "timeout", "error"}
    assert "success" in _run(success=False).missing


def test_a_large_log_is_sampled_by_whole_groups_with_the_seed():
    c = to_records(_run(n_groups=10))
    small, note = sample_groups(c, seed=0, limit=12)
    assert note is not None and "12 of the 40" in note
    sizes = small.records.episodes.groupby("group").size()
    assert (sizes == 4).all() and len(sizes) == 3
    again, _ = sample_groups(c, seed=0, limit=12)
    assert again.records.episodes["episode_id"].tolist() == small.records.episodes["episode_id"].tolist()
    assert set(small.records.steps["episode_id"]) == set(small.records.episodes["episode_id"])
    assert sample_groups(c, seed=0, limit=40) == (c, None)


def test_tool_counts_stand_in_for_a_step_table():
    """No end_reason, no steps: an unsuccessful rollout with a timed-out call is a timeout, a
    successful one stays a success, and the counts are the records' tool counts."""
    eps = pd.DataFrame({"episode_id": list("abcdef"), "iteration": [0, 0, 0, 1, 1, 1], "return": [1.0, 0.5, 0.0] * 2,
                        "success": pd.array([True, False, False, True, False, None], dtype="boolean"),
                        "tool_timeouts": [1, 2, 0, 0, 0, 1], "tool_errors": [0, 1, 3, 0, 0, 0],
                        "tool_calls": [2, 3, 4, 1, 1, 1]})
    c = to_records(check_run(LoggedRun(eps, None, "verl")))
    out = c.records.episodes
    assert out["outcome"].tolist() == ["success", "timeout", "failure", "success", "failure", "unknown"]
    assert out["end_reason"].tolist()[:3] == ["terminated", "tool_timeout", "terminated"]
    assert out["n_tool_timeouts"].tolist() == [1, 2, 0, 0, 0, 1]
    assert out["n_tool_errors"].tolist() == [0, 1, 3, 0, 0, 0]
    assert out["n_tool_calls"].tolist() == [2, 3, 4, 1, 1, 1]
    assert c.knows_timeouts and c.knows_tool_failures and not c.has_end_reason
    # timeouts alone do not tell tool failures: the errors are unknown
    assert not to_records(check_run(LoggedRun(eps.drop(columns="tool_errors"), None, "verl"))).knows_tool_failures
    # a step table's statuses take precedence over the counts
    assert not to_records(_run()).has_timeout_counts


def test_a_count_must_be_a_whole_number():
    import pytest

    from envaudit.logs.schema import LogSchemaError

    eps = pd.DataFrame({"episode_id": ["a", "b"], "iteration": [0, 0], "return": [1.0, 0.0],
                        "tool_timeouts": [1, -1]})
    with pytest.raises(LogSchemaError, match="tool_timeouts counts tool calls, a whole number >= 0 in every row; "
                                             "found -1"):
        check_run(LoggedRun(eps, None, "generic"))
