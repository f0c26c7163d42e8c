import numpy as np
import pandas as pd
import pytest

from envaudit.faults import FaultInjector
from envaudit.grpo import GRPOConfig, train
from envaudit.grpo.search import natural
from envaudit.grpo.trainer import RICHEST_KEPT, with_advantages
from envaudit.pipeline import timeout_handling_pipeline
from tests.grpo.envs import CheckSubmit, WorkSubmit

FAST = dict(iterations=40, learning_rate=1e-2)


def test_advantages_follow_the_pipeline_group_by_group():
    episodes = pd.DataFrame({"group": [0, 0, 0, 1, 1], "outcome": ["success", "failure", "timeout", "failure", "failure"]})
    returns = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    out = with_advantages(episodes, returns, timeout_handling_pipeline("drop"))
    # Group 0 trains on success and failure only: mean 0.5, std 0.5 -> +1 and -1; the timeout is dropped.
    assert out["advantage"].round(4).tolist()[:3] == [1.0, -1.0, 0.0]
    assert out["trained"].tolist() == [True, True, False, True, True]
    assert np.isnan(out["training_reward"][2]) and out["training_return"].tolist() == returns.tolist()
    assert out["advantage"].tolist()[3:] == [0.0, 0.0]  # equal rewards: nothing to learn
    kept = with_advantages(episodes, returns, timeout_handling_pipeline("keep"))
    assert kept["advantage"][1] == kept["advantage"][2] < 0  # kept, a timeout is just another failure


def test_training_is_deterministic_for_a_seed_and_logs_every_iteration():
    config = GRPOConfig(iterations=3, seed=5)
    a, b = train(CheckSubmit, config), train(CheckSubmit, config)
    pd.testing.assert_frame_equal(a.curves, b.curves)
    assert not train(CheckSubmit, config.replace(seed=6)).curves.equals(a.curves)
    expected = {"iteration", "mode", "return", "training_reward", "success_rate", "timeout_rate", "failure_rate",
                "mean_length", "entropy", "kl", "mix:check", "mix:submit", "mix:wait"}
    assert expected <= set(a.curves.columns) and a.curves["iteration"].tolist() == [0, 1, 2]
    mix = a.curves[["mix:check", "mix:submit", "mix:wait"]].sum(axis=1)
    assert np.allclose(mix, 1.0)
    assert len(a.episodes) == 3 * config.rollouts_per_iteration and a.first is not None
    # CheckSubmit's tools never fail: the tool-failure rate is zero, not missing.
    assert (a.curves["failure_rate"] == 0).all()
    # What training met: the best-paying episodes the env ended without success, richest first,
    # each with the actions that led there (a failed CheckSubmit episode ends on `submit`, index 1).
    failed = a.episodes[a.episodes["outcome"] == "failure"].set_index("episode_id")
    assert 1 <= len(a.richest) <= RICHEST_KEPT and a.richest == b.richest
    assert [m.ret for m in a.richest] == sorted((m.ret for m in a.richest), reverse=True)
    for met in a.richest:
        assert failed.loc[met.episode_id, "return"] == met.ret and met.actions[-1] == 1
        assert len(met.actions) == failed.loc[met.episode_id, "length"] and met.mode == "natural"


def test_on_iteration_can_stop_training_early():
    seen = []
    result = train(CheckSubmit, GRPOConfig(iterations=10), on_iteration=lambda i, engine, row: seen.append(i) or i == 1)
    assert seen == [0, 1] and len(result.curves) == 2


@pytest.mark.parametrize("seed", [0, 1])
def test_drop_teaches_timeouts_that_penalty_does_not(seed):
    # CheckSubmit: after a bad check (probability 1/2) submitting fails for sure; stalling times out.
    # A random policy times out only when it never submits in 6 steps: (2/3)^6 = 0.088.
    random_timeouts = (2 / 3) ** 6
    drop = natural(CheckSubmit, GRPOConfig(seed=seed, pipeline="drop", **FAST)).episodes
    penalty = natural(CheckSubmit, GRPOConfig(seed=seed, pipeline="penalty", **FAST)).episodes
    drop_rate, penalty_rate = (drop["outcome"] == "timeout").mean(), (penalty["outcome"] == "timeout").mean()
    # Under drop, a failing submit is punished and a stall is not: the bad half of attempts drifts into
    # timeouts (towards 1/2 by design), far above random play.
    assert drop_rate > 2 * random_timeouts
    # Under penalty stalling is punished harder than failing: timeouts fall below random play.
    assert penalty_rate <= random_timeouts


@pytest.mark.parametrize("seed", [0, 1])
def test_costly_failures_teach_giving_up_while_the_clean_twin_persists(seed):
    # Every tool fails half the time. Persisting needs 3 successful calls (6 expected steps),
    # giving up 1 (2 expected steps); with failure_cost=1 giving up pays -1 against -2, with 0 it pays
    # 0 against +1. The midpoint of 2 and 6 steps separates the two behaviours.
    def faults(env):
        return FaultInjector(env, error_rate=0.5, seed=seed)
    config = GRPOConfig(seed=seed, **FAST)
    flawed = natural(lambda: WorkSubmit(failure_cost=1.0), config, wrappers=[faults]).episodes
    clean = natural(lambda: WorkSubmit(failure_cost=0.0), config, wrappers=[faults]).episodes
    assert flawed["length"].mean() < 4 < clean["length"].mean()
    # An optimal persister succeeds unless 10 calls give fewer than 3 successes (P = 56/1024).
    assert (flawed["outcome"] == "success").mean() < 0.2 < 0.5 < (clean["outcome"] == "success").mean()
