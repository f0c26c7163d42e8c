"""``read_log``'s choices and refusals, and what ``run_logs`` puts in the report, on small logs.

The verl sample (tests/logs/data/verl/rollout) is a dump the verl reader recognises; the generic
logs are written here. Every refusal must name the fix (a ``UsageError``: exit 2 at the CLI).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from envaudit.config import ScanConfig
from envaudit.logs import audit
from envaudit.logs.audit import CURVES_TABLE, FORMATS, read_log, run_logs
from envaudit.logs.records import MAX_ANALYSED
from envaudit.logs.schema import LoggedRun, check_run
from envaudit.resolve import UsageError

VERL = Path(__file__).parent / "data" / "verl" / "rollout"


def _generic(tmp_path: Path, n_iterations: int = 4, per: int = 8, **extra) -> Path:
    rows = [{"episode_id": f"{it}-{k}", "group_id": f"{it}-{k // 4}", "iteration": it,
             "return": float(k % 2), "success": bool(k % 2), "end_reason": "terminated", **extra}
            for it in range(n_iterations) for k in range(per)]
    path = tmp_path / "episodes.jsonl"
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    return path


def test_formats_are_the_readers_and_an_unknown_one_is_refused(tmp_path):
    assert FORMATS == ("auto", "generic", "verl", "skyrl", "trl", "prime-rl", "openrlhf")
    with pytest.raises(UsageError, match=r"--format 'nope': expected one of auto, generic, verl"):
        read_log([_generic(tmp_path)], fmt="nope")


def test_auto_picks_the_reader_that_recognises_the_file(tmp_path):
    run = read_log([_generic(tmp_path)])
    assert run.source == "generic" and len(run.episodes) == 32
    dump = read_log([VERL])
    assert dump.source == "verl"
    assert read_log([VERL], fmt="verl").episodes.equals(dump.episodes)


def test_generic_by_name_and_its_mapping(tmp_path):
    path = tmp_path / "e.jsonl"
    pd.DataFrame({"id": ["a", "b"], "iteration": [0, 1], "score": [0.5, 1.0]}).to_json(path, orient="records", lines=True)
    run = read_log([path], fmt="generic", mapping={"id": "episode_id", "score": "return"})
    assert run.source == "generic"
    assert run.episodes["return"].tolist() == [0.5, 1.0]
    assert "id -> episode_id" in run.notes


def test_a_generic_log_takes_no_reader_options(tmp_path):
    with pytest.raises(UsageError, match=r"--reader-arg kind, subset: options of a trainer's reader"):
        read_log([_generic(tmp_path)], reader_options={"subset": "x", "kind": "y"})


def test_a_trainer_dump_refuses_steps_several_paths_and_unknown_options(tmp_path):
    with pytest.raises(UsageError, match=r"--steps is for logs in the generic schema; a verl dump"):
        read_log([VERL], steps=tmp_path / "steps.jsonl")
    with pytest.raises(UsageError, match=r"a verl dump is one file or folder; got 2 paths"):
        read_log([VERL, VERL], fmt="verl")
    with pytest.raises(UsageError, match=r"--reader-arg bogus: the verl reader takes success_field"):
        read_log([VERL], reader_options={"bogus": 1})


def test_a_trainer_reader_option_reaches_the_reader():
    plain = read_log([VERL])
    assert read_log([VERL], reader_options={"success_field": None}).episodes.equals(plain.episodes)


def test_a_named_format_reads_with_that_reader_whatever_the_file(tmp_path):
    with pytest.raises(UsageError, match=r"missing.jsonl does not exist; give the file or folder the trainer wrote"):
        read_log([tmp_path / "missing.jsonl"], fmt="verl")


def test_a_schema_error_becomes_a_usage_error(tmp_path):
    path = tmp_path / "e.jsonl"
    pd.DataFrame({"episode_id": ["a"], "return": [1.0]}).to_json(path, orient="records", lines=True)
    with pytest.raises(UsageError, match=r"no iteration column"):
        read_log([path])


def _run(n_iterations=4, per=8, **columns) -> LoggedRun:
    rows = pd.DataFrame([{"episode_id": f"{it}-{k}", "group_id": f"{it}-{k // 4}", "iteration": it,
                          "return": float(k % 2), "success": bool(k % 2), "length": 1 + k % 3,
                          "end_reason": "truncated" if k == 0 else "terminated"}
                         for it in range(n_iterations) for k in range(per)])
    return check_run(LoggedRun(rows.assign(**columns), None, "generic", notes=["a note"]))


def test_the_report_summarises_the_log():
    report = run_logs(_run(), label="mine")
    s = report.exploration
    assert (s["episodes"], s["steps"], s["iterations"]) == (32, 0, 4)
    assert s["mean_return"] == 0.5
    assert s["mean_length"] == pytest.approx((1 + 2 + 3 + 1 + 2 + 3 + 1 + 2) / 8)
    assert s["outcomes"] == {"failure": 12, "success": 16, "timeout": 4}
    assert s["end_reasons"] == {"terminated": 28, "truncated": 4}
    assert s["success_flag"] is True and s["source"] == "generic" and s["notes"] == ["a note"]
    assert s["missing"] == [] and "sampled" not in s  # every episode column present, no step table given
    assert report.env_id == "logs:mine"
    assert report.config["logs"] == {"source": "generic", "paths": "mine", "env": None}
    assert CURVES_TABLE in report.tables and len(report.tables[CURVES_TABLE]) == 4


def test_each_analysis_has_a_status_and_drift_comes_last():
    report = run_logs(_run())
    names = [p.name for p in report.probes]
    assert names == ["timeouts", "pipeline", "length", "intent", "failures", "drift"]
    failures = next(p for p in report.probes if p.name == "failures")
    assert failures.status == "skipped" and "steps" in failures.error
    assert all(p.status == "ok" for p in report.probes if p.name != "failures")


def test_progress_is_told_in_order_and_ends_at_one():
    told: list[tuple[str, float]] = []
    run_logs(_run(), progress=lambda m, f: told.append((m, f)))
    assert told[0] == ("analysis timeouts", 0.0)
    assert told[-2][0] == "drift over training" and told[-2][1] == pytest.approx(5 / 6)
    assert told[-1] == ("done", 1.0)
    assert [f for _, f in told] == sorted(f for _, f in told)


def test_overrides_replace_the_config():
    report = run_logs(_run(), ScanConfig(seed=3), alpha=0.01)
    assert report.config["seed"] == 3 and report.config["alpha"] == 0.01


def test_a_large_log_is_sampled_and_says_so():
    per = 64
    n_iterations = MAX_ANALYSED // per + 2
    report = run_logs(_run(n_iterations=n_iterations, per=per))
    assert report.exploration["episodes"] == n_iterations * per
    assert "seeded sample" in report.exploration["sampled"]


def test_default_out_dir_names_the_log():
    assert "logs-mine" in audit.default_out_dir("mine")


# -- with an env: the replay is the report's last probe ----------------------------------------------
def _corridor_run(*, seeds=True, diverge: bool = False) -> LoggedRun:
    """Corridor episodes (tests/logs/replay_envs.py): search then answer from seeds 0..7, over two
    iterations; each replays exactly unless ``diverge`` logs episode 3's search as paying +0.5."""
    from tests.logs.replay_envs import ANSWER, SEARCH, episode

    eps = [episode(f"ep{s}", s, [SEARCH, ANSWER], iteration=s // 4) for s in range(8)]
    if diverge:
        eps[3]["steps"][0]["reward"] = 0.5
        eps[3]["return"] += 0.6
    frame = pd.DataFrame([{k: v for k, v in ep.items() if k != "steps"} for ep in eps])
    if not seeds:
        frame = frame.drop(columns=["seed"])
    steps = pd.DataFrame([{"episode_id": ep["episode_id"], **s} for ep in eps for s in ep["steps"]])
    return check_run(LoggedRun(frame, steps, "generic"))


def test_a_replayable_log_is_replayed_as_the_last_probe():
    from tests.logs.replay_envs import make_corridor

    told: list[tuple[str, float]] = []
    report = run_logs(_corridor_run(), env=make_corridor, progress=lambda m, f: told.append((m, f)))
    replay = report.probes[-1]
    assert (replay.name, replay.status, replay.findings, replay.error) == ("replay", "ok", 0, None)
    assert len(report.tables["replay_episodes"]) == 8
    assert not [f for f in report.findings if f.code == "non-replayable"]
    assert ("drift over training", pytest.approx(5 / 7)) in told  # 5 analyses, drift, replay
    assert ("replay against the env", pytest.approx(6 / 7)) in told
    assert report.broken is None and report.config["logs"]["env"] is None  # a factory is not a spec
    assert len(report.records.episodes) == 8


def test_a_divergent_log_is_non_replayable():
    from tests.logs.replay_envs import make_corridor

    report = run_logs(_corridor_run(diverge=True), env=make_corridor)
    [finding] = [f for f in report.findings if f.code == "non-replayable"]
    assert finding.probe == "replay"
    assert report.probes[-1].findings == 1 and report.probes[-1].status == "ok"


def test_a_log_without_seeds_cannot_be_replayed_and_says_so():
    from tests.logs.replay_envs import make_corridor

    report = run_logs(_corridor_run(seeds=False), env=make_corridor)
    replay = report.probes[-1]
    assert replay.name == "replay" and replay.status == "skipped" and "seed" in replay.error
    [entry] = [e for e in report.incomplete if e["probe"] == "replay"]
    assert entry["skipped"] == "the whole replay" and not entry["reason"].startswith("not run: ")
    [unchecked] = [f for f in report.findings if f.code == "exploit-policy" and f.probe == "logs"]
    [gap] = [g for g in unchecked.evidence["unchecked"] if g["probe"] == "replay"]
    assert gap["columns"] == ["seed"] and gap["codes"] == ["non-replayable"]
    assert "replay (the whole replay: " in unchecked.summary


def test_an_env_that_cannot_be_made_breaks_the_audit():
    def broken():
        raise RuntimeError("no such database")

    report = run_logs(_corridor_run(), env=broken)
    assert report.broken is not None and "no such database" in report.broken["message"]
    assert report.probes[-1].status == "crashed"


def test_an_env_id_is_kept_in_the_config():
    report = run_logs(_corridor_run(seeds=False), env="envaudit/FlakySearch-v0")
    assert report.config["logs"]["env"] == "envaudit/FlakySearch-v0"


def test_analysis_statuses_carry_their_findings_and_reasons():
    report = run_logs(_corridor_run())
    by = {p.name: p for p in report.probes}
    for p in report.probes:
        if p.name != "drift":
            assert p.findings == len([f for f in report.findings if f.probe == p.name])
    skipped = [p for p in report.probes if p.status == "skipped"]
    assert [p.name for p in skipped] == ["pipeline"]  # no group_id column
    assert all(p.error and p.error.startswith("not run: ") for p in skipped)
    assert all(f.probe for f in report.findings)  # every finding names its analysis
    assert "drift" in by and by["drift"].status == "ok"
    assert report.created.endswith("+00:00")
    gaps = {(e["probe"], e["skipped"]) for e in report.incomplete}
    for p in skipped:
        assert (p.name, "the whole analysis") in gaps
