"""The verl reader in detail: which files it reads, the DAPO score rules, ``success`` and its notes.

Samples are written in ``_dump_generations``' format (one JSON object per rollout in
``{global_steps}.jsonl``: input, output, gts, score, step, then the reward_extra_infos keys); see
``test_readers.py`` for the source lines and ``envaudit/logs/readers/verl.py`` for the mapping.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from envaudit.errors import UsageError
from envaudit.logs.readers import verl

DATA = Path(__file__).parent / "data" / "verl"
READ_NOTE = "iteration <- step; group_id <- step + input (same prompt text in the same step: verl dumps no uid)"
PLAIN_RETURN = "return <- score (the summed token-level score: the trained reward before any KL-in-reward penalty)"
NO_LENGTH = ("length, end_reason: verl's dump holds decoded text only (no token or turn count, no stop reason); "
             "both left missing")
BARE_ACC = ("success: 'acc' is the score function's bare number (the DAPO reward manager stores acc = score when "
            "the score function returns no dict), a reward, not a correctness check; success left missing")


def _dump(path: Path, *lines: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _line(prompt: str, score, step: int = 1, **extra) -> dict:
    return {"input": prompt, "output": f"reply to {prompt}", "gts": "4", "score": score, "step": step, **extra}


def _col(run, column):
    return run.episodes[column].tolist()


# ---------------------------------------------------------------- notes, prompt and response

def test_plain_dump_notes_and_text_columns():
    run = verl.read(DATA / "rollout")
    assert run.notes == ["read 8 rollouts from 2 verl dump file(s) (trainer.rollout_data_dir)", READ_NOTE,
                         PLAIN_RETURN, "success <- 'acc' (boolean)", NO_LENGTH]
    first = json.loads((DATA / "rollout" / "1.jsonl").read_text().splitlines()[0])
    assert run.episodes["prompt"].iloc[0] == first["input"]
    assert run.episodes["response"].iloc[0] == first["output"]
    assert run.source == "verl"


def test_dapo_bare_score_notes_say_the_penalty_is_in_the_score():
    run = verl.read(DATA / "dapo_bare")
    assert run.notes == ["read 4 rollouts from 1 verl dump file(s) (trainer.rollout_data_dir)", READ_NOTE,
                         "return <- score (the summed token-level score: the trained reward before any "
                         "KL-in-reward penalty, the DAPO overlong penalty included)", BARE_ACC, NO_LENGTH]


def test_dapo_dict_score_notes_say_the_penalty_is_added():
    run = verl.read(DATA / "dapo_dict")
    assert run.notes[2] == ("return <- score + overlong_reward (the DAPO overlong penalty is part of the trained "
                            "reward)")
    assert run.notes[3] == "success <- 'acc' (boolean)"


def test_a_dump_without_a_correctness_key(tmp_path):
    _dump(tmp_path / "1.jsonl", _line("q", 1.0, pred="4"), _line("q", 0.0, pred="5"))
    run = verl.read(tmp_path)
    assert run.notes[3] == ("success: no correctness key in the dump (acc, correct, ...); success left missing "
                            "(a reward function returning a dict with 'acc' adds one)")
    assert "success" in run.missing


# ---------------------------------------------------------------- success

def test_success_field_names_an_extra_key_and_never_a_line_field():
    with pytest.raises(UsageError, match=r"^success_field='score' is not in the log; fields there: acc, pred$"):
        verl.read(DATA / "rollout", success_field="score")


def test_success_field_reads_the_named_key(tmp_path):
    _dump(tmp_path / "1.jsonl", _line("q", 1.0, verified=False), _line("q", 0.0, verified=True))
    run = verl.read(tmp_path, success_field="verified")
    assert _col(run, "success") == [False, True]
    assert run.notes[3] == "success <- 'verified' (boolean)"


def test_a_correct_key_copying_the_score_is_not_success(tmp_path):
    # a reward function that returns {"score": s, "correct": s}: the flag is the reward again
    _dump(tmp_path / "1.jsonl", _line("q", 1.0, correct=1), _line("q", 0.0, correct=0), _line("p", 1.0, correct=1))
    run = verl.read(tmp_path)
    assert "success" in run.missing
    assert run.notes[3].startswith("success: 'correct' equals the reward on every rollout")


def test_a_boolean_acc_equal_to_the_score_is_a_correctness_flag(tmp_path):
    # math_dapo's dict {score: 1.0, acc: True}; no rollout overlong, so score == acc + 0 on every line
    _dump(tmp_path / "1.jsonl", _line("q", 1.0, acc=True, overlong_reward=0.0),
          _line("q", 0.0, acc=False, overlong_reward=0.0))
    run = verl.read(tmp_path)
    assert _col(run, "success") == [True, False]
    assert _col(run, "return") == [1.0, 0.0]


def test_an_int_acc_equal_to_the_score_without_overlong_is_the_bare_score(tmp_path):
    _dump(tmp_path / "1.jsonl", _line("q", 1.0, acc=1), _line("q", 0.0, acc=0))
    run = verl.read(tmp_path)
    assert run.notes[2:4] == [PLAIN_RETURN, BARE_ACC]
    assert "success" in run.missing


def test_an_acc_null_on_one_line_is_not_taken_for_the_bare_score(tmp_path):
    # the copy cannot be shown on every line: acc is read as a 0/1 flag, the dict rule adds the penalty
    _dump(tmp_path / "1.jsonl", _line("q", 1.0, acc=1.0, overlong_reward=0.0),
          _line("q", 0.5, acc=1.0, overlong_reward=-0.5), _line("p", None, acc=None, overlong_reward=-0.5))
    run = verl.read(tmp_path)
    ret = _col(run, "return")
    assert ret[:2] == [1.0, 0.0] and math.isnan(ret[2])
    assert _col(run, "success")[:2] == [True, True]


# ---------------------------------------------------------------- the overlong penalty

def test_a_null_overlong_reward_is_no_penalty(tmp_path):
    _dump(tmp_path / "3.jsonl", _line("q", 1.0, acc=True, overlong_reward=-0.5),
          _line("q", 0.0, acc=False, overlong_reward=None))
    assert _col(verl.read(tmp_path), "return") == [0.5, 0.0]


def test_overlong_reward_without_acc_is_added_to_the_score(tmp_path):
    # no acc to compare with: the score cannot be a bare number's copy, so the dict rule applies
    _dump(tmp_path / "3.jsonl", _line("q", 1.0, overlong_reward=-0.25), _line("q", 0.0, overlong_reward=0.0))
    run = verl.read(tmp_path)
    assert _col(run, "return") == [0.75, 0.0]
    assert run.notes[2].startswith("return <- score + overlong_reward")


# ---------------------------------------------------------------- which files

def test_only_step_files_of_a_folder_are_read_and_ids_keep_the_subfolder(tmp_path):
    _dump(tmp_path / "train" / "2.jsonl", _line("q", 1.0, step=2))
    _dump(tmp_path / "train" / "2_backup.jsonl", _line("q", 0.0, step=2))  # matches [0-9]*.jsonl only
    _dump(tmp_path / "val" / "10.jsonl", _line("q", 0.0, step=10))
    run = verl.read(tmp_path)
    assert _col(run, "episode_id") == ["train/2.jsonl:1", "val/10.jsonl:1"]
    assert _col(run, "return") == [1.0, 0.0]
    assert run.notes[0] == "read 2 rollouts from 2 verl dump file(s) (trainer.rollout_data_dir)"


def test_a_file_named_explicitly_is_read_whatever_its_name(tmp_path):
    log = _dump(tmp_path / "val_rollouts.jsonl", _line("q", 1.0), _line("q", 0.0))
    run = verl.read(log)
    assert _col(run, "episode_id") == ["val_rollouts.jsonl:1", "val_rollouts.jsonl:2"]


def test_a_folder_without_step_files_names_the_option(tmp_path):
    with pytest.raises(UsageError, match=r"holds no verl rollout dump \(\[0-9\]\*\.jsonl\); set "
                                         r"trainer\.rollout_data_dir=DIR in the verl config and point at DIR$"):
        verl.read(tmp_path)


# ---------------------------------------------------------------- sniffing

def test_sniff_wants_a_step_file_with_verls_keys(tmp_path):
    assert verl.sniff(DATA / "rollout")
    assert not verl.sniff(tmp_path)  # empty
    assert not verl.sniff(tmp_path / "nowhere")
    _dump(tmp_path / "a" / "1.jsonl", {"input_prompt": "q", "output_response": "a", "score": 1.0})
    assert not verl.sniff(tmp_path / "a")  # a step file, but not verl's keys
    named = _dump(tmp_path / "b" / "rollouts.jsonl", _line("q", 1.0))
    assert not verl.sniff(named)  # verl's keys, but not a {global_steps}.jsonl name
