"""The same seed, the same report, on another CPU: Intel MKL's code path pinned before first use.

Torch's CPU build does its matrix products in Intel MKL, which picks a code path by the processor
(SSE, AVX2, AVX-512) at its first call. The paths round differently, and a GRPO run is a long chain
of such products: on an AVX-512 machine a policy trained on ``PartialCredit`` learned nothing, on an
AVX2 machine it learned to stall, with the same seed (tests/probes/grpo/test_grpo_same_state.py).
MKL's conditional numerical reproducibility fixes the path: ``MKL_CBWR=COMPATIBLE`` gives the same
results on every x86 CPU, Intel or not. It must be set before MKL's first call, so the package sets
it as it is imported, unless the user already chose a branch. The cost is speed on large products;
the policies envaudit trains are a few thousand parameters.
"""

from __future__ import annotations

import os

BRANCH = "COMPATIBLE"
"""MKL's branch for results that do not depend on the CPU (SSE2 without approximate reciprocals)."""


def pin_math_library(environ: dict[str, str] | None = None) -> str:
    """Set ``MKL_CBWR`` to ``BRANCH`` unless it is set already; return the branch in effect. A
    process that ran an MKL routine before this keeps the branch it started with (MKL reads the
    variable once), so envaudit is imported before torch does any work in the scan's process, and
    every worker process inherits the variable."""
    env = os.environ if environ is None else environ
    return env.setdefault("MKL_CBWR", BRANCH)


__all__ = ["BRANCH", "pin_math_library"]
