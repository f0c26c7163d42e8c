"""SkyRL: the evaluation dump of ``trainer.dump_eval_results`` (on by default).

What SkyRL writes (NovaSky-AI/SkyRL):

- ``skyrl/train/evaluate.py``: after each evaluation, with ``trainer.dump_eval_results`` (default
  ``True``, ``skyrl/train/config/config.py``), results go to
  ``{trainer.export_path}/dumped_evals/global_step_{N}_evals/`` (``eval_only/`` for an eval-only run).
- ``skyrl/train/utils/trainer_utils.py``, ``dump_per_dataset_eval_results``: one
  ``{data_source}.jsonl`` per dataset, one JSON object per rollout with ``input_prompt``,
  ``output_response`` (decoded), ``score`` (the generator's reward: a float, or a list of per-token
  rewards), ``stop_reason`` (the inference engine's: ``stop`` / ``length``; ``null`` when the
  generator reports none), ``env_class``, ``env_extras``, ``data_source``; plus
  ``aggregated_results.jsonl`` (metrics, skipped here).
- Training rollouts are not dumped as records: ``trainer.dump_data_batch`` pickles the tensor batch
  (``TrainingInputBatch.save``, ``dumped_data/global_step_{N}_training_input.pkl``: token ids,
  advantages, with the uids removed), which needs SkyRL's classes to unpickle and carries no text,
  prompt group or stop reason. This reader reads the evaluation dumps; a training run evaluated
  every ``trainer.eval_interval`` steps gives one point per evaluation.

Mapping:

- ``iteration`` <- ``N`` of ``global_step_N_evals`` (``eval_only`` reads as 0, noted);
  ``episode_id`` <- ``<file>:<line>``.
- ``group_id`` <- iteration + ``data_source`` + ``input_prompt`` (each prompt is sampled
  ``generator.eval_n_samples_per_prompt`` times).
- ``return`` <- ``score`` (summed when it is a per-token list).
- ``end_reason`` <- ``stop_reason``: ``stop`` -> terminated, ``length`` -> truncated (the
  generator's own max-input-length cut-off also reports ``length``), ``abort`` -> error; other
  values are left empty and named in the notes.
- ``prompt`` <- ``input_prompt``, ``response`` <- ``output_response``, ``task`` <- ``data_source``.
- Missing: ``length`` (no token or turn count is dumped) and ``success`` (no correctness field:
  SkyRL's pass@n is computed from ``score > 0``, which is a reward). No step table.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

from envaudit.errors import UsageError
from envaudit.logs.readers import _common
from envaudit.logs.schema import LoggedRun

NAME = "skyrl"
FIELDS = ("input_prompt", "output_response", "score")
STOP_REASONS = {"stop": "terminated", "length": "truncated", "abort": "error"}
_STEP_DIR = re.compile(r"^global_step_(\d+)_evals$")


def sniff(path: str | os.PathLike) -> bool:
    """A per-dataset eval ``.jsonl`` (or a folder of them) whose first line has SkyRL's keys."""
    path = Path(path)
    first = path if path.is_file() else next(iter(_eval_files(path)), None) if path.is_dir() else None
    if first is None:
        return False
    record = _common.first_record(first)
    return record is not None and all(k in record for k in FIELDS) and "stop_reason" in record


def _eval_files(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("*.jsonl"), key=_common.natural_key)
            if p.is_file() and p.name != "aggregated_results.jsonl"]


def _iteration(file: Path) -> int | None:
    """``N`` of the ``global_step_N_evals`` folder the file sits in; ``None`` for ``eval_only``."""
    for part in reversed(file.parent.parts):
        match = _STEP_DIR.match(part)
        if match:
            return int(match.group(1))
        if part == "eval_only":
            return None
    return None


def _score(value) -> float:
    if isinstance(value, list):  # per-token rewards: the trajectory's reward is their sum
        return float(sum(_common.number_or_nan(v) for v in value))
    return _common.number_or_nan(value)


def read(path: str | os.PathLike) -> LoggedRun:
    """Every per-dataset eval JSONL under ``path`` (or the one file ``path``) as a ``LoggedRun``."""
    root = _common.as_path(path)
    files = [root] if root.is_file() else _eval_files(root)
    if not files:
        raise UsageError(
            f"{root} holds no SkyRL eval dump (*.jsonl under dumped_evals/global_step_N_evals/); point at "
            "{trainer.export_path}/dumped_evals (written while trainer.dump_eval_results=true)")
    rows: list[dict] = []
    unplaced = 0
    for file in files:
        iteration = _iteration(file.resolve())
        if iteration is None:
            unplaced += 1
        label = file.relative_to(root).as_posix() if root.is_dir() else file.name
        for lineno, record in _common.read_jsonl(file):
            _common.require(record, FIELDS, f"{file}:{lineno}", NAME)
            rows.append({"_id": f"{label}:{lineno}", "_iteration": iteration or 0, **record})
    table = pd.DataFrame(rows)
    notes = [f"read {len(table)} evaluation rollouts from {len(files)} SkyRL file(s) (trainer.dump_eval_results); "
             "SkyRL dumps no training rollouts as records (dump_data_batch pickles tensors)",
             "iteration <- N of global_step_N_evals; group_id <- iteration + data_source + input_prompt",
             "return <- score (summed where it is a list of per-token rewards)"]
    if unplaced:
        notes.append(f"{unplaced} file(s) sit outside a global_step_N_evals folder (eval_only run): iteration 0")
    source = table["data_source"] if "data_source" in table.columns else pd.Series([""] * len(table))
    episodes = pd.DataFrame({
        "episode_id": table["_id"],
        "group_id": [_common.group_key(i, d, p)
                     for i, d, p in zip(table["_iteration"], source, table["input_prompt"], strict=True)],
        "iteration": table["_iteration"],
        "return": table["score"].map(_score),
    })
    if "stop_reason" in table.columns and table["stop_reason"].notna().any():
        reasons = table["stop_reason"]
        episodes["end_reason"] = reasons.map(STOP_REASONS).astype("string")
        unknown = sorted(set(reasons.dropna().astype(str)) - set(STOP_REASONS))
        notes.append("end_reason <- stop_reason (stop -> terminated, length -> truncated, abort -> error)")
        if unknown:
            notes.append(f"stop_reason values left without an end_reason: {', '.join(unknown)}")
        if reasons.isna().any():
            notes.append(f"{int(reasons.isna().sum())} rollouts have no stop_reason: end_reason left empty")
    else:
        notes.append("end_reason: the dump's stop_reason is null throughout (the generator reported none); missing")
    notes.append("length: SkyRL's eval dump holds decoded text only; missing. success: no correctness field "
                 "(pass@n there is score > 0, a reward); missing")
    episodes["prompt"] = table["input_prompt"]
    episodes["response"] = table["output_response"]
    episodes["task"] = source.values
    return _common.logged_run(episodes, None, NAME, notes, fields=table)
