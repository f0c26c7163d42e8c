"""An env that cannot be audited at all is its own verdict: exit 3, the exception and where it was
raised in the user's code — never the exit code of "an incentive was found"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

from envaudit.cli import main
from envaudit.scan import run_scan
from envaudit.stats import MIN_SAMPLES

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


# -- hangs: an env whose episodes hang before enough of them finish is broken, and costs a deadline
class SleepsInStep(gym.Env):
    """Every step sleeps for good (a lock never released, a socket never answered)."""

    action_space = gym.spaces.Discrete(2)
    observation_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        time.sleep(10**6)


class SpinsInStep(SleepsInStep):
    """Every step spins for good: a busy loop holds its thread (and the GIL) until its process dies."""

    def step(self, action):
        while True:
            pass


class HangsUnlessItEnds(SleepsInStep):
    """Action 0 ends the episode at once, action 1 hangs: some episodes finish before the first hang,
    fewer than any check needs (a hang stops exploration, 2**-8 that 8 end first)."""

    def step(self, action):
        if action == 1:
            time.sleep(10**6)
        return 0, 0.0, True, False, {"success": False}


STEP_TIMEOUT = 1.0
SPIN_CPU_S = 0.5


def _timed_scan(target: str, out: str) -> tuple[int, float]:
    start = time.monotonic()
    rc = main(["scan", target, "--step-timeout", str(STEP_TIMEOUT), "--workers", "1", "--out", out, "--no-progress"])
    return rc, time.monotonic() - start


def _cpu_stretch() -> float:
    """Wall time per second of CPU a busy loop gets on this machine now (1 when a core is free). A
    step deadline counts the time the step had, not the time it waited for a CPU (deadline.py), so
    on a loaded machine a spinning step is declared hung after this many deadlines of wall time."""
    code = f"import time\nwhile time.process_time() < {SPIN_CPU_S}: pass\n"
    start = time.monotonic()
    subprocess.run([sys.executable, "-S", "-c", code], check=True)
    return max(1.0, (time.monotonic() - start) / SPIN_CPU_S)


@pytest.fixture(scope="module")
def startup_s(tmp_path_factory) -> float:
    """How long the same scan takes for an env that breaks at once: starting the worker processes."""
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("baseline"))
    try:
        main(["scan", "tests.test_broken_env:ResetAlwaysFails", "--workers", "1", "--out", "warm", "--no-progress"])
        rc, elapsed = _timed_scan("tests.test_broken_env:ResetAlwaysFails", "base")
    finally:
        os.chdir(here)
    assert rc == 3
    return elapsed


@pytest.mark.parametrize("env", ["SleepsInStep", "SpinsInStep", "HangsUnlessItEnds"])
def test_an_env_that_hangs_before_enough_episodes_finish_exits_3_within_two_deadlines(env, startup_s, tmp_path,
                                                                                     monkeypatch, capsys):
    """One worker, so the scan needs one hung episode to decide: beyond starting its worker
    processes, it may take two step deadlines (of the time the step had: see ``_cpu_stretch``).
    The machine's load now stretches the scan's own start and report as much as a spinning step
    (CI runs this beside other test workers), so both are scaled by the stretch measured now."""
    monkeypatch.chdir(tmp_path)
    stretch = _cpu_stretch()
    rc, elapsed = _timed_scan(f"tests.test_broken_env:{env}", "out")
    out = capsys.readouterr().out
    assert rc == 3, out
    assert elapsed - startup_s * stretch <= 2 * STEP_TIMEOUT * stretch, (elapsed, startup_s, stretch)
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["broken"]["stage"] == "step" and data["probes"] == []
    assert data["broken"]["message"].startswith(f"step() did not return within {STEP_TIMEOUT:g} s")
    assert f"fewer than the {MIN_SAMPLES} any check needs" in data["broken"]["message"]
    assert "ENV BROKEN (step): step() did not return" in out
