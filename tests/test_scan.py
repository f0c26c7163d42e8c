import json
import time

import gymnasium as gym
import pytest

import envaudit.scan as scan_module
from envaudit import Finding, Probe, ScanConfig, Severity
from envaudit.conclusion import holm_correct
from envaudit.errors import UsageError
from envaudit.report import Report
from envaudit.reporting import write_folder
from envaudit.reporting.markdown import render_markdown
from envaudit.scan import run_scan
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.user_envs import CoinEnv


def _with_probes(monkeypatch, *probes):
    registry = {p.name: p for p in probes}
    monkeypatch.setattr(scan_module, "probe_names", lambda: sorted(registry))
    monkeypatch.setattr(scan_module, "registered_probes",
                        lambda names=None: {n: p for n, p in registry.items() if names is None or n in names})


def _finding(p_value, severity="fail"):
    return Finding(code="timeout-rewarded", severity=severity, title="t", summary="s",
                   evidence={"p_value": p_value})


def test_exploration_runs_groups_of_rollouts_from_one_reset_seed():
    report = run_scan(CoinEnv, ScanConfig(seed=3, episodes=40, group_size=8, probes=()))
    eps = report.records.episodes
    assert len(eps) == 40 and report.exploration["episodes"] == 40
    per_group = eps.groupby("group")["seed"]
    assert (per_group.nunique() == 1).all() and (per_group.size() == 8).all()
    assert eps["seed"].nunique() == 5
    # CoinEnv pays 1 exactly on success, half the time under a random policy.
    assert (eps["return"] == eps["success"].astype(float)).all()
    assert 0.25 < eps["return"].mean() < 0.75


def test_same_seed_same_report_other_seed_other_data():
    cfg = ScanConfig(seed=11, episodes=32, probes=())
    a, b = run_scan(CoinEnv, cfg), run_scan(CoinEnv, cfg)
    c = run_scan(CoinEnv, ScanConfig(seed=12, episodes=32, probes=()))
    assert a.records.episodes.equals(b.records.episodes)
    assert a.records.steps.equals(b.records.steps)
    assert not a.records.steps["action"].equals(c.records.steps["action"])


def test_probe_that_raises_becomes_a_finding_and_the_scan_goes_on(monkeypatch):
    def boom(ctx):
        raise RuntimeError("kaput")

    def fine(ctx):
        return [Finding(code="length-bias", severity="info", title="ok", summary="fine")]

    _with_probes(monkeypatch, Probe("boom", boom, "raises", order=1), Probe("fine", fine, "works", order=2))
    report = run_scan(CoinEnv, ScanConfig(episodes=16))
    status = {p.name: p.status for p in report.probes}
    assert status == {"boom": "crashed", "fine": "ok"}
    crashed = [f for f in report.findings if f.code == "env-error"]
    assert len(crashed) == 1 and "RuntimeError: kaput" in crashed[0].summary
    assert crashed[0].probe == "boom" and crashed[0].severity == Severity.WARN
    assert any(f.title == "ok" and f.probe == "fine" for f in report.findings)


def test_probe_returning_garbage_is_reported(monkeypatch):
    _with_probes(monkeypatch, Probe("garbage", lambda ctx: ["not a finding"], "bad"))
    report = run_scan(CoinEnv, ScanConfig(episodes=8))
    assert report.probes[0].status == "crashed"
    assert "instead of envaudit.Finding" in report.findings[0].summary


def test_holm_downgrades_unsupported_findings_to_info():
    findings = holm_correct([_finding(0.001), _finding(0.03), _finding(0.04), _finding(0.5, "info")], alpha=0.05)
    # Holm: 0.001*4=0.004; 0.03*3=0.09; max(0.09, 0.04*2)=0.09; 0.5
    assert [round(f.evidence["p_adjusted"], 6) for f in findings] == [0.004, 0.09, 0.09, 0.5]
    assert [str(f.severity) for f in findings] == ["fail", "info", "info", "info"]
    assert "Holm over 4 tests" in findings[1].evidence["downgraded"]


def test_unknown_probe_name_is_a_usage_error_with_a_suggestion(monkeypatch):
    _with_probes(monkeypatch, Probe("replay", lambda ctx: [], "r"))
    with pytest.raises(UsageError, match=r"unknown probe 'replya' \(did you mean 'replay'\?\)"):
        run_scan(CoinEnv, ScanConfig(probes=("replya",)))


