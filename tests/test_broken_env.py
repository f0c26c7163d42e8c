"""An env that cannot be audited at all is its own verdict: exit 3, the exception and where it was
raised in the user's code — never the exit code of "an incentive was found"."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

from envaudit.cli import main
from envaudit.scan import run_scan

ROOT = Path(__file__).parents[1]
HERE = Path(__file__).name


def no_database():
    raise ConnectionError("cannot connect to flight database")  # the factory of a user's env


class ResetAlwaysFails(gym.Env):
    action_space = gym.spaces.Discrete(2)
    observation_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        raise RuntimeError("fixture file missing")

    def step(self, action):  # pragma: no cover - never reached
        return 0, 0.0, True, False, {}


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if text in line)


def test_a_factory_that_raises_is_broken_with_its_file_and_line():
    report = run_scan(no_database, episodes=8, quick=True)
    assert report.broken["stage"] == "make"
    assert report.broken["message"] == "ConnectionError: cannot connect to flight database"
    assert report.broken["where"].endswith(f"{HERE}:{_line_of('cannot connect to flight database')}")
    [finding] = report.findings
    assert finding.code == "env-error" and "cannot be made" in finding.title
    assert report.broken["where"] in finding.summary


def test_an_env_whose_every_reset_raises_is_broken():
    report = run_scan(ResetAlwaysFails, episodes=8, quick=True)
    assert report.broken["stage"] == "reset" and "fixture file missing" in report.broken["message"]
    assert report.broken["where"].endswith(f"{HERE}:{_line_of('fixture file missing')}")
    assert report.probes == []  # nothing ran on an env that never finished an episode


def test_the_cli_exits_3_and_says_where(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    rc = main(["scan", "tests.test_broken_env:no_database", "--quick", "--out", "out", "--no-progress"])
    assert rc == 3
    out = capsys.readouterr().out
    assert "ENV BROKEN (make): ConnectionError: cannot connect to flight database" in out and HERE in out
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["broken"]["stage"] == "make" and data["broken"]["where"].endswith(
        f"{HERE}:{_line_of('cannot connect to flight database')}")


def test_every_unknown_probe_is_named(capsys):
    assert main(["scan", "CartPole-v1", "--probes", "timeout,lenght,replay"]) == 2
    err = capsys.readouterr().err
    assert "unknown probes 'timeout' (did you mean 'timeouts'?), 'lenght' (did you mean 'length'?)" in err


def test_a_factory_returning_no_env_names_its_type_with_the_right_article(capsys):
    assert main(["scan", "tests.test_broken_env:_line_of_int", "--quick"]) == 2
    assert "made an int, not a gymnasium.Env" in capsys.readouterr().err


def _line_of_int():
    return 7


@pytest.fixture(autouse=True)
def _importable(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
