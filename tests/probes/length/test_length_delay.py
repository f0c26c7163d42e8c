"""The length probe's marginal-value checks (``probes/length_delay.py``) on envs of known design.

``tests/fixtures/ladder_envs.py`` documents each env's payoffs: a shaped walk keeps its progress but
pays nothing for standing still (clean) or pays ``stand_bonus`` per idle step at the goal (farming);
``FormatAnswer`` pays ``format_score`` per wrong attempt, so succeeding after ``k`` wrong attempts
earns ``k * format_score`` more than succeeding at once (delaying success), or nothing more when
``format_score`` is 0 (clean). Each runs over exploration seeds 0-4: a detector must hold on every
seed, not on one.
"""

from __future__ import annotations

import pytest

from envaudit.findings import Severity
from envaudit.probes.length import CODE, probe
from envaudit.probes.length.delay import DelayPolicy, tail_pay
from tests.fixtures.context import flagged, run_probe
from tests.fixtures.counterfactual_envs import FlakyLookup
from tests.fixtures.ladder_envs import FormatAnswer, ShapedWalk, StepCostQuit

SEEDS = range(5)


def _length(findings):
    return [f for f in findings if f.code == CODE]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("make", [ShapedWalk, lambda: ShapedWalk(step_cost=-0.01), StepCostQuit, FormatAnswer],
                         ids=["shaped", "shaped-step-cost", "step-cost-quit", "format-clean"])
def test_clean_envs_raise_no_length_warn_or_fail(make, seed):
    findings, _ = run_probe(probe, make, episodes=64, seed=seed, quick=True)
    assert flagged(findings) == [], [f.summary for f in findings]


@pytest.mark.parametrize("seed", SEEDS)
def test_shaped_progress_is_reported_as_progress_not_farming(seed):
    findings, _ = run_probe(probe, ShapedWalk, episodes=64, seed=seed, quick=True)
    farming = [f for f in findings if f.evidence.get("behaviour") == "stall"]
    # Repeating 'right' walks to the goal and stands there: 0.6 of shaping, then 0 per idle step.
    for f in farming:
        assert f.severity == Severity.INFO and not f.evidence["marginal"]["pays"]
        if f.evidence["policy"] == "repeat 'right'":
            assert f.evidence["marginal"]["mean_tail_pay"] == pytest.approx(0.0)


@pytest.mark.parametrize("seed", SEEDS)
def test_paid_idle_steps_are_farming(seed):
    bonus, env = 0.05, ShapedWalk(stand_bonus=0.05)
    f = _length(run_probe(probe, lambda: ShapedWalk(stand_bonus=bonus), episodes=64, seed=seed, quick=True)[0])
    assert f and f[0].severity >= Severity.WARN and f[0].evidence["behaviour"] == "stall"
    assert f[0].evidence["marginal"]["pay_per_tail_step"] == pytest.approx(bonus, rel=0.05)
    # Repeating 'right' to the step limit: shaping 0.6 plus a bonus on every step after the goal.
    if f[0].evidence["policy"] == "repeat 'right'":
        assert f[0].evidence["mean_strategy"] == pytest.approx(
            env.shaping + bonus * (env.max_steps - env.length))


@pytest.mark.parametrize("seed", SEEDS)
def test_delaying_success_is_length_bias_at_fail(seed):
    score = 0.1
    findings, ctx = run_probe(probe, lambda: FormatAnswer(format_score=score), episodes=64, seed=seed, quick=True)
    delayed = [f for f in findings if f.evidence.get("behaviour") == "delay-success"]
    assert len(delayed) == 1, [f.summary for f in findings]
    f = delayed[0]
    assert f.severity == Severity.FAIL and "Delaying success" in f.title
    k = f.evidence["k"]
    # Each inserted wrong answer pays format_score + step_cost; an inserted right answer ends the
    # episode at once, so the mean gain lies between 0 and k * (format_score + step_cost).
    assert 0 < f.evidence["gain"] <= k * (score - 0.01) + 1e-9
    # The examples are delayed successes, distinct, kept in the report's tables.
    kept = {int(e): r for r in ctx.kept for e in r.episodes["episode_id"]}
    assert len(set(f.examples)) == len(f.examples) > 0 and set(f.examples) <= set(kept)
    for e in f.examples:
        eps = kept[e].episodes.set_index("episode_id")
        assert eps.loc[e, "outcome"] == "success" and eps.loc[e, "length"] > 2


@pytest.mark.parametrize("seed", SEEDS)
def test_a_lucky_answer_in_place_of_the_delay_is_no_delayed_success(seed):
    # FlakyLookup: look up (each step costs 0.05), then answer; the honest success pays 0.9 or less.
    # Inserting 'answer_0' first ends a quarter of the episodes at once with success (0.95): a lucky
    # guess, not a success reached later, so no pair may count it.
    findings, _ = run_probe(probe, lambda: FlakyLookup(error_rate=0.3, step_cost=0.05), episodes=64, seed=seed,
                            quick=True)
    assert flagged(findings) == [], [f.summary for f in findings]


def test_delay_policy_inserts_before_the_final_action():
    policy = DelayPolicy([4, 2], delay=0, k=3, label="answer_0")
    assert policy.plan == [4, 0, 0, 0, 2]


def test_tail_pay_is_the_second_half_without_the_last_step():
    import pandas as pd

    steps = pd.DataFrame({"episode_id": [1] * 5, "step": range(5), "reward": [0.3, 0.1, 0.2, 0.4, 5.0]})
    eps = pd.DataFrame({"episode_id": [1]})
    # Body (without the last step) is 4 steps; its second half is steps 2 and 3.
    assert tail_pay(eps, steps).iloc[0].to_dict() == {"episode_id": 1, "tail_steps": 2, "tail_pay": pytest.approx(0.6)}
