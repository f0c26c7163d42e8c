"""Work is counted in units, never in seconds: the same seed and config give the same report idle
or under load, and a wall-clock cap that cuts work says so (``report.incomplete``, exit 4)."""

import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections import Counter

import pytest

import envaudit.scan as scan_module
from envaudit import Finding, Probe, ScanConfig
from envaudit.cli import main
from envaudit.report import Report
from envaudit.reporting import write_folder
from envaudit.rollout import RandomPolicy, Runner
from envaudit.scan import run_scan
from tests.fixtures.user_envs import CoinEnv

FLAKY = "envaudit/FlakySearch-v0"
# Exploration always runs; these probes size their work by episodes, fault rates and strategies.
PROBES = ("timeouts", "failures", "exploits", "length")


def _with_probes(monkeypatch, *probes):
    registry = {p.name: p for p in probes}
    monkeypatch.setattr(scan_module, "probe_names", lambda: sorted(registry))
    monkeypatch.setattr(scan_module, "registered_probes",
                        lambda names=None: {n: p for n, p in registry.items() if names is None or n in names})


def _without_timings(report: Report) -> dict:
    data = report.to_dict()
    data.pop("seconds"), data.pop("created")
    for probe in data["probes"]:
        probe.pop("seconds")
    return data


def _spin() -> None:
    while True:
        pass


def test_same_scan_idle_and_under_cpu_load_gives_the_same_report():
    config = ScanConfig(seed=0, quick=True, probes=PROBES)
    idle = run_scan(FLAKY, config)
    busy = [multiprocessing.get_context("spawn").Process(target=_spin, daemon=True) for _ in range(2)]
    try:
        for p in busy:
            p.start()
        loaded = run_scan(FLAKY, config)
    finally:
        for p in busy:
            p.terminate()
            p.join(5)
    assert not idle.incomplete and not loaded.incomplete
    assert [p.status for p in idle.probes] == ["ok"] * len(PROBES)
    assert json.dumps(_without_timings(idle), sort_keys=True) == json.dumps(_without_timings(loaded), sort_keys=True)
    assert idle.records.episodes.equals(loaded.records.episodes)


def _episodes_by_probe(monkeypatch, config: ScanConfig) -> tuple[Report, Counter]:
    """Run a scan, counting every episode any runner plays (probes keep only some in the report)."""
    played: Counter = Counter()
    original = Runner.run

    def counting(self, policy, seeds, **kw):
        result = original(self, policy, seeds, **kw)
        played[(kw.get("tags") or {}).get("probe")] += len(result.records.episodes)
        return result

    monkeypatch.setattr(Runner, "run", counting)
    report = run_scan(FLAKY, config)
    monkeypatch.setattr(Runner, "run", original)
    return report, played


def test_quick_is_fewer_episodes_not_less_time(monkeypatch):
    default, full = _episodes_by_probe(monkeypatch, ScanConfig(seed=0, probes=PROBES))
    quick, small = _episodes_by_probe(monkeypatch, ScanConfig(seed=0, quick=True, probes=PROBES))
    # ScanConfig.episodes is 256; --quick runs a quarter of it.
    assert (full["explore"], small["explore"]) == (256, 64)
    assert default.exploration["episodes"] == 256 and quick.exploration["episodes"] == 64
    for probe in ("timeouts", "failures", "exploits"):
        assert 0 < small[probe] < full[probe], (probe, small[probe], full[probe])
    assert not default.incomplete and not quick.incomplete


def test_a_tiny_cap_marks_the_report_incomplete_and_names_what_was_skipped():
    report = run_scan(CoinEnv, ScanConfig(seed=0, episodes=64, probes=("exploits", "length"), budget_s=1e-3))
    skipped = {(g["probe"], g["skipped"]) for g in report.incomplete}
    # The cap passed before the first exploration group, so nothing ran: all 64 episodes, both probes.
    assert skipped == {("explore", "64 of 64 exploration episodes"),
                       ("exploits", "the whole probe"), ("length", "the whole probe")}
    assert all("safety cap of 0.001 s" in g["reason"] and "--budget" in g["reason"] for g in report.incomplete)
    assert [p.status for p in report.probes] == ["skipped", "skipped"]
    assert report.exploration["episodes"] == 0


class _SlowCoin(CoinEnv):
    def step(self, action):
        time.sleep(0.05)
        return super().step(action)


class _SleepyCoin(CoinEnv):
    def step(self, action):
        time.sleep(0.25)
        return super().step(action)


def test_exploration_runs_all_its_episodes_however_long_they_take_within_the_cap():
    # 16 episodes of 0.25 s each take 4 s: more than any share of a 10 s budget a time-sliced
    # exploration would get, well within the cap.
    report = run_scan(_SleepyCoin, ScanConfig(seed=0, episodes=16, group_size=4, probes=(), budget_s=10.0))
    assert report.exploration["episodes"] == 16 and report.incomplete == []


