"""Each trainer reader on a small sample in that trainer's real on-disk format.

The samples under tests/logs/data/<trainer>/ were written to match, field for field and in the same
layout, what these source lines write (the commits read are in each reader's docstring):

- verl: ``verl/trainer/ppo/ray_trainer.py`` ``_dump_generations`` (``{global_steps}.jsonl``; keys
  input, output, gts, score, step, then the reward_extra_infos keys, ``json.dumps(entry,
  ensure_ascii=False)``); extra keys of ``verl/utils/reward_score/math_dapo.py`` (score, acc, pred)
  and ``verl/workers/reward_manager/dapo.py`` lines 104-125 (acc = bare score, overlong_reward,
  overlong).
- SkyRL: ``skyrl/train/utils/trainer_utils.py`` ``dump_per_dataset_eval_results`` (the ``entry``
  dict, ``{sanitize_data_source}.jsonl`` + ``aggregated_results.jsonl``) under
  ``skyrl/train/evaluate.py``'s ``dumped_evals/global_step_{N}_evals``; env_extras as
  ``examples/train/gsm8k/gsm8k_dataset.py`` builds them.
- TRL: ``trl/trainer/grpo_trainer.py`` ``log`` (the ``table`` dict -> ``df_base.to_parquet(
  completions/completions_{global_step:05d}.parquet)``, written by data/trl/make_sample.py with the
  same pandas call); the pre-0.28 W&B file as ``wandb/sdk/data_types/table.py`` ``_to_table_json``
  writes it, with v0.27's ``"step": [str(global_step)]``.
- prime-rl: ``src/prime_rl/monitors/file.py`` (``rollouts/step_{N}/{kind}/{subset}/traces.jsonl``,
  orjson: compact separators) of ``Episode.to_record()`` (``verifiers/v1/episode.py``,
  ``verifiers/v1/trace.py``: field order of the models, None fields dropped). The agent's runtime
  config is abbreviated (the reader never reads it).
- OpenRLHF: ``openrlhf/utils/logging_utils.py`` ``WandbLogger.log_train`` (columns global_step,
  text, reward; the whole table re-logged each step) as ``wandb/sdk/data_types/base_types/media.py``
  names the file (``{key}_{step}_{sha256[:20]}.table.json``).

Expected values come from those samples' design (which rollout is correct, truncated, timed out).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from envaudit.errors import UsageError
from envaudit.logs.readers import READERS, reader_for
from envaudit.logs.schema import END_REASONS

DATA = Path(__file__).parent / "data"


def _rows(run, column):
    return run.episodes[column].tolist()


# ---------------------------------------------------------------- verl

def test_verl_rollout_dir_maps_steps_groups_scores_and_acc():
    run = READERS["verl"].read(DATA / "verl" / "rollout")
    eps = run.episodes
    assert run.source == "verl"
    assert len(eps) == 8
    assert _rows(run, "iteration") == [1, 1, 1, 1, 2, 2, 2, 2]
    assert _rows(run, "return") == [1.0, -1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0]
    assert _rows(run, "success") == [True, False, True, True, True, True, False, False]
    # two prompts per step, rollout.n = 2: four groups of two; the same prompt in step 2 is a new group
    assert eps.groupby("group_id").size().tolist() == [2, 2, 2, 2]
    assert eps["group_id"].iloc[0] == eps["group_id"].iloc[1] != eps["group_id"].iloc[4]
    assert eps["episode_id"].iloc[0] == "1.jsonl:1" and eps["episode_id"].is_unique
    assert {"length", "end_reason"} <= set(run.missing) and "success" not in run.missing
    assert run.steps is None
    assert any("acc" in n for n in run.notes)


def test_verl_dapo_bare_score_acc_is_not_success_and_penalty_already_in_score():
    run = READERS["verl"].read(DATA / "verl" / "dapo_bare" / "5.jsonl")
    # dumped score = bare score + overlong_reward; acc is the bare score (a reward), so no success
    assert _rows(run, "return") == [1.0, 0.75, 0.0, -0.5]
    assert "success" in run.missing
    assert any("bare number" in n for n in run.notes)


def test_verl_dapo_dict_score_adds_the_overlong_penalty():
    run = READERS["verl"].read(DATA / "verl" / "dapo_dict")
    # the dict's pre-penalty score replaced the token score in the line: trained reward = score + penalty
    assert _rows(run, "return") == [0.5, -1.0]
    assert _rows(run, "success") == [True, False]


# ---------------------------------------------------------------- SkyRL

def test_skyrl_eval_dumps_map_step_folders_and_stop_reasons():
    run = READERS["skyrl"].read(DATA / "skyrl" / "dumped_evals")
    eps = run.episodes
    assert len(eps) == 8  # aggregated_results.jsonl is metrics, not rollouts
    assert _rows(run, "iteration") == [0, 0, 0, 0, 5, 5, 5, 5]
    assert _rows(run, "return") == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    assert _rows(run, "end_reason") == ["terminated", "truncated", "terminated", "terminated",
                                        "terminated", "terminated", "terminated", "truncated"]
    assert eps.groupby("group_id").size().tolist() == [2, 2, 2, 2]
    assert set(eps["task"]) == {"openai/gsm8k"}
    assert {"length", "success"} <= set(run.missing)


# ---------------------------------------------------------------- TRL

def test_trl_parquet_sums_reward_columns_and_skips_a_relogged_table():
    run = READERS["trl"].read(DATA / "trl" / "completions")
    eps = run.episodes
    # completions_00003 repeats 00002's generation (num_iterations=2, logging_steps=1): read once
    assert len(eps) == 8
    assert _rows(run, "iteration") == [1, 1, 1, 1, 2, 2, 2, 2]
    ret = _rows(run, "return")
    assert ret[:5] == [2.0, 1.0, 1.0, 0.0, 2.0] and math.isnan(ret[5]) and ret[6:] == [2.0, 1.0]
    assert _rows(run, "success") == [True, False, True, False, True, False, True, True]
    assert eps.groupby("group_id").size().tolist() == [2, 2, 2, 2]
    assert any("repeated" in n for n in run.notes)
    assert any("accuracy_reward, format_reward" in n for n in run.notes)
    assert {"length", "end_reason"} <= set(run.missing)


def test_trl_reward_weights_and_named_reward_columns():
    run = READERS["trl"].read(DATA / "trl" / "completions" / "completions_00001.parquet",
                              reward_weights=[1.0, 0.5])
    assert _rows(run, "return") == [1.5, 0.5, 1.0, 0.0]
    only_acc = READERS["trl"].read(DATA / "trl" / "completions" / "completions_00001.parquet",
                                   reward_columns=["accuracy_reward"])
    assert _rows(only_acc, "return") == [1.0, 0.0, 1.0, 0.0]
    with pytest.raises(UsageError, match="reward_weights has 1 values for 2 reward columns"):
        READERS["trl"].read(DATA / "trl" / "completions", reward_weights=[1.0])


def test_trl_pre_028_wandb_table_with_string_steps():
    run = READERS["trl"].read(DATA / "trl" / "wandb")
    assert _rows(run, "iteration") == [4, 4]
    assert _rows(run, "return") == [2.0, 0.0]
    assert "success" in run.missing  # no log_extra before 0.28, and rewards are never success


# ---------------------------------------------------------------- prime-rl

def test_prime_rl_all_subset_maps_turns_end_reasons_metrics_and_steps():
    run = READERS["prime-rl"].read(DATA / "prime-rl" / "rollouts")
    eps = run.episodes
    assert _rows(run, "episode_id") == ["e1", "e2", "e3", "e4", "e5", "e6"]
    assert _rows(run, "group_id") == ["g0", "g0", "g1", "g1", "g2", "g2"]
    assert _rows(run, "iteration") == [0, 0, 0, 0, 1, 1]
    ret = _rows(run, "return")  # correct_answer (weight 1) + 0.2 * format
    assert ret[:5] == pytest.approx([1.1, 0.0, 0.0, 0.0, 1.1]) and math.isnan(ret[5])
    assert _rows(run, "length") == [2, 3, 1, 1, 1, 0]
    assert _rows(run, "end_reason") == ["terminated", "truncated", "timeout", "truncated", "terminated", "error"]
    assert eps["success"].tolist() == [True, False, pd.NA, False, True, pd.NA]
    steps = run.steps
    assert steps.groupby("episode_id").size().to_dict() == {"e1": 2, "e2": 3, "e3": 1, "e4": 1, "e5": 1}
    assert steps[steps.episode_id == "e1"]["action"].tolist() == ["search", "reply"]
    assert steps["tool_name"].dropna().unique().tolist() == ["search"]
    assert {"steps.reward", "steps.tool_status", "steps.latency_s"} <= set(run.missing)
    assert any("failed before any trace" in n for n in run.notes)


def test_prime_rl_effective_subset_is_only_what_was_trained_on():
    run = READERS["prime-rl"].read(DATA / "prime-rl" / "rollouts", subset="effective")
    assert _rows(run, "episode_id") == ["e1", "e2"]
    with pytest.raises(UsageError, match="holds no eval/all/traces.jsonl"):
        READERS["prime-rl"].read(DATA / "prime-rl" / "rollouts", kind="eval")


def test_success_field_must_name_a_field_of_the_log():
    with pytest.raises(UsageError, match="success_field='solved' is not in the log; fields there: .*correct"):
        READERS["prime-rl"].read(DATA / "prime-rl" / "rollouts", success_field="solved")


# ---------------------------------------------------------------- OpenRLHF

def test_openrlhf_cumulative_wandb_tables_read_once():
    run = READERS["openrlhf"].read(DATA / "openrlhf" / "wandb")
    assert _rows(run, "iteration") == [1, 2, 3]
    assert _rows(run, "return") == [1.0, 0.0, 1.0]
    assert _rows(run, "episode_id") == ["step1", "step2", "step3"]
    assert {"group_id", "length", "end_reason", "success"} <= set(run.missing)


# ---------------------------------------------------------------- choosing a reader

@pytest.mark.parametrize("name, path", [
    ("verl", "verl/rollout"), ("verl", "verl/rollout/2.jsonl"),
    ("skyrl", "skyrl/dumped_evals"), ("skyrl", "skyrl/dumped_evals/global_step_5_evals/openai_gsm8k.jsonl"),
    ("trl", "trl/completions"), ("trl", "trl/wandb"),
    ("prime-rl", "prime-rl/rollouts"), ("prime-rl", "prime-rl/rollouts/step_1/train/all/traces.jsonl"),
    ("openrlhf", "openrlhf/wandb"),
])
def test_sniffing_picks_the_trainer_that_wrote_the_log(name, path):
    assert reader_for(DATA / path).NAME == name


def test_every_reader_returns_schema_end_reasons():
    for name, path in [("skyrl", "skyrl/dumped_evals"), ("prime-rl", "prime-rl/rollouts")]:
        run = READERS[name].read(DATA / path)
        assert set(run.episodes["end_reason"].dropna()) <= set(END_REASONS)


def test_a_log_no_reader_knows_gets_a_clear_error(tmp_path):
    log = tmp_path / "rollouts.jsonl"
    log.write_text('{"prompt": "hi", "reward": 1.0}\n')
    with pytest.raises(UsageError, match=r"no trainer reader recognises .*--format NAME with NAME one of "
                                         r"verl, skyrl, trl, prime-rl, openrlhf"):
        reader_for(log)
    with pytest.raises(UsageError, match="--format 'rllm' is not a trainer reader; choose one of verl, skyrl"):
        reader_for(log, "rllm")
    with pytest.raises(UsageError, match="does not exist"):
        reader_for(tmp_path / "nowhere")


def test_a_forced_reader_on_the_wrong_file_names_what_is_missing(tmp_path):
    wrong = tmp_path / "3.jsonl"
    shutil.copy(DATA / "skyrl" / "dumped_evals" / "global_step_0_evals" / "openai_gsm8k.jsonl", wrong)
    with pytest.raises(UsageError, match=r"3\.jsonl:1 has no input, output, step .*not a verl rollout dump"):
        READERS["verl"].read(wrong)


def test_a_broken_line_names_file_and_line(tmp_path):
    log = tmp_path / "7.jsonl"
    good = (DATA / "verl" / "rollout" / "1.jsonl").read_text().splitlines()[0]
    log.write_text(good + "\n" + good[: len(good) // 2] + "\n")
    with pytest.raises(UsageError, match=r"7\.jsonl:2 is not valid JSON"):
        READERS["verl"].read(log)


# ---------------------------------------------------------------- the correctness rule

def test_an_integer_0_1_copy_of_a_float_reward_is_not_success():
    from envaudit.logs.readers._common import correctness

    reward = pd.Series([1.0, 0.0, 1.0, 0.0])
    copy = pd.Series([1, 0, 1, 0])  # int64 against float64: equal by value all the same
    success, note = correctness(copy, "acc", reward=reward)
    assert success is None and "copy of the reward" in note
    # differing on one rollout: a correctness flag of its own
    success, note = correctness(pd.Series([1, 0, 0, 0]), "acc", reward=reward)
    assert success.tolist() == [True, False, False, False] and note == "success <- 'acc' (0/1)"
    success, note = correctness(pd.Series([2, 0, 1, 0]), "acc")
    assert success is None and "other than 0/1" in note


def test_verl_int_acc_copying_a_float_score_is_not_success(tmp_path):
    lines = [{"input": "q", "output": "a", "gts": "a", "score": float(s), "step": 1, "acc": s} for s in (1, 0, 1, 0)]
    (tmp_path / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    run = READERS["verl"].read(tmp_path)
    assert "success" in run.missing and any("success left missing" in n for n in run.notes)


# ---------------------------------------------------------------- --map on a trainer's dump

def test_map_reads_a_dumps_own_keys_and_checks_them(tmp_path):
    from envaudit.logs.readers import map_fields

    lines = [{"input": f"q{i % 2}", "output": "a", "gts": "a", "score": float(i % 2), "step": 1, "acc": bool(i % 2),
              "tool_timeouts": i % 3, "n_errors": 1, "num_turns": 2 + i, "note": "x"} for i in range(6)]
    (tmp_path / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    run = map_fields(READERS["verl"].read(tmp_path), {"num_turns": "length", "n_errors": "tool_errors"})
    assert _rows(run, "length") == [2, 3, 4, 5, 6, 7]
    assert _rows(run, "tool_errors") == [1] * 6
    assert _rows(run, "tool_timeouts") == [0, 1, 2, 0, 1, 2]  # read unasked: the schema's own name
    assert "length" not in run.missing and "length <- 'num_turns' (--map)" in run.notes
    with pytest.raises(UsageError, match=r"no key 'turns'; its keys: input, output, gts, score, step, acc"):
        map_fields(READERS["verl"].read(tmp_path), {"turns": "length"})
    with pytest.raises(UsageError, match=r"--map num_turns=tool_status: a verl dump has no step table"):
        map_fields(READERS["verl"].read(tmp_path), {"num_turns": "tool_status"})
    with pytest.raises(UsageError, match=r"'note' is not a number on every rollout"):
        map_fields(READERS["verl"].read(tmp_path), {"note": "length"})
    with pytest.raises(UsageError, match=r"--map score=success: .*copy of the reward"):
        map_fields(READERS["verl"].read(tmp_path), {"score": "success"})


def test_map_reaches_every_reader():
    from envaudit.logs.readers import map_fields

    cases = {"skyrl": ("dumped_evals", "env_class", "task"), "openrlhf": ("wandb", "text", "task"),
             "trl": ("completions", "correct", "task"),
             "prime-rl": ("rollouts", "metrics.correct", "success")}
    for name, (folder, key, column) in cases.items():
        run = READERS[name].read(DATA / name / folder)
        assert key in run.fields.columns, name
        assert len(run.fields) == len(run.episodes), name
        if column == "task":
            mapped = map_fields(run, {key: column})
            assert _rows(mapped, column) == pd.Series(run.fields[key]).tolist(), name


def test_prime_rl_reads_a_timeout_error_type_as_a_timeout(tmp_path):
    source = DATA / "prime-rl" / "rollouts" / "step_0" / "train" / "all" / "traces.jsonl"
    first = json.loads(source.read_text().splitlines()[0])
    first["errors"] = [{"type": "TimeoutError", "message": "the search tool did not answer"}]
    folder = tmp_path / "step_3" / "train" / "all"
    folder.mkdir(parents=True)
    (folder / "traces.jsonl").write_text(json.dumps(first) + "\n")
    assert _rows(READERS["prime-rl"].read(tmp_path), "end_reason") == ["timeout"]
    first["errors"] = [{"type": "ValueError", "message": "bad tool arguments"}]
    (folder / "traces.jsonl").write_text(json.dumps(first) + "\n")
    assert _rows(READERS["prime-rl"].read(tmp_path), "end_reason") == ["error"]


# ---------------------------------------------------------------- what the readers share

def test_copies_reward_by_value_on_every_rollout():
    from envaudit.logs.readers._common import copies_reward

    assert copies_reward(pd.Series([1]), pd.Series([1.0]))  # one rollout is enough to compare
    assert not copies_reward(pd.Series([], dtype=float), pd.Series([], dtype=float))  # nothing to compare
    assert copies_reward(pd.Series([1.0, math.nan]), pd.Series([1.0, math.nan]))  # unscored alike
    assert not copies_reward(pd.Series([1.0, math.nan]), pd.Series([1.0, 0.0]))
    assert not copies_reward(pd.Series([1, 0]), pd.Series([1.0, 0.0, 1.0]))


def test_correctness_kinds():
    from envaudit.logs.readers._common import correctness

    success, note = correctness(pd.Series([True, None, False], dtype=object), "ok")
    assert str(success.dtype) == "boolean" and success.tolist() == [True, pd.NA, False]
    assert note == "success <- 'ok' (boolean)"
    success, note = correctness(pd.Series([True, 2], dtype=object), "ok")
    assert success is None and note == "success: 'ok' holds non-numeric values (e.g. True); success left missing"
    success, note = correctness(pd.Series([0, 3]), "ok")
    assert note.startswith("success: 'ok' holds values other than 0/1 (e.g. 3)")


def test_jsonl_lines_blank_lines_and_non_objects(tmp_path):
    from envaudit.logs.readers._common import first_record, read_jsonl

    log = tmp_path / "1.jsonl"
    log.write_text('\n\n{"a": 1}\n\n{"a": 2}\n')
    assert first_record(log) == {"a": 1}  # blank lines before the first record are skipped
    assert [(n, r["a"]) for n, r in read_jsonl(log)] == [(3, 1), (5, 2)]
    log.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(UsageError, match=r"1\.jsonl:2 holds a JSON list, expected an object"):
        list(read_jsonl(log))
    log.write_text("[1, 2]\n")
    assert first_record(log) is None


def test_step_files_sort_as_numbers(tmp_path):
    from envaudit.logs.readers._common import find_files

    for step in (10, 2, 1):
        (tmp_path / f"{step}.jsonl").write_text("{}\n")
    assert [p.name for p in find_files(tmp_path, "*.jsonl", "dump", "hint")] == ["1.jsonl", "2.jsonl", "10.jsonl"]
    with pytest.raises(UsageError, match=r"holds no verl dump \(\*\.parquet\); set the option"):
        find_files(tmp_path, "*.parquet", "verl dump", "set the option")


def test_group_key_and_the_logged_run():
    import hashlib

    from envaudit.logs.readers._common import group_key, logged_run, pick_correctness_field

    assert group_key(3, "p", "q") == "3/" + hashlib.sha1(b"p\x1fq").hexdigest()[:10]
    eps = pd.DataFrame({"episode_id": ["a", "b"], "iteration": ["1", "2"], "return": [1, 0], "length": [2.0, 3.0]},
                       index=[5, 7])
    steps = pd.DataFrame({"episode_id": ["a"], "step": [0], "action": ["x"]}, index=[9])
    run = logged_run(eps, steps, "verl", [])
    assert run.episodes.index.tolist() == [0, 1] and "index" not in run.episodes.columns
    assert str(run.episodes["iteration"].dtype) == "int64" and str(run.episodes["return"].dtype) == "float64"
    assert str(run.episodes["length"].dtype) == "Int64"
    assert run.missing == ["group_id", "end_reason", "success", "steps.reward", "steps.tool_name",
                           "steps.tool_status", "steps.latency_s"]
    assert run.steps.index.tolist() == [0]
    assert pick_correctness_field(["score", "pred"], None) is None
    assert pick_correctness_field(["passed", "acc"], None) == "acc"  # in CORRECTNESS_NAMES' order
