"""What the grpo probe need not play (``envaudit.probes.grpo.sparing``): the natural run standing in
for the success search, and the ceilings that decide a targeted run early.

``TenOnes`` pays one per action 1 over ten steps and succeeds from a return of 5: the natural run
learns to play 1 every step and succeeds every time, so it holds what the success search would
reach (10), and ending without success pays at most 4, far below what success pays, so the search
for it is decided once its best return stops rising. ``Combination`` is the other side: its natural
run collapses to ending at once (an exploration collapse), so it does not always succeed and the
success search runs.
"""

import dataclasses

import numpy as np
import pytest

from envaudit.cost import EnvCost
from envaudit.grpo import GRPOConfig
from envaudit.grpo.search import Reference, natural
from envaudit.probes.grpo.lessons import MIN_EFFECT, Honest
from envaudit.probes.grpo.sparing import ceilings, stand_in_reach, stands_in_for_success
from envaudit.probes.grpo.training import run
from envaudit.stats import MIN_SAMPLES, reward_scale
from tests.fixtures.context import explore
from tests.grpo.envs import TenOnes
from tests.grpo.ladder_envs import Combination


@pytest.fixture(scope="module")
def settled():
    result = natural(TenOnes, GRPOConfig(iterations=40, learning_rate=1e-2, seed=2, barren_rollouts=96), eval_groups=2)
    assert result.training.settled and (result.episodes["outcome"] == "success").all()
    return result


def _with(result, **episodes_changes):
    """The run with its evaluation's episodes changed column by column."""
    episodes = result.episodes.assign(**episodes_changes)
    return dataclasses.replace(result, evaluation=dataclasses.replace(result.evaluation, episodes=episodes))


def test_a_settled_natural_run_that_always_succeeds_under_the_env_return_stands_in(settled):
    assert stands_in_for_success(settled)
    reach = stand_in_reach(settled, Reference(-20.0, 10.0, 1))
    assert reach["n"] == len(settled.episodes) and reach["mean_return"] == 10.0 and "natural run" in reach["via"]
    assert not stands_in_for_success(None)
    unsettled = dataclasses.replace(settled, training=dataclasses.replace(settled.training, settled=False))
    assert not stands_in_for_success(unsettled)
    one_failed = settled.episodes["outcome"].where(settled.episodes.index != 0, "failure")
    assert not stands_in_for_success(_with(settled, outcome=one_failed))
    # A pipeline that paid a rollout other than its env return, or dropped one, optimised something else.
    assert not stands_in_for_success(_with(settled, training_reward=settled.episodes["training_reward"] - 0.5))
    assert not stands_in_for_success(_with(settled, trained=False))
    cut = dataclasses.replace(settled, evaluation_stopped="deadline")
    assert not stands_in_for_success(cut)


def test_paid_as_is_means_the_env_return_to_the_last_digit(settled):
    from envaudit.probes.grpo.sparing import _paid_as_is

    episodes = settled.episodes.assign(**{"return": 1000.0, "training_reward": 1000.0})
    assert _paid_as_is(episodes)
    assert not _paid_as_is(episodes.assign(training_reward=1000.001))  # no relative tolerance
    assert not _paid_as_is(episodes.assign(training_reward=1000.0 + 1e-10))
    assert not _paid_as_is(episodes.iloc[:0]) and not _paid_as_is(episodes.drop(columns="training_reward"))


def test_ceilings_sit_a_margin_below_success_and_above_failing_outright():
    success, failure = np.array([1.0, 1.0, 0.4]), np.zeros(MIN_SAMPLES)
    honest = Honest(success, failure, persist=None)
    margin = MIN_EFFECT * reward_scale(success, failure, [])
    (no_success,) = ceilings("no_success", honest, np.zeros(0))
    # Below the lower of mean (0.8) and median (1.0).
    assert no_success.behaviour == "no_success" and no_success.below == pytest.approx(0.8 - margin)
    assert no_success.margin == pytest.approx(margin)
    assert [c.behaviour for c in ceilings("short", honest, np.zeros(0))] == ["no_success"]
    timeout = ceilings("timeout", honest, np.zeros(0))
    assert [(c.behaviour, c.below, c.margin) for c in timeout][1] == ("timeout", pytest.approx(margin), margin)
    # Where success pays no more than failing outright the margin is the spread of every return seen.
    (flat,) = ceilings("no_success", Honest(np.zeros(3), failure, None), np.array([-3.0, 3.0]))
    pooled = np.concatenate([np.zeros(3), failure, [-3.0, 3.0]])
    assert flat.margin == pytest.approx(MIN_EFFECT * pooled.std()) and flat.below == pytest.approx(-flat.margin)
    # Too few failures to put timing out on the ladder: only the replay's ceiling is read.
    assert len(ceilings("timeout", Honest(success, failure[:2], None), np.zeros(0))) == 1
    assert ceilings("success", honest, np.zeros(0)) == ()
    assert ceilings("no_success", Honest(np.zeros(0), failure, None), np.zeros(0)) == ()


def test_the_probe_spares_the_success_search_and_decides_the_search_without_success():
    ctx = explore(TenOnes, probe="grpo", episodes=64, quick=True)
    ctx.shared.cost = EnvCost()
    run(ctx)
    runs = ctx.notes["runs"]
    assert runs["target-success"] == {"iterations": 0, "eval_episodes": 0, "env_steps": 0, "stopped": None,
                                      "stood_in_by": "natural"}
    targets = ctx.tables["targets"].set_index("behaviour")
    assert targets.loc["success", "rate"] == 1.0 and targets.loc["success", "mean_return"] == 10.0
    assert targets.loc["no_success", "max_return"] <= 4.0
    assert runs["target-no_success"]["decided"] and runs["target-no_success"]["iterations"] < 14
    # What the runs played is what the probe counted: the stand-in played nothing.
    played = sum(r["env_steps"] + 10 * r["eval_episodes"] for r in runs.values())
    assert ctx.cost.section()["probes"]["grpo"]["env_steps"] == played


def test_a_natural_run_that_does_not_always_succeed_leaves_the_success_search_to_run():
    ctx = explore(lambda: Combination(), probe="grpo", episodes=64, quick=True)
    run(ctx, only=("natural", "target-success"))
    runs = ctx.notes["runs"]
    assert "stood_in_by" not in runs["target-success"] and runs["target-success"]["iterations"] > 0
