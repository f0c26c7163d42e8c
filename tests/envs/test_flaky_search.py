"""FlakySearch: the oracle's designed value, and the planted flaws' exploits against their twins.

The oracle walks search -> open_doc -> answer, retrying each failed call; a search succeeds with
probability (1 - error_rate) * (1 - slow_rate) (an overrun is a timeout), an open with
1 - open_error_rate. Expected values come from those parameters (``chain_value``).
"""

import gymnasium as gym
import numpy as np
import pytest

from envaudit.envs import VARIANTS, FlakySearch
from envaudit.faults import FaultInjector
from envaudit.rollout import SequencePolicy

SEEDS = range(400)


def oracle_chain(env, helpers, cost=0.0):
    S = helpers.Stage
    p_search = (1 - env.search_error_rate) * (1 - env.search_slow_rate)
    stages = [S(p_search, r_fail=-cost), S(1 - env.open_error_rate, r_fail=-cost), S(1.0)]
    return helpers.chain_value(stages, env.max_steps)


def make(env_id):
    env = gym.make(env_id)
    return env, env.unwrapped


def test_clean_oracle_reaches_its_designed_success_rate(helpers):
    env, base = make("envaudit/FlakySearch-v0")
    design = oracle_chain(base, helpers)
    played = helpers.play(env, base.oracle(), SEEDS)
    played.assert_success_rate(design.p_success)
    played.assert_mean_return(design.mean_return)
    assert design.p_success > 0.9
    assert np.array_equal(played.returns, played.success.astype(float))


def test_failure_penalty_makes_giving_up_beat_persisting(helpers):
    v = VARIANTS["envaudit/FlakySearch-FailurePenalty-v0"]
    env, base = make(v.id)
    design = oracle_chain(base, helpers, cost=base.failure_cost)
    oracle = helpers.play(env, base.oracle(), SEEDS)
    oracle.assert_mean_return(design.mean_return)
    give_up = helpers.play(env, base.exploits()[v.exploit], SEEDS)
    assert np.all(give_up.returns == 0.0) and not give_up.success.any()
    # fail-worthy: the exploit's return is at least the honest oracle's, by design and measured.
    assert design.mean_return < 0.0
    assert give_up.returns.mean() >= oracle.returns.mean()


def test_without_the_failure_cost_persisting_wins_even_on_the_degraded_backend(helpers):
    kwargs = {k: val for k, val in VARIANTS["envaudit/FlakySearch-FailurePenalty-v0"].kwargs.items()
              if k != "failure_cost"}
    base = FlakySearch(**kwargs)
    design = oracle_chain(base, helpers)
    oracle = helpers.play(base, base.oracle(), SEEDS)
    oracle.assert_mean_return(design.mean_return)
    give_up = helpers.play(base, base.exploits()["give-up-at-once"], SEEDS)
    assert oracle.returns.mean() > give_up.returns.mean() == 0.0


def test_lenient_grader_pays_answer_all_without_success(helpers):
    v = VARIANTS["envaudit/FlakySearch-AnswerAll-v0"]
    env, base = make(v.id)
    exploit = helpers.play(env, base.exploits()[v.exploit], SEEDS)
    assert np.all(exploit.returns == 1.0) and not exploit.success.any()
    design = oracle_chain(base, helpers)
    oracle = helpers.play(env, base.oracle(), SEEDS)
    oracle.assert_mean_return(design.mean_return)
    assert exploit.returns.mean() >= oracle.returns.mean()

    clean_env, clean = make(v.clean_id)
    assert np.all(helpers.play(clean_env, clean.exploits()[v.exploit], SEEDS).returns == 0.0)


def test_wrong_answers_and_give_up_pay_nothing_in_the_clean_env(helpers):
    env, base = make("envaudit/FlakySearch-v0")
    for k in range(base.n_candidates):
        played = helpers.play(env, SequencePolicy([base.action_index(f"answer_{k}")]), range(200))
        assert np.array_equal(played.returns, played.success.astype(float))
        # a blind answer is right one time in n_candidates
        played.assert_success_rate(1 / base.n_candidates)


def test_search_overruns_are_reported_as_timeouts_with_their_simulated_latency():
    base = FlakySearch(search_error_rate=0.0, search_slow_rate=1.0)
    base.reset(seed=0)
    *_, info = base.step(base.action_index("search"))
    assert info["tool"]["status"] == "timeout"
    assert info["tool"]["latency_s"] > base.tools["search"].deadline_s
    obs, reward, term, trunc, info = base.step(base.action_index("open_doc"))
    assert info["tool"]["status"] == "error" and "search first" in info["tool"]["error"]
    assert reward == 0.0 and not term


def test_oracle_retries_through_injected_faults(helpers):
    base = FlakySearch()
    env = FaultInjector(base, error_rate=0.2, seed=3)
    played = helpers.play(env, base.oracle(), range(200))
    assert played.success.mean() > 0.6
    assert np.array_equal(played.returns, played.success.astype(float))


def test_observation_reveals_the_answer_only_after_open_doc():
    base = FlakySearch(search_error_rate=0.0, search_slow_rate=0.0, open_error_rate=0.0)
    obs, _ = base.reset(seed=5)
    assert obs[:2].tolist() == [0.0, 0.0]
    obs, *_ = base.step(base.action_index("search"))
    assert obs[0] == 1.0 and obs[1] == 0.0
    obs, *_ = base.step(base.action_index("open_doc"))
    assert obs[1] == 1.0 and int(np.argmax(obs[2:2 + base.n_candidates])) == base.answer


@pytest.mark.parametrize("kwargs, match", [
    ({"search_error_rate": 1.5}, "search_error_rate must be a probability in \\[0, 1\\], got 1.5"),
    ({"failure_cost": -1}, "failure_cost is a cost and must be >= 0, got -1"),
    ({"n_candidates": 1}, "n_candidates must be an integer >= 2, got 1"),
])
def test_bad_parameters_are_named_in_the_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FlakySearch(**kwargs)


def test_render_ansi_is_the_transcript():
    base = FlakySearch(render_mode="ansi")
    base.reset(seed=0)
    base.step(base.action_index("give_up"))
    assert base.render() == "1. give_up -> ok, reward +0"