def test_env_that_cannot_be_made_is_a_finding_not_a_crash():
    def broken():
        raise OSError("no GPU here")

    report = run_scan(broken, ScanConfig(probes=()))
    assert [f.code for f in report.findings] == ["env-error"]
    assert "OSError: no GPU here" in report.findings[0].summary


def test_report_folder_round_trips(tmp_path):
    report = run_scan(CoinEnv, ScanConfig(seed=5, episodes=16, probes=()))
    report.findings.append(_finding(0.01))
    write_folder(report, tmp_path / "r")
    names = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert {"episodes.parquet", "report.json", "report.md", "report.html", "steps.parquet"} <= set(names)
    assert not [n for n in names if n.endswith(".tmp")]
    # Readable by the team like any file written under the umask, not mkstemp's private 0600.
    assert all((tmp_path / "r" / n).stat().st_mode & 0o044 for n in names)
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert data["schema_version"] == 2 and data["config"]["seed"] == 5
    assert data["fingerprint"]["class"].endswith("user_envs.CoinEnv")
    loaded = Report.load(tmp_path / "r")
    assert loaded.to_dict() == report.to_dict()
    assert loaded.records.episodes["return"].tolist() == report.records.episodes["return"].tolist()
    assert "# envaudit report" in (tmp_path / "r" / "report.md").read_text()


def test_episodes_kept_twice_by_probes_are_stored_once():
    from envaudit.envs import VARIANTS  # noqa: F401 - registers the bundled envs

    report = run_scan("envaudit/Helpdesk-AttemptCredit-v0", ScanConfig(seed=0, quick=True, probes=("failures",)))
    steps, eps = report.records.steps, report.records.episodes
    assert not steps.duplicated(["episode_id", "step"]).any() and not eps["episode_id"].duplicated().any()
    # Every episode's steps are numbered 0..length-1 exactly once.
    lengths = steps.groupby("episode_id").size()
    assert (lengths == eps.set_index("episode_id").loc[lengths.index, "length"]).all()


class HangsLate(gym.Env):
    """Action 0 succeeds, 1 fails, 2 and 3 go on. On a third of the reset seeds, action 3 hangs:
    exploration (seed 0, --quick) meets it after its first group of 8 finished (enough to audit),
    so the probes run."""

    HANG_FROM = 1
    action_space = gym.spaces.Discrete(4)
    observation_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.doomed = self.np_random.random() < 1 / 3
        return 0, {}

    def step(self, action):
        self.t += 1
        if action == 3 and self.doomed and self.t >= self.HANG_FROM:
            time.sleep(10**6)
        if action in (0, 1):
            return 0, float(action == 0), True, False, {"success": action == 0}
        return 0, 0.0, False, self.t >= 10, {}


class HangsLater(HangsLate):
    """The same hang, rarer: exploration (seed 0, --quick) never meets it, GRPO's training does."""

    HANG_FROM = 7


def test_once_the_env_hung_no_probe_waits_on_it_again_and_each_is_listed_hung():
    step_timeout = 0.5
    start = time.monotonic()
    report = run_scan(HangsLate, probes=["api", "replay", "grpo"], quick=True, step_timeout_s=step_timeout)
    assert report.broken is None and report.exploration["episodes"] >= MIN_SAMPLES
    status = {p.name: p for p in report.probes}
    assert {name: p.status for name, p in status.items()} == {"api": "hung", "replay": "hung", "grpo": "hung"}
    assert status["grpo"].error.startswith("GRPO training skipped: the env already hung in this scan (step() did not")
    assert status["grpo"].seconds < step_timeout  # it did not step the env at all
    assert time.monotonic() - start < 30 * step_timeout  # one hang waited on, not one per GRPO group
    markdown = render_markdown(report)
    assert "| grpo | hung |" in markdown and "| replay | hung |" in markdown


def test_a_grpo_run_stopped_by_its_own_hang_is_listed_hung():
    report = run_scan(HangsLater, probes=["grpo"], quick=True, step_timeout_s=0.5)
    [grpo] = report.probes
    assert grpo.notes["runs"]["natural"]["stopped"] == "hang"
    assert grpo.status == "hung" and grpo.error.startswith("GRPO run 'natural' stopped at a hang")
