"""Suites: several envs into one folder, a ranked summary, --fail-on over the suite, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import envaudit.suite_exec as suite_exec
from envaudit.cli import main
from envaudit.errors import UsageError
from envaudit.reporting.suite_summary import SuiteSummary, pending_row
from envaudit.suite_file import build_entries, expand, read_suite_file

ROOT = Path(__file__).parents[1]
COIN = "tests.fixtures.suite_envs:logged"
BROKEN = "tests.fixtures.suite_envs:cannot_make"
SMALL = ["--episodes", "8", "--quick", "--probes", "api", "--no-progress"]
TIMINGS = ("seconds", "created")


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("ENVAUDIT_TEST_MAKE_LOG", str(tmp_path / "made.log"))
    return tmp_path


def made(tmp_path) -> list[str]:
    log = tmp_path / "made.log"
    return sorted(set(log.read_text().split())) if log.exists() else []


def without_timings(report: dict) -> dict:
    """report.json less what the clock decides (durations, the creation stamp)."""
    out = {k: v for k, v in report.items() if k not in TIMINGS}
    out["probes"] = [{k: v for k, v in p.items() if k != "seconds"} for p in report["probes"]]
    return out


def test_patterns_expand_over_the_registry_and_an_ecosystem():
    code_fix = {"envaudit/CodeFix-v0", "envaudit/CodeFix-TimeoutPasses-v0", "envaudit/CodeFix-PartialCredit-v0"}
    text = {i.removesuffix("-v0") + "-Text-v0" for i in code_fix}
    assert set(expand("envaudit/CodeFix*")) == code_fix | text
    assert expand("envaudit/Helpdesk-v0") == ["envaudit/Helpdesk-v0"]  # no pattern: itself, unchecked
    assert "reasoning-gym:leg_counting" in expand("reasoning-gym:leg_*")
    assert expand("reasoning-gym", ["leg_counting", "basic_arithmetic"]) == [
        "reasoning-gym:leg_counting", "reasoning-gym:basic_arithmetic"]
    with pytest.raises(UsageError, match="pattern 'nosuch_\\*' matches none of reasoning-gym's"):
        expand("reasoning-gym:nosuch_*")
    with pytest.raises(UsageError, match="needs an ecosystem target"):
        expand("envaudit/Helpdesk-v0", ["x"])


def test_suite_file_layers_options_from_general_to_specific(tmp_path):
    path = tmp_path / "suite.toml"
    path.write_text("""
out = "reports/nightly"
[defaults]
quick = true
seed = 3
probes = "api,timeouts"
env_args = { size = 20 }
[[env]]
target = "envaudit/Helpdesk-v0"
[[env]]
target = "envaudit/Helpdesk-v0"
seed = 9
[[env]]
target = "reasoning-gym"
tasks = ["leg_counting"]
env_args = { size = 5 }
[[env]]
target = "envaudit/CodeFix-v0"
name = "codefix-rllm"
pipeline = "rllm"
""")
    suite = read_suite_file(path)
    assert suite.out == "reports/nightly"
    entries = build_entries([], suite, base={"episodes": 40, "seed": 1}, flags={"seed": 5, "quick": False},
                            env_args={})
    assert [e.name for e in entries] == ["envaudit-Helpdesk-v0", "envaudit-Helpdesk-v0-2",
                                         "reasoning-gym-leg_counting", "codefix-rllm"]
    first, second, legs, codefix = entries
    # pyproject < [defaults] < command line < the entry itself
    assert (first.config.episodes, first.config.seed, first.config.quick) == (40, 5, False)
    assert second.config.seed == 9 and first.config.probes == ("api", "timeouts")
    assert dict(first.env_args) == {"size": 20} and dict(legs.env_args) == {"size": 5}
    assert codefix.config.pipeline == "rllm"
    assert first.identity("v") != second.identity("v")  # another seed is another scan
    same = build_entries([], suite, base={"episodes": 40, "seed": 1}, flags={"seed": 5, "quick": False,
                                                                             "fail_on": "warn"}, env_args={})
    assert same[0].identity("v") == first.identity("v")  # --fail-on changes the verdict, not the scan


@pytest.mark.parametrize(("text", "message"), [
    ("[[env]]\ntarget = 'x'\nepisode = 3\n", "unknown key 'episode' in \\[\\[env\\]\\] #1 of .*did you mean 'episodes'"),
    ("[defaults]\nquick = true\n", "has no \\[\\[env\\]\\] entries"),
    ("[[env]]\nname = 'x'\n", "has no target"),
    ("[[env]]\ntarget = 'envaudit/CodeFix*'\nname = 'one'\n", "needs a single env \\(this entry expands to 6\\)"),
    ("[[env]]\ntarget = 'x'\nepisodes = 0\n", "episodes must be at least 1, got 0"),
])
def test_suite_file_errors_name_the_fix(tmp_path, text, message):
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        build_entries([], read_suite_file(path), base={}, flags={}, env_args={})


def _row(name: str, code: int | None, worst: str | None = None) -> dict:
    row = pending_row(name, name, {}, "id", "fail")
    if code is not None:
        row.update(status="error" if code == 2 else "done", exit_code=code, worst=worst)
    return row


@pytest.mark.parametrize(("codes", "suite_code"), [
    ([0, 0], 0), ([0, 4], 4), ([4, 1, 0], 1), ([1, 3, 4], 3), ([3, 2, 1], 2), ([0, None], 0)])
def test_suite_exit_code_is_the_most_urgent_env_code(codes, suite_code):
    """The single scan's precedence (2 and 3 before 1, 1 before 4) over the envs of the suite."""
    summary = SuiteSummary([_row(f"e{i}", c) for i, c in enumerate(codes)], complete=None not in codes)
    assert summary.exit_code == suite_code


