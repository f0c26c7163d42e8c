"""The pipeline probe's decision functions on hand-built groups whose advantages are known.

Groups are small enough to do GRPO's arithmetic by hand. Under ``advantage_scaling="none"``
(Dr. GRPO) a rollout's advantage is its trained reward minus the mean of its group's trained
rewards: a group of one success (1) and three failures (0) gives each failure 0 - 1/4 = -0.25; a
failure that had timed out under a pipeline that drops timeouts gets 0 (out of the loss), and one
that had succeeded gets 1 - 2/4 = 0.5.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.pipeline import Pipeline
from envaudit.probes import pipeline as P
from envaudit.protocol import END_TRUNCATED, ERROR, FAILURE, SUCCESS, TIMEOUT, TOOL_TIMEOUT
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.frames import FakeContext, episode, records

DROP = Pipeline(name="drop", handling={TIMEOUT: "drop"}, advantage_scaling="none")
KEEP_NONE = Pipeline(name="keep-none", advantage_scaling="none")


def groups(*specs) -> pd.DataFrame:
    """``specs``: per group a list of (outcome, return); episode ids count up across groups."""
    rows, eid = [], 0
    for g, spec in enumerate(specs):
        for outcome, ret in spec:
            rows.append({"episode_id": eid, "group": g, "seed": 100 + g, "outcome": outcome, "return": ret})
            eid += 1
    return P._groups(pd.DataFrame(rows))


ONE_WIN = [(SUCCESS, 1.0), (FAILURE, 0.0), (FAILURE, 0.0), (FAILURE, 0.0)]


def test_groups_key_on_group_else_seed_and_zero_a_missing_return():
    eps = pd.DataFrame({"episode_id": [2, 1, 0], "group": [1, 0, None], "seed": [5, 7, 5],
                        "outcome": [FAILURE] * 3, "return": [np.nan, "x", 2.0]})
    g = P._groups(eps)
    assert g["_group"].tolist() == ["5", "5", "7"] and g["episode_id"].tolist() == [0, 2, 1]  # a None group: by seed
    assert g["_return"].tolist() == [2.0, 0.0, 0.0]
    g = P._groups(eps.assign(group=[1, 0, 0]))
    assert g["_group"].tolist() == ["0", "0", "1"] and g["episode_id"].tolist() == [0, 1, 2]


def test_effective_advantages_per_group():
    eps = groups(ONE_WIN, [(FAILURE, 0.0), (TIMEOUT, 0.5)])
    eff = P.effective_advantages(eps, DROP).set_index("episode_id")
    assert eff["advantage"].tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25, 0.0, 0.0])
    assert eff["trained"].tolist() == [True] * 5 + [False]  # the timeout is dropped
    keep = P.effective_advantages(eps, KEEP_NONE).set_index("episode_id")
    assert keep.loc[[4, 5], "advantage"].tolist() == pytest.approx([-0.25, 0.25])


def test_effective_advantages_of_no_episodes_is_an_empty_table():
    eff = P.effective_advantages(groups(ONE_WIN).iloc[0:0], DROP)
    assert len(eff) == 0 and {"advantage", "trained"} <= set(eff.columns)


def test_cluster_ci_resamples_whole_groups():
    rng = np.random.default_rng(0)
    # group a: one 0; group b: three 4s. Resampled means: 0 (a, a), 3 (a, b), 4 (b, b)
    lo, hi = P._cluster_mean_ci(np.array([0.0, 4.0, 4.0, 4.0]), np.array(["a", "b", "b", "b"]), rng)
    assert (lo, hi) == (0.0, 4.0)
    assert P._cluster_mean_ci(np.array([1.0, 3.0]), np.array(["a", "a"]), rng) == (2.0, 2.0)
    assert all(math.isnan(x) for x in P._cluster_mean_ci(np.array([]), np.array([]), rng))
    lo, hi = P._cluster_mean_ci(np.array([1.0, 1.0, 3.0, 3.0]), np.array(["a", "b", "c", "d"]), rng, n_boot=4000)
    assert lo == 1.0 and hi == 3.0  # all four from one pair is rare but within 2.5%: 2/16 each


def test_rows_summarise_one_outcome():
    eff = P.effective_advantages(groups(ONE_WIN, ONE_WIN), DROP)
    row = P._rows(eff[eff["outcome"] == FAILURE], "advantage", DROP, "configured", "observed", FAILURE,
                  np.random.default_rng(0))
    assert row["n_episodes"] == 6 and row["n_groups"] == 2 and row["mean_advantage"] == pytest.approx(-0.25)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((-0.25, -0.25)) and row["trained_share"] == 1.0
    assert row["mean_return"] == 0.0 and row["pipeline"] == "drop" and row["role"] == "configured"
    assert math.isnan(P._rows(eff.drop(columns="trained"), "advantage", DROP, "r", "k", "o",
                              np.random.default_rng(0))["trained_share"])


def test_target_returns_per_group_then_overall_then_stall_runs():
    eps = groups([(TIMEOUT, 0.4), (TIMEOUT, 0.6), (FAILURE, 0.0)], [(FAILURE, 0.0)], [(TIMEOUT, 2.0)])
    target, source = P._target_returns(eps, TIMEOUT, [9.0])
    assert target == {"0": 0.5, "1": 0.6, "2": 2.0} and source == "observed timeout rollouts"  # 1: the median of all
    none = groups([(FAILURE, 0.0)], [(FAILURE, 1.0)])
    target, source = P._target_returns(none, TIMEOUT, [0.2, 0.4, 3.0])
    assert target == {"0": 0.4, "1": 0.4} and source == "timeout rollouts of the stall policy"
    target, source = P._target_returns(none, TIMEOUT, [])
    assert all(math.isnan(v) for v in target.values()) and source.startswith("the failing rollout's own return")


def test_switching_a_failure_to_a_dropped_timeout_or_a_success():
    eps = groups(ONE_WIN)
    out = P.switch_failures(eps, DROP, TIMEOUT, {"0": 0.0}, {"0": 1.0})
    assert out["episode_id"].tolist() == [1, 2, 3]
    assert out["as_failure"].tolist() == pytest.approx([-0.25] * 3)
    assert out["switched"].tolist() == pytest.approx([0.0] * 3)  # dropped: out of the loss
    assert out["as_success"].tolist() == pytest.approx([0.5] * 3)
    kept = P.switch_failures(eps, KEEP_NONE, TIMEOUT, {"0": 0.6}, {"0": float("nan")})
    # kept at 0.6: the group's rewards 1, 0.6, 0, 0 have mean 0.4
    assert kept["switched"].tolist() == pytest.approx([0.2] * 3) and kept["switched_return"].tolist() == [0.6] * 3
    assert kept["as_success"].isna().all()
    own = P.switch_failures(eps, KEEP_NONE, TIMEOUT, {"0": float("nan")}, {"0": 1.0})
    assert own["switched"].tolist() == pytest.approx([-0.25] * 3) and own["switched_return"].tolist() == [0.0] * 3
    assert list(P.switch_failures(groups([(SUCCESS, 1.0)]), DROP, TIMEOUT, {"0": 0.0}, {"0": 1.0}).columns) == [
        "_group", "episode_id", "return", "switched_return", "as_failure", "switched", "as_success"]


def per_group(gaps, success_gap=None):
    """One failing rollout per group with ``switched - as_failure`` = each gap."""
    return pd.DataFrame({"_group": [str(i) for i in range(len(gaps))], "episode_id": range(len(gaps)),
                         "as_failure": [-0.25] * len(gaps), "switched": [-0.25 + g for g in gaps],
                         "as_success": [float("nan") if success_gap is None else -0.25 + g - success_gap
                                        for g in gaps]})


def test_gap_test_is_a_one_sided_sign_test_over_groups():
    rng = np.random.default_rng(0)
    t = P.gap_test(per_group([0.25] * 10), rng)
    assert t["p_value"] == pytest.approx(0.5 ** 10) and t["n_groups_positive"] == 10 and t["gap"] == 0.25
    assert t["gap_ci"] == pytest.approx([0.25, 0.25]) and not t["underpowered"]
    t = P.gap_test(per_group([0.25] * 9 + [-0.25]), rng)
    assert t["p_value"] == pytest.approx(11 / 1024)  # P(X >= 9), X ~ Bin(10, 1/2)
    t = P.gap_test(per_group([0.25] * 8 + [0.0, 1e-10]), rng)  # no gap and float noise: left out
    assert t["n_groups_nonzero"] == 8 and t["n_groups"] == 10 and t["p_value"] == pytest.approx(0.5 ** 8)
    t = P.gap_test(per_group([0.0] * 3), rng)
    assert t["p_value"] == 1.0 and t["underpowered"] and t["n_groups"] == 3
    assert P.gap_test(per_group([]).iloc[0:0], rng) == {"n_groups": 0, "p_value": 1.0, "gap": None, "gap_ci": None}
    assert P.gap_test(per_group([0.25] * MIN_SAMPLES), rng)["underpowered"] is False
    assert P.gap_test(per_group([0.25] * (MIN_SAMPLES - 1)), rng)["underpowered"] is True


def test_gap_test_compares_the_switch_with_success():
    rng = np.random.default_rng(0)
    t = P.gap_test(per_group([0.25] * 4, success_gap=-0.5), rng)
    assert t["switched_minus_success"] == pytest.approx(-0.5) and t["n_groups_with_success"] == 4
    assert t["switched_minus_success_ci"] == pytest.approx([-0.5, -0.5])
    assert t["mean_as_success"] == pytest.approx(0.5) and t["mean_switched"] == 0.0 and t["mean_as_failure"] == -0.25
    t = P.gap_test(per_group([0.25], success_gap=0.0), rng)
    assert t["n_groups_with_success"] == 1 and "switched_minus_success_ci" not in t
    t = P.gap_test(per_group([0.25] * 2), rng)
    assert t["switched_minus_success"] is None and t["mean_as_success"] is None


def test_which_pipelines_treat_a_class_specially():
    assert P.treats_specially(DROP, TIMEOUT) and not P.treats_specially(DROP, ERROR)
    assert P.treats_specially(Pipeline(mask_group_on=(TIMEOUT,)), TIMEOUT)
    assert P._same_as_keep(Pipeline()) and not P._same_as_keep(KEEP_NONE)
    assert not P._same_as_keep(Pipeline(handling={ERROR: "zero"}))
    assert not P._same_as_keep(Pipeline(mask_group_on=(ERROR,)))
    assert not P._same_as_keep(Pipeline(filter_zero_variance=True))


def test_escape_in_words():
    assert P._escape(Pipeline(mask_group_on=(TIMEOUT,), handling={TIMEOUT: "drop"}), 0.0).startswith("masks its whole")
    assert P._escape(DROP, 0.0) == "is removed from the loss (advantage 0)"
    assert P._escape(Pipeline(handling={TIMEOUT: "zero"}, penalty=-3), 0.5) == "is trained on reward 0 (advantage +0.50)"
    assert P._escape(Pipeline(handling={TIMEOUT: "penalty"}, penalty=-0.5), -0.1) == (
        "is trained on reward -0.5 (advantage -0.10)")
    assert P._escape(Pipeline(handling={ERROR: "drop"}), 0.0, ERROR) == "is removed from the loss (advantage 0)"


def test_a_sign_test_is_decidable_with_enough_groups():
    assert P._decidable(MIN_SAMPLES, 0.05) and not P._decidable(MIN_SAMPLES - 1, 0.5)
    assert not P._decidable(9, 0.5 ** 9) and P._decidable(10, 0.5 ** 9)  # 0.5^n must be below alpha


def test_observed_reach_reads_the_recorded_timeouts():
    eps = pd.DataFrame({"outcome": [TIMEOUT, FAILURE, FAILURE, TIMEOUT]})
    r = P.observed_reach(None, eps)
    assert r["exploration_timeouts"] == 2 and r["exploration_rate"] == 0.5 and r["reachable"]
    assert not r["by_stall"] and r["stall_action"] is None
    r = P.observed_reach(None, eps.iloc[0:0])
    assert r["exploration_rate"] == 0.0 and not r["reachable"]



def test_observed_reach_of_one_timeout_is_reachable_and_ran_no_stall():
    # One timeout in four episodes (the others fail and succeed): a logged run that reached a
    # timeout once has reached it; nothing about stalling is known without stall runs.
    eps = pd.DataFrame({"outcome": [FAILURE, TIMEOUT, SUCCESS, FAILURE]})
    assert P.observed_reach(None, eps) == {
        "exploration_timeouts": 1, "exploration_rate": 0.25, "stall_action": None, "stall_rate": 0.0,
        "stall_episodes": 0, "stall_returns": [], "stall_examples": [], "tried": [], "by_stall": False,
        "reachable": True}
    assert P.observed_reach(None, eps[eps["outcome"] != TIMEOUT])["reachable"] is False

# -- the finding ---------------------------------------------------------------------------------
def gap(**kw):
    t = {"gap": 0.25, "p_value": 0.001, "n_groups_with_success": 4, "switched_minus_success": -0.5,
         "mean_as_failure": -0.25, "mean_switched": 0.0, "mean_as_success": 0.5, "underpowered": False,
         "n_groups": 10}
    return {**t, **kw}


REACHED = {"reachable": True, "by_stall": True, "stall_action": "wait", "exploration_rate": 0.0,
           "stall_rate": 1.0, "stall_episodes": 4, "stall_examples": [90, 91]}


def finding(test, reachable=REACHED, pipeline=DROP):
    ctx = SimpleNamespace(pipeline=pipeline, config=ScanConfig(seed=0))
    switched = pd.DataFrame({"episode_id": [5, 6, 7, 8], "as_failure": [-0.1, -0.4, -0.2, -0.3]})
    return P.decide_timeout_drop_incentive(ctx, test, gap(gap=0.0), reachable, "observed timeout rollouts", switched)


def test_finding_severity_follows_the_ladder():
    f = finding(gap())
    assert f.severity == Severity.WARN and f.evidence["behaviour"] == "timeout" and f.evidence["reward_path"] == "pipeline"
    assert list(f.examples) == [90, 91, 6, 8, 7] and "repeating `wait`" in f.summary
    assert f.title == "drop: timing out beats failing (+0.00 vs -0.25 advantage)"
    assert finding(gap(switched_minus_success=0.0)).severity == Severity.FAIL  # as much as success
    assert finding(gap(switched_minus_success=-1e-10)).severity == Severity.FAIL
    nobody = finding(gap(n_groups_with_success=0, switched_minus_success=None))
    assert nobody.severity == Severity.FAIL and "no exploration rollout succeeded" in nobody.summary
    assert finding(gap(underpowered=True)).severity == Severity.INFO
    latent = finding(gap(), {**REACHED, "reachable": False, "by_stall": False})
    assert latent.severity == Severity.INFO and "latent incentive" in latent.summary


def test_no_finding_without_a_significant_positive_gap():
    assert finding(gap(gap=None)) is None and finding(gap(gap=0.0)) is None and finding(gap(gap=1e-10)) is None
    assert finding(gap(p_value=0.05)) is None  # p must be below alpha
    assert finding(gap(p_value=0.049)) is not None


def test_reach_repeats_suspect_actions_until_one_times_out():
    explored = records(episode(FAILURE, [(0, 0.0), (1, 0.0)]), episode(TIMEOUT, [(0, 0.0), (0, 0.0)]))

    def play(policy, seeds, kw):
        a = policy.actions[0] if hasattr(policy, "actions") else None
        out = TIMEOUT if a == 0 else FAILURE
        return records(*[episode(out, [(a, 0.5)], seed=s) for s in seeds])

    ctx = FakeContext(explored, env=SimpleNamespace(action_space=gym.spaces.Discrete(2)), play=play,
                      labels=["wait", "answer"])
    eps = groups([(FAILURE, 0.0), (TIMEOUT, 0.0)], [(FAILURE, 0.0)])
    r = P.reach(ctx, eps)
    assert r["stall_action"] == "wait" and r["stall_rate"] == 1.0 and r["by_stall"] and r["reachable"]
    assert r["stall_returns"] == [0.5, 0.5] and r["exploration_timeouts"] == 1 and r["exploration_rate"] == pytest.approx(1 / 3)
    assert [s for _, s, _ in ctx.runs] == [[100, 101]]  # the groups' seeds; stopped after the first
    assert r["tried"] == [{"action": "wait", "timeout_rate": 1.0, "episodes": 2}]


def test_suspects_rank_the_action_that_times_out_first():
    explored = records(episode(TIMEOUT, [{"action": 1, "reward": 0.0, "tool_status": TOOL_TIMEOUT},
                                         {"action": 1, "reward": 0.0, "tool_status": TOOL_TIMEOUT}], end=END_TRUNCATED),
                       episode(FAILURE, [(0, 0.0), (2, 0.0)]))
    ctx = FakeContext(explored, env=SimpleNamespace(action_space=gym.spaces.Discrete(4)))
    # 1 times out at every call; then the actions that never ended an episode (0 seen, 3 never
    # tried), by action; last 2, which ended the failure
    assert P._suspects(ctx, TIMEOUT) == ([1, 0, 3, 2], 1)
    ranked, seen = P._suspects(FakeContext(records(episode(FAILURE, [(0, 0.0)])),
                                           env=SimpleNamespace(action_space=gym.spaces.Discrete(14, start=1))), TIMEOUT)
    assert seen == 0 and len(ranked) == 12 and ranked[-1] == 12  # nothing seen: the first 12 of all actions
    # an error is ranked by the calls that errored
    ctx = FakeContext(records(episode(ERROR, [{"action": 2, "reward": 0.0, "tool_status": "error"}], end=END_TRUNCATED),
                              episode(FAILURE, [(0, 0.0), (1, 0.0)])),
                      env=SimpleNamespace(action_space=gym.spaces.Discrete(3)))
    assert P._suspects(ctx, ERROR) == ([2, 0, 1], 1)
