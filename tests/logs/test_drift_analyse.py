"""``drift.analyse`` called directly on logged runs whose drift is known by design.

The runs are ``trainer_runs.rollouts`` in the generic schema (30 iterations of 4 groups x 8
rollouts; the design is in that module): ``hacked`` trades success (0.39 -> 0.13) for a hack
paying 0.9, so the last quarter's unsuccessful rollouts earn about 0.8 against about 0.2 for the
first quarter's failures: ``paid-without-success``, ``warn``; with the hack paying 1.2 they earn
as much as success: ``at-least-success``, ``fail``; ``clean`` raises return with success: nothing.
The windows are iterations 1-8 and 23-30 (a quarter of 30, rounded up).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.grpo.search import Reference
from envaudit.logs import drift
from envaudit.logs.records import log_context, to_records
from envaudit.logs.schema import LoggedRun, check_run
from envaudit.testing.logs import Drift, generate_log
from tests.logs.trainer_runs import PROMPTS, ROLLOUTS, STEPS, rollouts

PER_WINDOW = 8 * PROMPTS * ROLLOUTS  # episodes in each window of 8 iterations


def _run(kind: str, *, hack_score: float = 0.9, groups: bool = True, **extra: bool) -> LoggedRun:
    table = rollouts(kind, hack_score=hack_score)
    frame = pd.DataFrame({"episode_id": np.arange(len(table)), "iteration": table["step"],
                          "return": table["score"], "success": table["solved"], "length": table["num_turns"]})
    if groups:
        frame["group_id"] = table["step"].astype(str) + "/" + table["prompt"].astype(str)
    if extra.get("timeouts"):
        frame["tool_timeouts"] = table["tool_timeouts"]
    return check_run(LoggedRun(frame, None, "generic"))


def _analyse(run: LoggedRun, config: ScanConfig | None = None):
    converted = to_records(run)
    ctx = log_context(converted, config or ScanConfig(), (config or ScanConfig()).rollout_pipeline(), "drift")
    table = drift.curves(converted)
    notes: list[str] = []
    gaps: list[dict] = []
    return drift.analyse(ctx, converted, table, notes, gaps), notes, gaps, ctx


@pytest.fixture(scope="module")
def hacked():
    return _analyse(_run("hacked"))


def test_the_hacked_run_is_paid_without_success_at_warn(hacked):
    findings, _notes, _gaps, ctx = hacked
    [f] = findings
    assert (f.code, f.severity, f.probe) == ("learned-exploit", Severity.WARN, "drift")
    ev = f.evidence
    assert ev["verdict"] == "paid-without-success" and ev["learned"] == drift.UNNAMED
    assert ev["source"] == "logs" and ev["reward_path"] == "env"
    assert ev["before_iterations"] == [1, 8] and ev["after_iterations"] == [STEPS - 7, STEPS]
    assert ev["n_before"] == PER_WINDOW and ev["n_after"] == PER_WINDOW
    assert ev["success_before"] > ev["success_after"] + 0.15 and ev["success_fell"]
    assert ev["series"] == "success_rate"
    assert ev["start_iteration"] is not None and ev["start_iteration"] <= 8  # success falls from the start
    assert ev["ladder"]["level"] == "above_alternative"
    assert ev["n_shown"] > PER_WINDOW / 2  # most late rollouts are unsuccessful
    assert ev["return"]["mean_after"] > ev["return"]["mean_before"] + 0.3
    assert f.title == "The logged run's return rose while its success fell: failing rollouts are paid"
    assert f.summary.startswith(f"Over the logged run (iterations 1–8 against {STEPS - 7}–{STEPS}), the policy "
                                f"learned {drift.UNNAMED} (")
    assert "clearly more than failing did in the first" in f.summary
    assert f"Success went {ev['success_before']:.2f} → {ev['success_after']:.2f}." in f.summary
    assert f"Success started falling at iteration {ev['start_iteration']}." in f.summary
    assert f.fix == drift.UNNAMED_FIX
    # examples: distinct unsuccessful rollouts of the last window, at most five
    eps = to_records(_run("hacked")).records.episodes.set_index("episode_id")
    assert 1 <= len(f.examples) <= 5 and len(set(f.examples)) == len(f.examples)
    assert all(eps.loc[i, "iteration"] > STEPS - 8 and not eps.loc[i, "success"] for i in f.examples)


def test_the_summary_note_of_the_hacked_run(hacked):
    _findings, notes, gaps, ctx = hacked
    s = ctx.notes["drift"]
    assert s["before_iterations"] == [1, 8] and s["after_iterations"] == [STEPS - 7, STEPS]
    assert s["return_before"] < s["return_after"] and s["success_before"] > s["success_after"]
    assert s["moves"] == []  # turns are unrelated to the score by design: only return and success moved
    # the log has groups, length and success, but no tool statuses, end reasons or actions
    assert [g["skipped"] for g in gaps] == ["failure moves", "timeout moves", "takeover moves"]
    assert [g["columns"] for g in gaps] == [["steps.tool_status"], ["end_reason"], ["steps.action"]]
    assert [g["reason"] for g in gaps] == ["no steps.tool_status (or tool_errors and tool_timeouts counts) column",
                                           "no end_reason (or a tool_timeouts count) column", "no steps.action column"]
    assert all(g["probe"] == "drift" and g["codes"] == ["learned-exploit"] for g in gaps)
    assert notes == ["drift: no steps.tool_status (or tool_errors and tool_timeouts counts) column, so failure "
                     "moves were not tested",
                     "drift: no end_reason (or a tool_timeouts count) column, so timeout moves were not tested",
                     "drift: no steps.action column, so takeover moves were not tested"]


def test_a_hack_paying_more_than_success_fails():
    [f], *_ = _analyse(_run("hacked", hack_score=1.2))
    assert f.severity == Severity.FAIL and f.evidence["verdict"] == "at-least-success"
    assert f.title == "The logged run's return rose while its success fell: failing pays as much as success"
    assert "as much as honest success" in f.summary


def test_the_clean_run_files_nothing():
    findings, _notes, _gaps, ctx = _analyse(_run("clean"))
    assert findings == []
    s = ctx.notes["drift"]
    assert s["success_after"] > s["success_before"]


def test_without_groups_the_pipeline_test_is_a_gap():
    findings, notes, gaps, _ctx = _analyse(_run("hacked", groups=False))
    assert [f.evidence["verdict"] for f in findings] == ["paid-without-success"]  # the rest still runs
    assert gaps[0] == {"probe": "drift", "skipped": "the pipeline's favour of timing out", "reason": "no group_id column",
                       "columns": ["group_id"], "codes": ["learned-exploit"]}
    assert notes[0].startswith("drift: no group_id column")


def test_a_timeout_count_unlocks_the_timeout_moves():
    _findings, _notes, gaps, _ctx = _analyse(_run("clean", timeouts=True))
    assert "timeout moves" not in [g["skipped"] for g in gaps]


def test_a_stricter_alpha_is_used_by_the_tests():
    # At alpha 1e-12 the success fall of 256 + 256 rollouts is not significant: nothing is filed.
    findings, *_ = _analyse(_run("hacked"), ScanConfig(alpha=1e-12))
    assert findings == []


def _d(**over) -> dict:
    d = {"success_fell": True, "success_fell_p": 0.001, "success_before": 0.4, "success_after": 0.1,
         "return": {"mean_before": 0.2, "mean_after": 0.8, "diff": 0.6, "diff_ci": [0.4, 0.8], "p_value": 0.0},
         "returns": (np.linspace(0.0, 0.4, 40), np.linspace(0.6, 1.0, 40))}
    d.update(over)
    return d


def _honest(success, failure):
    from envaudit.probes.grpo.lessons import Honest

    return Honest(np.asarray(success, float), np.asarray(failure, float), pd.DataFrame())


def _after(returns) -> pd.DataFrame:
    return pd.DataFrame({"outcome": ["failure"] * len(returns) + ["success"], "return": [*returns, 1.0],
                         "episode_id": np.arange(len(returns) + 1)})


@pytest.fixture
def ctx():
    run = _run("clean")
    return log_context(to_records(run), ScanConfig(), ScanConfig().rollout_pipeline(), "drift")


def test_reward_without_success_needs_a_fall_and_a_rise(ctx):
    honest = _honest(np.full(20, 1.0), np.zeros(20))
    after = _after(np.full(20, 0.8))
    assert drift.reward_without_success(ctx, _d(success_fell=False), after, honest) is None
    assert drift.reward_without_success(ctx, _d(returns=(np.ones(40), np.ones(40))), after, honest) is None
    assert drift.reward_without_success(ctx, _d(**{"return": {**_d()["return"], "diff_ci": [-0.1, 0.5]}}),
                                        after, honest) is None
    assert drift.reward_without_success(ctx, _d(**{"return": {**_d()["return"], "diff_ci": None}}),
                                        after, honest) is None
    v = drift.reward_without_success(ctx, _d(), after, honest)
    assert v is not None and v.kind == "paid-without-success" and not v.at_least
    assert v.move.behaviour == drift.UNNAMED and v.move.key == "reward"
    assert (v.move.before, v.move.after) == (0.4, 0.1)
    assert v.move.p_value == pytest.approx(max(0.001, v.move.evidence["return_rise"]["p_value"]))
    assert v.evidence["n_shown"] == 20 and len(v.shown) == 20  # the unsuccessful rollouts only
    assert "earn 0.80" in v.reason and "(0.00)" in v.reason


def test_reward_without_success_levels(ctx):
    honest = _honest(np.full(20, 1.0) + np.linspace(-0.01, 0.01, 20), np.zeros(20) + np.linspace(-0.01, 0.01, 20))
    top = drift.reward_without_success(ctx, _d(), _after(np.full(20, 1.0) + np.linspace(-0.01, 0.01, 20)), honest)
    assert top.kind == "at-least-success" and top.at_least and "as much as honest success (1.00)" in top.reason
    low = drift.reward_without_success(ctx, _d(), _after(np.linspace(-0.05, 0.05, 20)), honest)
    assert low.kind == "unexplained" and not low.at_least
    assert "not clearly placed on the ladder" in low.reason
    empty = drift.reward_without_success(ctx, _d(), _after(np.full(20, 0.5)), _honest([], []))
    assert "n/a" in empty.reason


def test_every_level_names_the_behaviour_and_keeps_its_evidence(ctx):
    honest = _honest(np.full(20, 1.0) + np.linspace(-0.01, 0.01, 20), np.zeros(20) + np.linspace(-0.01, 0.01, 20))
    cases = {"at-least-success": np.full(20, 1.0) + np.linspace(-0.01, 0.01, 20),
             "paid-without-success": np.full(20, 0.8), "unexplained": np.linspace(-0.05, 0.05, 20)}
    for kind, returns in cases.items():
        v = drift.reward_without_success(ctx, _d(), _after(returns), honest)
        assert v.kind == kind and v.behaviour == "degenerate-answer"
        assert v.at_least is (kind == "at-least-success")
        assert v.move is not None and v.move.exploit is True and v.move.why == "return 0.20 → 0.80"
        assert v.move.evidence["return_test"] == _d()["return"]
        assert v.move.evidence["return_rise"]["test"] == "welch"
        level = {"at-least-success": "at_least_success", "paid-without-success": "above_alternative"}.get(kind)
        assert set(v.evidence) == {"ladder", "n_shown"}
        assert v.evidence["ladder"]["level"] == level if level else v.evidence["ladder"]["level"] not in (
            "at_least_success", "above_alternative")
        assert v.evidence["n_shown"] == 20 and list(v.shown["return"]) == list(returns)


def test_a_rise_at_exactly_alpha_is_not_a_rise(ctx, monkeypatch):
    honest = _honest(np.full(20, 1.0), np.zeros(20))
    monkeypatch.setattr(drift, "_mean_rise", lambda test, returns: {"p_value": ctx.config.alpha})
    assert drift.reward_without_success(ctx, _d(), _after(np.full(20, 0.8)), honest) is None


def test_no_unsuccessful_rollout_reads_n_a(ctx):
    after = pd.DataFrame({"outcome": ["success"] * 3, "return": [1.0] * 3, "episode_id": [0, 1, 2]})
    v = drift.reward_without_success(ctx, _d(), after, _honest(np.full(20, 1.0), np.zeros(20)))
    assert "earn n/a" in v.reason and v.evidence["n_shown"] == 0


def test_the_named_move_path_hands_the_grpo_judge_the_two_windows(monkeypatch):
    # A generated log with steps (FlakySearch, the policy stalling more from iteration 2, 16
    # iterations: the first four and the last four are the windows) under a drop pipeline:
    # timeouts up is a named move. What analyse hands the GRPO probe's judge is read back: the first window as the reference
    # (``before`` and its steps), the last window as the trained policy's evaluation (its episodes
    # and only their steps), the honest rungs from every success and the first window's failures.
    run = generate_log(drift=Drift("stall", start=2), iterations=16, groups=16)
    calls = []
    real = drift.judge

    def spy(ctx, result, move, before, before_steps, honest, reference, labels):
        calls.append((result, move, before, before_steps, honest, reference, labels))
        return real(ctx, result, move, before, before_steps, honest, reference, labels)

    monkeypatch.setattr(drift, "judge", spy)
    config = ScanConfig(timeout_handling="drop")
    converted = to_records(run)
    ctx = log_context(converted, config, config.rollout_pipeline(), "drift")
    findings = drift.analyse(ctx, converted, drift.curves(converted), [], [])
    assert calls, "no named move reached the judge"
    eps, steps = converted.records.episodes, converted.records.steps
    its = sorted(eps["iteration"].unique())
    assert len(its) == 16
    first = set(eps.loc[eps["iteration"].isin(its[:4]), "episode_id"])
    last = set(eps.loc[eps["iteration"].isin(its[-4:]), "episode_id"])
    for result, move, before, before_steps, honest, reference, labels in calls:
        assert move.exploit and result.mode == "logged" and result.behaviour is None and result.training is None
        assert set(before["episode_id"]) == first and set(before_steps["episode_id"]) == first
        assert set(result.evaluation.episodes["episode_id"]) == last
        assert set(result.evaluation.steps["episode_id"]) == last
        assert len(result.evaluation.steps) == steps["episode_id"].isin(last).sum()
        assert reference == Reference.from_episodes(before)
        assert sorted(honest.success) == sorted(eps.loc[eps["outcome"] == "success", "return"])
        assert sorted(honest.failure) == sorted(before.loc[before["outcome"] == "failure", "return"])
        assert labels == converted.labels
    # The summary note lists every move with what it is, both rates, its p-value and verdict.
    moves = ctx.notes["drift"]["moves"]
    assert moves and all(set(m) == {"behaviour", "before", "after", "p_value", "exploit", "why"} for m in moves)
    timeouts = next(m for m in moves if m["behaviour"] == "timeouts up")
    assert timeouts["exploit"] and timeouts["after"] > timeouts["before"] and timeouts["p_value"] < 0.01
    [f] = [f for f in findings if f.code == "learned-exploit"]
    assert f.evidence["behaviour"] == "timeout" and f.evidence["reward_path"] == "pipeline"
    assert f.evidence["before_iterations"] == [its[0], its[3]] and f.evidence["after_iterations"] == [its[-4], its[-1]]
    assert f.evidence["n_shown"] == sum(1 for i in last if eps.set_index("episode_id").loc[i, "outcome"] == "timeout")


@pytest.mark.parametrize("iterations", [1, 2])
def test_one_iteration_is_not_a_run_and_two_are(iterations):
    # One iteration cannot have drifted: a note and a gap for the whole analysis, nothing filed.
    # Two are the smallest run: one iteration in each window, analysed.
    run = _run("hacked")
    kept = run.episodes[run.episodes["iteration"] <= iterations].reset_index(drop=True)
    findings, notes, gaps, ctx = _analyse(check_run(LoggedRun(kept, None, "generic")))
    whole = {"probe": "drift", "skipped": "the whole analysis", "reason": "the log holds a single iteration",
             "columns": [], "codes": ["learned-exploit"]}
    if iterations == 1:
        assert findings == [] and gaps == [whole] and "drift" not in ctx.notes
        assert notes == ["drift: the log holds a single iteration, so nothing can have drifted over training"]
    else:
        assert whole not in gaps and ctx.notes["drift"]["before_iterations"] == [1, 1]
        assert ctx.notes["drift"]["after_iterations"] == [2, 2]