def test_ranking_goes_by_the_worst_group():
    rows = [_row("clean", 0), _row("warned", 0, "warn"), _row("pending", None), _row("failed", 1, "fail"),
            _row("bad-option", 2)]
    rows[1]["counts"] = {"fail": 0, "warn": 1, "info": 0}
    rows[3]["counts"] = {"fail": 1, "warn": 0, "info": 2}
    assert [r["name"] for r in SuiteSummary(rows, complete=False).ranked()] == [
        "bad-option", "failed", "warned", "clean", "pending"]


def test_a_suite_of_targets_writes_a_report_per_env_and_a_summary(here, capsys):
    rc = main(["scan", COIN, BROKEN, "--out", "s", *SMALL])
    assert rc == 3  # one env cannot be made: broken, as `envaudit scan` of it alone says
    out = capsys.readouterr().out
    assert "suite written to s/" in out and "ENV BROKEN" in out
    suite = json.loads((here / "s" / "suite.json").read_text())
    assert suite["complete"] and suite["exit_code"] == 3
    assert suite["counts"]["envs"] == 2 and suite["counts"]["broken"] == 1
    broken, coin = suite["envs"]  # ranked: the broken env's env-error (fail) group first
    assert (broken["target"], broken["exit_code"], broken["worst"]) == (BROKEN, 3, "fail")
    assert broken["headline"]["code"] == "env-error" and "simulator binary" in broken["headline"]["summary"]
    assert (coin["target"], coin["exit_code"]) == (COIN, 0)
    for name in (broken["name"], coin["name"]):
        assert (here / "s" / name / "report.json").exists() and (here / "s" / name / "report.html").exists()
    md = (here / "s" / "summary.md").read_text()
    assert md.index(broken["name"]) < md.index(coin["name"]) and "suite exit code 3" in md
    html = (here / "s" / "summary.html").read_text()
    assert f'href="{coin["name"]}/report.html"' in html and "<script" not in html

    # An env's folder is the one `envaudit scan ENV` writes alone (plus suite_entry.json).
    assert main(["scan", COIN, "--out", "alone", *SMALL]) == 0
    alone = json.loads((here / "alone" / "report.json").read_text())
    in_suite = json.loads((here / "s" / coin["name"] / "report.json").read_text())
    alone["config"]["out"] = in_suite["config"]["out"]
    assert without_timings(in_suite) == without_timings(alone)
    files = {p.name for p in (here / "s" / coin["name"]).iterdir()}
    assert files - {p.name for p in (here / "alone").iterdir()} == {"suite_entry.json"}


def test_fail_on_applies_over_the_suite(here, monkeypatch):
    """A probe planted to report one warn on every env: --fail-on decides the suite's code over all
    envs, and a broken env outranks it as in a single scan."""
    import envaudit.scan as scan_module
    from envaudit import Finding, Probe

    def warn(ctx):
        return [Finding(code="length-bias", severity="warn", title="farming", summary="steps pay")]

    registry = {"planted": Probe("planted", warn, "always warns")}
    monkeypatch.setattr(scan_module, "probe_names", lambda: sorted(registry))
    monkeypatch.setattr(scan_module, "registered_probes",
                        lambda names=None: {n: p for n, p in registry.items() if names is None or n in names})
    argv = ["scan", COIN, COIN, "--env-arg", "tag=x", "--episodes", "8", "--no-progress"]
    assert main([*argv, "--out", "a", "--fail-on", "warn"]) == 1
    assert main([*argv, "--out", "b", "--fail-on", "fail"]) == 0
    assert main([*argv, "--out", "c", "--fail-on", "never"]) == 0
    rows = json.loads((here / "a" / "suite.json").read_text())["envs"]
    assert [(r["worst"], r["exit_code"], r["headline"]["code"]) for r in rows] == [("warn", 1, "length-bias")] * 2
    assert main(["scan", COIN, BROKEN, "--episodes", "8", "--no-progress", "--out", "d", "--fail-on", "warn"]) == 3


