"""Atomic file writes: a temporary file in the target folder, then a rename.

No reader ever sees a half-written report file, and an interrupted write leaves the old file (or
none) in place. Files get the permissions a plain ``open(..., "w")`` would give under the current
umask, not ``mkstemp``'s private 0600, so a report folder stays readable by its team.
"""

from __future__ import annotations

import os
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
