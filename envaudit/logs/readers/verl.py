"""verl: the rollout dump of ``trainer.rollout_data_dir`` (and ``trainer.validation_data_dir``).

What verl writes (volcengine/verl, ``verl/trainer/ppo/ray_trainer.py``):

- ``RayPPOTrainer._log_rollout_data`` runs every training step when ``trainer.rollout_data_dir`` is
  set (``verl/trainer/config/ppo_trainer.yaml``: "Directory for logging rollout data; no dump if
  null"); ``_validate`` does the same for ``trainer.validation_data_dir``.
- Both call ``_dump_generations``, which writes ``{dir}/{global_steps}.jsonl``: one JSON object per
  rollout with ``input`` (decoded prompt), ``output`` (decoded response), ``gts`` (ground truth),
  ``score`` (``token_level_scores.sum(-1)``), ``step`` (``global_steps``), plus every key of
  ``reward_extra_infos_dict`` whose list has one value per rollout. Those extra keys are what the
  reward function returns when it returns a dict (``verl/workers/reward_manager/naive.py``), e.g.
  ``score``, ``acc``, ``pred`` of ``verl/utils/reward_score/math_dapo.py``; the DAPO reward manager
  (``verl/workers/reward_manager/dapo.py``) adds ``overlong_reward`` and ``overlong`` when
  ``overlong_buffer.log`` is on. An extra key named ``score`` replaces the summed token score in
  the line (``base_data[k] = v``).

Mapping:

- ``iteration`` <- ``step``; ``episode_id`` <- ``<file>:<line>``.
- ``group_id`` <- ``step`` + ``input``: verl repeats each prompt ``rollout.n`` times (one GRPO group)
  but dumps no ``uid``, so rollouts with the same prompt text in the same step form the group.
- ``return`` <- ``score``: the summed token scores, i.e. the trained reward before the KL penalty
  of ``algorithm.use_kl_in_reward`` (not dumped). One exception: with the DAPO manager's
  ``overlong_reward`` logged and a score function returning a dict, the line's ``score`` is that
  dict's (pre-penalty) score, so ``return`` <- ``score + overlong_reward``; a bare-number score
  function is recognised by ``score == acc + overlong_reward`` on every line.
- ``success`` <- an explicit correctness key (``acc``, ``correct``...; ``success_field=`` names
  another), only when boolean or 0/1 and not a copy of ``score`` (the DAPO manager stores
  ``acc = score`` when the score function returns a bare number).
- ``prompt`` <- ``input``, ``response`` <- ``output``.
- Missing: ``length`` (the dump holds decoded text, no token count and no turn count: the
  multi-turn ``__num_turns__`` stays in the batch) and ``end_reason`` (no stop reason is dumped;
  the DAPO ``overlong`` flag marks the penalty buffer before the length limit, not truncation).
  No step table.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd

from envaudit.logs.readers import _common
from envaudit.logs.schema import LoggedRun

NAME = "verl"
FIELDS = ("input", "output", "score", "step")
"""Keys every line of ``_dump_generations`` has (``gts`` too, but it may be ``null``)."""
_STEP_FILE = re.compile(r"^\d+\.jsonl$")


def sniff(path: str | os.PathLike) -> bool:
    """A ``{global_steps}.jsonl`` file (or a folder of them) whose first line has verl's keys."""
    first = _common.sniff_first(path, "[0-9]*.jsonl")
    if first is None or not _STEP_FILE.match(first.name):
        return False
    record = _common.first_record(first)
    return record is not None and all(k in record for k in FIELDS)


def read(path: str | os.PathLike, *, success_field: str | None = None) -> LoggedRun:
    """Every ``{step}.jsonl`` under ``path`` (or the one file ``path``) as a ``LoggedRun``."""
    root = _common.as_path(path)
    files = [f for f in _common.find_files(root, "[0-9]*.jsonl", "verl rollout dump",
                                           "set trainer.rollout_data_dir=DIR in the verl config and point at DIR")
             if f == root or _STEP_FILE.match(f.name)]
    rows: list[dict] = []
    for file in files:
        label = file.relative_to(root).as_posix() if root.is_dir() else file.name
        for lineno, record in _common.read_jsonl(file):
            _common.require(record, FIELDS, f"{file}:{lineno}", NAME)
            rows.append({"_id": f"{label}:{lineno}", **record})
    table = pd.DataFrame(rows)
    notes = [f"read {len(table)} rollouts from {len(files)} verl dump file(s) (trainer.rollout_data_dir)",
             "iteration <- step; group_id <- step + input (same prompt text in the same step: verl dumps no uid)"]
    episodes = pd.DataFrame({
        "episode_id": table["_id"],
        "group_id": [_common.group_key(s, p) for s, p in zip(table["step"], table["input"], strict=True)],
        "iteration": table["step"],
    })
    score = table["score"].map(_common.number_or_nan)
    overlong = table["overlong_reward"].map(_common.number_or_nan).fillna(0.0) \
        if "overlong_reward" in table.columns else pd.Series(0.0, index=table.index)
    bare = _bare_score_acc(table, score, overlong)
    if "overlong_reward" in table.columns and not bare:
        # the score function returned a dict: its 'score' replaced the summed token score in the
        # line, so the overlong penalty the DAPO manager added to the trained reward is not in it
        episodes["return"] = score + overlong
        notes.append("return <- score + overlong_reward (the DAPO overlong penalty is part of the trained reward)")
    else:
        episodes["return"] = score
        penalty = ", the DAPO overlong penalty included" if "overlong_reward" in table.columns else ""
        notes.append("return <- score (the summed token-level score: the trained reward before any KL-in-reward "
                     f"penalty{penalty})")
    extra = [c for c in table.columns if c not in ("_id", "input", "output", "gts", "score", "step")]
    field = _common.pick_correctness_field(extra, success_field)
    if field is None:
        notes.append("success: no correctness key in the dump (acc, correct, ...); success left missing "
                     "(a reward function returning a dict with 'acc' adds one)")
    elif field == "acc" and bare:
        notes.append("success: 'acc' is the score function's bare number (the DAPO reward manager stores "
                     "acc = score when the score function returns no dict), a reward, not a correctness check; "
                     "success left missing")
    else:
        success, note = _common.correctness(table[field], field, reward=table["score"])
        notes.append(note)
        if success is not None:
            episodes["success"] = success
    notes.append("length, end_reason: verl's dump holds decoded text only (no token or turn count, no stop "
                 "reason); both left missing")
    episodes["prompt"] = table["input"]
    episodes["response"] = table["output"]
    return _common.logged_run(episodes, None, NAME, notes, fields=table)


def _bare_score_acc(table: pd.DataFrame, score: pd.Series, overlong: pd.Series) -> bool:
    """Whether ``acc`` is the DAPO manager's copy of a bare-number score (``reward_extra_info["acc"]
    .append(score)``, verl/workers/reward_manager/dapo.py): numeric, not boolean, and the dumped
    ``score`` (token scores, the penalty included) equals ``acc + overlong_reward`` on every line."""
    if "acc" not in table.columns:
        return False
    acc = table["acc"]
    if acc.isna().any() or any(isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number))
                               for v in acc):
        return False
    return bool(np.allclose(score.to_numpy(float), acc.to_numpy(float) + overlong.to_numpy(float), equal_nan=True))
