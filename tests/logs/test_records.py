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
