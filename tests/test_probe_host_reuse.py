"""One worker process hosts probe after probe: the report is the one fresh workers give.

``ProbeHost`` keeps its worker process between probes (``envaudit.execution.reuse``). A probe that
dies takes only its own worker; one that leaves process state changed gets its successor a fresh
worker; one that ends cleanly passes its worker on. Either way every probe's result is what it is
with a fresh worker per probe (``reuse=False``, the host as it was before).
"""

from __future__ import annotations

import json

import pytest

import envaudit.scan as scan_module
from envaudit.execution import ExecutionConfig
from envaudit.probe import BUILTIN
from envaudit.probe_host import ProbeHost
from envaudit.reporting import write_folder
from envaudit.scan import run_scan
from tests.execution.test_execution import _strip_timings
from tests.fixtures.host_probes import ACTIONS, EXIT_CODE

FIXTURE = "tests.fixtures.host_probes"


@pytest.fixture
def hosts(monkeypatch):
    """Register the fixture probes; record every ProbeHost a scan makes."""
    for name in ("patcher", "reader", "dier"):
        monkeypatch.setitem(BUILTIN, name, f"{FIXTURE}:{name}")
    made: list[ProbeHost] = []

    def scan(target: str, probes: tuple[str, ...], tmp_path, *, reuse: bool = True) -> dict:
        def host(*args, **kwargs):
            made.append(ProbeHost(*args, reuse=reuse, **kwargs))
            return made[-1]

        monkeypatch.setattr(scan_module, "ProbeHost", host)
        report = run_scan(target, seed=3, quick=True, episodes=16, group_size=4, probes=probes,
                          execution=ExecutionConfig("processes", workers=2))
        out = tmp_path / f"{'-'.join(probes)}-{reuse}-{len(made)}"
        write_folder(report, out)
        return _strip_timings(json.loads((out / "report.json").read_text()))

    return scan, made


def test_probes_sharing_one_worker_give_the_report_of_fresh_workers(hosts, tmp_path):
    scan, made = hosts
    probes = ("replay", "timeouts", "length", "reader")
    shared = scan("tests.fixtures.host_probes:BonusWalk", probes, tmp_path)
    fresh = scan("tests.fixtures.host_probes:BonusWalk", probes, tmp_path, reuse=False)
    assert [p["status"] for p in shared["probes"]] == ["ok"] * 4
    assert shared == fresh
    # Four probes, one worker process between them (and one per probe without reuse).
    assert (made[0].pool.started, made[0].replaced) == (1, [])
    assert made[1].pool.started == 4


def test_a_probe_that_leaves_state_behind_gets_the_next_probe_a_fresh_worker(hosts, tmp_path):
    scan, made = hosts
    probes = ("patcher", "reader", "length")
    shared = scan("tests.fixtures.host_probes:BonusWalk", probes, tmp_path)
    fresh = scan("tests.fixtures.host_probes:BonusWalk", probes, tmp_path, reuse=False)
    assert shared == fresh
    # The reader was paid as the env pays in a fresh process: the patched BONUS never reached it.
    [reading] = [f for f in shared["findings"] if f["probe"] == "reader"]
    assert reading["evidence"]["return"] == pytest.approx(1.0 - 0.05 * len(ACTIONS))  # the last step reaches GOAL
    [(probe, why)] = made[0].replaced
    assert probe == "patcher" and "tests.fixtures.host_probes" in why and "BONUS" in why
    assert made[0].pool.started == 2  # the patcher's, then one for reader and length


def test_a_worker_after_a_probe_died_still_gives_the_other_probes_findings(hosts, tmp_path):
    scan, made = hosts
    with_death = scan("tests.fixtures.crash_envs:CleanWalk", ("api", "dier", "reader", "length"), tmp_path)
    without = scan("tests.fixtures.crash_envs:CleanWalk", ("api", "reader", "length"), tmp_path, reuse=False)
    statuses = {p["name"]: p for p in with_death["probes"]}
    assert statuses["dier"]["status"] == "crashed" and f"exited with code {EXIT_CODE}" in statuses["dier"]["error"]
    assert all(statuses[n]["status"] == "ok" for n in ("api", "reader", "length"))
    lost = [f for f in with_death["findings"] if f["probe"] == "scan" and f["code"] == "env-error"]
    assert len(lost) == 1 and lost[0]["evidence"]["probes"] == ["dier"]
    others = [f for f in with_death["findings"] if f["probe"] not in ("dier", "scan")]
    assert others == without["findings"] and any(f["probe"] == "reader" for f in others)
    assert [p for p in with_death["probes"] if p["name"] != "dier"] == without["probes"]
    # api's worker hosted dier and died with it; one fresh worker hosted reader and length.
    assert made[0].pool.started == 2 and [p for p, _ in made[0].replaced] == ["dier"]


def test_the_replay_probes_oracle_units_run_in_a_probe_worker_as_inline(tmp_path):
    """The oracle's episodes are captured through a wrapper's shared list: played on the episode
    pool the list stayed empty, so under processes no oracle unit ran and the report differed."""
    from envaudit.probes.replay import ORACLE_UNITS

    reports = []
    for execution in (None, ExecutionConfig("processes", workers=2)):
        report = run_scan("envaudit/FlakySearch-v0", seed=0, quick=True, probes=("replay",), execution=execution)
        out = tmp_path / ("inline" if execution is None else "processes")
        write_folder(report, out)
        reports.append(_strip_timings(json.loads((out / "report.json").read_text())))
    assert reports[0]["probes"][0]["notes"]["oracle_units"] == ORACLE_UNITS  # FlakySearch has an oracle
    assert reports[0] == reports[1]


def test_the_reuse_check_names_what_a_probe_changed_and_ignores_the_reset_generators(monkeypatch):
    """In-process: what ``Snapshot.changed`` sees (the host asks it after every probe)."""
    import random

    import numpy as np

    from envaudit.execution.reuse import Randomness, Snapshot, watched_modules
    from tests.fixtures import host_probes

    modules = watched_modules([FIXTURE])
    assert FIXTURE in modules and "envaudit.probe_host" in modules and "time" in modules
    randomness = Randomness()
    before = Snapshot(modules)
    random.random(), np.random.random()  # the global generators: reset before each probe instead
    assert before.changed() is None
    randomness.restore()
    monkeypatch.setattr(host_probes.BonusWalk, "step", lambda self, action: None)
    assert "BonusWalk.step" in before.changed()
    monkeypatch.undo()
    assert before.changed() is None
    monkeypatch.setenv("ENVAUDIT_REUSE_TEST", "1")
    assert before.changed() == "the process's environ changed"