def test_a_finished_suite_is_kept_unless_resumed_or_forced(here, capsys, monkeypatch):
    argv = ["scan", COIN, BROKEN, "--out", "s", *SMALL]
    assert main(argv) == 3
    assert main(argv) == 2
    assert "already holds a finished suite; pass --resume" in capsys.readouterr().err
    calls = []
    original = suite_exec.scan_entry
    monkeypatch.setattr(suite_exec, "scan_entry", lambda job, *a: calls.append(job.entry.name) or original(job, *a))
    assert main([*argv, "--resume"]) == 3 and calls == []  # nothing rescanned
    assert main([*argv, "--resume", "--seed", "1"]) == 3 and len(calls) == 2  # another seed: other scans
    assert main([*argv, "--force"]) == 3 and len(calls) == 4
    (here / "notes").mkdir()
    (here / "notes" / "todo.txt").write_text("mine")
    assert main(["scan", COIN, BROKEN, "--out", "notes", *SMALL]) == 2
    assert "not a suite folder" in capsys.readouterr().err and (here / "notes" / "todo.txt").exists()


def test_an_interrupted_suite_resumes_without_rescanning_finished_envs(here, monkeypatch, capsys):
    """Ctrl-C as the third env starts (the second finished): exit 130, the summary marked
    incomplete with the finished envs in it; the same command then scans only the rest."""
    argv = ["scan", "--suite", "suite.toml", *SMALL, "--out", "s"]
    (here / "suite.toml").write_text("".join(
        f"[[env]]\ntarget = '{COIN}'\nenv_args = {{ tag = '{t}' }}\n" for t in "abc"))
    original = suite_exec.scan_entry
    started = []

    def interrupt_third(job, *args):
        started.append(job.entry.env_args["tag"])
        if len(started) == 3:
            raise KeyboardInterrupt
        return original(job, *args)

    monkeypatch.setattr(suite_exec, "scan_entry", interrupt_third)
    assert main(argv) == 130
    assert "rerun the same command" in capsys.readouterr().err
    suite = json.loads((here / "s" / "suite.json").read_text())
    assert not suite["complete"] and [r["status"] for r in suite["envs"]] == ["done", "done", "pending"]
    assert "Incomplete" in (here / "s" / "summary.md").read_text()
    assert made(here) == ["a", "b"]
    (here / "made.log").unlink()
    monkeypatch.setattr(suite_exec, "scan_entry", original)
    assert main(argv) == 0
    assert made(here) == ["c"]  # a and b were kept
    suite = json.loads((here / "s" / "suite.json").read_text())
    assert suite["complete"] and [r["status"] for r in suite["envs"]] == ["done"] * 3


def test_workers_give_the_same_reports_as_one_after_another(here):
    """--workers 2 scans envs in two processes; each env's report is the sequential one."""
    argv = ["scan", "envaudit/FlakySearch-AnswerAll-v0", "envaudit/Helpdesk-EngagementBonus-v0", COIN,
            "--episodes", "64", "--quick", "--probes", "api,exploits,replay,intent", "--no-progress"]
    assert main([*argv, "--out", "seq"]) == 1
    assert main([*argv, "--out", "par", "--workers", "2"]) == 1
    seq = json.loads((here / "seq" / "suite.json").read_text())
    par = json.loads((here / "par" / "suite.json").read_text())
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(seq["envs"]) == strip(par["envs"])
    for row in seq["envs"]:
        a = json.loads((here / "seq" / row["name"] / "report.json").read_text())
        b = json.loads((here / "par" / row["name"] / "report.json").read_text())
        b["config"]["out"] = a["config"]["out"]
        assert without_timings(a) == without_timings(b)
    worst = {r["target"]: r["worst"] for r in seq["envs"]}
    # Planted by design (envs/registry.py): answer_all earns +1 without success, and replying to the
    # step limit out-earns resolving the ticket: both exploits pay at least as much as success.
    assert worst["envaudit/FlakySearch-AnswerAll-v0"] == "fail"
    assert worst["envaudit/Helpdesk-EngagementBonus-v0"] == "fail"
    assert worst[COIN] is None


