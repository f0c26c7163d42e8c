"""The generic reader's values: types of the schema columns, success words, and the bad values it names."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from envaudit.logs import generic
from envaudit.logs.schema import LogSchemaError


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _rows(columns):
    """``{"a": [1, 2], "b": [3, 4]}`` as ``[{"a": 1, "b": 3}, {"a": 2, "b": 4}]``, each value as given."""
    return [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def _episodes(tmp_path, **columns):
    """Three rollouts, with ``columns`` added or replacing the defaults."""
    rows = {"episode_id": [1, 2, 3], "iteration": [0, 0, 1], "return": [1.0, 0.0, 0.5], **columns}
    return _jsonl(tmp_path / "episodes.jsonl", _rows(rows))


def test_numbers_get_the_schemas_types(tmp_path):
    # iterations and lengths logged as floats, returns as ints: the schema says int, int, float
    run = generic.read(_episodes(tmp_path, iteration=[0.0, 0.0, 1.0], length=[3.0, 5.0, 2.0], **{"return": [1, 0, 2]}))
    eps = run.episodes
    assert (str(eps["iteration"].dtype), str(eps["length"].dtype), str(eps["return"].dtype)) == (
        "int64", "int64", "float64")
    assert eps["iteration"].tolist() == [0, 0, 1] and eps["length"].tolist() == [3, 5, 2]
    assert eps["return"].tolist() == [1.0, 0.0, 2.0]
    assert run.source == "generic"


def test_numbers_logged_as_text_are_read(tmp_path):
    run = generic.read(_episodes(tmp_path, iteration=["0", "0", "1"], length=["3", "5", "2"],
                                 **{"return": ["1.5", "0", "-2"]}))
    assert run.episodes["iteration"].tolist() == [0, 0, 1]
    assert run.episodes["length"].tolist() == [3, 5, 2]
    assert run.episodes["return"].tolist() == [1.5, 0.0, -2.0]


@pytest.mark.parametrize("column", ["iteration", "length", "return"])
def test_a_value_that_is_not_a_number_names_the_first_and_its_episode(tmp_path, column):
    values = {"iteration": [0, "warmup", "later"], "length": [3, "n/a", "?"], "return": [1.0, "high", "low"]}
    with pytest.raises(LogSchemaError, match=rf"^{column} must be a number in every row; found '{values[column][1]}' "
                                             r"\(episode 2\)$"):
        generic.read(_episodes(tmp_path, **{column: values[column]}))


def test_a_bad_number_without_episode_ids_is_still_named(tmp_path):
    path = _jsonl(tmp_path / "episodes.jsonl", [{"iteration": 0, "return": 1.0}, {"iteration": "x", "return": 0.0}])
    with pytest.raises(LogSchemaError, match=r"^iteration must be a number; found 'x'$"):
        generic.read(path)


def test_success_words_are_read_as_booleans(tmp_path):
    # mixed kinds in one column, as a hand-written log has them: pandas reads them as logged
    words = [True, "TRUE", " yes ", "Yes", 1, "1", 1.0, "1.0", False, "false", "No", 0, "0", 0.0, "0.0", None]
    rows = [{"episode_id": k, "iteration": 0, "return": 0.0, "success": w} for k, w in enumerate(words)]
    run = generic.read(_jsonl(tmp_path / "episodes.jsonl", rows))
    success = run.episodes["success"]
    assert str(success.dtype) == "boolean"
    assert success.iloc[:8].tolist() == [True] * 8
    assert success.iloc[8:15].tolist() == [False] * 7
    assert success.isna().tolist() == [False] * 15 + [True]


def test_success_logged_as_booleans_stays_boolean(tmp_path):
    run = generic.read(_episodes(tmp_path, success=[True, False, True]))
    assert str(run.episodes["success"].dtype) == "boolean"
    assert run.episodes["success"].tolist() == [True, False, True]


def test_success_in_a_csv_with_gaps(tmp_path):
    path = tmp_path / "episodes.csv"
    path.write_text("episode_id,iteration,return,success\n1,0,1.0,true\n2,0,0.0,\n3,1,0.5,false\n")
    success = generic.read(path).episodes["success"]
    assert str(success.dtype) == "boolean"
    assert success.isna().tolist() == [False, True, False]
    assert success.dropna().tolist() == [True, False]


def test_success_as_floats_with_gaps(tmp_path):
    run = generic.read(_episodes(tmp_path, success=[1.0, None, 0.0]))
    assert run.episodes["success"].isna().tolist() == [False, True, False]
    assert run.episodes["success"].dropna().tolist() == [True, False]


def test_a_success_value_that_is_not_a_truth_value_is_named(tmp_path):
    with pytest.raises(LogSchemaError, match=r"^success must be true/false \(or 1/0\); found 'maybe'$"):
        generic.read(_episodes(tmp_path, success=["yes", "maybe", "perhaps"]))
    with pytest.raises(LogSchemaError, match=r"found 0\.7$"):
        generic.read(_episodes(tmp_path, success=[1.0, 0.7, 0.2]))


def test_an_empty_success_column_is_dropped_and_said(tmp_path):
    run = generic.read(_episodes(tmp_path, success=[None, None, None]))
    assert "success" not in run.episodes
    assert "success" in run.missing
    assert "success: every value was empty, so the log has no success signal" in run.notes


def test_end_reason_is_read_in_any_case(tmp_path):
    run = generic.read(_episodes(tmp_path, end_reason=["Terminated", "TIMEOUT", None]))
    assert run.episodes["end_reason"].tolist()[:2] == ["terminated", "timeout"]
    assert pd.isna(run.episodes["end_reason"].iloc[2])


def test_mapping_notes_each_rename_and_reads_it(tmp_path):
    path = _jsonl(tmp_path / "episodes.jsonl", [
        {"uid": "a", "global_step": 3, "score": 1, "acc": "true", "mode": "x"},
        {"uid": "b", "global_step": 4, "score": 0, "acc": "false", "mode": "y"}])
    run = generic.read(path, mapping={"uid": "episode_id", "global_step": "iteration", "score": "return",
                                      "acc": "success"})
    assert run.notes == ["uid -> episode_id", "global_step -> iteration", "score -> return", "acc -> success"]
    assert list(run.episodes) == ["episode_id", "iteration", "return", "success"]
    assert run.episodes["success"].tolist() == [True, False]


# --- the step table ----------------------------------------------------------------------------------


def _steps(tmp_path, **columns):
    rows = {"episode_id": [1, 1, 2], "step": [0, 1, 0], **columns}
    return _jsonl(tmp_path / "steps.jsonl", _rows(rows))


def test_step_columns_get_the_schemas_types(tmp_path):
    steps = generic.read(_episodes(tmp_path), steps=_steps(
        tmp_path, step=["0", "1", "0"], reward=[1, "n/a", 0], tool_status=["OK", "Error", "timeout"],
        observation=["a", "b", "c"])).steps
    assert list(steps) == ["episode_id", "step", "reward", "tool_status"]
    assert str(steps["step"].dtype) == "int64" and steps["step"].tolist() == [0, 1, 0]
    assert str(steps["reward"].dtype) == "float64"
    assert steps["reward"].isna().tolist() == [False, True, False]  # a reward that is not a number is a gap
    assert steps["reward"].dropna().tolist() == [1.0, 0.0]
    assert steps["tool_status"].tolist() == ["ok", "error", "timeout"]


def test_step_numbers_logged_as_floats(tmp_path):
    steps = generic.read(_episodes(tmp_path), steps=_steps(tmp_path, step=[0.0, 1.0, 0.0], reward=[1, 2, 3])).steps
    assert str(steps["step"].dtype) == "int64" and str(steps["reward"].dtype) == "float64"
    assert steps["reward"].tolist() == [1.0, 2.0, 3.0]


def test_a_step_table_without_optional_columns_reads(tmp_path):
    run = generic.read(_episodes(tmp_path), steps=_steps(tmp_path))
    assert list(run.steps) == ["episode_id", "step"]
    assert {"steps.reward", "steps.tool_status", "steps.action"} <= set(run.missing)


# --- --map ------------------------------------------------------------------------------------------


def test_parse_mapping_strips_spaces():
    assert generic.parse_mapping([" score = return ", "turns=length"]) == {"score": "return", "turns": "length"}
    assert generic.parse_mapping([]) == {}


@pytest.mark.parametrize("item", ["score", "=return", "score=", " = "])
def test_parse_mapping_refuses_a_half(item):
    with pytest.raises(LogSchemaError, match=rf"^--map '{item}': expected LOG_COLUMN=SCHEMA_COLUMN, e\.g\. "
                                             r"--map score=return$"):
        generic.parse_mapping([item])


def test_parse_mapping_lists_the_schema_columns():
    with pytest.raises(LogSchemaError) as info:
        generic.parse_mapping(["score=reward_sum"])
    listed = str(info.value).split("schema columns: ")[1].split(", ")
    assert listed == sorted(listed) and {"return", "step", "seed", "tool_status"} <= set(listed)
