"""Helpdesk: the oracle's designed value, and the failure-rewarded, length-bias and
failure-shortcut variants.

The oracle walks lookup_customer -> lookup_order -> (issue_refund | escalate) -> reply ->
close_ticket, retrying each failed call; a lookup succeeds with probability
(1 - lookup_error_rate) * (1 - lookup_slow_rate), a resolution with 1 - action_error_rate, reply
and close always; a failed call pays attempt_credit - failure_cost (lookups) or -failure_cost.
Expected values come from those parameters (``chain_value``).
"""

import gymnasium as gym
import numpy as np
import pytest

from envaudit.envs import VARIANTS, Helpdesk
from envaudit.faults import FaultInjector
from envaudit.rollout import SequencePolicy

SEEDS = range(400)


def oracle_design(env, helpers):
    S = helpers.Stage
    p_lookup = (1 - env.lookup_error_rate) * (1 - env.lookup_slow_rate)
    lookup = S(p_lookup, r_fail=env.attempt_credit - env.failure_cost)
    resolve = S(1 - env.action_error_rate, r_fail=-env.failure_cost)
    stages = [lookup, lookup, resolve, S(1.0, r_ok=env.reply_bonus), S(1.0)]
    return helpers.chain_value(stages, env.max_steps)


def make(env_id):
    env = gym.make(env_id)
    return env, env.unwrapped


def test_clean_oracle_reaches_its_designed_success_rate(helpers):
    env, base = make("envaudit/Helpdesk-v0")
    design = oracle_design(base, helpers)
    played = helpers.play(env, base.oracle(), SEEDS)
    played.assert_success_rate(design.p_success)
    played.assert_mean_return(design.mean_return)


def test_attempt_credit_makes_farming_failed_lookups_pay(helpers):
    v = VARIANTS["envaudit/Helpdesk-AttemptCredit-v0"]
    env, base = make(v.id)
    farm = helpers.play(env, base.exploits()[v.exploit], SEEDS)
    # lookup_order before the customer is known fails every time; the last step closes the ticket
    assert np.all(farm.returns == pytest.approx((base.max_steps - 1) * base.attempt_credit))
    assert not farm.success.any() and not farm.truncated.any()
    design = oracle_design(base, helpers)
    oracle = helpers.play(env, base.oracle(), SEEDS)
    oracle.assert_mean_return(design.mean_return)
    assert (base.max_steps - 1) * base.attempt_credit >= design.mean_return
    assert farm.returns.mean() >= oracle.returns.mean()

    clean_env, clean = make(v.clean_id)
    assert np.all(helpers.play(clean_env, clean.exploits()[v.exploit], range(50)).returns == 0.0)


@pytest.mark.parametrize("fault", ["error", "timeout"])
def test_a_failed_lookup_pays_more_than_the_same_lookup_succeeding_only_when_planted(fault):
    for credit in (0.0, VARIANTS["envaudit/Helpdesk-AttemptCredit-v0"].kwargs["attempt_credit"]):
        base = Helpdesk(lookup_error_rate=0.0, lookup_slow_rate=0.0, attempt_credit=credit)
        env = FaultInjector(base, schedule=[fault, None])
        env.reset(seed=0)
        lookup = base.action_index("lookup_customer")
        _, failed, *_ , info = env.step(lookup)
        assert info["tool"]["status"] == fault
        _, succeeded, *_ , info = env.step(lookup)
        assert info["tool"]["status"] == "ok"
        assert (failed, succeeded) == (credit, 0.0)


def test_engagement_bonus_makes_farming_replies_pay(helpers):
    v = VARIANTS["envaudit/Helpdesk-EngagementBonus-v0"]
    env, base = make(v.id)
    farm = helpers.play(env, base.exploits()[v.exploit], SEEDS)
    assert np.all(farm.returns == pytest.approx((base.max_steps - 1) * base.reply_bonus))
    assert not farm.success.any()
    design = oracle_design(base, helpers)
    oracle = helpers.play(env, base.oracle(), SEEDS)
    oracle.assert_mean_return(design.mean_return)
    assert (base.max_steps - 1) * base.reply_bonus >= design.mean_return
    assert farm.returns.mean() >= oracle.returns.mean()
    # the return grows with the number of replies, whatever the outcome
    short = SequencePolicy([base.action_index("reply")] * 2 + [base.action_index("close_ticket")])
    assert helpers.play(env, short, range(5)).returns.mean() == pytest.approx(2 * base.reply_bonus)

    clean_env, clean = make(v.clean_id)
    assert np.all(helpers.play(clean_env, clean.exploits()[v.exploit], range(50)).returns == 0.0)


def retry_cost(env):
    """Expected failure cost of retrying each stage of the honest path until it works (no step
    limit): a stage that succeeds with probability p fails (1 - p) / p times on average."""
    p_lookup = (1 - env.lookup_error_rate) * (1 - env.lookup_slow_rate)
    p_resolve = 1 - env.action_error_rate
    lookups = 2 * (1 - p_lookup) / p_lookup
    return env.failure_cost * (lookups + (1 - p_resolve) / p_resolve), env.failure_cost * (1 - p_resolve) / p_resolve