def test_single_env_flags_that_only_suites_take_are_usage_errors(here, capsys):
    assert main(["scan", COIN, "--workers", "2", *SMALL]) == 2
    assert "--workers applies to suites" in capsys.readouterr().err
    assert main(["scan", *SMALL]) == 2
    assert "required: ENV (one or more), or --suite FILE" in capsys.readouterr().err


def test_one_progress_display_for_the_suite():
    """Envs done out of the total on one bar, a line per env being scanned with its probe."""
    import io

    from rich.console import Console
    from rich.progress import Progress, TextColumn

    from envaudit.cli_suite import SuiteProgress

    console = Console(file=io.StringIO(), width=80, color_system=None)
    with Progress(TextColumn("{task.description}"), console=console, auto_refresh=False) as bar:
        show = SuiteProgress(bar, total=3)
        show({"kind": "kept", "name": "a", "done": 1, "total": 3})
        show({"kind": "progress", "name": "b", "message": "probe exploits", "fraction": 0.5, "done": 1, "total": 3})
        show({"kind": "progress", "name": "c", "message": "exploring", "fraction": 0.0, "done": 1, "total": 3})
        lines = [t.description for t in bar.tasks]
        assert lines == ["envs 1/3 (2 running)", "  b: probe exploits", "  c: exploring"]
        show({"kind": "done", "name": "b", "done": 2, "total": 3})
        assert [t.description for t in bar.tasks] == ["envs 2/3 (1 running)", "  c: exploring"]


def test_a_worker_that_dies_is_reported_and_the_suite_goes_on(here):
    """The process scanning one env dies (here: importing its module ends the process): that env is
    an error row with exit code 3 (it could not be audited), the suite is complete and a rerun
    retries it; envs finished in other workers keep their reports."""
    argv = ["scan", COIN, "tests.fixtures.suite_dies_on_import:make_env", *SMALL, "--out", "s", "--workers", "2"]
    assert main(argv) == 3
    suite = json.loads((here / "s" / "suite.json").read_text())
    rows = {r["target"]: r for r in suite["envs"]}
    dead = rows["tests.fixtures.suite_dies_on_import:make_env"]
    assert (dead["status"], dead["exit_code"]) == ("error", 3) and "died" in dead["error"]
    assert suite["complete"] and suite["envs"][0] is not None
    coin = rows[COIN]
    if coin["status"] == "done":  # it may have been running beside the crash, then it failed with it
        assert (here / "s" / coin["name"] / "report.json").exists()


def test_summary_pages_escape_what_envs_and_users_wrote():
    from envaudit.reporting.suite_html import render_suite_html

    row = _row("<img src=x onerror=alert(1)>", 2)
    row["error"] = "option <b>size</b> rejected"
    page = render_suite_html(SuiteSummary([row], complete=False))
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;b&gt;size&lt;/b&gt;" in page and "Incomplete" in page
    assert "default-src 'none'" in page
    md = SuiteSummary([row], complete=False).to_markdown()
    assert "**Incomplete**" in md and "option <b>size</b> rejected" in md


def test_row_files_of_a_skyrl_gym_env_scan_as_one_env_each(here, capsys):
    """``--tasks`` as a glob for an adapter fed row files: one env per file, each as `envaudit scan
    skyrl-gym:gsm8k --tasks FILE` would scan it."""
    rows = (ROOT / "tests" / "adapters" / "data" / "skyrl_gsm8k.jsonl").read_text()
    (here / "rows").mkdir()
    for name in ("easy", "hard"):
        (here / "rows" / f"{name}.jsonl").write_text(rows)
    argv = ["scan", "skyrl-gym:gsm8k", "--tasks", "rows/*.jsonl", "--quick", "--probes", "replay",
            "--episodes", "8", "--no-progress", "--out", "s"]
    assert main(argv) == 0
    suite = json.loads((here / "s" / "suite.json").read_text())
    assert sorted((r["name"], r["env_args"]["tasks"]) for r in suite["envs"]) == [
        ("skyrl-gym-gsm8k-easy", "rows/easy.jsonl"), ("skyrl-gym-gsm8k-hard", "rows/hard.jsonl")]
    assert main([*argv[:3], "rows/none-*.jsonl", *argv[4:-1], "other"]) == 2
    assert "matches no file" in capsys.readouterr().err
