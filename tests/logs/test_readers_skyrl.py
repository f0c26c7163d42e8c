"""The SkyRL reader in detail: step folders and eval_only, groups across datasets, per-token scores,
stop reasons and the notes.

Samples follow ``dump_per_dataset_eval_results``: one ``{data_source}.jsonl`` per dataset under
``dumped_evals/global_step_{N}_evals/`` (``eval_only/`` for an eval-only run), one object per rollout
with input_prompt, output_response, score, stop_reason, env_class, env_extras, data_source.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envaudit.errors import UsageError
from envaudit.logs.readers import skyrl

DATA = Path(__file__).parent / "data" / "skyrl" / "dumped_evals"
MAPPED = ["iteration <- N of global_step_N_evals; group_id <- iteration + data_source + input_prompt",
          "return <- score (summed where it is a list of per-token rewards)"]
STOPS = "end_reason <- stop_reason (stop -> terminated, length -> truncated, abort -> error)"
NO_LENGTH = ("length: SkyRL's eval dump holds decoded text only; missing. success: no correctness field "
             "(pass@n there is score > 0, a reward); missing")


def _dump(path: Path, *lines: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _line(prompt: str, score=1.0, stop="stop", source: str | None = "openai/gsm8k", **extra) -> dict:
    line = {"input_prompt": prompt, "output_response": f"reply to {prompt}", "score": score, "stop_reason": stop,
            "env_class": "gsm8k", "env_extras": {}}
    if source is not None:
        line["data_source"] = source
    return {**line, **extra}


def _col(run, column):
    return run.episodes[column].tolist()


def _read_note(rollouts: int, files: int) -> str:
    return (f"read {rollouts} evaluation rollouts from {files} SkyRL file(s) (trainer.dump_eval_results); SkyRL dumps "
            "no training rollouts as records (dump_data_batch pickles tensors)")


def test_dumped_evals_notes_text_columns_and_source():
    run = skyrl.read(DATA)
    assert run.notes == [_read_note(8, 2), *MAPPED, STOPS, NO_LENGTH]
    first = json.loads((DATA / "global_step_0_evals" / "openai_gsm8k.jsonl").read_text().splitlines()[0])
    assert run.episodes["prompt"].iloc[0] == first["input_prompt"]
    assert run.episodes["response"].iloc[0] == first["output_response"]
    assert run.source == "skyrl"


def test_one_file_takes_its_step_from_its_folder():
    run = skyrl.read(DATA / "global_step_5_evals" / "openai_gsm8k.jsonl")
    assert _col(run, "iteration") == [5, 5, 5, 5]
    assert _col(run, "episode_id") == [f"openai_gsm8k.jsonl:{n}" for n in (1, 2, 3, 4)]


def test_step_folders_sort_as_numbers_and_ids_keep_the_folder(tmp_path):
    _dump(tmp_path / "global_step_10_evals" / "gsm8k.jsonl", _line("q", 0.0))
    _dump(tmp_path / "global_step_5_evals" / "gsm8k.jsonl", _line("q", 1.0))
    run = skyrl.read(tmp_path)
    assert _col(run, "iteration") == [5, 10]
    assert _col(run, "episode_id") == ["global_step_5_evals/gsm8k.jsonl:1", "global_step_10_evals/gsm8k.jsonl:1"]


def test_a_dataset_subfolder_still_takes_the_step_above_it(tmp_path):
    _dump(tmp_path / "global_step_4_evals" / "math" / "aime.jsonl", _line("q"))
    run = skyrl.read(tmp_path)
    assert _col(run, "iteration") == [4]
    assert run.notes == [_read_note(1, 1), *MAPPED, STOPS, NO_LENGTH]  # placed: no eval_only note


def test_eval_only_files_read_as_step_0_and_are_counted(tmp_path):
    # eval_only stops the walk up the path: a step folder above it belongs to something else
    root = tmp_path / "global_step_7_evals" / "copied_run" / "dumped_evals"
    _dump(root / "eval_only" / "gsm8k.jsonl", _line("q"))
    _dump(root / "eval_only" / "math.jsonl", _line("q", source="math"))
    run = skyrl.read(root)
    assert _col(run, "iteration") == [0, 0]
    assert run.notes[3] == "2 file(s) sit outside a global_step_N_evals folder (eval_only run): iteration 0"


def test_the_same_prompt_in_two_datasets_is_two_groups(tmp_path):
    _dump(tmp_path / "global_step_1_evals" / "a.jsonl", _line("q", source="a"), _line("q", source="a"))
    _dump(tmp_path / "global_step_1_evals" / "b.jsonl", _line("q", source="b"), _line("q", source="b"))
    groups = _col(skyrl.read(tmp_path), "group_id")
    assert groups[0] == groups[1] != groups[2] == groups[3]


def test_per_token_scores_are_summed_and_a_missing_data_source_is_an_empty_task(tmp_path):
    _dump(tmp_path / "global_step_1_evals" / "x.jsonl", _line("q", [0.0, 0.0, 1.0], source=None),
          _line("q", [0.0, -0.5], source=None))
    run = skyrl.read(tmp_path)
    assert _col(run, "return") == [1.0, -0.5]
    assert _col(run, "task") == ["", ""]


# ---------------------------------------------------------------- stop reasons

def test_unknown_and_null_stop_reasons_are_left_empty_and_named(tmp_path):
    _dump(tmp_path / "global_step_1_evals" / "x.jsonl", _line("q", stop="stop"), _line("q", stop="tool_calls"),
          _line("q", stop="abort"), _line("q", stop=None), _line("q", stop="content_filter"))
    run = skyrl.read(tmp_path)
    reasons = run.episodes["end_reason"]
    assert reasons.isna().tolist() == [False, True, False, True, True]
    assert reasons.dropna().tolist() == ["terminated", "error"]
    assert run.notes[3:6] == [STOPS, "stop_reason values left without an end_reason: content_filter, tool_calls",
                              "1 rollouts have no stop_reason: end_reason left empty"]


@pytest.mark.parametrize("stop", [None, "absent"])
def test_no_stop_reason_at_all_leaves_end_reason_missing(tmp_path, stop):
    line = _line("q")
    if stop is None:
        line["stop_reason"] = None
    else:
        del line["stop_reason"]
    _dump(tmp_path / "global_step_1_evals" / "x.jsonl", line)
    run = skyrl.read(tmp_path)
    assert "end_reason" in run.missing
    assert run.notes[3] == ("end_reason: the dump's stop_reason is null throughout (the generator reported none); "
                            "missing")


# ---------------------------------------------------------------- errors and sniffing

def test_a_folder_without_eval_files(tmp_path):
    _dump(tmp_path / "global_step_1_evals" / "aggregated_results.jsonl", {"eval/all/avg_score": 1.0})
    with pytest.raises(UsageError, match=r"holds no SkyRL eval dump \(\*\.jsonl under dumped_evals/"
                                         r"global_step_N_evals/\); point at \{trainer\.export_path\}/dumped_evals "
                                         r"\(written while trainer\.dump_eval_results=true\)$"):
        skyrl.read(tmp_path)


def test_a_line_without_skyrls_keys_names_file_and_line(tmp_path):
    log = _dump(tmp_path / "x.jsonl", _line("q"), {"input_prompt": "q", "reward": 1.0})
    with pytest.raises(UsageError, match=r"x\.jsonl:2 has no output_response, score \(it has: input_prompt, reward\); "
                                         r"this is not a skyrl rollout dump"):
        skyrl.read(log)


def test_sniff_wants_skyrls_keys_and_a_stop_reason(tmp_path):
    assert not skyrl.sniff(_dump(tmp_path / "a.jsonl", {"text": "q", "stop_reason": "stop"}))
    assert not skyrl.sniff(_dump(tmp_path / "b.jsonl", {k: v for k, v in _line("q").items() if k != "stop_reason"}))
    assert skyrl.sniff(_dump(tmp_path / "c.jsonl", _line("q")))
