"""``--executor ray``: a suite of bundled envs scanned as Ray tasks on a local Ray instance finds
exactly what the local executor finds.

The suite is four envs, one per path a report can take: a planted flaw these probes catch at fail
(an answer that pays without success), the unseeded answer (a non-replayable env, whose numbers no
executor controls), a clean env, and a clean env's text twin (the text catalogue path). Every
bundled env's scan is ``tests/test_grouping.py``'s, and the expansion of ``envaudit/*`` over the
registry ``tests/test_suite.py``'s; what this module adds is the executor, for which four envs
on two Ray workers are as telling as eight.

Ray starts once for the module (a local instance of two CPUs); the local executor runs two worker
processes. The scans are small (a quick scan, four cheap probes, 16 exploration episodes) so the
module stays in the default run; what is compared is everything a report says apart from its
timings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray

from envaudit.envs.registry import TEXT_VARIANTS, VARIANTS
from envaudit.suite import run_suite
from envaudit.suite_exec import start_ray
from envaudit.suite_file import build_entries

PROBES = ["api", "exploits", "replay", "intent"]
TIMINGS = ("seconds", "created")
ALL = {**VARIANTS, **TEXT_VARIANTS}


@pytest.fixture(scope="module")
def local_ray():
    started = start_ray(None, num_cpus=2)
    yield
    if started:
        ray.shutdown()


def _comparable(folder: Path) -> dict:
    report = json.loads((folder / "report.json").read_text())
    report = {k: v for k, v in report.items() if k not in (*TIMINGS, "config")}
    report["probes"] = [{k: v for k, v in p.items() if k != "seconds"} for p in report["probes"]]
    return report


SUITE = ["envaudit/FlakySearch-AnswerAll-v0", "envaudit/FlakySearch-Unseeded-v0", "envaudit/Helpdesk-v0",
         "envaudit/Helpdesk-Text-v0"]


# Two suites of four report folders. The limit only keeps a loaded machine from failing it.
@pytest.mark.timeout(900)
def test_ray_suite_finds_what_the_local_executor_finds(local_ray, tmp_path):
    entries = build_entries(SUITE, None, base={},
                            flags={"quick": True, "episodes": 64, "probes": PROBES}, env_args={})
    assert [e.target for e in entries] == SUITE
    local = run_suite(entries, tmp_path / "local", workers=2)  # local worker processes
    on_ray = run_suite(entries, tmp_path / "ray", executor="ray")
    assert local.complete and on_ray.complete and on_ray.executor == "ray"

    def verdicts(summary):
        return {r["target"]: (r["worst"], r["exit_code"],
                              [(g["code"], g["severity"], g["behaviour"], g["reward_path"]) for g in r["groups"]])
                for r in summary.rows}

    assert verdicts(on_ray) == verdicts(local)
    # Whole reports match too, except where the env itself draws from Python's unseeded global
    # random (the planted non-replayable flaw): its numbers follow the process's history, which
    # no executor controls; its verdicts are compared above.
    unseeded = {t for t in SUITE if "non-replayable" in ALL[t].planted}
    assert unseeded == {"envaudit/FlakySearch-Unseeded-v0"}
    for entry in entries:
        if entry.target not in unseeded:
            assert _comparable(tmp_path / "ray" / entry.name) == _comparable(tmp_path / "local" / entry.name), \
                entry.name
    # The comparison is not between two empty reports: by design (envs/registry.py) the grader that
    # pays answer_all and the unseeded answer each make an exploit pay as much as success (or break
    # replay), which these probes catch at fail; no clean env gets warn or fail.
    worst = {r["target"]: r["worst"] for r in local.rows}
    for name in ("FlakySearch-AnswerAll", "FlakySearch-Unseeded"):
        assert worst[f"envaudit/{name}-v0"] == "fail", name
    for target in SUITE:
        if ALL[target].is_clean:
            assert worst[target] in (None, "info"), target


def test_the_command_runs_a_suite_on_ray(local_ray, tmp_path, monkeypatch, capsys):
    """``envaudit scan A B --executor ray`` joins the Ray instance this process already runs."""
    from envaudit.cli import main

    monkeypatch.chdir(tmp_path)
    argv = ["scan", "envaudit/FlakySearch-AnswerAll-v0", "envaudit/FlakySearch-v0", "--quick", "--episodes", "64",
            "--probes", ",".join(PROBES), "--out", "s", "--no-progress", "--executor", "ray"]
    assert main(argv) == 1  # by design the lenient grader pays answer_all as much as success: fail
    suite = json.loads((tmp_path / "s" / "suite.json").read_text())
    assert suite["executor"] == "ray" and suite["complete"]
    assert [(r["target"], r["worst"]) for r in suite["envs"]][0] == ("envaudit/FlakySearch-AnswerAll-v0", "fail")
    assert ray.is_initialized()  # not shut down: the command did not start it
