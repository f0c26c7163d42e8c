"""The logged run as the probes' records: outcome classes from the logged columns only, and the
seeded sample of whole groups a large log is analysed on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envaudit.logs.records import sample_groups, to_records
from envaudit.logs.schema import LoggedRun, check_run
from envaudit.recording import EPISODE_COLUMNS as RECORD_EPISODES
from envaudit.recording import STEP_COLUMNS as RECORD_STEPS


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
    from envaudit.logs.schema import LogSchemaError

    eps = pd.DataFrame({"episode_id": ["a", "b"], "iteration": [0, 0], "return": [1.0, 0.0],
                        "tool_timeouts": [1, -1]})
    with pytest.raises(LogSchemaError, match="tool_timeouts counts tool calls, a whole number >= 0 in every row; "
                                             "found -1"):
        check_run(LoggedRun(eps, None, "generic"))


def _values(column: pd.Series) -> list:
    return [None if pd.isna(v) else v for v in column]


def _logged(steps: pd.DataFrame | None, **columns) -> LoggedRun:
    eps = pd.DataFrame({"episode_id": ["b", "a", "c"], "iteration": [0, 0, 1], "return": [1.0, 0.0, 0.5], **columns})
    return check_run(LoggedRun(eps, steps, "generic"))


# Logged out of order on purpose: episodes b, a, c; steps shuffled within and across episodes.
FULL_STEPS = pd.DataFrame({
    "episode_id": ["a", "b", "c", "a", "b"],
    "step": [1, 0, 0, 0, 1],
    "action": ["search", "answer", "calc", "search", "search"],
    "reward": [0.0, 1.0, 0.25, 0.5, 0.0],
    "tool_name": ["web", None, "calc", "web", "web"],
    "tool_status": ["timeout", None, "error", "ok", "error"],
    "latency_s": [2.0, 0.1, 0.4, 0.3, 0.2],
})


def test_every_logged_column_is_carried_with_its_dtype():
    """b ends terminated and succeeds, a is cut by its turn limit and fails, c crashes with no
    success flag: episode ids become 0, 1, 2 in logged order, groups integer codes in order of
    first appearance, and the step table is sorted by episode then step."""
    c = to_records(_logged(FULL_STEPS, group_id=["g2", "g1", "g2"], seed=[7, 8, 9],
                           end_reason=["terminated", "truncated", "error"],
                           success=pd.array([True, False, None], dtype="boolean")))
    eps = c.records.episodes
    assert list(eps.columns[:len(RECORD_EPISODES)]) == RECORD_EPISODES
    assert eps["episode_id"].tolist() == [0, 1, 2] and eps["episode_id"].dtype == np.int64
    assert eps["log_episode_id"].tolist() == ["b", "a", "c"]
    assert eps["group"].tolist() == [0, 1, 0] and eps["group"].dtype == np.int64
    assert eps["log_group_id"].tolist() == ["g2", "g1", "g2"]
    assert eps["seed"].tolist() == [7, 8, 9]
    assert eps["return"].tolist() == [1.0, 0.0, 0.5] and eps["return"].dtype == np.float64
    assert eps["iteration"].tolist() == [0, 0, 1] and eps["iteration"].dtype == np.int64
    assert eps["end_reason"].tolist() == ["terminated", "truncated", "tool_error"]
    assert eps["outcome"].tolist() == ["success", "timeout", "error"]
    assert eps["success"].dtype == "boolean" and eps["success"].tolist()[:2] == [True, False]
    assert eps["success"].isna().tolist() == [False, False, True]
    assert eps["length"].tolist() == [2, 2, 1] and eps["length"].dtype == np.int64  # counted from the steps
    # b: one call failed (its answer is no call); a: an ok call and a timed-out one; c: one error
    assert eps["n_tool_calls"].tolist() == [1, 2, 1] and eps["n_tool_calls"].dtype == np.int64
    assert eps["n_tool_errors"].tolist() == [1, 0, 1] and eps["n_tool_errors"].dtype == np.int64
    assert eps["n_tool_timeouts"].tolist() == [0, 1, 0] and eps["n_tool_timeouts"].dtype == np.int64
    assert eps["n_injected"].tolist() == [0, 0, 0] and eps["n_injected"].dtype == np.int64
    assert eps["error"].tolist() == [None] * 3
    assert set(eps["probe"]) == {"logged"} and set(eps["policy"]) == {"generic"}

    steps = c.records.steps
    assert list(steps.columns) == RECORD_STEPS and isinstance(steps.index, pd.RangeIndex)
    assert steps["episode_id"].tolist() == [0, 0, 1, 1, 2] and steps["episode_id"].dtype == np.int64
    assert steps["step"].tolist() == [0, 1, 0, 1, 0] and steps["step"].dtype == np.int64
    assert c.labels == ["answer", "calc", "search"]  # sorted, the codes index them
    assert steps["action"].tolist() == [0, 2, 2, 2, 1] and steps["action"].dtype == np.int64
    assert steps["action_label"].tolist() == ["answer", "search", "search", "search", "calc"]
    assert steps["reward"].tolist() == [1.0, 0.0, 0.5, 0.0, 0.25]
    assert steps["terminated"].tolist() == [False, True, False, False, False]  # b's last step only
    assert steps["truncated"].tolist() == [False, False, False, True, False]  # a's last step only
    assert steps["terminated"].dtype == bool and steps["truncated"].dtype == bool
    # a step without a tool call has no name or status (missing, whatever pandas fills it with)
    assert _values(steps["tool_name"]) == [None, "web", "web", "web", "calc"]
    assert _values(steps["tool_status"]) == [
        None, "error", "ok", "timeout", "error"]
    assert steps["latency_s"].tolist() == [0.1, 0.2, 0.3, 2.0, 0.4] and steps["latency_s"].dtype == np.float64
    assert steps["error"].tolist() == [None] * 5
    assert steps["injected"].tolist() == [False] * 5 and steps["injected"].dtype == bool
    assert (c.has_success, c.has_end_reason, c.has_tool_status, c.has_steps, c.has_length) == (True,) * 5
    assert not c.has_timeout_counts and not c.has_error_counts
    assert c.knows_timeouts and c.knows_tool_failures


def test_a_column_the_log_lacks_stays_unknown():
    """Only the ids and step numbers are logged: nothing is filled in from the return."""
    c = to_records(_logged(pd.DataFrame({"episode_id": ["c", "b", "a", "a"], "step": [0, 0, 1, 0]})))
    eps = c.records.episodes
    assert eps["outcome"].tolist() == ["unknown"] * 3
    assert eps["end_reason"].tolist() == ["terminated"] * 3
    assert eps["success"].dtype == "boolean" and eps["success"].isna().all()
    assert eps["seed"].tolist() == [None] * 3 and eps["group"].tolist() == [None] * 3
    assert eps["log_group_id"].tolist() == [None] * 3
    assert eps["length"].tolist() == [1, 2, 1]
    for column in ("n_tool_calls", "n_tool_errors", "n_tool_timeouts"):
        assert eps[column].tolist() == [0, 0, 0] and eps[column].dtype == np.int64
    steps = c.records.steps
    assert steps["action"].tolist() == [None] * 4 and steps["action_label"].tolist() == [None] * 4
    assert steps["reward"].isna().all() and steps["latency_s"].isna().all()
    assert steps["reward"].dtype == np.float64 and steps["latency_s"].dtype == np.float64  # numbers, missing
    assert steps["tool_name"].isna().all() and steps["tool_status"].isna().all()
    assert steps["terminated"].tolist() == [True, False, True, True]  # the last step of each episode
    assert c.labels is None
    assert (c.has_success, c.has_end_reason, c.has_tool_status) == (False, False, False)
    assert c.has_steps and c.has_length and not c.knows_timeouts and not c.knows_tool_failures


def test_without_a_step_table_length_comes_from_the_log_or_is_unknown():
    logged = to_records(_logged(None, length=[3.0, 5.0, 1.0]))
    assert logged.records.episodes["length"].tolist() == [3, 5, 1]
    assert logged.records.episodes["length"].dtype == np.int64  # a count of steps, logged as floats
    assert logged.has_length and not logged.has_steps
    assert list(logged.records.steps.columns) == RECORD_STEPS and logged.records.steps.empty
    bare = to_records(_logged(None))
    assert bare.records.episodes["length"].tolist() == [0, 0, 0] and bare.records.episodes["length"].dtype == np.int64
    assert not bare.has_length and not bare.has_steps and bare.labels is None
    # a logged length wins over a count of the steps
    with_steps = to_records(_logged(pd.DataFrame({"episode_id": ["a"], "step": [0]}), length=[3, 5, 1]))
    assert with_steps.records.episodes["length"].tolist() == [3, 5, 1]


def test_a_timeout_count_makes_a_failed_rollout_a_timeout_only_without_statuses():
    """One timed-out call is enough; a step table's statuses (even all ok) take precedence, and an
    empty step table has no statuses."""
    counts = {"success": pd.array([False, False, True], dtype="boolean"), "tool_timeouts": [1, 0, 1]}
    assert to_records(_logged(None, **counts)).records.episodes["outcome"].tolist() == ["timeout", "failure", "success"]
    empty = pd.DataFrame({"episode_id": pd.Series([], dtype=object), "step": pd.Series([], dtype=int),
                          "tool_status": pd.Series([], dtype=object)})
    assert to_records(_logged(empty, **counts)).records.episodes["outcome"].tolist() == ["timeout", "failure", "success"]
    no_status = pd.DataFrame({"episode_id": ["b"], "step": [0]})
    assert to_records(_logged(no_status, **counts)).records.episodes["outcome"].tolist() == ["timeout", "failure", "success"]
    ok = pd.DataFrame({"episode_id": ["b", "a", "c"], "step": [0, 0, 0], "tool_status": ["ok"] * 3})
    c = to_records(_logged(ok, **counts))
    assert c.records.episodes["outcome"].tolist() == ["failure", "failure", "success"]
    assert c.records.episodes["n_tool_timeouts"].tolist() == [0, 0, 0]  # the statuses, not the count
    assert c.has_tool_status and not c.has_timeout_counts


def test_numeric_actions_and_the_log_context():
    from envaudit.config import ScanConfig
    from envaudit.logs.records import NEEDS_ENV, NeedsEnv, log_context

    steps = pd.DataFrame({"episode_id": ["b", "a", "c"], "step": [0, 0, 0], "action": [0, 3, 1]})
    c = to_records(_logged(steps))
    assert c.labels is None and c.records.steps["action"].tolist() == [0, 3, 1]
    assert c.records.steps["action_label"].tolist() == [None] * 3
    config = ScanConfig()
    ctx = log_context(c, config, config.rollout_pipeline(), "length")
    assert ctx.env.action_space.n == 4  # actions 0..3 were logged
    assert ctx.env.action_labels is None and not ctx.is_tool_env
    with pytest.raises(NeedsEnv, match="cannot be reset; pass --env ENV"):
        ctx.env.reset(seed=0)
    with pytest.raises(NeedsEnv, match="cannot be stepped; pass --env ENV"):
        ctx.env.step(0)
    with pytest.raises(NeedsEnv, match="running policy 'random' needs the env"):
        ctx.run(type("P", (), {"name": "random"})(), [0])
    assert ctx.over_cap("the second look")
    assert ctx.skipped == [{"probe": "length", "skipped": "the second look", "reason": NEEDS_ENV}]
    with pytest.raises(NeedsEnv, match="no env to make; pass --env ENV"):
        ctx.make_env()
    text = to_records(_logged(FULL_STEPS))
    text_ctx = log_context(text, config, config.rollout_pipeline(), "length")
    assert text_ctx.env.action_space.n == 3 and text_ctx.env.action_labels == ["answer", "calc", "search"]
    empty_actions = pd.DataFrame({"episode_id": ["a", "b"], "step": [0, 0], "action": [None, None]})
    for bare in (to_records(_logged(None)), to_records(_logged(pd.DataFrame({"episode_id": ["a"], "step": [0]}))),
                 to_records(_logged(empty_actions))):
        with pytest.raises(NeedsEnv, match="no step actions"):
            _ = log_context(bare, config, config.rollout_pipeline(), "length").env


def test_a_log_without_groups_is_sampled_by_episode():
    eps = pd.DataFrame({"episode_id": [f"e{i}" for i in range(40)], "iteration": [i // 10 for i in range(40)],
                        "return": 0.0})
    c = to_records(check_run(LoggedRun(eps, None, "generic")))
    small, note = sample_groups(c, seed=3, limit=12)
    assert len(small.records.episodes) == 12 and "12 of the 40" in note
    assert list(small.records.episodes.columns) == list(c.records.episodes.columns)
    assert isinstance(small.records.episodes.index, pd.RangeIndex)
    # fewer than two groups' worth: one whole group of 4
    grouped = to_records(_run(n_groups=10))
    one, _ = sample_groups(grouped, seed=0, limit=5)
    assert len(one.records.episodes) == 4 and one.records.episodes["group"].nunique() == 1
    assert list(one.records.steps.columns) == RECORD_STEPS and isinstance(one.records.steps.index, pd.RangeIndex)
    assert len(one.records.steps) == 8


def test_an_episode_without_steps_has_none_and_whole_numbers_stay_numbers():
    """c logged no step: its length and tool counts are 0, not missing. Integers logged where the
    records hold floats (returns, rewards, latencies) become floats, and a missing end reason is
    read as the env ending the episode."""
    steps = pd.DataFrame({"episode_id": ["b", "a"], "step": [0.0, 0.0], "reward": [1, 0], "latency_s": [2, 1],
                          "tool_status": ["timeout", "error"], "action": [0, 0]})
    eps = pd.DataFrame({"episode_id": ["b", "a", "c"], "iteration": [0.0, 0.0, 1.0], "return": [1, 0, 1],
                        "end_reason": ["truncated", None, "terminated"]})
    c = to_records(check_run(LoggedRun(eps, steps, "generic")))
    out = c.records.episodes
    assert out["length"].tolist() == [1, 1, 0]
    assert out["n_tool_calls"].tolist() == [1, 1, 0] and out["n_tool_calls"].dtype == np.int64
    assert out["n_tool_errors"].tolist() == [0, 1, 0] and out["n_tool_errors"].dtype == np.int64
    assert out["n_tool_timeouts"].tolist() == [1, 0, 0] and out["n_tool_timeouts"].dtype == np.int64
    assert out["end_reason"].tolist() == ["truncated", "terminated", "terminated"]
    assert out["return"].dtype == np.float64 and out["iteration"].dtype == np.int64
    s = c.records.steps
    assert s["reward"].dtype == np.float64 and s["latency_s"].dtype == np.float64 and s["step"].dtype == np.int64
    assert s["truncated"].tolist() == [True, False] and s["terminated"].tolist() == [False, True]
    # one logged action: a catalogue of one action, observed through one observation
    import gymnasium as gym

    from envaudit.config import ScanConfig
    from envaudit.logs.records import log_context

    config = ScanConfig()
    pipeline = config.rollout_pipeline()
    ctx = log_context(c, config, pipeline, "length")
    assert ctx.env.action_space == gym.spaces.Discrete(1) and ctx.env.observation_space == gym.spaces.Discrete(1)
    assert ctx.exploration is c.records and ctx.config is config and ctx.pipeline is pipeline
    assert ctx.exploration_problems == [] and ctx.env_id == "logged run" and ctx.name == "length"


def test_logged_counts_stand_in_beside_a_step_table_without_statuses():
    steps = pd.DataFrame({"episode_id": ["b", "a"], "step": [0, 0]})
    c = to_records(_logged(steps, tool_calls=[2, 1, 0], tool_errors=[1, 0, 0], tool_timeouts=[0, 1, 0]))
    out = c.records.episodes
    assert out["n_tool_calls"].tolist() == [2, 1, 0] and out["n_tool_errors"].tolist() == [1, 0, 0]
    assert out["n_tool_timeouts"].tolist() == [0, 1, 0]
    assert c.has_timeout_counts and c.has_error_counts and not c.has_tool_status and c.knows_tool_failures
