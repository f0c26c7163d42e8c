"""The generic reader's files: which names it reads, how paths pair up, and which columns it reads."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from envaudit.logs import generic
from envaudit.logs.schema import LogSchemaError

EPISODES = pd.DataFrame({"episode_id": [1, 2, 3], "iteration": [0, 0, 1], "return": [1.0, 0.0, 0.5]})
STEPS = pd.DataFrame({"episode_id": [1, 1, 2, 3], "step": [0, 1, 0, 0], "reward": [0.0, 1.0, 0.0, 0.5]})


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("name", ["episodes.jsonl", "episodes.json", "EPISODES.NDJSON", "run.parquet", "run.pq",
                                  "run.csv", "run.jsonl.gz", "run.CSV.GZ"])
def test_sniff_knows_every_suffix(tmp_path, name):
    assert generic.sniff(tmp_path / name)


@pytest.mark.parametrize("name", ["notes.txt", "run.gz", "run.jsonl.bak", "gz.run"])
def test_sniff_refuses_other_names(tmp_path, name):
    assert generic.sniff(tmp_path / name) is False


def test_sniff_reads_a_folder_by_its_files(tmp_path):
    (tmp_path / "README.txt").write_text("not a log")
    assert generic.sniff(tmp_path) is False
    EPISODES.to_csv(tmp_path / "episodes.csv", index=False)
    assert generic.sniff(tmp_path) is True


@pytest.mark.parametrize("name", ["episodes.pq", "episodes.ndjson", "episodes.json"])
def test_each_suffix_is_read_as_its_format(tmp_path, name):
    path = tmp_path / name
    if name.endswith(".pq"):
        EPISODES.to_parquet(path)
    else:
        _jsonl(path, EPISODES.to_dict("records"))
    frame = generic.read_table(path)
    assert frame["return"].tolist() == [1.0, 0.0, 0.5]
    assert generic.read(path).episodes["episode_id"].tolist() == [1, 2, 3]


def _with_extras(frame):
    return frame.assign(completion="a long completion the analyses never read", score=[3, 4, 5][: len(frame)])


@pytest.mark.parametrize("kind", ["parquet", "csv", "jsonl"])
def test_read_table_reads_only_the_wanted_columns(tmp_path, kind):
    path = tmp_path / f"episodes.{kind}"
    frame = _with_extras(EPISODES)
    if kind == "parquet":
        frame.to_parquet(path)
    elif kind == "csv":
        frame.to_csv(path, index=False)
    else:
        _jsonl(path, frame.to_dict("records"))
    assert list(generic.read_table(path, {"episode_id", "return", "absent"})) == ["episode_id", "return"]
    assert list(generic.read_table(path)) == ["episode_id", "iteration", "return", "completion", "score"]


def test_mixed_value_kinds_fall_back_to_pandas_keeping_values_as_logged(tmp_path):
    # action is an int in one row and text in the next: pyarrow refuses the column
    path = _jsonl(tmp_path / "episodes.jsonl", [
        {"episode_id": "007", "iteration": 0, "return": 1.0, "action": 3, "response": "x"},
        {"episode_id": "008", "iteration": 1, "return": 0.0, "action": "search", "response": "y"}])
    frame = generic.read_table(path, {"episode_id", "action"})
    assert list(frame) == ["episode_id", "action"]
    assert frame["episode_id"].tolist() == ["007", "008"]  # ids that look like numbers stay text
    assert frame["action"].tolist() == [3, "search"]
    assert list(generic.read_table(path)) == ["episode_id", "iteration", "return", "action", "response"]


def test_csv_header_names_may_be_quoted(tmp_path):
    path = tmp_path / "episodes.csv"
    path.write_text('"episode_id","iteration","return","score"\n1,0,1.5,9\n2,1,0.5,8\n')
    frame = generic.read_table(path, {"episode_id", "return"})
    assert list(frame) == ["episode_id", "return"]
    assert frame["return"].tolist() == [1.5, 0.5]


def test_csv_reads_the_header_of_the_first_line_only(tmp_path):
    path = tmp_path / "episodes.csv"
    path.write_text("episode_id,return,note\n1,2.0,return\n")
    assert list(generic.read_table(path, {"episode_id", "return"})) == ["episode_id", "return"]


def test_csv_with_bytes_that_are_not_utf8_in_an_unread_column_is_read(tmp_path):
    path = tmp_path / "episodes.csv"
    path.write_bytes(b"episode_id,iteration,return,prompt_text\n1,0,1.0,caf\xe9\n2,1,0.0,na\xefve\n")
    frame = generic.read_table(path, {"episode_id", "iteration", "return"})
    assert frame["return"].tolist() == [1.0, 0.0]


def test_read_reads_only_schema_and_mapped_columns(tmp_path, monkeypatch):
    path = tmp_path / "episodes.parquet"
    _with_extras(EPISODES).drop(columns="return").to_parquet(path)
    STEPS.assign(observation="a page of text").to_parquet(tmp_path / "steps.parquet")
    read = []
    original = generic.read_table
    monkeypatch.setattr(generic, "read_table", lambda p, wanted=None: read.append(original(p, wanted)) or read[-1])
    run = generic.read(path, steps=tmp_path / "steps.parquet", mapping={"score": "return"})
    assert run.episodes["return"].tolist() == [3.0, 4.0, 5.0]
    assert list(read[0]) == ["episode_id", "iteration", "score"]
    assert list(read[1]) == ["episode_id", "step", "reward"]


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(LogSchemaError, match=r"episodes\.jsonl does not exist; give the path of a JSONL, Parquet"):
        generic.read_table(tmp_path / "episodes.jsonl")


def test_an_unknown_suffix_is_told_the_suffixes(tmp_path):
    path = tmp_path / "episodes.txt"
    path.write_text("episode_id\n1\n")
    told = (r"episodes\.txt: cannot tell its format from the name; expected a file ending in "
            r"\.jsonl, \.json, \.ndjson, \.parquet, \.pq, \.csv \(optionally \.gz\)")
    with pytest.raises(LogSchemaError, match=told):
        generic.read_table(path)


@pytest.mark.parametrize("name", ["episodes.parquet", "episodes.csv.gz"])
def test_an_unreadable_file_names_the_format_it_was_read_as(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\x00\x01 this is not a log \xff")
    kind = name.split(".")[1]
    with pytest.raises(LogSchemaError, match=rf"{name} could not be read as {kind}: "):
        generic.read_table(path)


# --- which files make a run -------------------------------------------------------------------------


def _folder(tmp_path, steps=True):
    EPISODES.to_csv(tmp_path / "episodes.csv", index=False)
    if steps:
        STEPS.to_csv(tmp_path / "steps.csv", index=False)
    return tmp_path


def test_a_folder_is_its_episodes_and_steps_files(tmp_path):
    run = generic.read(_folder(tmp_path))
    assert run.steps["step"].tolist() == [0, 1, 0, 0]
    (tmp_path / "alone").mkdir()
    assert generic.read(_folder(tmp_path / "alone", steps=False)).steps is None


def test_steps_given_with_a_folder_replace_the_folders_steps(tmp_path):
    other = tmp_path / "other.jsonl"
    _jsonl(other, [{"episode_id": 3, "step": 0, "reward": 9.0}])
    run = generic.read(_folder(tmp_path), steps=other)
    assert run.steps["reward"].tolist() == [9.0]


def test_a_folder_without_episodes_is_told_what_to_give(tmp_path):
    STEPS.to_csv(tmp_path / "steps.csv", index=False)
    with pytest.raises(LogSchemaError, match=r"has no episodes\.jsonl/\.parquet/\.csv; give the episode table's path"):
        generic.read(tmp_path)


def test_two_paths_are_episodes_then_steps(tmp_path):
    EPISODES.to_csv(tmp_path / "e.csv", index=False)
    STEPS.to_csv(tmp_path / "s.csv", index=False)
    run = generic.read([tmp_path / "e.csv", tmp_path / "s.csv"])
    assert len(run.episodes) == 3 and len(run.steps) == 4


@pytest.mark.parametrize(("count", "with_steps", "told"), [
    (0, False, "got 0 paths; pass"),
    (3, False, "got 3 paths; pass"),
    (2, True, "got 2 paths and --steps; pass"),
])
def test_too_many_or_too_few_paths_are_refused(tmp_path, count, with_steps, told):
    paths = []
    for k in range(count):
        EPISODES.to_csv(tmp_path / f"e{k}.csv", index=False)
        paths.append(tmp_path / f"e{k}.csv")
    STEPS.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(LogSchemaError, match=rf"expected an episode table and at most one step table, {told} "
                                             r"EPISODES \[STEPS\] or EPISODES --steps STEPS$"):
        generic.read(paths, steps=tmp_path / "s.csv" if with_steps else None)


def test_a_step_table_given_as_episodes_is_told_to_swap(tmp_path):
    STEPS.to_csv(tmp_path / "steps.csv", index=False)
    with pytest.raises(LogSchemaError, match=r"steps\.csv looks like a step table \(it has a step column\); give the "
                                             "episode table first and this one as the second PATH or --steps"):
        generic.read(tmp_path / "steps.csv")
    pd.DataFrame({"step": [0, 1]}).to_csv(tmp_path / "only.csv", index=False)
    with pytest.raises(LogSchemaError, match="looks like a step table"):
        generic.read(tmp_path / "only.csv")


def test_an_episode_table_with_a_step_column_is_read_when_steps_are_given(tmp_path):
    EPISODES.assign(step=7).to_csv(tmp_path / "e.csv", index=False)
    STEPS.to_csv(tmp_path / "s.csv", index=False)
    run = generic.read(tmp_path / "e.csv", steps=tmp_path / "s.csv")
    assert "step" not in run.episodes and run.steps["step"].tolist() == [0, 1, 0, 0]
