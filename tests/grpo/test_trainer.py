import numpy as np
import pandas as pd
import pytest

from envaudit.faults import FaultInjector
from envaudit.grpo import GRPOConfig, train
from envaudit.grpo.search import natural
from envaudit.grpo.trainer import RICHEST_KEPT, with_advantages
from envaudit.pipeline import timeout_handling_pipeline
from envaudit.recording import Records
from tests.grpo.envs import CheckSubmit, TenOnes, WorkSubmit

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


UNIFORM_ENTROPY = float(np.log(2))
"""Nats of a uniform policy over two actions."""


def _rows(*groups, entropy=UNIFORM_ENTROPY):
    return [{"learning_groups": g, "entropy": entropy} for g in groups]


def test_learning_groups_need_a_trained_rollout_with_an_advantage():
    from envaudit.grpo.trainer import learning_groups

    episodes = pd.DataFrame({"episode_id": range(7), "group": [0, 0, 1, 1, 2, 2, 3],
                             "advantage": [1.0, -1.0, 0.0, 0.0, 0.0, 2.0, 2.0],
                             "trained": [True, True, True, True, False, True, False]})
    # Groups 0 and 2 (its trained rollout's advantage) move the policy; group 1 has no advantage,
    # group 3's only rollout with one is not trained.
    assert learning_groups(episodes) == 2
    assert learning_groups(episodes.assign(advantage=0.0)) == 0


def test_barren_counts_quiet_rollouts_of_a_uniform_policy():
    from envaudit.grpo.trainer import UNIFORM, barren

    config = GRPOConfig(barren_rollouts=64, group_size=8, groups_per_iteration=4)  # 32 rollouts an iteration
    assert not barren(_rows(1, 0), config, 2)  # 32 of 64
    assert barren(_rows(1, 0, 0), config, 2)
    assert not barren(_rows(0, 0, 1, 0), config, 2)  # a learning group restarts the count
    # A policy that moved away from uniform is never stopped: the entropy bonus brings it back to exploring.
    low = UNIFORM * np.log(2) - 1e-6
    assert not barren(_rows(1, 0, 0, entropy=low), config, 2)
    rows = _rows(0, 0, 0)
    rows[0]["entropy"] = low  # ... but the iterations since it was uniform again count
    assert barren(rows, config, 2) and not barren(rows, config, 3)  # log(3) is a larger maximum
    rows[-1]["entropy"] = float("nan")  # an iteration that trained nothing says nothing of its policy
    assert not barren(rows, config, 2)
    assert not barren(_rows(0, 0, 0), config.replace(barren_rollouts=0), 2)
    assert not barren(_rows(0, 0, 0), config, 1)


def test_a_target_nothing_reaches_stops_as_barren():
    from envaudit.grpo.search import Reference, targeted

    config = GRPOConfig(iterations=30, learning_rate=1e-2, seed=3, barren_rollouts=96)
    reference = Reference(floor=-1.0, spread=1.0, short_length=1)
    result = targeted(TenOnes, config, "timeout", reference, eval_groups=1)  # TenOnes always terminates
    assert result.training.barren
    assert len(result.training.curves) == 3  # 3 iterations x 32 rollouts = 96, none learned anything
    assert (result.training.curves["learning_groups"] == 0).all()


def test_settled_needs_a_quiet_window_whose_entropy_does_not_climb():
    from envaudit.grpo.trainer import SETTLED_RISE, settled

    config = GRPOConfig(barren_rollouts=64, group_size=8, groups_per_iteration=4)  # 2 iterations' worth
    saturated = 1e-4
    assert settled(_rows(3, 0, 0, entropy=saturated), config, 2)
    assert not settled(_rows(0, 0, 1, 0, entropy=saturated), config, 2)  # a learning group restarts the window
    assert not settled(_rows(0, entropy=saturated), config, 2)  # 32 of 64
    rise = SETTLED_RISE * np.log(2)
    rows = _rows(0, 0, entropy=0.2)
    rows[-1]["entropy"] = 0.2 + rise  # at the tolerance
    assert settled(rows, config, 2)
    rows[-1]["entropy"] = 0.2 + 1.01 * rise  # climbing back towards exploring: trains on
    assert not settled(rows, config, 2)
    assert settled(rows, config, 3)  # log(3) allows more
    rows = _rows(0, 0, entropy=0.3)
    rows[-1]["entropy"] = 0.01  # falling is settling
    assert settled(rows, config, 2)
    rows[0]["entropy"] = float("nan")  # an iteration that trained nothing says nothing of its policy
    assert not settled(rows, config, 2)
    assert not settled(_rows(0, 0, entropy=saturated), config.replace(barren_rollouts=0), 2)
    assert not settled(_rows(0, 0, entropy=saturated), config, 1)
    assert not settled(_rows(0, 0, entropy=saturated), config.replace(engine="vllm"), 2)
    # A window that is not a whole number of iterations takes the iteration that completes it.
    assert not settled(_rows(0, 0, entropy=saturated), config.replace(barren_rollouts=65), 2)
    assert settled(_rows(0, 0, 0, entropy=saturated), config.replace(barren_rollouts=65), 2)


