import json
import subprocess
import sys
from pathlib import Path

import pytest

import envaudit.scan as scan_module
from envaudit import Finding, Probe
from envaudit.cli import main

ROOT = Path(__file__).parents[1]


@pytest.fixture
def planted_probe(monkeypatch):
    """A registry with one probe that reports a warn, so --fail-on decides the exit code."""

    def warn(ctx):
        return [Finding(code="length-bias", severity="warn", title="farming", summary="steps pay")]

    registry = {"planted": Probe("planted", warn, "always warns")}
    monkeypatch.setattr(scan_module, "probe_names", lambda: sorted(registry))
    monkeypatch.setattr(scan_module, "registered_probes",
                        lambda names=None: {n: p for n, p in registry.items() if names is None or n in names})


@pytest.mark.parametrize(("fail_on", "code"), [("fail", 0), ("warn", 1), ("info", 1), ("never", 0)])
def test_exit_code_follows_fail_on(planted_probe, tmp_path, monkeypatch, capsys, fail_on, code):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    rc = main(["scan", "tests.fixtures.user_envs:CoinEnv", "--episodes", "8", "--out", "out",
               "--fail-on", fail_on, "--no-progress"])
    assert rc == code
    out = capsys.readouterr().out
    assert "steps pay" in out and "report written to out/" in out
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["config"]["fail_on"] == fail_on and data["counts"]["warn"] == 1


def test_fail_on_and_counts_go_by_incentive(tmp_path, monkeypatch, capsys):
    """Three probes' findings of one incentive (stalling to the step limit pays) are one verdict."""

    def seen_thrice(ctx):
        return [Finding(code="length-bias", severity="warn", title="farming", summary="steps pay",
                        evidence={"behaviour": "stall"}),
                Finding(code="exploit-policy", severity="warn", title="stalling pays", summary="a stall policy pays",
                        evidence={"ending": "truncated"}),
                Finding(code="learned-exploit", severity="info", title="GRPO learned length up", summary="longer",
                        evidence={"moves": [{"behaviour": "length up", "exploit": True}]})]

    registry = {"planted": Probe("planted", seen_thrice, "one incentive, three findings")}
    monkeypatch.setattr(scan_module, "probe_names", lambda: sorted(registry))
    monkeypatch.setattr(scan_module, "registered_probes", lambda names=None: registry)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    assert main(["scan", "tests.fixtures.user_envs:CoinEnv", "--episodes", "8", "--out", "out",
                 "--fail-on", "warn", "--no-progress"]) == 1
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())  # the table's text, unwrapped
    assert "also seen by: planted exploit-policy (warn); planted learned-exploit (info)" in out
    assert "0 fail, 1 warn, 0 info (3 findings)" in out
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["counts"] == {"fail": 0, "warn": 1, "info": 0} and len(data["findings"]) == 3
    assert [(g["code"], g["behaviour"], g["severity"], len(g["members"])) for g in data["groups"]] == [
        ("length-bias", "stall", "warn", 3)]
    assert main(["scan", "tests.fixtures.user_envs:CoinEnv", "--episodes", "8", "--out", "out2",
                 "--fail-on", "fail", "--no-progress"]) == 0


