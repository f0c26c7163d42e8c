"""analyses: which columns each record analysis needs, and an analysis the log cannot feed is told, not run."""

from __future__ import annotations

import pandas as pd
import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Finding, Severity
from envaudit.logs import analyses
from envaudit.logs.records import NeedsEnv, log_context, to_records
from envaudit.logs.schema import LoggedRun

EVERY_NEED = ("success", "end_reason", "steps", "steps.tool_status", "steps.reward", "steps.action", "group_id",
              "length")


def _converted(steps=True, **columns):
    """Four rollouts in two groups, each column of the schema logged unless ``columns`` drops it (None)
    or replaces it; with ``steps``, two steps each with every step column."""
    eps = {"episode_id": [10, 11, 12, 13], "iteration": [0, 0, 1, 1], "return": [1.0, 0.0, 1.0, 0.0],
           "group_id": ["a", "a", "b", "b"], "length": [2, 2, 2, 2],
           "end_reason": ["terminated", "timeout", "terminated", "truncated"], "success": [True, False, True, False]}
    eps = pd.DataFrame({k: v for k, v in {**eps, **columns}.items() if v is not None})
    step_frame = None
    if steps is not None:
        step_frame = pd.DataFrame({"episode_id": [10, 10, 11, 11, 12, 12, 13, 13], "step": [0, 1] * 4,
                                   "reward": [0.0, 1.0] * 4, "action": ["search", "answer"] * 4,
                                   "tool_status": ["ok", None] * 4})
        if steps is not True:
            step_frame = steps(step_frame)
    return to_records(LoggedRun(eps, step_frame, "generic"))


def test_a_log_with_every_column_lacks_nothing():
    assert analyses.absent_columns(_converted(), *EVERY_NEED) == []


def test_a_log_of_the_required_columns_alone_lacks_everything_in_the_order_asked():
    bare = _converted(steps=None, group_id=None, length=None, end_reason=None, success=None)
    assert analyses.absent_columns(bare, *EVERY_NEED) == list(EVERY_NEED)
    assert analyses.absent_columns(bare, "length", "success") == ["length", "success"]
    assert analyses.absent_columns(bare) == []


@pytest.mark.parametrize(("drop", "lacks"), [
    ({"success": None}, ["success"]),
    ({"end_reason": None}, ["end_reason"]),
    ({"group_id": None}, ["group_id"]),
    ({"length": None}, []),  # counted from the step table
])
def test_each_episode_column_is_needed_alone(drop, lacks):
    assert analyses.absent_columns(_converted(**drop), *EVERY_NEED) == lacks


def test_without_a_step_table_length_must_be_logged():
    assert analyses.absent_columns(_converted(steps=None), "length") == []
    assert analyses.absent_columns(_converted(steps=None, length=None), "length") == ["length"]


def test_a_timeout_count_stands_in_for_end_reason():
    converted = _converted(steps=None, end_reason=None, tool_timeouts=[0, 1, 0, 0])
    assert analyses.absent_columns(converted, "end_reason", "success") == []
    assert analyses.absent_columns(_converted(steps=None, end_reason=None), "end_reason") == ["end_reason"]


def test_without_a_step_table_every_step_column_is_absent():
    assert analyses.absent_columns(_converted(steps=None), *EVERY_NEED) == [
        "steps", "steps.tool_status", "steps.reward", "steps.action"]


@pytest.mark.parametrize(("change", "lacks"), [
    (lambda s: s.drop(columns="tool_status"), ["steps.tool_status"]),
    (lambda s: s.drop(columns="reward"), ["steps.reward"]),
    (lambda s: s.assign(reward=[0.0, None] * 4), ["steps.reward"]),  # one step unpaid is not a reward column
    (lambda s: s.drop(columns="action"), ["steps.action"]),
    (lambda s: s.assign(action=[3, None] * 4), ["steps.action"]),  # action ids with a gap
])
def test_a_step_column_absent_or_with_gaps_is_absent(change, lacks):
    assert analyses.absent_columns(_converted(steps=change), *EVERY_NEED) == lacks


def test_every_probe_with_a_record_half_is_analysed_in_order_with_its_needs():
    assert tuple(analyses.ANALYSES) == analyses.ANALYSED == ("timeouts", "pipeline", "length", "intent", "failures")
    needs = {name: needs for name, (_fn, needs) in analyses.ANALYSES.items()}
    assert needs == {"timeouts": ("end_reason", "success"), "pipeline": ("end_reason", "success", "group_id"),
                     "length": ("length",), "intent": ("success",),
                     "failures": ("steps", "steps.tool_status", "steps.reward")}


# --- run_analysis -----------------------------------------------------------------------------------

FOUND = Finding("timeout-rewarded", Severity.WARN, "planted", "s", {}, [], "f")


def _ctx(converted, name="planted"):
    return log_context(converted, ScanConfig(), ScanConfig().rollout_pipeline(), name)


@pytest.fixture
def planted(monkeypatch):
    """Plant analyses: ``name -> (fn, needs)``; each call's arguments are kept in ``calls``."""
    calls = []

    def plant(name, needs, result=None, raises=None):
        def fn(ctx, converted):
            calls.append((ctx, converted))
            if raises is not None:
                raise raises
            return [FOUND] if result is None else result
        monkeypatch.setitem(analyses.ANALYSES, name, (fn, needs))
    plant.calls = calls
    return plant


def test_an_analysis_whose_columns_are_logged_runs_on_the_context_and_records(planted):
    planted("planted", ("success", "length"))
    converted = _converted()
    ctx = _ctx(converted)
    assert analyses.run_analysis("planted", ctx, converted) == ([FOUND], None)
    assert planted.calls == [(ctx, converted)]


def test_an_analysis_missing_one_column_is_not_run_and_names_it(planted):
    planted("planted", ("success", "length"))
    converted = _converted(success=None)
    assert analyses.run_analysis("planted", _ctx(converted), converted) == (
        [], "not run: the log has no success column")
    assert planted.calls == []


def test_an_analysis_missing_several_columns_names_each(planted):
    planted("planted", ("end_reason", "success", "group_id"))
    converted = _converted(steps=None, end_reason=None, group_id=None)
    assert analyses.run_analysis("planted", _ctx(converted), converted) == (
        [], "not run: the log has no end_reason, group_id columns")


def test_an_analysis_that_needs_the_env_is_told_not_crashed(planted):
    planted("planted", (), raises=NeedsEnv("a logged run cannot be stepped"))
    converted = _converted()
    assert analyses.run_analysis("planted", _ctx(converted), converted) == (
        [], "not run: a logged run cannot be stepped")


def test_any_other_error_of_an_analysis_is_not_swallowed(planted):
    planted("planted", (), raises=KeyError("bug"))
    converted = _converted()
    with pytest.raises(KeyError):
        analyses.run_analysis("planted", _ctx(converted), converted)


def test_a_real_analysis_is_skipped_for_its_needs():
    bare = _converted(steps=None, group_id=None, length=None, end_reason=None, success=None)
    assert analyses.run_analysis("pipeline", _ctx(bare, "pipeline"), bare) == (
        [], "not run: the log has no end_reason, success, group_id columns")
    assert analyses.run_analysis("failures", _ctx(bare, "failures"), bare) == (
        [], "not run: the log has no steps, steps.tool_status, steps.reward columns")


def test_a_real_analysis_runs_on_a_log_that_feeds_it():
    converted = _converted()
    findings, skipped = analyses.run_analysis("length", _ctx(converted, "length"), converted)
    assert skipped is None and isinstance(findings, list)
    assert all(isinstance(f, Finding) for f in findings)
