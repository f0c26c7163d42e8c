"""skyrl-gym: the adapter's rows, options and fingerprint, and the step's mapping on gsm8k -- against
skyrl-gym 0.4.0 itself and the row files of ``tests/adapters/data`` (see ``test_skyrl_gym.py``).

Every message and value below was read off the adapter's contract (the module docstring) and the
rows; each bad input is named with the fix, so a swapped check or a wrong key fails here."""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import pytest

pytest.importorskip("skyrl_gym")

from envaudit.adapters.skyrl_gym import TASKS_HINT, SkyRLGymEnv, check, load_rows  # noqa: E402
from envaudit.errors import UsageError  # noqa: E402

DATA = Path(__file__).parent / "data"
GSM8K = str(DATA / "skyrl_gsm8k.jsonl")
MULTI = str(DATA / "skyrl_gsm8k_multi_turn.parquet")
ROW = {"prompt": [{"role": "user", "content": "What is 2 + 2?"}], "env_class": "gsm8k",
       "reward_spec": {"method": "rule", "ground_truth": "4"}}


def _message(call, *args, **kwargs) -> str:
    with pytest.raises(UsageError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


# -- row files ----------------------------------------------------------------------------------------
def test_rows_come_from_json_lists_jsonl_and_parquet(tmp_path):
    listed = tmp_path / "rows.json"
    listed.write_text(json.dumps([ROW, ROW]))
    assert load_rows(str(listed)) == (ROW, ROW)
    lines = tmp_path / "rows.ndjson"
    lines.write_text(json.dumps(ROW) + "\n\n   \n" + json.dumps(ROW) + "\n")  # blank lines are no rows
    assert load_rows(lines) == (ROW, ROW)
    # Parquet hands back NumPy arrays and scalars: the rows come out as the lists and numbers envs read.
    parquet = tmp_path / "multi.parquet"  # a copy: rows are kept per file version, and this one is new
    parquet.write_bytes(Path(MULTI).read_bytes())
    row = load_rows(parquet)[0]
    assert type(row["prompt"]) is list and type(row["prompt"][0]) is dict
    assert row["extra_info"] == {"split": "test", "index": 0, "max_turns": 5} and type(row["extra_info"]["index"]) is int
    # A file rewritten in place is read again (rows are kept per file version): a new modification
    # time with the same size, or the same modification time with another size.
    lines.write_text(json.dumps(ROW) + "\n")
    assert load_rows(lines) == (ROW,)
    same_size = {**ROW, "reward_spec": {"method": "rule", "ground_truth": "5"}}
    before = lines.stat()
    lines.write_text(json.dumps(same_size) + "\n")
    os.utime(lines, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
    assert load_rows(lines) == (same_size,)
    stamp = lines.stat().st_mtime_ns
    lines.write_text(json.dumps(ROW) + "\n" + json.dumps(ROW) + "\n")
    os.utime(lines, ns=(stamp, stamp))
    assert load_rows(lines) == (ROW, ROW)


def test_bad_row_files_name_the_file_the_line_and_the_fix(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(ROW) + "\n\n{oops\n")
    assert _message(load_rows, path).startswith(f"--tasks {path.resolve()}, line 3: not valid JSON (")
    path.write_text("\n")
    assert _message(load_rows, path) == f"--tasks {path.resolve()}: the file holds no rows"
    listed = tmp_path / "rows.json"
    listed.write_text(json.dumps({"rows": [ROW]}))
    assert _message(load_rows, listed) == f"--tasks {listed.resolve()}: expected a JSON list of rows, got dict"
    listed.write_text("[")
    assert _message(load_rows, listed).startswith(f"--tasks {listed.resolve()}: not valid JSON (")
    broken = tmp_path / "rows.parquet"
    broken.write_bytes(b"not parquet")
    assert _message(load_rows, broken).startswith(f"--tasks {broken.resolve()}: not a readable Parquet file (")
    assert _message(load_rows, 5) == f"--tasks 5: expected the path of a row file; {TASKS_HINT}"
    assert _message(load_rows, "  ") == f"--tasks '  ': expected the path of a row file; {TASKS_HINT}"
    missing = tmp_path / "none.jsonl"
    assert _message(load_rows, missing) == f"--tasks {str(missing)!r}: no such file (relative to {os.getcwd()}); {TASKS_HINT}"


@pytest.mark.parametrize(("row", "expected"), [
    ([1, 2], "row 1: expected a row object (prompt, env_class, reward_spec, ...), got list"),
    ({"env_class": "gsm8k"}, "row 1: the row has no 'prompt' (a list of {role, content} chat messages); "
                             "its keys are ['env_class']"),
    ({**ROW, "prompt": "hi"}, "row 1: 'prompt' must be a non-empty list of {role, content} chat messages, got 'hi'"),
    ({**ROW, "prompt": []}, "row 1: 'prompt' must be a non-empty list of {role, content} chat messages, got '[]'"),
    ({**ROW, "prompt": [{"content": "hi"}]}, "row 1: 'prompt' must be a non-empty list of {role, content} chat "
                                             "messages, got \"[{'content': 'hi'}]\""),
    ({**ROW, "prompt": [{"role": "user"}]}, "row 1: 'prompt' must be a non-empty list of {role, content} chat "
                                            "messages, got \"[{'role': 'user'}]\""),
])
def test_each_bad_row_is_named_by_its_number(tmp_path, row, expected):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([ROW, row]))
    assert _message(load_rows, path) == f"--tasks {path.resolve()}, {expected}"


# -- options ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cap", [0, True, "3"])
def test_the_turn_cap_must_be_a_positive_integer(cap):
    assert _message(check, "gsm8k", tasks=GSM8K, turn_cap=cap) == (
        f"--env-arg turn_cap={cap!r}: expected a positive integer number of turns")


def test_check_names_the_env_the_tasks_and_the_rows_at_fault(tmp_path):
    assert check("gsm8k", tasks=GSM8K, turn_cap=1) is None
    assert _message(check, "gsm8k") == (f"skyrl-gym:gsm8k needs tasks: skyrl-gym envs are built from dataset rows "
                                        f"and ship none; {TASKS_HINT}")
    assert _message(SkyRLGymEnv, "gsm8k") == f"skyrl-gym:gsm8k needs tasks; {TASKS_HINT}"
    import skyrl_gym

    assert _message(check, "zzqqxxw", tasks=GSM8K) == (
        f"skyrl-gym has no env 'zzqqxxw' (registered: {', '.join(sorted(skyrl_gym.registry))})")
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps([ROW, {**ROW, "env_class": "aime"}]))
    assert _message(check, "gsm8k", tasks=str(mixed)) == (
        f"--tasks {mixed}: its rows are for env_class aime, gsm8k, not 'gsm8k'; scan skyrl-gym:aime or give rows for gsm8k")
    # Rows without env_class are taken for the env scanned.
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps([{k: v for k, v in ROW.items() if k != "env_class"}]))
    assert check("gsm8k", tasks=str(bare)) is None
    # gsm8k's own env accepts a row whose ground truth is None; the catalogue has no reference to build.
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps([ROW, {**ROW, "reward_spec": {"method": "rule", "ground_truth": None}}]))
    assert _message(check, "gsm8k", tasks=str(empty)) == (
        f"--tasks {empty}, row 1: no reward_spec.ground_truth, which the catalogue's reference answer is built from")


