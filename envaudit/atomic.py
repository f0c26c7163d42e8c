"""Atomic file and folder writes: a temporary file (or folder) beside the target, then a rename.

No reader ever sees a half-written report file, and an interrupted write leaves the old file (or
none) in place. Files get the permissions a plain ``open(..., "w")`` would give under the current
umask, not ``mkstemp``'s private 0600, so a report folder stays readable by its team.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once at import: os.umask can only be read by setting it, and setting it to 0 on every write
# would briefly give files created meanwhile by other threads (an abandoned probe) mode 0666.
_UMASK = _read_umask()


def _atomic(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    """Write text or bytes to ``path`` atomically."""
    payload = data.encode() if isinstance(data, str) else data

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(payload)

    _atomic(path, write)


def atomic_parquet(path: str | os.PathLike, frame: pd.DataFrame) -> None:
    """Write a DataFrame as Parquet to ``path`` atomically."""
    _atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


REPORT_MARKER = "report.json"
"""A folder holding this file was written by envaudit; only such folders are ever replaced."""


def atomic_folder(target: str | os.PathLike, fill: Callable[[Path], None], *, replace: bool = False) -> Path:
    """Write a whole folder atomically: ``fill`` writes into a sibling temporary folder, which is then
    renamed to ``target``. An interrupted or failed write (``KeyboardInterrupt`` included) removes the
    temporary folder and leaves ``target`` as it was, so a reader sees the old folder, the new one,
    or none — never a mix.

    An existing ``target`` is replaced only with ``replace=True``, and only when it is empty or
    holds a ``report.json`` (a folder envaudit wrote): a user's other folder is never deleted.
    """
    target = Path(target)
    if target.exists():
        if not target.is_dir():
            raise FileExistsError(f"{target} exists and is not a folder; choose another --out")
        if any(target.iterdir()):
            if not (target / REPORT_MARKER).exists():
                raise FileExistsError(f"{target} exists and is not a report folder (no {REPORT_MARKER}); "
                                      "choose another --out")
            if not replace:
                raise FileExistsError(f"{target} already holds a report; pass --force to replace it "
                                      "or choose another --out")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    old = None
    try:
        os.chmod(staging, 0o777 & ~_UMASK)
        fill(staging)
        if target.exists():
            old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".old"))
            os.rmdir(old)
            _rename_folder(target, old)
        _rename_folder(staging, target)
    except BaseException:
        if old is not None and not target.exists():
            os.replace(old, target)  # put the previous report back
            old = None
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return target


def _rename_folder(source: Path, destination: Path) -> None:
    os.replace(source, destination)
