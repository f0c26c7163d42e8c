"""The TRL reader in detail: file selection and order, repeated tables, reward columns and weights,
``success`` and the notes and errors.

Samples are written as ``GRPOTrainer.log`` writes them (see ``tests/logs/data/trl/make_sample.py``):
``pd.DataFrame(table).to_parquet(completions/completions_{step:05d}.parquet)`` with step, prompt,
completion, one float column per reward function, the ``log_extra`` columns and advantage; before
0.28 a W&B ``completions_<n>_<hash>.table.json`` of the same columns.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from envaudit.errors import UsageError
from envaudit.logs.readers import trl

DATA = Path(__file__).parent / "data" / "trl"
FIRST = DATA / "completions" / "completions_00001.parquet"
MAPPED = "iteration <- step (global step when the table was logged); group_id <- step + prompt"
NO_LENGTH = "length, end_reason: TRL's completions table has no token counts and no truncation flag; missing"
COLUMNS = "step, prompt, completion, accuracy_reward, format_reward, correct, advantage"


def _parquet(path: Path, step: int, rewards: list, prompts=("p", "p")) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"step": [step] * len(rewards), "prompt": list(prompts), "completion": [f"c{r}" for r in rewards],
                  "accuracy_reward": [float(r) for r in rewards], "advantage": [0.0] * len(rewards)}
                 ).to_parquet(path)
    return path


def _wandb(path: Path, step: int, rewards: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"columns": ["step", "prompt", "completion", "accuracy_reward", "advantage"],
                                "data": [[str(step), "p", f"c{r}", r, 0.0] for r in rewards]}))
    return path


def _col(run, column):
    return run.episodes[column].tolist()


# ---------------------------------------------------------------- notes and columns

def test_one_table_notes_text_columns_and_fields():
    run = trl.read(FIRST)
    assert run.notes == ["read 4 completions from 1 TRL table(s) (GRPOConfig.log_completions)", MAPPED,
                         "return <- sum of reward columns accuracy_reward, format_reward (NaN-skipping, as "
                         "GRPOTrainer)", "success <- 'correct' (boolean)", NO_LENGTH]
    table = pd.read_parquet(FIRST)
    assert _col(run, "prompt") == table["prompt"].tolist()
    assert _col(run, "response") == table["completion"].tolist()
    assert _col(run, "episode_id") == [f"completions_00001.parquet:{i}" for i in range(4)]
    assert list(run.fields.columns) == COLUMNS.split(", ")  # the table's own columns, no index column added
    assert run.source == "trl"


def test_folder_notes_count_the_repeated_table_and_the_unscored_completion():
    run = trl.read(DATA / "completions")
    assert run.notes == ["read 8 completions from 2 TRL table(s) (GRPOConfig.log_completions)", MAPPED,
                         "1 table(s) repeated the previous one row for row (the same generation logged at a "
                         "later step) and were skipped",
                         "return <- sum of reward columns accuracy_reward, format_reward (NaN-skipping, as "
                         "GRPOTrainer)",
                         "1 completions had no reward from any function: return NaN",
                         "success <- 'correct' (boolean)", NO_LENGTH]
    assert _col(run, "episode_id")[4] == "completions_00002.parquet:0"


def test_weights_are_named_in_the_notes_as_plain_numbers():
    run = trl.read(FIRST, reward_weights=[2, 1])
    assert _col(run, "return") == [3.0, 1.0, 2.0, 0.0]  # 2 * accuracy + format
    assert run.notes[2] == ("return <- sum of reward columns accuracy_reward, format_reward with weights [2.0, 1.0] "
                            "(NaN-skipping, as GRPOTrainer)")


def test_a_reward_cell_that_is_not_a_number_is_unscored(tmp_path):
    log = tmp_path / "completions_2_0a1b.table.json"
    log.write_text(json.dumps({"columns": ["step", "prompt", "completion", "accuracy_reward", "advantage"],
                               "data": [["2", "p", "a", 1.0, 0.0], ["2", "p", "b", "n/a", 0.0]]}))
    ret = _col(trl.read(log, reward_columns=["accuracy_reward"]), "return")
    assert ret[0] == 1.0 and math.isnan(ret[1])


# ---------------------------------------------------------------- repeated tables and file order

def test_a_table_after_a_repeated_one_is_still_read(tmp_path):
    _parquet(tmp_path / "completions_00001.parquet", 1, [1, 0])
    _parquet(tmp_path / "completions_00002.parquet", 2, [1, 0])  # step 1's generation logged again
    _parquet(tmp_path / "completions_00003.parquet", 3, [0, 0])
    _parquet(tmp_path / "completions_00004.parquet", 4, [0, 0])  # and step 3's
    run = trl.read(tmp_path)
    assert _col(run, "iteration") == [1, 1, 3, 3]
    assert run.notes[2].startswith("2 table(s) repeated the previous one")


def test_wandb_tables_are_read_in_step_order(tmp_path):
    _wandb(tmp_path / "completions_10_9f8e7d.table.json", 10, [0.0, 0.0])
    _wandb(tmp_path / "completions_9_1a2b3c.table.json", 9, [1.0, 0.0])
    assert _col(trl.read(tmp_path), "iteration") == [9, 9, 10, 10]


def test_only_completions_tables_are_read_from_a_folder(tmp_path):
    _parquet(tmp_path / "completions_00001.parquet", 1, [1, 0])
    (tmp_path / "completions_notes.txt").write_text("run notes\n")
    assert _col(trl.read(tmp_path), "return") == [1.0, 0.0]
    assert trl.sniff(FIRST)


# ---------------------------------------------------------------- errors

def test_a_file_of_another_kind_is_refused(tmp_path):
    log = tmp_path / "completions_00001.csv"
    log.write_text("step,prompt,completion\n")
    with pytest.raises(UsageError, match=r"completions_00001\.csv is neither a \.parquet nor a \.table\.json file; "
                                         r"TRL writes its completions table as completions/completions_NNNNN\.parquet "
                                         r"\(or a W&B completions_\*\.table\.json\)$"):
        trl.read(log)


def test_an_empty_folder_names_the_option(tmp_path):
    with pytest.raises(UsageError, match=r"holds no TRL completions table \(completions_NNNNN\.parquet\); set "
                                         r"GRPOConfig\(log_completions=True\) and point at \{output_dir\}/completions$"):
        trl.read(tmp_path)


def test_a_table_without_trls_columns_names_what_it_lacks(tmp_path):
    log = tmp_path / "completions_00001.parquet"
    pd.DataFrame({"step": [1], "text": ["t"], "reward": [1.0]}).to_parquet(log)
    with pytest.raises(UsageError, match=r"has no prompt, completion column \(it has: step, text, reward\); this is "
                                         r"not a TRL completions table: pass the --format of the trainer that wrote it$"):
        trl.read(log)


def test_one_weight_per_reward_column():
    with pytest.raises(UsageError, match=r"^reward_weights has 3 values for 2 reward columns \(accuracy_reward, "
                                         r"format_reward\); give one weight per reward function, in that order$"):
        trl.read(FIRST, reward_weights=[1.0, 1.0, 1.0])


def test_named_reward_columns_must_exist():
    with pytest.raises(UsageError, match=rf"^reward_columns acc, fmt not in the table; its columns: {COLUMNS}$"):
        trl.read(FIRST, reward_columns=["acc", "format_reward", "fmt"])


def test_a_table_without_float_columns_asks_for_reward_columns(tmp_path):
    log = tmp_path / "completions_00001.parquet"
    pd.DataFrame({"step": [1], "prompt": ["p"], "completion": ["c"], "passed": [True]}).to_parquet(log)
    with pytest.raises(UsageError, match=r"^no reward column in the TRL table \(float columns besides step/advantage; "
                                         r"it has: step, prompt, completion, passed\); name them with reward_columns=$"):
        trl.read(log)


# ---------------------------------------------------------------- success

def test_success_field_names_a_reward_column_the_user_trusts():
    run = trl.read(DATA / "completions", success_field="accuracy_reward")
    # step 2's second completion was unscored (NaN): its correctness is unknown, not False
    assert _col(run, "success") == [True, False, True, False, True, pd.NA, True, True]
    assert run.notes[5] == "success <- 'accuracy_reward' (0/1)"


def test_success_field_must_be_a_table_column_other_than_the_fixed_ones():
    with pytest.raises(UsageError, match=r"^success_field='advantage' is not in the log; fields there: "
                                         r"accuracy_reward, format_reward, correct$"):
        trl.read(FIRST, success_field="advantage")
    with pytest.raises(UsageError, match=r"^success_field='solved' is not in the log"):
        trl.read(FIRST, success_field="solved")


def test_no_boolean_correctness_column_and_ids_keep_the_run_folder():
    run = trl.read(DATA / "wandb")
    assert _col(run, "episode_id")[1] == \
        "run-20250601_120000-q1w2e3r4/files/media/table/completions_4_3f9a0c2d81e6b7a45c10.table.json:1"
    assert run.notes[3] == ("success: no boolean correctness column (log_extra 'correct', 'acc', ...); success left "
                            "missing (success_field= names one)")
