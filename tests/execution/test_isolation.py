"""A default scan (every probe) of an env that kills its process: nothing escapes, the report is complete.

Each dying env (tests/fixtures/crash_envs.py) kills the process running it at step ``BREAK_AT`` of
an episode that opened with the trigger twice: a segfault, ``os._exit`` or a leak past the memory
cap. Under the process executor that process is an episode worker (for ``ctx.run`` episodes) or
the worker process running a probe (its own stepping: the api probe's raw rollouts, check_env,
ordered runs); the GRPO probe's rollouts step on episode workers too (lockstep lanes). Either way
the scan goes on and says where it happened.
"""

from __future__ import annotations

import json

import pytest

from envaudit.probe import probe_names
from tests.execution.test_execution import CAP_MB, _strip_timings
from tests.fixtures.crash_envs import BREAK_AT, EXIT_CODE

SAYS = {"SegfaultWalk": "SIGSEGV (signal 11)", "ExitWalk": f"exited with code {EXIT_CODE}",
        "LeakWalk": f"past the memory cap of {CAP_MB} MiB"}


def _scan(tmp_path, name: str, *extra: str) -> tuple[int, dict]:
    from envaudit.cli import main

    out = tmp_path / name
    rc = main(["scan", f"tests.fixtures.crash_envs:{name}", "--quick", "--workers", "2", "--memory-cap",
               str(CAP_MB), "--step-timeout", "60", "--out", str(out), "--no-progress", *extra])
    return rc, json.loads((out / "report.json").read_text())


def _check(rc: int, report: dict, name: str) -> None:
    says = SAYS[name]
    assert rc == 1 and report["incomplete"] == [] and not report.get("broken")
    # Every probe ran: it finished, or its worker process died and it says how.
    statuses = {p["name"]: p for p in report["probes"]}
    assert sorted(statuses) == probe_names()
    crashed = [p for p in statuses.values() if p["status"] != "ok"]
    assert all(p["status"] == "crashed" and says in p["error"] for p in crashed)
    # The GRPO probe's rollouts step on the episode workers (lockstep lanes), with random play from
    # many seeds: some rollout opens with the trigger and its worker dies; that costs the rollout,
    # not the probe, and the scan's env-error finding lists it under grpo.
    assert statuses["grpo"]["status"] == "ok"
    probe_errors = {f["probe"] for f in report["findings"] if f["code"] == "env-error" and f["probe"] != "scan"}
    assert {p["name"] for p in crashed} <= probe_errors
    lost = [f for f in report["findings"] if f["code"] == "env-error" and f["probe"] == "scan"]
    assert len(lost) == 1 and lost[0]["severity"] == "fail"
    evidence = lost[0]["evidence"]
    # Exploration and the dead probes are among the places it happened; every case names the designed
    # call and step, its seed, and the signal or exit code.
    assert {"explore", "grpo", *(p["name"] for p in crashed)} <= set(evidence["probes"])
    cases = evidence["cases"]
    assert cases and all(c["call"] == "step" and c["step"] == BREAK_AT and c["seed"] is not None
                         and says in c["message"] for c in cases)


def test_a_default_scan_of_a_segfaulting_env_completes_with_env_error(tmp_path):
    rc, report = _scan(tmp_path, "SegfaultWalk")
    _check(rc, report, "SegfaultWalk")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ExitWalk", "LeakWalk"])
def test_a_default_scan_of_each_dying_env_completes_with_env_error(tmp_path, name):
    rc, report = _scan(tmp_path, name)
    _check(rc, report, name)


@pytest.mark.slow
def test_a_default_scan_writes_the_same_report_with_1_or_4_workers_and_inline(tmp_path):
    reports = [_strip_timings(_scan(tmp_path / f"w{w}", "CleanWalk", "--workers", str(w))[1]) for w in (1, 4)]
    reports.append(_strip_timings(_scan(tmp_path / "inline", "CleanWalk", "--executor", "inline")[1]))
    assert reports[0] == reports[1] == reports[2]
    assert all(p["status"] == "ok" for p in reports[0]["probes"])


def test_a_factory_that_cannot_be_pickled_runs_its_probes_in_the_scanning_process():
    import threading

    from envaudit.execution import ExecutionConfig
    from envaudit.scan import run_scan
    from tests.fixtures.crash_envs import CleanWalk

    lock = threading.Lock()  # cloudpickle cannot send a lock, so nor the factory that holds one

    def make_env():
        with lock:
            return CleanWalk()

    with pytest.warns(RuntimeWarning, match="probe 'length' cannot be sent to a worker process"):
        report = run_scan(make_env, episodes=8, group_size=4, probes=("length",),
                          execution=ExecutionConfig("processes", workers=2))
    assert report.broken is None and [p.status for p in report.probes] == ["ok"]
    assert report.exploration["episodes"] == 8
