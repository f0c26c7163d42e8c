"""Fingerprints of observations, to tell whether a replay came back to a state it saw before."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np


def digest(obs: Any) -> str:
    """A short fingerprint of an observation (arrays by their bytes, anything else by ``repr``)."""
    if isinstance(obs, np.ndarray):
        raw = obs.dtype.str.encode() + obs.tobytes()
    elif isinstance(obs, dict):
        raw = repr(sorted((k, digest(v)) for k, v in obs.items())).encode()
    else:
        raw = repr(obs).encode()
    return hashlib.sha1(raw).hexdigest()[:16]