def test_a_run_the_cap_cuts_is_recorded_with_how_many_episodes_it_skipped(monkeypatch):
    def many(ctx):
        result = ctx.run(RandomPolicy(), ctx.seeds(1000, "many"), make_env=_SlowCoin)
        return [Finding(code="length-bias", severity="info", title="ran", summary=f"{len(result.records.episodes)}")]

    _with_probes(monkeypatch, Probe("many", many, "runs too much"))
    report = run_scan(CoinEnv, ScanConfig(seed=0, episodes=8, budget_s=1.5))
    assert report.exploration["episodes"] == 8
    (gap,) = report.incomplete
    done = int(report.findings[0].summary)
    assert 0 < done < 1000
    assert gap["probe"] == "many" and gap["skipped"] == f"{1000 - done} of 1000 episodes of policy 'random'"


def test_a_probe_that_ignores_the_cap_is_cut_and_reported_incomplete_not_as_a_finding(monkeypatch):
    def sleeper(ctx):
        time.sleep(60)
        return []

    _with_probes(monkeypatch, Probe("sleeper", sleeper, "never returns"))
    start = time.monotonic()
    report = run_scan(CoinEnv, ScanConfig(episodes=16, budget_s=2.0, step_timeout_s=0.5))
    # the cap + the backstop's grace (2 s + two step timeouts) + slack
    assert time.monotonic() - start < 2.0 + 3.0 + 1.5
    assert report.probes[0].status == "overran" and report.findings == []
    (gap,) = report.incomplete
    assert gap["probe"] == "sleeper" and "did not stop within 3 s of the wall-clock safety cap" in gap["reason"]


def test_incomplete_round_trips_and_renders(tmp_path):
    report = run_scan(CoinEnv, ScanConfig(seed=0, episodes=8, probes=(), budget_s=1e-3))
    write_folder(report, tmp_path / "r")
    assert Report.load(tmp_path / "r").incomplete == report.incomplete != []
    md = (tmp_path / "r" / "report.md").read_text()
    assert "**INCOMPLETE:**" in md and "- `explore`: 8 of 8 exploration episodes" in md


@pytest.fixture
def planted_probe(monkeypatch):
    def warn(ctx):
        return [Finding(code="length-bias", severity="warn", title="farming", summary="steps pay")]

    _with_probes(monkeypatch, Probe("planted", warn, "always warns"))


def test_cli_exits_4_when_the_cap_skipped_work(planted_probe, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # A cap that passes before exploration: the planted probe is skipped, so its warn never comes
    # and --fail-on warn is not reached; the audit is incomplete, not clean.
    rc = main(["scan", "CartPole-v1", "--episodes", "8", "--budget", "0.001", "--out", "out",
               "--fail-on", "warn", "--no-progress"])
    out = capsys.readouterr().out
    assert "INCOMPLETE: explore: skipped 8 of 8 exploration episodes" in out
    assert "INCOMPLETE: planted: skipped the whole probe" in out
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(data["incomplete"]) == 2 and data["findings"] == []
    assert rc == 4


def test_cli_finding_beats_incomplete(monkeypatch, tmp_path, capsys):
    def warn_then_stall(ctx):
        ctx.incomplete("the second half", "a test cut it")
        return [Finding(code="length-bias", severity="warn", title="farming", summary="steps pay")]

    _with_probes(monkeypatch, Probe("half", warn_then_stall, "warns, then records a gap"))
    monkeypatch.chdir(tmp_path)
    rc = main(["scan", "CartPole-v1", "--episodes", "8", "--out", "out", "--fail-on", "warn", "--no-progress"])
    assert rc == 1
    assert "INCOMPLETE: half: skipped the second half (a test cut it)" in capsys.readouterr().out
    assert main(["scan", "CartPole-v1", "--episodes", "8", "--out", "o2", "--fail-on", "never",
                 "--no-progress"]) == 4


def test_help_documents_exit_4(capsys):
    with pytest.raises(SystemExit):
        main(["scan", "--help"])
    out = capsys.readouterr().out
    assert "4  incomplete" in out and "1 before 4" in out



def test_pytest_gate_fails_an_incomplete_audit_even_without_findings():
    from envaudit.testing.pytest_plugin import gate

    report = run_scan(CoinEnv, ScanConfig(seed=0, episodes=8, probes=(), budget_s=1e-3))
    assert report.findings == []
    with pytest.raises(pytest.fail.Exception, match="incomplete: raise budget_s"):
        gate(report, "fail")
    gate(run_scan(CoinEnv, ScanConfig(seed=0, episodes=8, probes=())), "fail")  # complete and clean: passes


def test_the_report_does_not_depend_on_the_scans_hash_seed(tmp_path):
    # Sets of strings iterate in an order PYTHONHASHSEED decides: a report built from one would
    # differ between a scan and its rerun in a new shell. Two scans under two hash seeds, at once.
    def start(hash_seed: str) -> subprocess.Popen:
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        return subprocess.Popen([sys.executable, "-m", "envaudit.cli", "scan", "tests.fixtures.user_envs:CoinEnv",
                                 "--quick", "--no-progress", "--workers", "1", "--fail-on", "never",
                                 "--out", str(tmp_path / hash_seed)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    scans = {seed: start(seed) for seed in ("5", "7")}
    for scan in scans.values():
        _, err = scan.communicate(timeout=300)
        assert scan.returncode == 0, err.decode()[-2000:]
    reports = [_without_timings(Report.load(tmp_path / seed)) for seed in scans]
    for report in reports:
        report["config"].pop("out")
    assert reports[0]["probes"] and json.dumps(reports[0], sort_keys=True) == json.dumps(reports[1], sort_keys=True)
