"""A benchmark case: a generated env's spec, what a scan of it should report, and how to scan it.

It sits above both ``spec`` (what the env is) and ``envs`` (the env a spec becomes), since a case
makes its own env (``case.make_env``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envaudit.families import envs
from envaudit.families.spec import FLAW_KINDS, EnvSpec


@dataclass(frozen=True)
class Case:
    """One benchmark case: a spec, what a scan of it should report, and how to scan it.

    ``expected``: the finding codes any one of which, at ``warn`` or ``fail``, counts as catching
    the planted incentive (empty for a clean env). ``tolerated``: codes that honestly describe a
    side effect of the same incentive (farming to the step limit also makes truncation pay, say);
    they are neither a hit nor a false alarm. ``scan_overrides``: ``ScanConfig`` fields the case
    must be scanned with (the timeout-drop case's pipeline).
    """

    name: str
    spec: EnvSpec
    expected: frozenset[str] = frozenset()
    tolerated: frozenset[str] = frozenset()
    scan_overrides: tuple[tuple[str, Any], ...] = ()
    notes: str = ""

    @property
    def is_clean(self) -> bool:
        return not self.expected

    @property
    def kind(self) -> str:
        if self.spec.flaw is not None:
            return self.spec.flaw.kind
        return "timeout-drop" if dict(self.scan_overrides) else "clean"

    @property
    def code(self) -> str:
        """The catalogue code the case is filed under ('' for a clean env)."""
        return FLAW_KINDS.get(self.kind, "")

    def overrides(self) -> Mapping[str, Any]:
        return dict(self.scan_overrides)

    def features(self) -> dict[str, Any]:
        return {**self.spec.features(), "kind": self.kind, **{f"scan_{k}": v for k, v in self.scan_overrides}}

    def make_env(self):
        """A fresh env of this case (a zero-argument factory for ``run_scan``: ``case.make_env``)."""
        return envs.make_env(self.spec)


__all__ = ["Case"]
