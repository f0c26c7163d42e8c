"""Scans of Gymnasium's classic envs: they complete with no env-error and no fail, and say
something true about each (what is true comes from each env's documented reward)."""

from __future__ import annotations

import pytest

from envaudit import ScanConfig, Severity
from envaudit.scan import run_scan

# Taxi-v3 of the issue is Taxi-v4 in Gymnasium 1.x (same reward: -1 per step, -10 illegal moves).
CLASSICS = {
    "CartPole-v1": ("length-bias", "the return equals length"),
    "FrozenLake-v1": ("reward-without-success", "never sets info['success']"),
    "Taxi-v4": ("length-bias", "A typical step pays -1 "),
    # GRPO learns the 13-step path along the cliff: training moved length down to 13.
    "CliffWalking-v1": ("learned-exploit", "moved length down"),
    "Blackjack-v1": ("reward-without-success", "never sets info['success']"),
}
# CartPole is slow: GRPO learns to balance, so its episodes grow to 500 steps (21 of the scan's
# 22 CPU-s). FrozenLake keeps a classic env's whole quick scan in the default run.
SLOW = {"CartPole-v1", "Taxi-v4", "CliffWalking-v1", "Blackjack-v1"}


@pytest.mark.parametrize(
    "env_id", [pytest.param(e, marks=pytest.mark.slow) if e in SLOW else e for e in CLASSICS]
)
def test_classic_scan_completes_without_env_error_or_fail_and_says_something_true(env_id):
    report = run_scan(env_id, ScanConfig(seed=0, quick=True))
    assert all(p.status == "ok" for p in report.probes), [(p.name, p.status, p.error) for p in report.probes]
    assert not [f for f in report.findings if f.code == "env-error" and f.severity > Severity.INFO]
    assert not [f for f in report.findings if f.severity == Severity.FAIL]
    code, words = CLASSICS[env_id]
    assert any(f.code == code and words in f.summary for f in report.findings), \
        [(f.code, f.summary) for f in report.findings]
