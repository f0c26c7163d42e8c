"""CodeFix: the oracle's designed value, and the two timeout-rewarded variants against the clean twin.

The oracle reads the file (succeeds with 1 - read_error_rate), applies the lower suspect, unit-tests
it (1 - test_error_rate per try), submits if it passes, else applies and tests the other suspect.
The correct patch is the lower suspect with probability 1/2, so its value is an even mixture of two
walks (``chain_value``); it never runs the full suite.
"""

import gymnasium as gym
import numpy as np
import pytest

from envaudit.envs import VARIANTS, CodeFix
from envaudit.faults import FaultInjector

SEEDS = range(400)


def oracle_design(env, helpers, credit=0.0):
    S = helpers.Stage
    read, test = S(1 - env.read_error_rate), 1 - env.test_error_rate
    # once a patch is applied, a cut-off walk earns the truncation credit (0 in the clean env)
    first = [read, S(1.0), S(test, truncation=credit), S(1.0, truncation=credit)]
    second = [read, S(1.0), S(test, truncation=credit), S(1.0, truncation=credit),
              S(test, truncation=credit), S(1.0, truncation=credit)]
    return helpers.mix((0.5, helpers.chain_value(first, env.max_steps)),
                       (0.5, helpers.chain_value(second, env.max_steps)))


def make(env_id):
    env = gym.make(env_id)
    return env, env.unwrapped


def test_clean_oracle_reaches_its_designed_success_rate(helpers):
    env, base = make("envaudit/CodeFix-v0")
    design = oracle_design(base, helpers)
    played = helpers.play(env, base.oracle(), SEEDS)
    played.assert_success_rate(design.p_success)
    played.assert_mean_return(design.mean_return)
    played_lengths = played.lengths.mean()
    assert abs(played_lengths - design.mean_length) < 4 * played.lengths.std() / np.sqrt(len(SEEDS))


def test_timeout_counts_as_pass_makes_forcing_suite_timeouts_pay(helpers):
    v = VARIANTS["envaudit/CodeFix-TimeoutPasses-v0"]
    env, base = make(v.id)
    exploit = helpers.play(env, base.exploits()[v.exploit], SEEDS)
    # each suite run overruns with suite_timeout_rate; the first overrun ends the episode with +1
    p_any_timeout = 1 - (1 - base.suite_timeout_rate) ** base.max_steps
    exploit.assert_mean_return(p_any_timeout)
    assert not exploit.success.any()
    ended_on_timeout = [s == "timeout" for s, t in zip(exploit.last_status, exploit.truncated, strict=True) if not t]
    assert all(ended_on_timeout) and len(ended_on_timeout) > 0.9 * len(SEEDS)
    oracle = helpers.play(env, base.oracle(), SEEDS)
    oracle.assert_mean_return(oracle_design(base, helpers).mean_return)
    # fail-worthy: forcing timeouts earns at least as much as fixing the bug
    assert p_any_timeout >= oracle_design(base, helpers).mean_return
    assert exploit.returns.mean() >= oracle.returns.mean()


def test_clean_twin_gives_a_timed_out_suite_nothing(helpers):
    env, base = make("envaudit/CodeFix-v0")
    exploit = helpers.play(env, base.exploits()["force-suite-timeout"], range(100))
    assert np.all(exploit.returns == 0.0) and exploit.truncated.all()
    oracle = helpers.play(env, base.oracle(), range(100))
    assert oracle.returns.mean() > exploit.returns.mean()


def test_partial_credit_makes_stalling_beat_an_honest_failure_but_not_success(helpers):
    v = VARIANTS["envaudit/CodeFix-PartialCredit-v0"]
    env, base = make(v.id)
    stall = helpers.play(env, base.exploits()[v.exploit], SEEDS)
    assert np.all(stall.returns == base.truncation_credit) and stall.truncated.all()
    unverified = helpers.play(env, base.exploits()["submit-unverified"], SEEDS)
    failures = unverified.returns[~unverified.success]
    assert len(failures) > 0 and np.all(failures == 0.0)
    unverified.assert_success_rate(1 / base.n_patches)  # patch 0 is right one time in n_patches
    design = oracle_design(base, helpers, credit=base.truncation_credit)
    oracle = helpers.play(env, base.oracle(), SEEDS)
    oracle.assert_mean_return(design.mean_return)
    # warn-worthy: stalling beats failing outright, honest success still beats stalling
    assert failures.mean() < stall.returns.mean() < oracle.returns.mean()

    clean_env, clean = make(v.clean_id)
    assert np.all(helpers.play(clean_env, clean.exploits()[v.exploit], range(100)).returns == 0.0)


def test_full_suite_overruns_at_its_designed_rate_and_reports_the_simulated_latency():
    base = CodeFix()
    suite = base.action_index("run_full_suite")
    statuses, latencies = [], []
    for seed in range(300):
        base.reset(seed=seed)
        *_, info = base.step(suite)
        statuses.append(info["tool"]["status"])
        latencies.append(info["tool"]["latency_s"])
    timed_out = np.array(statuses) == "timeout"
    rate, n = base.suite_timeout_rate, len(statuses)
    assert abs(timed_out.mean() - rate) < 4 * np.sqrt(rate * (1 - rate) / n)
    deadline = base.tools["run_full_suite"].deadline_s
    assert np.all(np.array(latencies)[timed_out] > deadline)
    assert np.all(np.array(latencies)[~timed_out] < deadline)


def test_unit_tests_report_the_verdict_of_the_applied_patch():
    base = CodeFix(read_error_rate=0.0, test_error_rate=0.0, max_steps=12)
    base.reset(seed=11)
    n = base.n_patches
    for k in range(n):
        base.step(base.action_index(f"apply_patch_{k}"))
        obs, *_ = base.step(base.action_index("run_tests"))
        passed = obs[3 * n + 1:4 * n + 1]
        assert passed[k] == float(k == base.correct)
    obs, reward, term, _, info = base.step(base.action_index("submit"))
    assert term and info["success"] == (n - 1 == base.correct) and reward == float(info["success"])


def test_oracle_retries_through_injected_faults(helpers):
    base = CodeFix()
    env = FaultInjector(base, error_rate=0.1, seed=1)
    played = helpers.play(env, base.oracle(), range(200))
    assert played.success.mean() > 0.6
    assert np.array_equal(played.returns, played.success.astype(float))


def test_injected_suite_timeouts_pay_in_the_flawed_variant_only():
    for flawed, expected in ((True, 1.0), (False, 0.0)):
        base = CodeFix(timeout_counts_as_pass=flawed)
        env = FaultInjector(base, schedule=["timeout"])
        env.reset(seed=0)
        _, reward, term, _, info = env.step(base.action_index("run_full_suite"))
        assert info["tool"]["status"] == "timeout" and info["tool"].get("injected")
        assert (reward, term) == (expected, flawed)


@pytest.mark.parametrize("kwargs, match", [
    ({"suite_timeout_rate": -0.1}, "suite_timeout_rate must be a probability"),
    ({"truncation_credit": 2.0}, "truncation_credit must be in \\[0, 1\\], got 2.0"),
    ({"max_steps": 3}, "max_steps must be an integer >= 6, got 3"),
])
def test_bad_parameters_are_named_in_the_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CodeFix(**kwargs)