# -- the fingerprint, the turns and the step ------------------------------------------------------------
def test_the_fingerprint_of_a_gsm8k_scan():
    env = SkyRLGymEnv("gsm8k", tasks=GSM8K)
    info = {k: v for k, v in env.adapter_info.items() if k != "catalogue_check"}
    assert info == {
        "ecosystem": "skyrl-gym", "package": "skyrl-gym", "version": importlib.metadata.version("skyrl-gym"),
        "env": "gsm8k", "env_class": "skyrl_gym.envs.gsm8k.env:GSM8kEnv", "tasks": GSM8K, "rows": 10,
        "env_config": {}, "max_turns": 1,
        "success": "the first '#### N' of the answer equals reward_spec.ground_truth (skyrl-gym's gsm8k "
                   "extract_solution, strict)",
        "truncation": "done at max_turns without an answer (multi-turn envs); the adapter's turn cap",
        "tool_status": "read from skyrl-gym's error texts in the next observation "
                       "(envaudit.adapters.skyrl_profiles.TOOL_TEXT)",
        "replay": "the reset seed picks the row (seed mod rows); a fresh skyrl-gym env per reset (skyrl-gym has no reset)",
    }
    assert (env.turn_limit, env.turn_cap, env.max_steps) == (1, 1, 1)
    assert (env.inner, env.index, env.row, env.relabelled) == (None, 0, {}, [])


