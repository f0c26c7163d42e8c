"""The generic reader: JSONL, Parquet and CSV read alike; --map; what a bad log is told."""

from __future__ import annotations

import pandas as pd
import pytest

from envaudit.logs import generic
from envaudit.logs.schema import LogSchemaError
from envaudit.testing.logs import Drift, generate_log, write_log


@pytest.fixture(scope="module")
def small_run():
    return generate_log(drift=Drift("none"), iterations=2, groups=2, group_size=4)


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "csv"])
def test_every_format_reads_the_same_run(small_run, tmp_path, kind):
    eps_path, steps_path = write_log(small_run, tmp_path, kind=kind)
    run = generic.read([eps_path, steps_path])
    assert len(run.episodes) == len(small_run.episodes) == 16
    assert len(run.steps) == len(small_run.steps)
    assert run.episodes["return"].tolist() == pytest.approx(small_run.episodes["return"].tolist())
    assert run.episodes["success"].astype(bool).tolist() == small_run.episodes["success"].astype(bool).tolist()
    assert set(run.steps["action"]) <= {"search", "open_doc", "give_up", "answer_all",
                                        *(f"answer_{k}" for k in range(4))}
    assert run.missing == []
    # A folder of episodes.* and steps.* is the same run; --steps is the same as a second PATH.
    assert len(generic.read(tmp_path).steps) == len(run.steps)
    assert len(generic.read(eps_path, steps=steps_path).steps) == len(run.steps)


def test_map_renames_log_columns_onto_the_schema(small_run, tmp_path):
    eps = small_run.episodes.rename(columns={"return": "score", "group_id": "prompt_uid"})
    path = tmp_path / "rollouts.jsonl"
    eps.drop(columns=["mode"]).to_json(path, orient="records", lines=True)
    with pytest.raises(LogSchemaError, match=r"no return column.*--map YOUR_COLUMN=return"):
        generic.read(path)
    run = generic.read(path, mapping=generic.parse_mapping(["score=return", "prompt_uid=group_id"]))
    assert run.episodes["return"].sum() == pytest.approx(small_run.episodes["return"].sum())
    assert "score -> return" in run.notes
    assert "steps" not in run.missing and run.steps is None


def test_a_missing_optional_column_is_named_never_filled(small_run, tmp_path):
    path = tmp_path / "episodes.csv"
    small_run.episodes.drop(columns=["success", "mode"]).to_csv(path, index=False)
    run = generic.read(path)
    assert "success" in run.missing and "success" not in run.episodes


def test_bad_values_are_told_with_the_fix(small_run, tmp_path):
    eps = small_run.episodes.drop(columns=["mode"]).assign(end_reason="stopped")
    path = tmp_path / "episodes.parquet"
    eps.to_parquet(path)
    with pytest.raises(LogSchemaError, match="end_reason holds 'stopped'; expected one of terminated"):
        generic.read(path)
    with pytest.raises(LogSchemaError, match="expected LOG_COLUMN=SCHEMA_COLUMN"):
        generic.parse_mapping(["score"])
    with pytest.raises(LogSchemaError, match="'reward_sum' is not a schema column"):
        generic.parse_mapping(["score=reward_sum"])
    pd.DataFrame({"episode_id": [1, 1], "iteration": [0, 0], "return": [0.0, 1.0]}).to_json(
        tmp_path / "dup.jsonl", orient="records", lines=True)
    with pytest.raises(LogSchemaError, match="episode_id 1 appears more than once"):
        generic.read(tmp_path / "dup.jsonl")
