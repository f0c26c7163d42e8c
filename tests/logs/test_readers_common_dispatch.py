"""Choosing a reader (``reader_for``) and ``--map`` on a trainer's dump (``map_fields``) in detail.

The dumps are small verl ``{step}.jsonl`` files (input, output, gts, score, step, then the reward
function's extra keys: the keys ``--map`` reads) written in ``tmp_path``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from envaudit.errors import UsageError
from envaudit.logs.readers import READERS, map_fields, reader_for
from envaudit.logs.schema import LoggedRun

VERL = READERS["verl"]


def _verl(tmp_path: Path, **keys: list) -> LoggedRun:
    """A verl dump of one rollout per value in ``keys``' lists: scores 1, 0, 1, ...; one prompt per pair."""
    n = len(next(iter(keys.values())))
    lines = [{"input": f"q{i // 2}", "output": "a", "gts": "a", "score": float((i + 1) % 2), "step": 1,
              **{k: v[i] for k, v in keys.items()}} for i in range(n)]
    (tmp_path / "1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return VERL.read(tmp_path)


def _col(run, column):
    return run.episodes[column].tolist()


# ---------------------------------------------------------------- reader_for

def test_a_log_two_readers_recognise_asks_for_format(tmp_path):
    both = {"input": "q", "output": "a", "score": 1.0, "step": 1,
            "input_prompt": "q", "output_response": "a", "stop_reason": "stop"}
    (tmp_path / "1.jsonl").write_text(json.dumps(both) + "\n")
    with pytest.raises(UsageError, match=r"1\.jsonl looks like the rollout log of more than one trainer \(verl, "
                                         r"skyrl\); say which with --format NAME$"):
        reader_for(tmp_path / "1.jsonl")


def test_a_log_no_reader_knows_lists_what_each_reads(tmp_path):
    log = tmp_path / "rollouts.jsonl"
    log.write_text('{"prompt": "hi", "reward": 1.0}\n')
    expected = ("verl: {step}.jsonl files of trainer.rollout_data_dir; "
                "skyrl: dumped_evals/global_step_N_evals/*.jsonl of trainer.dump_eval_results; "
                "trl: completions/completions_NNNNN.parquet of GRPOConfig(log_completions=True); "
                "prime-rl: rollouts/step_N/train/all/traces.jsonl of the file monitor; "
                "openrlhf: the W&B table train/generated_samples_*.table.json")
    with pytest.raises(UsageError) as caught:
        reader_for(log)
    assert str(caught.value) == (f"no trainer reader recognises {log} (expected one of: {expected}); pass --format "
                                 "NAME with NAME one of verl, skyrl, trl, prime-rl, openrlhf, or write the log in "
                                 "the generic schema")


# ---------------------------------------------------------------- map_fields

def test_a_run_without_dump_keys_names_none(tmp_path):
    run = _verl(tmp_path, acc=[True, False])
    bare = LoggedRun(episodes=run.episodes, steps=None, source="generic", fields=None)
    assert map_fields(bare, {}) is bare
    with pytest.raises(UsageError, match=r"^--map turns=length: the generic dump has no key 'turns'; its keys: none$"):
        map_fields(bare, {"turns": "length"})


def test_map_fills_only_schema_columns(tmp_path):
    run = _verl(tmp_path, acc=[True, False])
    with pytest.raises(UsageError, match=r"^--map acc=tool_status: a verl dump has no step table and its reader maps "
                                         r"the other columns itself; --map fills one of success, length, end_reason, "
                                         r"tool_calls, tool_errors, tool_timeouts, seed, task$"):
        map_fields(run, {"acc": "tool_status"})


def test_map_success_from_a_correctness_key_the_reader_does_not_know(tmp_path):
    run = _verl(tmp_path, judge_ok=[False, True, None])
    assert "success" in run.missing  # not a correctness name: the reader leaves it alone
    mapped = map_fields(run, {"judge_ok": "success"})
    assert _col(mapped, "success") == [False, True, pd.NA]
    assert "success" not in mapped.missing
    assert mapped.notes[-1] == "success <- 'judge_ok' (--map)"


def test_map_success_refuses_a_reward_and_says_why(tmp_path):
    run = _verl(tmp_path, judge=[0.5, 0.0])
    with pytest.raises(UsageError) as caught:
        map_fields(run, {"judge": "success"})
    assert str(caught.value) == ("--map judge=success: 'judge' holds values other than 0/1 (e.g. 0.5); a correctness "
                                 "flag must be boolean or 0/1, success left missing; map a correctness key "
                                 "(true/false or 0/1, independent of the reward)")
    with pytest.raises(UsageError, match=r"^--map score=success: 'score' equals the return on every rollout: a copy "
                                         r"of the reward; map a correctness key"):
        map_fields(run, {"score": "success"})


@pytest.mark.parametrize("column", ["length", "tool_calls", "tool_errors", "tool_timeouts"])
def test_count_columns_must_be_numbers(tmp_path, column):
    run = _verl(tmp_path, count=[1, "n/a", 3])
    with pytest.raises(UsageError, match=rf"^--map count={column}: 'count' is not a number on every rollout \(e\.g\. "
                                         rf"'n/a'\); {column} is a count$"):
        map_fields(run, {"count": column})
    assert _col(map_fields(_verl(tmp_path, count=[1, "2", 3]), {"count": column}), column) == [1, 2, 3]


def test_map_end_reason_reads_any_case(tmp_path):
    run = _verl(tmp_path, status=["Terminated", "TRUNCATED", "timeout"])
    mapped = map_fields(run, {"status": "end_reason"})
    assert _col(mapped, "end_reason") == ["terminated", "truncated", "timeout"]
    assert mapped.missing == ["length", "success"]  # end_reason no longer missing


def test_a_key_named_like_a_tool_count_is_read_unasked(tmp_path):
    run = map_fields(_verl(tmp_path, tool_calls=[2, 0]), {})
    assert _col(run, "tool_calls") == [2, 0]
    assert run.notes[-1] == "tool_calls <- 'tool_calls' (the dump's key of that name)"