def test_a_gsm8k_step_is_one_graded_turn():
    """By hand: row 3 of skyrl_gsm8k.jsonl (7 rows of 13 tulips, 19 broken) has ground truth 72."""
    env = SkyRLGymEnv("gsm8k", tasks=GSM8K)
    obs, info = env.reset(seed=3)
    assert obs.startswith("A garden has 7 rows of 13 tulips.") and info == {"index": 3, "system_prompt": ""}
    texts = env.candidates()
    assert (texts["reference"], texts["wrong_1"], texts["wrong_2"], texts["unformatted"]) == (
        "#### 72", "#### 73", "#### 71", "The answer is 72.")
    assert env.step(0) == ("", 1.0, True, False, {"index": 3, "success": True})
    env.reset(seed=3)
    assert env.step("#### 73") == ("", 0.0, True, False, {"index": 3, "success": False})
    env.close()
    assert env.inner is None


def test_the_turn_limit_is_the_largest_a_row_or_the_env_declares(tmp_path):
    # The parquet rows declare max_turns 5 in extra_info; the adapter's cap is the smaller of it and turn_cap.
    multi = SkyRLGymEnv("gsm8k_multi_turn", tasks=MULTI, turn_cap=3)
    assert (multi.turn_limit, multi.turn_cap, multi.max_steps, multi.adapter_info["max_turns"]) == (5, 3, 3, 5)
    assert SkyRLGymEnv("gsm8k_multi_turn", tasks=MULTI).turn_cap == 5
    rows = load_rows(MULTI)
    declared = tmp_path / "declared.json"
    # A row-level max_turns counts as well as extra_info's; one that is no number is ignored.
    declared.write_text(json.dumps([{**rows[0], "max_turns": 7}, {**rows[1], "extra_info": {"max_turns": "many"}}]))
    assert SkyRLGymEnv("gsm8k_multi_turn", tasks=str(declared)).turn_limit == 7
    # extra_info's max_turns of a later row counts too (the env itself reads only the row it is made for).
    later = tmp_path / "later.json"
    later.write_text(json.dumps([rows[0], {**rows[1], "extra_info": {**rows[1]["extra_info"], "max_turns": 9}}]))
    assert SkyRLGymEnv("gsm8k_multi_turn", tasks=str(later)).turn_limit == 9


def test_check_names_what_each_env_class_needs_of_its_rows(tmp_path):
    # A code row's ground truth must be lcb's tests: valid JSON that is not is named, with the format.
    row = json.loads((DATA / "skyrl_lcb.jsonl").read_text().splitlines()[0])
    row["reward_spec"] = {"method": "rule", "ground_truth": json.dumps([{"foo": 1}])}
    path = tmp_path / "lcb.jsonl"
    path.write_text(json.dumps(row) + "\n")
    assert _message(check, "lcb", tasks=str(path)) == (
        f"--tasks {path}, row 0: reward_spec.ground_truth is not lcb's tests (a JSON list of {{input, output, "
        "testtype, metadata.func_name for functional tests}), which the judge runs")
    assert check("lcb", tasks=str(DATA / "skyrl_lcb.jsonl")) is None
    # What the env itself rejects is named with its own words; text2sql's with where its databases go.
    sql = str(DATA / "skyrl_text2sql.jsonl")
    message = _message(check, "text2sql", tasks=sql)
    assert message.startswith(f"--tasks {sql}, row 0: skyrl-gym's text2sql env rejected it: ConfigAttributeError: ")
    assert message.endswith(" (skyrl-gym's text2sql reads its databases under env_config.db_path: pass "
                            "--env-arg db_path=DIR holding spider/database/DB_ID/DB_ID.sqlite)")
    assert check("text2sql", tasks=sql, db_path=str(DATA / "skyrl_sql")) is None
    gsm = tmp_path / "gsm.json"
    gsm.write_text(json.dumps([{**ROW, "reward_spec": "4"}]))
    message = _message(check, "gsm8k", tasks=str(gsm))
    assert message.startswith(f"--tasks {gsm}, row 0: skyrl-gym's gsm8k env rejected it: ") and "db_path" not in message
    assert _message(check, "gsm8", tasks=GSM8K) == "skyrl-gym has no env 'gsm8'; did you mean 'gsm8k'?"


def test_the_search_env_config_is_skyrl_gyms_own_defaults_under_the_options():
    import dataclasses

    from skyrl_gym.envs.search.env import SearchEnvConfig

    env = SkyRLGymEnv("search", tasks=str(DATA / "skyrl_search.jsonl"), topk=2)
    assert dict(env.config) == {**dataclasses.asdict(SearchEnvConfig()), "log_requests": False, "topk": 2}
    assert env.config.log_requests is False  # never a request log in the user's folder
    assert dict(SkyRLGymEnv("gsm8k", tasks=GSM8K).config) == {}  # other envs: the options alone
