"""``drift._finding``: the words and evidence of a logged run's learned-exploit finding, from a
hand-made verdict (each kind the ladder gives), so every field's source is known."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from envaudit.config import ScanConfig
from envaudit.logs import drift
from envaudit.logs.records import log_context, to_records
from envaudit.logs.schema import LoggedRun, check_run
from envaudit.probes.grpo.drift import Move
from envaudit.probes.grpo.lessons import Verdict
from envaudit.probes.grpo.text import learned_fix
from envaudit.protocol import TIMEOUT

SUMMARY = {"before_iterations": [0, 2], "after_iterations": [9, 11],
           "moves": [{"behaviour": "timeouts up", "before": 0.1, "after": 0.6}]}
D = {"success_before": 0.5, "success_after": 0.45, "success_fell": False,
     "return": {"mean_before": 0.1, "mean_after": 0.3}, "beyond_outcome": {"p_value": 0.02},
     "advantage_by_outcome": {"timeout": 0.4}, "n_before": 30, "n_after": 31}
SHOWN = pd.DataFrame({"episode_id": [3, 3, 5, 7, 8, 9, 10]})


def _ctx(mask_group_on=(), **config):
    run = check_run(LoggedRun(pd.DataFrame({"episode_id": ["a"], "iteration": [0], "return": [0.0]}), None, "generic"))
    cfg = ScanConfig(**config)
    return log_context(to_records(run), cfg, replace(cfg.rollout_pipeline(), mask_group_on=mask_group_on), "drift")


def _verdict(kind: str, key: str = "timeout", behaviour: str = "timeout", favoured: float | None = 0.003) -> Verdict:
    evidence = {"timeout_favoured": {"p_value": favoured}} if favoured is not None else {}
    move = Move("timeouts up", key, 0.1, 0.6, 0.001, True, "why", evidence)
    return Verdict(move, kind == "at-least-success", kind, behaviour, "they pay", SHOWN, {"ladder": {"level": "x"}})


def _finding(v, *, ctx=None, start=None, column=None, steps=None, d=D):
    return drift._finding(ctx or _ctx(timeout_handling="drop"), d, v, [v.move], start, column, SUMMARY, None,
                          steps if steps is not None else pd.DataFrame())


def test_a_learned_timeout_under_a_drop_pipeline_is_paid_by_the_pipeline():
    f = _finding(_verdict("timeout"))
    assert f.title == "The logged run learned to time out"
    ev = f.evidence
    assert ev["reward_path"] == "pipeline" and ev["attribution_p"] == 0.003
    assert ev["p_value"] == 0.001 and ev["behaviour"] == "timeout" and ev["verdict"] == "timeout"
    assert ev["learned"] == "timeouts up" and ev["source"] == "logs"
    assert ev["moves"] == SUMMARY["moves"] and ev["before_iterations"] == [0, 2] and ev["after_iterations"] == [9, 11]
    assert (ev["success_before"], ev["success_after"], ev["success_fell"]) == (0.5, 0.45, False)
    assert ev["return"] == D["return"] and ev["beyond_outcome"] == {"p_value": 0.02}
    assert ev["advantage_by_outcome"] == {"timeout": 0.4} and (ev["n_before"], ev["n_after"]) == (30, 31)
    assert ev["pipeline"] == ScanConfig(timeout_handling="drop").rollout_pipeline().to_dict()
    assert ev["ladder"] == {"level": "x"} and ev["typical_trajectory"] == ""
    assert ev["start_iteration"] is None and ev["series"] is None
    assert f.examples == [3, 5, 7, 8, 9]  # distinct, the first five
    assert f.fix == learned_fix(_verdict("timeout")) and f.probe == "drift"
    assert f.summary == ("Over the logged run (iterations 0–2 against 9–11), the policy learned timeouts up "
                         "(0.10 → 0.60): they pay. Success went 0.50 → 0.45.")


def test_who_pays_a_timeout():
    assert _finding(_verdict("timeout"), ctx=_ctx()).evidence["reward_path"] == "env"  # keep, no masking
    masked = _ctx(mask_group_on=(TIMEOUT,))  # keep, but a group with a timeout leaves the loss
    assert _finding(_verdict("timeout"), ctx=masked).evidence["reward_path"] == "pipeline"
    assert _finding(_verdict("failure-shortcut"), ctx=_ctx(timeout_handling="drop")).evidence["reward_path"] == "env"


def test_the_supporting_p_value_of_each_kind():
    assert _finding(_verdict("timeout", favoured=None)).evidence["attribution_p"] == 1.0
    assert _finding(_verdict("failure-shortcut")).evidence["attribution_p"] == 0.02
    assert _finding(_verdict("failure-shortcut"), d={**D, "beyond_outcome": None}).evidence["attribution_p"] == 1.0
    assert _finding(_verdict("failure-shortcut"), d={**D, "beyond_outcome": {}}).evidence["attribution_p"] == 1.0


@pytest.mark.parametrize("kind, title", [
    ("failure-shortcut", "The logged run learned to stop early because failed tool calls cost reward"),
    ("failure-conditioned", "The logged run learned to end right after a failed tool call, which pays"),
    ("failures-pay", "The logged run learned to hit tool failures, which pay"),
    ("at-least-success", "The logged run learned timeouts up, which pays as much as success"),
    ("exploration-collapse", "The logged run collapsed to ending early: an exploration hint, not an exploit"),
    ("unexplained", "The logged run learned timeouts up"),
])
def test_the_title_of_each_kind(kind, title):
    assert _finding(_verdict(kind)).title == title


@pytest.mark.parametrize("column, words", [
    ("success_rate", " Success started falling at iteration 6."),
    ("mean_length", " It started falling at iteration 6."),
    ("timeout_rate", " It started rising at iteration 6."),
])
def test_where_the_move_started(column, words):
    f = _finding(_verdict("timeout"), start=6, column=column)
    assert f.summary.endswith("Success went 0.50 → 0.45." + words)
    assert f.evidence["start_iteration"] == 6 and f.evidence["series"] == column


def test_the_typical_trajectory_of_the_shown_episodes():
    steps = pd.DataFrame({"episode_id": [3, 3, 5, 5, 99], "step": [0, 1, 0, 1, 0],
                          "action": ["search", "stall", "search", "stall", "answer"]})
    f = _finding(_verdict("timeout"), steps=steps)
    assert f.evidence["typical_trajectory"] == "search → stall (2 of 2 episodes)"  # episode 99 is not shown
    assert f.summary.endswith(" Typical trajectory of these episodes: search → stall (2 of 2 episodes).")


def test_the_unnamed_move_gets_its_own_fix():
    v = Verdict(Move(drift.UNNAMED, "reward", 0.4, 0.1, 0.01, True, "", {}), False, "paid-without-success",
                "degenerate-answer", "paid", SHOWN, {})
    f = _finding(v)
    assert f.fix == drift.UNNAMED_FIX
    assert f.title == "The logged run's return rose while its success fell: failing rollouts are paid"