def test_pyproject_section_sets_options_and_flags_override(planted_probe, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    (tmp_path / "pyproject.toml").write_text(
        "[tool.envaudit]\nseed = 7\nepisodes = 12\nfail-on = 'warn'\ntimeout-handling = 'drop'\n"
    )
    assert main(["scan", "tests.fixtures.user_envs:CoinEnv", "--out", "o", "--no-progress"]) == 1
    config = json.loads((tmp_path / "o" / "report.json").read_text())["config"]
    assert (config["seed"], config["episodes"], config["timeout_handling"]) == (7, 12, "drop")
    assert main(["scan", "tests.fixtures.user_envs:CoinEnv", "--out", "o2", "--fail-on", "never",
                 "--seed", "8", "--no-progress"]) == 0
    config = json.loads((tmp_path / "o2" / "report.json").read_text())["config"]
    assert (config["seed"], config["fail_on"]) == (8, "never")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["scan", "CartPol-v1"], "no Gymnasium env 'CartPol-v1'; did you mean 'CartPole-v1'?"),
        (["scan", "CartPole-v1", "--episodes", "0"], "episodes must be at least 1, got 0"),
        (["scan", "CartPole-v1", "--timeout-handling", "ignore"], "invalid choice: 'ignore'"),
        (["scan", "CartPole-v1", "--probes", "replya"], "unknown probe 'replya' (did you mean 'replay'?)"),
        (["scan", "CartPole-v1", "--pipeline", "rlm"], "no pipeline preset 'rlm'"),
        (["scan"], "the following arguments are required: ENV"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_usage_errors_exit_2_with_one_line_naming_the_fix(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unknown_pyproject_key_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.envaudit]\nepisodez = 3\n")
    assert main(["scan", "CartPole-v1"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'episodez' in [tool.envaudit]" in err and "did you mean 'episodes'?" in err


def test_console_script_lists_probes():
    out = subprocess.run([sys.executable, "-m", "envaudit.cli", "probes"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for name in ("api", "replay"):
        assert name in out.stdout


def test_version_prints_the_package_version(capsys):
    from envaudit import __version__

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"envaudit {__version__}"


def test_probes_are_listed_one_line_each(capsys):
    from envaudit.probe import registered_probes

    assert main(["probes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    probes = registered_probes()
    assert [line.split()[0] for line in lines] == list(probes)
    for line, probe in zip(lines, probes.values(), strict=True):
        assert probe.summary in line and all(code in line for code in probe.codes)


def test_scan_help_lists_the_pipeline_presets(capsys):
    from envaudit.presets import PRESETS

    with pytest.raises(SystemExit):
        main(["scan", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(name in text for name in PRESETS)


@pytest.mark.parametrize(("argv", "message"), [
    (["scan", "CartPole-v1", "--timeout-penalty", "5"],
     "--timeout-penalty 5 applies only under --timeout-handling penalty, but timed-out rollouts are handled "
     "with keep; add --timeout-handling penalty, or drop --timeout-penalty"),
    (["scan", "CartPole-v1", "--timeout-handling", "drop", "--timeout-penalty", "-2"],
     "--timeout-penalty -2 applies only under --timeout-handling penalty, but timed-out rollouts are handled with drop"),
    (["scan", "CartPole-v1", "--pipeline", "rllm", "--timeout-penalty", "5"],
     "--timeout-penalty 5 is ignored under --pipeline rllm, which sets its own handling"),
    (["logs", "run/", "--timeout-penalty", "5"], "--timeout-penalty 5 applies only under --timeout-handling penalty"),
])
def test_a_timeout_penalty_that_would_be_ignored_is_a_usage_error(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_timeout_penalty_under_penalty_handling_is_taken(tmp_path, monkeypatch):
    from envaudit.cli import _build_parser, _config

    monkeypatch.chdir(tmp_path)
    args = _build_parser().parse_args(["scan", "CartPole-v1", "--timeout-handling", "penalty", "--timeout-penalty", "5"])
    assert _config(args).rollout_pipeline().penalty == 5.0


@pytest.mark.parametrize(("command", "shown"), [
    ("scan", ["--seed SEED Seed of every random choice in the scan: the same seed gives the same report. (default: 0)",
              "(default: 256)", "reported as a hang. (default: 5)", "(default: 900)", "(default: keep)",
              "(default: -1)", "(default: fail)", "(default: 0.05)", "(default: processes)", "(default: 4096)"]),
    ("logs", ["(default: 0)", "(default: 0.05)", "(default: keep)", "(default: fail)"]),
])
def test_help_shows_each_options_default(command, shown, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert [s for s in shown if s not in text] == []
    assert "(default: None)" not in text and "(default: False)" not in text  # flags without one say nothing
