"""The acceptance matrix of the incentive probes, end to end: a quick scan of every bundled env.

Each flawed variant must yield its planted code at warn or fail; each clean env must yield no warn
or fail at all, from any probe. Which code is planted comes from the env's design
(``envaudit.envs.VARIANTS``), not from what a scan printed.
"""

from __future__ import annotations

import pytest

from envaudit import ScanConfig, Severity
from envaudit.envs import VARIANTS
from envaudit.scan import run_scan

CLEAN = sorted(v.id for v in VARIANTS.values() if not v.planted)
FLAWED = sorted(v.id for v in VARIANTS.values() if v.planted)


@pytest.mark.parametrize("env_id", FLAWED)
def test_flawed_variant_yields_its_planted_code(env_id):
    report = run_scan(env_id, ScanConfig(seed=0, quick=True))
    flagged = {f.code for f in report.findings if f.severity >= Severity.WARN}
    assert set(VARIANTS[env_id].planted) <= flagged, [(f.code, str(f.severity), f.summary) for f in report.findings]


@pytest.mark.parametrize("env_id", CLEAN)
def test_clean_env_yields_no_warn_or_fail(env_id):
    report = run_scan(env_id, ScanConfig(seed=0, quick=True))
    loud = [(f.code, str(f.severity), f.probe, f.summary) for f in report.findings if f.severity >= Severity.WARN]
    assert loud == []
    assert all(p.status == "ok" for p in report.probes), [(p.name, p.status, p.error) for p in report.probes]
