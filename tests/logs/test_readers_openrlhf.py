"""The OpenRLHF reader in detail: one table file, the notes and every refusal.

Samples are W&B tables as ``WandbLogger.log_train`` logs them (columns global_step, text, reward; each
copy holds every row so far), saved as ``files/media/table/train/generated_samples_<n>_<hash>
.table.json`` = ``{"columns": [...], "data": [[...], ...]}``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envaudit.errors import UsageError
from envaudit.logs.readers import openrlhf

DATA = Path(__file__).parent / "data" / "openrlhf" / "wandb"
TABLES = DATA / "run-20260101_000000-abcd1234" / "files" / "media" / "table" / "train"


def _table(path: Path, rows: list, columns=("global_step", "text", "reward")) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"columns": list(columns), "data": rows}))
    return path


def test_run_folder_notes_prompt_and_source():
    run = openrlhf.read(DATA)
    assert run.notes == [
        "read 3 logged samples (one per training step, steps 1..3) from 3 OpenRLHF W&B table file(s); OpenRLHF dumps "
        "no rollouts, this table is all it writes",
        "iteration <- global_step; return <- reward; prompt <- text (prompt and response decoded together)",
        "group_id, length, end_reason, success: not in OpenRLHF's table; missing"]
    assert run.episodes["prompt"].iloc[1] == "user\nName a prime above 10.\nassistant\nThe answer is 9."
    assert run.source == "openrlhf"


def test_one_table_file_is_read_on_its_own():
    one = TABLES / "generated_samples_4_00000000000001436586.table.json"
    run = openrlhf.read(one)
    assert run.episodes["iteration"].tolist() == [1, 2]  # the copy logged at step 2 holds steps 1 and 2
    assert run.notes[0].startswith("read 2 logged samples (one per training step, steps 1..2) from 1 OpenRLHF")
    assert openrlhf.sniff(one)


def test_a_folder_without_samples_tables(tmp_path):
    with pytest.raises(UsageError, match=r"holds no OpenRLHF samples table \(generated_samples_\*\.table\.json\); "
                                         r"point at the wandb/run-\*/files folder of a run logged with "
                                         r"--logger\.wandb\.key \(OpenRLHF writes no rollout dump of its own\)$"):
        openrlhf.read(tmp_path)


def test_a_table_with_other_columns_is_refused(tmp_path):
    table = _table(tmp_path / "generated_samples_2_ab.table.json", [[2, "p", "c", 1.0]],
                   columns=("step", "prompt", "completion", "reward"))
    with pytest.raises(UsageError, match=r"has columns \['step', 'prompt', 'completion', 'reward'\], expected "
                                         r"\['global_step', 'text', 'reward'\] \(OpenRLHF's train/generated_samples "
                                         r"table\); pass the --format of the trainer that wrote it$"):
        openrlhf.read(table)


def test_tables_without_rows(tmp_path):
    _table(tmp_path / "generated_samples_0_ab.table.json", [])
    with pytest.raises(UsageError, match=r"the OpenRLHF samples table\(s\) in .* hold no rows; nothing to audit$"):
        openrlhf.read(tmp_path)


def test_two_runs_mixed_in_one_folder(tmp_path):
    # two runs' tables side by side: step 2 holds a different sample in each
    _table(tmp_path / "a" / "generated_samples_2_aa.table.json", [[1, "run a, step 1", 1.0], [2, "run a", 0.0]])
    _table(tmp_path / "b" / "generated_samples_2_bb.table.json", [[1, "run a, step 1", 1.0], [2, "run b", 1.0]])
    with pytest.raises(UsageError, match=r"^global_step 2 has two different samples across the tables in .*; the "
                                         r"tables of more than one run are mixed: point at one run's folder$"):
        openrlhf.read(tmp_path)