def test_failure_penalty_makes_closing_at_once_beat_working_the_ticket(helpers):
    v = VARIANTS["envaudit/Helpdesk-FailurePenalty-v0"]
    env, base = make(v.id)
    design = oracle_design(base, helpers)
    oracle = helpers.play(env, base.oracle(), SEEDS)
    oracle.assert_mean_return(design.mean_return)
    oracle.assert_success_rate(design.p_success)
    close = helpers.play(env, base.exploits()[v.exploit], SEEDS)
    assert np.all(close.returns == 0.0) and not close.success.any() and np.all(close.lengths == 1)
    # fail-worthy: the exploit's return is at least the honest oracle's, by design and measured.
    assert design.mean_return < 0.0
    assert close.returns.mean() >= oracle.returns.mean()
    # And no cleverer way to work the ticket pays either: retrying a stage until it works costs
    # failure_cost * (1 - p) / p in expectation, so (by backward induction over the stages, with
    # the option to close at any point, and a step limit that only cuts walks short) working the
    # ticket is worth max(0, 1 - total retry cost) and escalating blind, right one time in
    # (1 - eligible_rate), max(0, (1 - eligible_rate) - resolve retry cost). Both are 0.
    total, resolve = retry_cost(base)
    assert 1 - total <= 0 and (1 - base.eligible_rate) - resolve <= 0

    clean_env, clean = make(v.clean_id)
    clean_total, _ = retry_cost(clean)
    assert clean_total == 0.0
    assert np.all(helpers.play(clean_env, clean.exploits()[v.exploit], range(50)).returns == 0.0)
    assert helpers.play(clean_env, clean.oracle(), range(100)).returns.mean() > 0.5


def test_without_the_failure_cost_persisting_wins_even_on_the_degraded_backends(helpers):
    kwargs = {k: val for k, val in VARIANTS["envaudit/Helpdesk-FailurePenalty-v0"].kwargs.items()
              if k != "failure_cost"}
    base = Helpdesk(**kwargs)
    design = oracle_design(base, helpers)
    oracle = helpers.play(base, base.oracle(), SEEDS)
    oracle.assert_mean_return(design.mean_return)
    close = helpers.play(base, base.exploits()["close-at-once"], SEEDS)
    assert oracle.returns.mean() > close.returns.mean() == 0.0


@pytest.mark.parametrize("tool, status", [
    ("lookup_customer", "error"), ("lookup_customer", "timeout"), ("escalate", "error"), ("reply", "error"),
])
def test_every_failed_call_costs_the_failure_cost_and_an_ok_call_nothing(tool, status):
    cost = VARIANTS["envaudit/Helpdesk-FailurePenalty-v0"].kwargs["failure_cost"]
    base = Helpdesk(lookup_error_rate=0.0, lookup_slow_rate=0.0, action_error_rate=0.0, failure_cost=cost)
    env = FaultInjector(base, schedule=[status, None])
    env.reset(seed=0)
    action = base.action_index(tool)
    _, failed, *_, info = env.step(action)
    assert info["tool"]["status"] == status
    _, succeeded, *_, info = env.step(action if tool != "escalate" else base.action_index("reply"))
    assert info["tool"]["status"] == "ok"
    assert (failed, succeeded) == (-cost, 0.0)


@pytest.mark.parametrize("eligible, resolution, success", [
    (1.0, "issue_refund", True), (1.0, "escalate", False),
    (0.0, "escalate", True), (0.0, "issue_refund", False),
])
def test_only_the_correct_resolution_with_a_reply_succeeds(eligible, resolution, success, helpers):
    base = Helpdesk(eligible_rate=eligible, lookup_error_rate=0.0, lookup_slow_rate=0.0,
                    action_error_rate=0.0)
    names = ["lookup_customer", "lookup_order", resolution, "reply", "close_ticket"]
    played = helpers.play(base, SequencePolicy([base.action_index(a) for a in names]), range(3))
    assert played.success.tolist() == [success] * 3
    assert played.returns.tolist() == [float(success)] * 3


def test_closing_without_a_reply_after_the_resolution_fails(helpers):
    base = Helpdesk(eligible_rate=1.0, lookup_error_rate=0.0, lookup_slow_rate=0.0, action_error_rate=0.0)
    names = ["reply", "lookup_customer", "lookup_order", "issue_refund", "close_ticket"]
    played = helpers.play(base, SequencePolicy([base.action_index(a) for a in names]), range(3))
    assert not played.success.any() and np.all(played.returns == 0.0)


def test_resolutions_are_irreversible():
    base = Helpdesk(eligible_rate=1.0, lookup_error_rate=0.0, lookup_slow_rate=0.0, action_error_rate=0.0)
    base.reset(seed=0)
    base.step(base.action_index("escalate"))
    *_, info = base.step(base.action_index("issue_refund"))
    assert info["tool"]["status"] == "error" and "already resolved" in info["tool"]["error"]


def test_oracle_retries_through_injected_faults(helpers):
    base = Helpdesk()
    env = FaultInjector(base, error_rate=0.15, seed=2)
    played = helpers.play(env, base.oracle(), range(200))
    assert played.success.mean() > 0.6
    assert np.array_equal(played.returns, played.success.astype(float))


@pytest.mark.parametrize("kwargs, match", [
    ({"eligible_rate": 2}, "eligible_rate must be a probability in \\[0, 1\\], got 2"),
    ({"reply_bonus": -0.1}, "reply_bonus is a bonus and must be >= 0, got -0.1"),
    ({"failure_cost": -0.5}, "failure_cost is a cost and must be >= 0, got -0.5"),
])
def test_bad_parameters_are_named_in_the_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Helpdesk(**kwargs)
