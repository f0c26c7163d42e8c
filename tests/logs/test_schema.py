"""check_run: the schema every reader's run is held to, and what a log that breaks it is told."""

from __future__ import annotations

import pandas as pd
import pytest

from envaudit.logs.schema import (
    EPISODE_COLUMNS,
    STEP_COLUMNS,
    LoggedRun,
    LogSchemaError,
    check_run,
)


def _run(episodes=None, steps=None, source="generic", missing=None):
    eps = pd.DataFrame({"episode_id": [1, 2, 3], "iteration": [0, 0, 1], "return": [1.0, 0.0, 0.5]}
                       if episodes is None else episodes)
    return LoggedRun(eps, steps, source, missing=list(missing or []))


def _with(**columns):
    return pd.DataFrame({"episode_id": [1, 2, 3], "iteration": [0, 0, 1], "return": [1.0, 0.0, 0.5], **columns})


def test_a_complete_run_is_returned_with_nothing_missing():
    full = _with(group_id=[0, 0, 1], length=[3, 4, 5], end_reason=["terminated", "truncated", "error"],
                 success=[True, False, False], tool_calls=[1, 0, 2], tool_errors=[0, 0, 1], tool_timeouts=[0, 0, 0])
    steps = pd.DataFrame({column: [1, 2] if column == "episode_id" else [0, 0] for column in STEP_COLUMNS})
    run = _run(full, steps)
    assert check_run(run) is run
    assert run.missing == []


def test_each_absent_column_is_named_in_schema_order_never_filled():
    run = check_run(_run())
    assert run.missing == ["group_id", "length", "end_reason", "success"]  # the tool counts are not missing
    assert list(run.episodes) == ["episode_id", "iteration", "return"]


def test_a_column_already_named_missing_is_not_named_twice():
    run = check_run(_run(missing=["success"]))
    assert run.missing == ["success", "group_id", "length", "end_reason"]


def test_every_absent_step_column_is_named_with_its_table():
    steps = pd.DataFrame({"episode_id": [1, 1, 3], "step": [0, 1, 0], "reward": [0.0, 1.0, 0.0]})
    run = check_run(_run(steps=steps, missing=["steps.action"]))
    assert run.missing == ["steps.action", "group_id", "length", "end_reason", "success",
                           "steps.tool_name", "steps.tool_status", "steps.latency_s"]


def test_without_a_step_table_no_step_column_is_named():
    run = check_run(_run())
    assert not [c for c in run.missing if c.startswith("steps.")]


@pytest.mark.parametrize(("drop", "told"), [
    (["return"], r"^the verl log has no return column \(it has: episode_id, iteration\); map yours onto the "
                 r"schema with --map YOUR_COLUMN=return$"),
    (["episode_id", "return"], r"^the verl log has no episode_id, return columns \(it has: iteration\); "
                               r"map yours onto the schema with --map YOUR_COLUMN=episode_id$"),
    (["episode_id", "iteration", "return"], r"has no episode_id, iteration, return columns \(it has: none\)"),
])
def test_a_required_column_absent_is_named_with_the_map_that_fills_it(drop, told):
    eps = _with().drop(columns=drop)
    with pytest.raises(LogSchemaError, match=told):
        check_run(_run(eps, source="verl"))


def test_duplicate_episode_ids_name_the_first_repeat():
    eps = pd.DataFrame({"episode_id": ["a", "b", "b", "c", "c"], "iteration": [0] * 5, "return": [0.0] * 5})
    with pytest.raises(LogSchemaError, match=r"^episode_id b appears more than once in the trl log; episode ids "
                                             r"must be unique \(map a unique column with --map COLUMN=episode_id\)$"):
        check_run(_run(eps, source="trl"))


def test_end_reason_values_outside_the_schema_are_listed_sorted_five_at_most():
    eps = pd.DataFrame({"episode_id": range(8), "iteration": [0] * 8, "return": [0.0] * 8,
                        "end_reason": ["g", "f", "e", "d", "c", "b", "terminated", None]})
    with pytest.raises(LogSchemaError, match=r"^end_reason holds 'b', 'c', 'd', 'e', 'f'; expected one of terminated, "
                                             r"truncated, timeout, error \(rename the values in the log, or drop the "
                                             r"column\)$"):
        check_run(_run(eps))


def test_end_reason_gaps_are_allowed():
    run = check_run(_run(_with(end_reason=["timeout", None, "error"])))
    assert "end_reason" not in run.missing


@pytest.mark.parametrize("column", ["tool_calls", "tool_errors", "tool_timeouts"])
def test_tool_counts_become_whole_numbers(column):
    run = check_run(_run(_with(**{column: [2.0, "0", 1]})))
    assert str(run.episodes[column].dtype) == "int64"
    assert run.episodes[column].tolist() == [2, 0, 1]
    assert column not in run.missing


@pytest.mark.parametrize(("values", "found"), [
    ([1, -1, -2], "-1"),
    ([1.0, 0.5, 2.5], "0.5"),
    ([1, "many", "few"], "'many'"),
    ([1, None, 2], "nan"),  # a gap in a count is not a count
])
def test_a_tool_count_that_is_not_a_whole_number_is_named_plainly(values, found):
    with pytest.raises(LogSchemaError, match=rf"^tool_errors counts tool calls, a whole number >= 0 in every row; "
                                             rf"found {found} \(map a count of calls onto it, or drop it\)$"):
        check_run(_run(_with(tool_errors=values)))


@pytest.mark.parametrize("column", ["episode_id", "step"])
def test_a_step_table_without_its_keys_is_told_the_map(column):
    steps = pd.DataFrame({"episode_id": [1], "step": [0], "reward": [1.0]}).drop(columns=column)
    rest = ", ".join(steps.columns)
    with pytest.raises(LogSchemaError, match=rf"^the step table has no {column} column \(it has: {rest}\); "
                                             rf"map it with --map COLUMN={column}$"):
        check_run(_run(steps=steps))


def test_steps_of_episodes_not_logged_are_counted_and_the_first_named():
    steps = pd.DataFrame({"episode_id": [1, 7, 7, 9], "step": [0, 0, 1, 0]})
    with pytest.raises(LogSchemaError, match=r"^3 logged steps belong to episodes the episode table does not have "
                                             r"\(first: episode_id 7\); give the step table of the same run$"):
        check_run(_run(steps=steps))


def test_text_episode_ids_of_orphan_steps_are_quoted():
    eps = pd.DataFrame({"episode_id": ["a"], "iteration": [0], "return": [0.0]})
    with pytest.raises(LogSchemaError, match=r"^1 logged steps .*\(first: episode_id 'z'\)"):
        check_run(_run(eps, pd.DataFrame({"episode_id": ["a", "z"], "step": [0, 0]})))


def test_the_schema_documents_every_column_it_checks():
    assert {"episode_id", "iteration", "return", "end_reason", "tool_calls"} <= set(EPISODE_COLUMNS)
    assert {"episode_id", "step", "reward", "tool_status"} <= set(STEP_COLUMNS)