def test_a_run_that_learned_stops_once_settled():
    # TenOnes teaches "always 1" (return 10 against 5 for random play); once every group's rollouts
    # are alike there is nothing left to learn and the policy, saturated, stays so.
    config = GRPOConfig(iterations=40, learning_rate=1e-2, seed=3, barren_rollouts=96)
    result = train(TenOnes, config)
    assert result.settled and not result.barren and len(result.curves) < 40
    curves = result.curves
    assert (curves["learning_groups"].iloc[-3:] == 0).all() and curves["learning_groups"].iloc[0] > 0
    assert curves["return"].iloc[-1] == 10.0 and curves["entropy"].iloc[-1] < 0.05
    # It stopped at the first iteration that completed the window, not later.
    assert curves["learning_groups"].iloc[-4] > 0 or len(curves) == 3
    longer = train(TenOnes, config.replace(barren_rollouts=0))
    assert not longer.settled and len(longer.curves) == 40
    # What the policy does after its window is what it did at the stop: a rollout that deviates (and
    # so gives a group a signal) stays under the 1% the window promises.
    tail = longer.curves.iloc[len(curves):]
    assert (tail["return"] >= 9.9).all()
    assert tail["learning_groups"].sum() <= 0.01 * len(tail) * config.rollouts_per_iteration


def test_quiet_prior_counts_the_explorers_rollouts_only_when_no_group_would_learn():
    from envaudit.grpo.trainer import quiet_prior

    pipeline = timeout_handling_pipeline("keep")
    alike = pd.DataFrame({"group": [0, 0, 1, 1], "return": [1.0, 1.0, 3.0, 3.0], "outcome": ["failure"] * 4})
    assert quiet_prior(alike, None, pipeline) == 4
    differs = alike.assign(**{"return": [1.0, 2.0, 3.0, 3.0]})
    assert quiet_prior(differs, None, pipeline) == 0
    # Judged on the training reward, not the env return.
    assert quiet_prior(differs, lambda e: np.zeros(len(e)), pipeline) == 4
    assert quiet_prior(alike, lambda e: np.arange(len(e), dtype=float), pipeline) == 0
    assert quiet_prior(None, None, pipeline) == 0
    assert quiet_prior(alike.iloc[:0], None, pipeline) == 0
    assert quiet_prior(alike.drop(columns="group"), None, pipeline) == 0


def test_the_explorers_quiet_rollouts_shorten_a_barren_target():
    from envaudit.grpo.search import Reference, targeted

    config = GRPOConfig(iterations=30, learning_rate=1e-2, seed=3, barren_rollouts=96)
    reference = Reference(floor=-1.0, spread=1.0, short_length=1)
    explored = natural(TenOnes, config.replace(iterations=1), eval_groups=0).training.first
    assert len(explored.episodes) == 32
    result = targeted(TenOnes, config, "timeout", reference, eval_groups=1, prior=explored)
    assert result.training.barren and len(result.training.curves) == 2  # 32 explored + 2 x 32 = 96
    alone = targeted(TenOnes, config, "timeout", reference, eval_groups=1)
    assert len(alone.training.curves) == 3
    # A prior whose groups would have learned (one explored rollout timed out) counts for nothing.
    mixed = explored.episodes.copy()
    mixed.loc[mixed.index[0], "outcome"] = "timeout"
    mixed = Records(explored.steps, mixed)
    assert len(targeted(TenOnes, config, "timeout", reference, eval_groups=1, prior=mixed).training.curves) == 3




def test_the_explorers_rollouts_count_only_before_the_policy_moved():
    from envaudit.grpo.trainer import SETTLED_RISE, UNIFORM, barren, settled

    config = GRPOConfig(barren_rollouts=64, group_size=8, groups_per_iteration=4)  # 32 rollouts an iteration
    assert barren(_rows(0), config, 2, prior=32) and not barren(_rows(0), config, 2)
    assert not barren(_rows(0), config.replace(barren_rollouts=33), 2)  # no prior by default
    # Once an iteration learned, exploration's rollouts say nothing of the policy trained since.
    assert not barren(_rows(1, 0), config, 2, prior=32)
    assert not barren(_rows(1, 0, 0), config.replace(barren_rollouts=65), 2, prior=32)
    assert barren(_rows(0, 0, entropy=UNIFORM * np.log(2)), config, 2)  # at the uniform share exactly
    # settled compares the window's last iteration with its first, not any in between.
    rise = SETTLED_RISE * np.log(2)
    rows = [{"learning_groups": 0, "entropy": e} for e in (0.0, 3 * rise, 0.0)]
    assert settled(rows, config.replace(barren_rollouts=96), 2)
    assert settled([{"learning_groups": 0, "entropy": e} for e in (0.0, rise)], config, 2)  # at the tolerance
