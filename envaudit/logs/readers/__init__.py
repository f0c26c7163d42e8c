"""Readers for the rollout logs trainers actually write, each mapping onto the generic schema.

One module per trainer, each with ``NAME``, ``sniff(path) -> bool`` and ``read(path, **options) ->
LoggedRun``; its docstring cites the trainer's source file and option that produce the format and
says what maps to what. ``reader_for`` picks one by name (``--format NAME``) or by sniffing.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

from envaudit.errors import UsageError
from envaudit.logs.readers import openrlhf, prime_rl, skyrl, trl, verl

READERS: dict[str, ModuleType] = {m.NAME: m for m in (verl, skyrl, trl, prime_rl, openrlhf)}
"""``--format`` name -> reader module."""

_WHAT = {
    "verl": "{step}.jsonl files of trainer.rollout_data_dir",
    "skyrl": "dumped_evals/global_step_N_evals/*.jsonl of trainer.dump_eval_results",
    "trl": "completions/completions_NNNNN.parquet of GRPOConfig(log_completions=True)",
    "prime-rl": "rollouts/step_N/train/all/traces.jsonl of the file monitor",
    "openrlhf": "the W&B table train/generated_samples_*.table.json",
}


def reader_for(path: str | os.PathLike, name: str | None = None) -> ModuleType:
    """The reader named ``name``, or the one whose ``sniff`` recognises ``path``."""
    choices = ", ".join(READERS)
    if name is not None:
        if name not in READERS:
            raise UsageError(f"--format {name!r} is not a trainer reader; choose one of {choices}")
        return READERS[name]
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path} does not exist; give the file or folder the trainer wrote its rollouts to")
    found = [module for module in READERS.values() if module.sniff(path)]
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageError(f"{path} looks like the rollout log of more than one trainer "
                         f"({', '.join(m.NAME for m in found)}); say which with --format NAME")
    expected = "; ".join(f"{n}: {w}" for n, w in _WHAT.items())
    raise UsageError(f"no trainer reader recognises {path} (expected one of: {expected}); pass --format NAME "
                     f"with NAME one of {choices}, or write the log in the generic schema")


__all__ = ["READERS", "reader_for"]
