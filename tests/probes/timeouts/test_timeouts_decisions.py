"""The timeouts probe's decision functions on hand-built tables whose answers are known.

Each table below is written for the rule under test (``tests/fixtures/frames.py``): which episodes
count as timeouts, which actions end episodes, what an ending pays once the usual pay of the same
call is netted out, which arm becomes the finding and at what severity. They run in milliseconds,
so a planted bug in one rule fails here, not only (or never) in a scan of a whole env.
"""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from envaudit.config import ScanConfig
from envaudit.faults import FaultInjector
from envaudit.findings import Severity
from envaudit.policies import RepeatPolicy, StallPolicy
from envaudit.probes import timeouts as T
from envaudit.probes._shared import endings as E
from envaudit.protocol import (
    END_ENV_EXCEPTION,
    END_TOOL_TIMEOUT,
    END_TRUNCATED,
    ERROR,
    FAILURE,
    SUCCESS,
    TIMEOUT,
    TOOL_ERROR,
    TOOL_OK,
    TOOL_TIMEOUT,
)
from envaudit.recording import Records
from envaudit.stats import MIN_SAMPLES
from envaudit.toolenv import ToolEnv, ToolOutput, Transition
from tests.fixtures.frames import FakeContext, episode, many, records

N = 12  # episodes per kind: above MIN_SAMPLES, so every comparison below is powered


def exploration(timeout_steps, *, n_fail: int = N, n_success: int = N, n_timeout: int = N) -> Records:
    """Failures submit (action 1) for 0, successes for 1; timeouts play ``timeout_steps``."""
    return records(*many(n_fail, FAILURE, [(1, 0.0)], success=False),
                   *many(n_success, SUCCESS, [(1, 1.0)], success=True),
                   *many(n_timeout, TIMEOUT, timeout_steps, success=False, end=END_TRUNCATED))


# -- which episodes, which actions ---------------------------------------------------------------
def test_discrete_actions_count_from_the_space_start():
    assert E.discrete_actions(SimpleNamespace(action_space=gym.spaces.Discrete(3, start=2))) == [2, 3, 4]
    assert E.discrete_actions(SimpleNamespace(action_space=gym.spaces.Box(0, 1, (2,)))) is None


@pytest.mark.parametrize("quick, n, expected", [
    (False, 32, 32), (False, 4, MIN_SAMPLES + 4), (True, 64, 16), (True, 32, MIN_SAMPLES + 4),
    (False, MIN_SAMPLES + 4, MIN_SAMPLES + 4), (False, MIN_SAMPLES + 5, MIN_SAMPLES + 5)])
def test_an_arm_is_n_episodes_a_quarter_under_quick_never_below_min_samples_plus_4(quick, n, expected):
    assert E.sample_size(SimpleNamespace(config=ScanConfig(seed=0, quick=quick)), n) == expected


def test_returns_of_one_outcome():
    eps = pd.DataFrame({"outcome": [SUCCESS, FAILURE, SUCCESS], "return": [1, 0, 3]})
    assert E.returns_of(eps, SUCCESS).tolist() == [1.0, 3.0]
    assert E.returns_of(eps, TIMEOUT).tolist() == []


def test_a_timeout_the_env_graded_a_success_is_not_an_unsuccessful_timeout():
    eps = pd.DataFrame({"outcome": [TIMEOUT, TIMEOUT, TIMEOUT, FAILURE, SUCCESS],
                        "success": [True, False, None, False, True]})
    assert E.unsuccessful_timeouts(eps).tolist() == [False, True, True, False, False]


def test_ending_rates_are_per_integer_action():
    steps = pd.DataFrame({"action": [0, 0, 0, 0, 1, "text"], "terminated": [True, False, False, False, True, True]})
    assert E.ending_rates(steps) == {0: 0.25, 1: 1.0}  # the text action is left out
    assert E.ending_rates(pd.DataFrame({"action": ["a"], "terminated": [True]})) == {}


def test_an_ender_ends_at_least_half_as_often_as_the_top_action():
    # rates 1.0, 0.5 (exactly half the top: an ender), 0.25 (below half: the others)
    steps = pd.DataFrame({"action": [0, 1, 1, 2, 2, 2, 2], "terminated": [True, True, False, True, False, False, False]})
    enders, others, rates = E.split_enders(steps)
    assert (enders, others) == ([0, 1], [2]) and rates == {0: 1.0, 1: 0.5, 2: 0.25}
    never = pd.DataFrame({"action": [1, 0], "terminated": [False, False]})
    assert E.split_enders(never)[:2] == ([], [0, 1])  # nothing ends: no enders, all sorted
    assert E.split_enders(pd.DataFrame({"action": [], "terminated": []}))[:2] == ([], [])


def test_stall_and_repeat_policies():
    stall = StallPolicy([3, 5], avoided="'submit'")
    stall.rng = np.random.default_rng(0)
    assert {stall.act(None, {}) for _ in range(40)} == {3, 5}
    assert stall.describe() == "random actions, never 'submit'"
    assert StallPolicy([3]).describe() == "random actions"
    with pytest.raises(AssertionError):
        StallPolicy([])
    rep = RepeatPolicy.repeating(2, "search", "it timed out")
    assert rep.describe() == "repeat 'search' (it timed out)" and rep.name == "repeat search"
    assert RepeatPolicy.repeating(2, "search").describe() == "repeat 'search'"
    assert [rep.act(None, {}) for _ in range(3)] == [2, 2, 2]
    assert E.quoted(FakeContext(records(), labels=["a", "b"]), [0, 1]) == "'a' or 'b'"


# -- what the steps pay --------------------------------------------------------------------------
def test_final_share_is_the_last_steps_share_of_the_total():
    recs = records(episode(TIMEOUT, [(0, 1.0), (0, 3.0)]), episode(TIMEOUT, [(0, 2.0), (0, 2.0)]),
                   episode(FAILURE, [(1, 5.0)]))
    assert E.final_share(recs.steps, [0, 1]) == pytest.approx(5 / 8)
    assert E.final_share(recs.steps, [1]) == pytest.approx(0.5)
    assert E.final_share(recs.steps, [7]) is None  # no such episode
    zero = records(episode(TIMEOUT, [(0, 1.0), (0, -1.0)]))
    assert E.final_share(zero.steps, [0]) is None  # sums to 0: no share


def test_typical_step_pay_is_the_median_of_steps_that_end_nothing():
    recs = records(episode(TIMEOUT, [(0, -0.1), (0, -0.1), (0, 0.5), (0, 9.0)], end=END_TRUNCATED),
                   episode(FAILURE, [(0, -0.1), (1, 7.0)]))
    assert E.typical_step_pay(recs.steps) == pytest.approx(-0.1)  # the 9 and 7 end episodes
    assert E.typical_step_pay(records(episode(FAILURE, [(1, 1.0)])).steps) is None
    assert E.fmt(None) == "n/a" and E.fmt(0.123456) == "0.123"


def test_typical_step_pay_leaves_out_a_step_that_raised():
    # The recorder writes NaN on the step that raised (it ends nothing the env reported): no pay.
    crashed = episode(ERROR, [(0, -0.1), {"action": 0, "reward": float("nan"), "terminated": False}],
                      end=END_ENV_EXCEPTION)
    recs = records(episode(FAILURE, [(0, -0.1), (0, -0.1), (1, 0.0)]), crashed)
    assert E.typical_step_pay(recs.steps) == pytest.approx(-0.1)
    only = records(episode(ERROR, [{"action": 0, "reward": float("nan"), "terminated": False}], end=END_ENV_EXCEPTION))
    assert E.typical_step_pay(only.steps) is None


def test_failed_step_pay_sums_failed_calls_and_can_leave_the_ending_one_out():
    recs = records(
        episode(FAILURE, [{"reward": 0.2, "tool_status": TOOL_ERROR}, {"reward": 0.3, "tool_status": TOOL_TIMEOUT},
                          {"reward": 5.0, "tool_status": TOOL_OK}, {"reward": 0.4, "tool_status": TOOL_ERROR}]),
        episode(FAILURE, [{"reward": 1.0, "tool_status": None}]))
    all_failed = E.failed_step_pay(recs.steps, keep_ending=False)
    assert all_failed[0] == pytest.approx(0.9) and all_failed[1] == 0.0
    assert E.failed_step_pay(recs.steps, keep_ending=True)[0] == pytest.approx(0.5)  # the ending 0.4 stays
    assert E.failed_step_pay(recs.steps.iloc[0:0], keep_ending=True).empty


def test_ending_pay_nets_out_the_usual_pay_of_the_same_call_and_status():
    recs = records(
        episode(TIMEOUT, [{"action": 0, "reward": 0.1, "tool_status": TOOL_OK},
                          {"action": 0, "reward": 0.3, "tool_status": TOOL_OK},
                          {"action": 0, "reward": 0.5, "tool_status": TOOL_TIMEOUT},
                          {"action": 0, "reward": 1.2, "tool_status": TOOL_OK}], end=END_TRUNCATED),
        episode(FAILURE, [{"action": 0, "reward": 0.9, "tool_status": TOOL_TIMEOUT}]),
        episode(FAILURE, [{"action": 3, "reward": 0.7}]))
    pay = E.ending_pay(recs.steps, recs.steps)
    assert pay[0] == pytest.approx(1.2 - 0.2)  # 'ok' mid-episode pays 0.1 and 0.3 on average
    assert pay[1] == pytest.approx(0.9 - 0.5)  # a mid-episode timeout of the same action pays 0.5
    assert pay[2] == pytest.approx(0.7 - 0.1)  # never seen mid-episode: held to the least a working step pays
    other_reference = records(episode(TIMEOUT, [{"action": 0, "reward": 1.0, "tool_status": TOOL_OK},
                                                {"action": 0, "reward": 0.0, "tool_status": TOOL_OK}]))
    assert E.ending_pay(recs.steps, other_reference.steps)[0] == pytest.approx(0.2)
    assert E.ending_pay(recs.steps.iloc[0:0], recs.steps).empty


# -- the ladder, kept only when the ending pays ---------------------------------------------------
def test_ending_premium_holds_only_for_a_clear_premium_of_at_least_min_effect():
    stall = exploration([(0, 0.0), (0, 0.0), (0, 0.5)])
    eps = stall.episodes
    ctx = FakeContext(stall)
    tmo, fail = eps.loc[eps["outcome"] == TIMEOUT, "episode_id"], eps.loc[eps["outcome"] == FAILURE, "episode_id"]
    rng = np.random.default_rng(0)
    held = E.ending_premium(ctx, tmo, stall.steps, fail, 1.0, rng)
    assert held["holds"] and held["diff"] == pytest.approx(0.5)
    assert E.MIN_EFFECT == 0.1  # the boundaries below: a premium of 0.5 is 10% of a scale of 5
    assert not E.ending_premium(ctx, tmo, stall.steps, fail, 5.01, rng)["holds"]
    assert E.ending_premium(ctx, tmo, stall.steps, fail, 5.0, rng)["holds"]  # exactly 10%: counts
    assert not E.ending_premium(ctx, tmo[:MIN_SAMPLES - 1], stall.steps, fail, 1.0, rng)["holds"]  # underpowered
    # the timeouts' ending pays less than a failure's: no premium (a one-sided question)
    assert not E.ending_premium(ctx, fail, stall.steps, tmo, 1.0, rng)["holds"]


def test_ending_premium_needs_a_significant_difference():
    # half the timeouts' endings pay 0.6, half pay -0.6: a mean of 0 over failures that pay 0
    recs = records(*many(N, FAILURE, [(1, 0.0)], success=False),
                   *many(N // 2, TIMEOUT, [(0, 0.0), (0, 0.6)], end=END_TRUNCATED),
                   *many(N // 2, TIMEOUT, [(0, 0.0), (0, -0.5)], end=END_TRUNCATED))
    eps = recs.episodes
    out = E.ending_premium(FakeContext(recs), eps.loc[eps["outcome"] == TIMEOUT, "episode_id"], recs.steps,
                           eps.loc[eps["outcome"] == FAILURE, "episode_id"], 1.0, np.random.default_rng(0))
    assert not out["holds"] and out["p_value"] > 0.05


def test_judge_keeps_a_level_earned_by_the_ending():
    ctx = FakeContext(exploration([(0, 0.0), (0, 0.0), (0, 0.6)]))
    v = T.arm_verdict(ctx, None, np.ones(N), np.zeros(N), np.random.default_rng(0))
    assert v["level"] == "above_alternative" and v["ending_premium"]["holds"]  # 0.6: above 0, below 1
    full = FakeContext(exploration([(0, 0.0), (0, 1.0)]))
    assert T.arm_verdict(full, None, np.ones(N), np.zeros(N), np.random.default_rng(0))["level"] == "at_least_success"


def test_judge_holds_timeouts_against_the_same_episodes_failing_outright():
    # Every working step pays 0.2 and a failing submit pays 0, i.e. 0.2 less than every step:
    # timing out after three steps (0.6) beats the same episodes failing outright instead (their
    # last step's 0.2 swapped for the submit's ending, 0.2 below a step: 0.4), and the timeout's
    # own ending pays what a step pays (0) against the failure's -0.2: the ladder's warn rung.
    ctx = FakeContext(exploration([(0, 0.2), (0, 0.2), (0, 0.2)]))
    v = T.arm_verdict(ctx, None, np.ones(N), np.zeros(N), np.random.default_rng(0))
    assert v["level"] == "above_alternative" and v["vs_alternative"]["mean_alternative"] == pytest.approx(0.4)
    assert v["ending_premium"]["holds"] and v["ending_premium"]["diff"] == pytest.approx(0.2)
    # The submit pays what every step pays (0.2): stalling earns more only by collecting per-step
    # pay (length-bias's), and the same episodes failing outright earn the same 0.6.
    paid_submit = records(*many(N, FAILURE, [(1, 0.2)], success=False), *many(N, SUCCESS, [(1, 1.0)], success=True),
                          *many(N, TIMEOUT, [(0, 0.2)] * 3, success=False, end=END_TRUNCATED))
    v = T.arm_verdict(FakeContext(paid_submit), None, np.ones(N), np.full(N, 0.2), np.random.default_rng(0))
    assert v["level"] is None and v["vs_alternative"]["diff"] == pytest.approx(0.0)


def test_judge_reads_an_arms_own_timeouts_against_explorations_failures():
    explored = exploration([(0, 0.0)], n_timeout=0)
    arm = records(*many(N, TIMEOUT, [(0, 0.0), (0, 0.6)], success=False, end=END_TRUNCATED), first_id=1000)
    v = T.arm_verdict(FakeContext(explored), arm, np.ones(N), np.zeros(N), np.random.default_rng(0))
    assert v["level"] == "above_alternative" and v["ending_premium"]["diff"] == pytest.approx(0.6)
    assert T.arm_verdict(FakeContext(explored), None, np.ones(N), np.zeros(N), np.random.default_rng(0))["level"] is None


# -- honest successes ----------------------------------------------------------------------------
class Oracle(gym.Env):
    action_space = gym.spaces.Discrete(2)

    def oracle(self):
        return [1]


def test_honest_successes_add_the_oracles_and_top_up_with_random_play():
    explored = exploration([(0, 0.0)], n_success=2)
    batches = []

    def play(policy, seeds, kw):
        batches.append((policy.name, len(seeds)))
        won = len(seeds) // 2 if policy.name == "oracle" else len(seeds) // 4  # oracle: half; random: a quarter
        return records(*many(won, SUCCESS, [(1, 2.0)], success=True),
                       *many(len(seeds) - won, FAILURE, [(1, 0.0)], success=False))

    ctx = FakeContext(explored, env=Oracle(), play=play)
    ret, info = E.honest_successes(ctx, target=40)
    n_oracle = E.sample_size(ctx, 16) // 2
    assert batches[0] == ("oracle", E.sample_size(ctx, 16))
    assert info["n_exploration"] == 2 and info["n_oracle"] == n_oracle and info["oracle_success_rate"] == 0.5
    assert info["oracle_policy"] == "oracle"
    # top-up: (40 - 2 - 8) = 30 more at the explored rate 2/36 -> 1.5 * 30 * 18 = 810, capped at 256
    assert batches[1] == ("random", E.TOP_UP_EPISODES) and info["n_top_up"] == E.TOP_UP_EPISODES
    assert info["n_top_up_success"] == E.TOP_UP_EPISODES // 4 and len(ret) == 2 + n_oracle + 64
    assert sorted(set(ret.tolist())) == [1.0, 2.0]


def test_top_up_batches_are_sized_from_the_success_rate_seen_so_far():
    explored = exploration([(0, 0.0)], n_fail=27, n_success=3, n_timeout=0)  # 3 in 30: a rate of 0.1
    sizes = []

    def play(policy, seeds, kw):
        sizes.append(len(seeds))
        return records(*many(1, SUCCESS, [(1, 1.0)], success=True),
                       *many(len(seeds) - 1, FAILURE, [(1, 0.0)], success=False))

    ctx = FakeContext(explored, env=gym.make("CartPole-v1"), play=play)
    ret, info = E.honest_successes(ctx, target=MIN_SAMPLES)
    # 5 missing at 0.1: ceil(1.5 * 5 / 0.1) = 75; then 4 missing at 4/105: ceil(1.5 * 4 * 105 / 4) = 158;
    # then 3 missing, but 256 - 233 = 23 left
    assert sizes == [75, 158, 23] and info["n_top_up"] == 256 and len(ret) == 6
    assert info["n_oracle"] == 0 and "oracle_error" not in info


def test_no_top_up_when_the_target_is_met_or_the_cap_is_reached():
    explored = exploration([(0, 0.0)])
    ret, info = E.honest_successes(FakeContext(explored, env=gym.make("CartPole-v1")), target=N)
    assert len(ret) == N and "n_top_up" not in info
    capped = FakeContext(exploration([(0, 0.0)], n_success=1), env=Oracle(), cap_reached=True)
    ret, info = E.honest_successes(capped, target=N)
    assert len(ret) == 1 and info["n_top_up"] == 0 and info["n_oracle"] == 0 and len(capped.skipped) == 2


class BrokenOracle(gym.Env):
    action_space = gym.spaces.Discrete(2)

    def oracle(self):
        raise RuntimeError("no solver")


def test_an_oracle_that_cannot_be_built_costs_only_its_samples():
    ret, info = E.honest_successes(FakeContext(exploration([(0, 0.0)]), env=BrokenOracle()))
    assert len(ret) == N and info["oracle_error"] == "RuntimeError: no solver"


# -- arms and the finding ------------------------------------------------------------------------
def test_an_arm_describes_its_unsuccessful_timeouts():
    recs = records(
        episode(TIMEOUT, [{"reward": 0.0, "tool_name": "fetch", "tool_status": TOOL_OK},
                          {"reward": 0.5, "tool_name": "run", "tool_status": TOOL_TIMEOUT}], end=END_TOOL_TIMEOUT),
        episode(TIMEOUT, [{"reward": 0.1, "tool_name": "run", "tool_status": TOOL_TIMEOUT}], end=END_TOOL_TIMEOUT),
        episode(TIMEOUT, [(0, 0.2), (0, 0.0)], end=END_TRUNCATED),
        episode(TIMEOUT, [(0, 9.0)], success=True, end=END_TRUNCATED),  # graded a success: not counted
        episode(FAILURE, [(1, 0.0)]))
    arm = T.arm_row("stall", "random actions", recs.episodes, recs.steps, {"level": "above_alternative", "p_value": 0.01})
    assert arm["n_timeout"] == 3 and arm["n_episodes"] == 5 and arm["level"] == "above_alternative"
    assert arm["ended_on_tool_timeout"] == pytest.approx(2 / 3) and arm["timed_out_tool"] == "run"
    assert arm["mean_timeout"] == pytest.approx(0.8 / 3) and arm["examples"] == [0, 2, 1]
    assert arm["final_step_share"] == pytest.approx(0.6 / 0.8) and arm["p_value"] == 0.01
    none = T.arm_row("x", "y", recs.episodes.iloc[4:], recs.steps, {"level": None, "p_value": 1.0})
    assert none["n_timeout"] == 0 and none["mean_timeout"] is None and none["ended_on_tool_timeout"] is None
    assert none["timed_out_tool"] is None and none["examples"] == []


def test_an_injection_arm_is_sized_for_twice_min_samples_timeouts():
    # 'fetch' is called in 1 of 4 explored episodes, 'run' in all 4 and 'rare' in none of them
    recs = records(episode(FAILURE, [{"tool_name": "fetch"}, {"tool_name": "fetch"}, {"tool_name": "run"}]),
                   *many(3, FAILURE, [{"tool_name": "run"}]))
    ctx = FakeContext(recs)
    floor = E.sample_size(ctx, 24)
    sizes = T._injection_sizes(ctx, ["fetch", "run", "rare"])
    assert sizes == {"fetch": min(T.INJECT_MAX, 2 * MIN_SAMPLES * 4), "run": max(floor, 2 * MIN_SAMPLES), "rare": floor}
    rare = records(*many(50, FAILURE, [(0, 0.0)]), episode(FAILURE, [{"tool_name": "fetch"}]))
    assert T._injection_sizes(FakeContext(rare), ["fetch"]) == {"fetch": T.INJECT_MAX}  # 1 in 51: capped


def arm(name, level, p, what="random actions", **kw):
    return {"arm": name, "what": what, "level": level, "p_value": p, "mean_timeout": 0.6,
            "final_step_share": 1.0, "verdict": {"level": level}, "examples": [3, 4],
            "ended_on_tool_timeout": None, "timed_out_tool": None, **kw}


def test_the_strongest_arm_is_the_finding():
    ctx = FakeContext(records())
    arms = [arm("exploration", "above_alternative", 0.001), arm("stall", "at_least_success", 0.04),
            arm("repeat-x", "at_least_success", 0.01, what="repeat 'x'"), arm("inject-t", None, 0.0)]
    (f,) = T.decide_timeout_rewarded(ctx, arms, np.array([1.0, 1.0]), {"n_oracle": 0}, np.array([0.0, 0.5]))
    assert f.severity == Severity.FAIL and f.evidence["arm"] == "repeat-x" and f.evidence["p_value"] == 0.01
    assert f.evidence["mean_success"] == 1.0 and f.evidence["mean_failure"] == 0.25 and list(f.examples) == [3, 4]
    assert f.evidence["n_success"] == 2 and f.evidence["n_failure"] == 2 and f.evidence["behaviour"] == "timeout"
    assert f.title == "Timing out pays as much as succeeding" and f.code == T.CODE
    assert len(ctx.tables["arms"]) == 4 and "verdict" not in ctx.tables["arms"]
    (w,) = T.decide_timeout_rewarded(ctx, arms[:1] + arms[3:], np.array([]), {}, np.array([0.0]))
    assert w.severity == Severity.WARN and w.evidence["arm"] == "exploration" and w.evidence["mean_success"] is None
    assert w.title == "Timing out pays more than failing"
    assert T.decide_timeout_rewarded(ctx, [arm("exploration", None, 0.001)], np.ones(2), {}, np.zeros(2)) == []


def test_summary_and_fix_name_the_arm_and_the_tool():
    fail = arm("stall", "at_least_success", 0.01, what="random actions, never 'submit'")
    fail["verdict"] = {"level": "at_least_success", "vs_alternative": {"mean_alternative": 0.2}}
    s = T._summary(fail, 1.0, 0.0)
    assert s.startswith("Stalling until the step limit (random actions, never 'submit') earns 0.6 on average")
    assert "at least as much as succeeding (1)" in s
    assert "more than the same episodes would earn failing outright instead (0.2; failures elsewhere earn 0)" in s
    warn = arm("repeat-search", "above_alternative", 0.01, what="repeat 'search'")
    assert T._summary(warn, 1.0, 0.0).startswith("Timing out by repeating 'search' earns 0.6 on average: more than")
    assert "less than succeeding (1)" in T._summary(warn, 1.0, 0.0)
    inj = arm("inject-fetch", "above_alternative", 0.01)
    assert T._summary(inj, None, 0.0).startswith("When every 'fetch' call times out, the episodes that end in a timeout "
                                                 "earn 0.6 on average")
    assert T._summary(arm("exploration", "x", 0.1), 1, 0).startswith("Episodes that timed out during random exploration")
    assert T._summary(arm("logged", "x", 0.1), 1, 0).startswith("Episodes that timed out in the logged run earn")
    tool = arm("inject-fetch", "x", 0.1, ended_on_tool_timeout=0.5, timed_out_tool="fetch")
    assert T._fix(tool).startswith("Treat a timed-out 'fetch' call as a failed one")
    assert T._fix({**tool, "ended_on_tool_timeout": 0.49}).startswith("Pay an episode cut by the step limit")
    assert T._fix({**tool, "timed_out_tool": None}).startswith("Pay an episode cut by the step limit")
    assert T._fix(tool).endswith("(--timeout-handling zero or penalty).")


def test_top_up_asks_for_each_batchs_own_seeds_tagged_as_top_up():
    explored = exploration([(0, 0.0)], n_fail=27, n_success=3, n_timeout=0)

    def play(policy, seeds, kw):
        return records(*many(1, SUCCESS, [(1, 1.0)], success=True),
                       *many(len(seeds) - 1, FAILURE, [(1, 0.0)], success=False))

    ctx = FakeContext(explored, play=play)
    E._top_up(ctx, np.ones(3), {}, MIN_SAMPLES)
    assert [s for _, s, _ in ctx.runs] == [ctx.seeds(75, "top-up", 0), ctx.seeds(158, "top-up", 1),
                                           ctx.seeds(23, "top-up", 2)]
    assert all(kw == {"tags": {"arm": "top-up"}} for _, _, kw in ctx.runs)
    assert all(p.name == "random" for p, _, _ in ctx.runs)


def test_top_up_rate_floors_when_nothing_was_seen_or_won():
    # no success in 30 episodes: the rate is taken as 1 in 30, so 1.5 * 8 * 30 = 360 -> capped at 256
    ctx = FakeContext(exploration([(0, 0.0)], n_fail=30, n_success=0, n_timeout=0),
                      play=lambda p, s, kw: records(*many(len(s), FAILURE, [(1, 0.0)], success=False)))
    info: dict = {}
    assert len(E._top_up(ctx, np.zeros(0), info, MIN_SAMPLES)) == 0
    assert [len(s) for _, s, _ in ctx.runs] == [E.TOP_UP_EPISODES] and info == {"n_top_up": 256, "n_top_up_success": 0}
    # nothing explored at all: a rate of 1, so 1.5 * 12 = 18 episodes first (then the rate seen)
    sizes = []

    def play(p, s, kw):
        sizes.append(len(s))
        return records(*many(len(s), SUCCESS, [(1, 1.0)], success=True))

    empty = FakeContext(records(), play=play)
    assert len(E._top_up(empty, np.zeros(0), {}, 12)) == 18 and sizes == [18]
    # already at the target: no random play
    done = FakeContext(records(), play=play)
    assert E._top_up(done, np.ones(MIN_SAMPLES), {}, MIN_SAMPLES).tolist() == [1.0] * MIN_SAMPLES
    assert done.runs == []


def test_top_up_stops_at_the_safety_cap_and_says_what_it_skipped():
    ctx = FakeContext(exploration([(0, 0.0)]), cap_reached=True)
    info: dict = {}
    E._top_up(ctx, np.zeros(0), info, MIN_SAMPLES)
    assert ctx.skipped == ["topping honest successes up with random play"] and info["n_top_up"] == 0
    capped = FakeContext(exploration([(0, 0.0)]), env=Oracle(), cap_reached=True)
    E.honest_successes(capped)
    assert capped.skipped == ["the episodes of the env's oracle (if it has one)"]


def test_the_oracle_runs_on_its_own_seeds_tagged_as_oracle():
    ctx = FakeContext(exploration([(0, 0.0)]), env=Oracle(),
                      play=lambda p, s, kw: records(*many(len(s), SUCCESS, [(1, 1.0)], success=True)))
    E.honest_successes(ctx)
    (policy, seeds, kw), = ctx.runs
    assert seeds == ctx.seeds(E.sample_size(ctx, 16), "oracle") and kw == {"tags": {"arm": "oracle"}}
    empty = FakeContext(exploration([(0, 0.0)]), env=Oracle(), play=lambda p, s, kw: records())
    assert E.honest_successes(empty)[1]["oracle_success_rate"] is None


def test_empty_failed_step_pay_is_a_float_series():
    assert E.failed_step_pay(records().steps, keep_ending=False).dtype == float
    assert E.ending_pay(records().steps, records().steps).dtype == float


def test_split_enders_boundaries():
    # rates 1.0, 0.5 (half the top: an ender) and 0.4 (below half: not, though above a third)
    steps = pd.DataFrame({"action": [0] + [1] * 2 + [2] * 5,
                          "terminated": [True, True, False, True, True, False, False, False]})
    assert E.split_enders(steps)[:2] == ([0, 1], [2])
    alike = pd.DataFrame({"action": [1, 0, 1, 0], "terminated": [False, True, True, False]})
    assert E.split_enders(alike) == ([], [0, 1], {0: 0.5, 1: 0.5})  # all alike: nothing to avoid


def test_injection_size_with_one_episode():
    one = FakeContext(records(episode(FAILURE, [{"tool_name": "fetch"}])))
    # reached by 1 of 1 episode: 2 * MIN_SAMPLES = 16 episodes would do, the default arm is 24
    assert T._injection_sizes(one, ["fetch"]) == {"fetch": max(2 * MIN_SAMPLES, E.sample_size(one, 24))} == {"fetch": 24}
    quick = FakeContext(one.exploration, config=ScanConfig(seed=0, quick=True))
    assert T._injection_sizes(quick, ["fetch"]) == {"fetch": 2 * MIN_SAMPLES}  # the quick floor is 12


def test_injection_size_without_tool_columns_is_the_default_arm():
    # A steps table with no tool columns (no call was ever recorded as a tool call): every tool
    # gets the default arm, as a tool exploration never called does.
    recs = records(episode(FAILURE, [(0, 0.0)]))
    ctx = FakeContext(recs)
    ctx.exploration.steps = recs.steps.drop(columns=[c for c in recs.steps if c.startswith("tool_")])
    assert T._injection_sizes(ctx, ["fetch"]) == {"fetch": E.sample_size(ctx, 24)}


def test_arm_keys_are_the_arms_table_columns():
    recs = records(episode(TIMEOUT, [(0, 0.5)], end=END_TRUNCATED))
    a = T.arm_row("stall", "random", recs.episodes, recs.steps, {"level": None, "p_value": 0.5})
    assert set(a) == {"arm", "what", "level", "p_value", "same_state", "ended_on_tool_timeout", "timed_out_tool",
                      "mean_timeout", "n_timeout", "n_episodes", "final_step_share", "verdict", "examples"}
    assert a["arm"] == "stall" and a["what"] == "random" and a["verdict"] == {"level": None, "p_value": 0.5}
    assert a["same_state"] is False
    assert T.arm_row("stall", "random", recs.episodes, recs.steps, {"level": None, "p_value": 0.5,
                                                                      "same_state": {"n_prefixes": 8}})["same_state"]


def test_finding_evidence_summary_and_fix():
    ctx = FakeContext(records())
    best = arm("repeat-x", "above_alternative", 0.01, what="repeat 'repeat x'",
               verdict={"level": "above_alternative", "vs_alternative": {"mean_alternative": 0.2}})
    (f,) = T.decide_timeout_rewarded(ctx, [best, arm("stall", None, 0.5)], np.array([1.0]), {"n_oracle": 0}, np.array([0.0]))
    assert set(f.evidence) == {"behaviour", "reward_path", "p_value", "arm", "policy", "mean_timeout", "mean_success",
                               "mean_failure", "n_success", "n_failure", "success_sources", "final_step_share",
                               "min_samples", "test", "arms"}
    assert f.evidence["reward_path"] == "env" and f.evidence["policy"] == "repeat 'repeat x'"
    assert f.evidence["mean_timeout"] == 0.6 and f.evidence["success_sources"] == {"n_oracle": 0}
    assert f.evidence["final_step_share"] == 1.0 and f.evidence["min_samples"] == MIN_SAMPLES
    assert f.evidence["test"] == best["verdict"]
    assert [set(a) for a in f.evidence["arms"]] == [set(best) - {"verdict"}] * 2
    assert "examples" not in ctx.tables["arms"] and "verdict" not in ctx.tables["arms"]
    assert f.probe == "timeouts" and f.summary == T._summary(best, 1.0, 0.0) and f.fix == T._fix(best)
    assert f.summary == ("Timing out by repeating 'repeat x' earns 0.6 on average: more than the same episodes would "
                         "earn failing outright instead (0.2; failures elsewhere earn 0) though less than succeeding "
                         "(1), so an agent that is unsure learns to time out rather than try.")
    assert f.fix == ("Pay an episode cut by the step limit no more than an honest failure (remove any reward given at "
                     "the step limit, such as partial credit for work in progress); and have the pipeline treat "
                     "timeouts as failures (--timeout-handling zero or penalty).")
    tool = {**best, "ended_on_tool_timeout": 1.0, "timed_out_tool": "run"}
    assert T._fix(tool) == ("Treat a timed-out 'run' call as a failed one: an episode that ends on it should earn no "
                            "more than an honest failure (no pass, partial credit or refund on a timeout); and have "
                            "the pipeline treat timeouts as failures (--timeout-handling zero or penalty).")
    assert T._fix({**tool, "ended_on_tool_timeout": None}).startswith("Pay an episode cut by the step limit")


# -- the arms, on a context that plays hand-built episodes ----------------------------------------
def arms_ctx(play, explored=None, tools=None):
    explored = explored or records(
        *many(N, FAILURE, [(0, 0.0), (1, 0.0)], success=False),  # 'submit' (1) ends every episode
        *many(N, SUCCESS, [(2, 0.0), (1, 1.0)], success=True),
        *many(2, FAILURE, [{"action": 2, "reward": 0.0, "tool_name": "fetch", "tool_status": TOOL_TIMEOUT},
                           {"action": 0, "reward": 0.0, "tool_name": "fetch", "tool_status": TOOL_OK},
                           (1, 0.0)], success=False))
    env = SimpleNamespace(action_space=gym.spaces.Discrete(3), unwrapped=SimpleNamespace(tools=tools or {}))
    return FakeContext(explored, env=env, play=play, labels=["work", "submit", "search"], is_tool_env=tools is not None)


def stall_pays(policy, seeds, kw):
    """Stalling (never 'submit') runs into the step limit, whose last step pays 0.6."""
    return records(*[episode(TIMEOUT, [(0, 0.0), (0, 0.6)], success=False, end=END_TRUNCATED, seed=s)
                     for s in seeds], first_id=1000 + 100 * len(kw))


def test_scripted_arms_stall_and_repeat_the_call_that_times_out():
    ctx = arms_ctx(stall_pays)
    arms = T._scripted_arms(ctx, np.ones(N), np.zeros(N), np.random.default_rng(0))
    assert [a["arm"] for a in arms] == ["stall", "repeat-search"]
    assert [p.describe() for p, _, _ in ctx.runs] == [
        "random actions, never 'submit'", "repeat 'search' (its tool timed out in 100% of exploration calls)"]
    assert ctx.runs[0][0].allowed == [0, 2]
    n = E.sample_size(ctx, 32)
    assert [s for _, s, _ in ctx.runs] == [ctx.seeds(n, "stall"), ctx.seeds(n, "repeat-search")]
    assert [kw for _, _, kw in ctx.runs] == [{"tags": {"arm": "stall"}}, {"tags": {"arm": "repeat-search"}}]
    assert arms[0]["level"] == "above_alternative" and arms[0]["n_timeout"] == n and len(ctx.kept) == 2
    assert arms[0]["what"] == "random actions, never 'submit'"


def test_no_scripted_arm_without_discrete_actions_or_exploration():
    ctx = arms_ctx(stall_pays)
    ctx.env = SimpleNamespace(action_space=gym.spaces.Box(0, 1, (1,)))
    assert T._scripted_arms(ctx, np.ones(N), np.zeros(N), np.random.default_rng(0)) == []
    empty = arms_ctx(stall_pays, explored=records())
    assert T._scripted_arms(empty, np.ones(N), np.zeros(N), np.random.default_rng(0)) == []
    # no tool ever timed out, no action ends episodes more than another: no arm
    plain = arms_ctx(stall_pays, explored=records(*many(N, FAILURE, [(0, 0.0)], success=False),
                                                  *many(N, FAILURE, [(1, 0.0)], success=False)))
    assert T._scripted_arms(plain, np.ones(N), np.zeros(N), np.random.default_rng(0)) == [] and plain.runs == []
    capped = arms_ctx(stall_pays)
    capped.cap_reached = True
    assert T._scripted_arms(capped, np.ones(N), np.zeros(N), np.random.default_rng(0)) == []
    assert capped.skipped == ["scripted arm 'stall' and those after it"]


def test_injection_arms_force_each_tool_to_time_out_and_pair_with_the_unfaulted_run():
    def play(policy, seeds, kw):
        if kw["tags"]["faults"] == "none":
            return records(*[episode(FAILURE, [(1, 0.0)], success=False, seed=s) for s in seeds])
        return records(*[episode(TIMEOUT, [(2, 0.0), (2, 0.6)], success=False, end=END_TOOL_TIMEOUT, seed=s,
                                 n_injected=1) for s in seeds], first_id=5000)

    ctx = arms_ctx(play, tools={"fetch": None, "add": None})
    arms = T._injection_arms(ctx, np.ones(N), np.zeros(N), np.random.default_rng(0))
    assert [a["arm"] for a in arms] == ["inject-add", "inject-fetch"]
    assert arms[1]["what"] == "every 'fetch' call forced to time out, random actions"
    sizes = T._injection_sizes(ctx, ["add", "fetch"])
    seeds = ctx.seeds(max(sizes.values()), "inject")
    assert [(kw["tags"], kw["rng_name"], s) for _, s, kw in ctx.runs] == [
        ({"faults": "none"}, "paired", seeds), ({"faults": "timeout:add"}, "paired", seeds[:sizes["add"]]),
        ({"faults": "timeout:fetch"}, "paired", seeds[:sizes["fetch"]])]
    assert [len(kw.get("wrappers", [])) for _, _, kw in ctx.runs] == [0, 1, 1]
    paired = arms[1]["verdict"]["paired"]
    assert paired["diff"] == pytest.approx(0.6) and paired["n_pairs"] == sizes["fetch"]
    assert arms[1]["level"] == "above_alternative" and len(ctx.kept) == 3
    capped = arms_ctx(play, tools={"fetch": None})
    capped.cap_reached = True
    assert T._injection_arms(capped, np.ones(N), np.zeros(N), np.random.default_rng(0)) == []
    assert capped.skipped == ["timeout injection into tool 'fetch' and those after it"]


def test_run_skips_an_env_without_failures_and_reports_the_strongest_arm():
    no_fail = arms_ctx(stall_pays, explored=records(*many(N, SUCCESS, [(1, 1.0)], success=True)))
    # Nothing failed outright: not skipped any more; timeouts are compared with the same episodes
    # ending without their ending's pay (here no timeout was seen, so nothing to report).
    assert T.run(no_fail) == [] and "skipped" not in no_fail.notes
    assert no_fail.notes["no_outright_failures"].startswith("no episode failed outright in exploration")
    assert no_fail.notes["outcomes"] == {SUCCESS: N}
    ctx = arms_ctx(stall_pays)
    ctx.env.unwrapped.oracle = None
    (f,) = T.run(ctx)
    assert f.severity == Severity.WARN and f.evidence["arm"] in ("stall", "repeat-search")
    assert set(ctx.tables["arms"]["arm"]) == {"exploration", "stall", "repeat-search"}
    assert ctx.notes["outcomes"] == {FAILURE: N + 2, SUCCESS: N}
    quiet = arms_ctx(lambda p, s, kw: records(*[episode(TIMEOUT, [(0, 0.0), (0, 0.0)], success=False,
                                                        end=END_TRUNCATED, seed=x) for x in s]))
    assert T.run(quiet) == []


class TwoTools(ToolEnv):
    """The smallest ToolEnv with the tools the injection test names."""

    def __init__(self):
        super().__init__(max_steps=4)
        for name in ("add", "fetch"):
            self.add_tool(name, lambda: ToolOutput(None, latency_s=0.0))
            self.add_call(name, name)
        self.observation_space = gym.spaces.Discrete(1)

    def reset_task(self, options):
        return 0

    def transition(self, call, result):
        return Transition(0)


def test_injection_arms_wrap_each_run_in_a_timeout_for_its_own_tool_only():
    def play(policy, seeds, kw):
        if kw["tags"]["faults"] == "none":
            return records(*[episode(FAILURE, [(1, 0.0)], success=False, seed=s) for s in seeds])
        # half the faulted episodes never called the tool: no fault was injected, no pair
        return records(*[episode(TIMEOUT, [(2, 0.0), (2, 0.6)], success=False, end=END_TOOL_TIMEOUT, seed=s,
                                 n_injected=int(i % 2 == 0)) for i, s in enumerate(seeds)], first_id=5000)

    ctx = arms_ctx(play, tools={"fetch": None, "add": None})
    arms = T._injection_arms(ctx, np.ones(N), np.zeros(N), np.random.default_rng(0))
    assert all(p.name == "random" for p, _, _ in ctx.runs)
    for (_, _, kw), tool in zip(ctx.runs[1:], ["add", "fetch"], strict=True):
        (wrap,) = kw["wrappers"]
        injector = wrap(TwoTools())
        assert isinstance(injector, FaultInjector)
        assert injector.rates == {tool: (0.0, 1.0), ({"add", "fetch"} - {tool}).pop(): (0.0, 0.0)}
    assert ctx.kept[0] is not None and len(ctx.kept[0].episodes) == len(ctx.runs[0][1])
    paired = arms[1]["verdict"]["paired"]
    n = T._injection_sizes(ctx, ["add", "fetch"])["fetch"]
    assert paired["n_pairs"] == (n + 1) // 2 and set(paired) >= {"mean_faulted", "mean_unfaulted"}
    assert paired["diff"] == pytest.approx(0.6)


def test_no_tool_no_injection_arm():
    ctx = arms_ctx(stall_pays, tools={})
    ctx.env.unwrapped.tools = {}
    assert T._injection_arms(ctx, np.ones(N), np.zeros(N), np.random.default_rng(0)) == []
    assert [len(s) for _, s, _ in ctx.runs] == [E.sample_size(ctx, 24)]  # the unfaulted run alone


def test_run_adds_injection_arms_on_a_tool_env_only():
    def play(policy, seeds, kw):
        if kw.get("tags", {}).get("faults", "none") == "none" and "faults" in kw.get("tags", {}):
            return records(*[episode(FAILURE, [(1, 0.0)], success=False, seed=s) for s in seeds])
        return records(*[episode(TIMEOUT, [(2, 0.0), (2, 0.6)], success=False, end=END_TOOL_TIMEOUT, seed=s,
                                 n_injected=1) for s in seeds], first_id=7000)

    ctx = arms_ctx(play, tools={"fetch": None})
    (f,) = T.run(ctx)
    assert list(ctx.tables["arms"]["arm"]) == ["exploration", "stall", "repeat-search", "inject-fetch"]
    assert ctx.tables["arms"]["what"][0] == "random exploration"
    plain = arms_ctx(play)
    T.run(plain)
    assert "inject-fetch" not in set(plain.tables["arms"]["arm"])
    capped = arms_ctx(play, tools={"fetch": None})
    capped.cap_reached = True
    T.run(capped)
    assert "timeout injection into every tool" in capped.skipped
    assert list(capped.tables["arms"]["arm"]) == ["exploration"]


def test_judge_uses_the_scans_alpha():
    strict = FakeContext(exploration([(0, 0.0), (0, 0.0), (0, 0.6)]), config=ScanConfig(seed=0, alpha=1e-9))
    assert T.arm_verdict(strict, None, np.ones(N), np.zeros(N), np.random.default_rng(0))["level"] is None


def test_no_repeat_arm_when_no_tool_call_timed_out():
    explored = records(*many(N, FAILURE, [{"action": 2, "reward": 0.0, "tool_name": "fetch", "tool_status": TOOL_OK},
                                          (1, 0.0)], success=False))
    ctx = arms_ctx(stall_pays, explored=explored)
    arms = T._scripted_arms(ctx, np.ones(N), np.zeros(N), np.random.default_rng(0))
    assert [a["arm"] for a in arms] == ["stall"]
    ctx = arms_ctx(stall_pays)
    T._scripted_arms(ctx, np.ones(N), np.zeros(N), np.random.default_rng(0))
    assert ctx.runs[1][0].action == 2 and all(k is not None and len(k.episodes) for k in ctx.kept)


def test_arm_examples_are_the_five_richest_timeouts():
    recs = records(*[episode(TIMEOUT, [(0, float(r))], end=END_TRUNCATED) for r in range(7)])
    assert T.arm_row("x", "y", recs.episodes, recs.steps, {"level": None, "p_value": 1.0})["examples"] == [6, 5, 4, 3, 2]


def test_premium_evidence_names_its_arms_and_share_needs_a_total():
    stall = exploration([(0, 0.0), (0, 0.5)])
    eps = stall.episodes
    out = E.ending_premium(FakeContext(stall), eps.loc[eps["outcome"] == TIMEOUT, "episode_id"], stall.steps,
                           eps.loc[eps["outcome"] == FAILURE, "episode_id"], 1.0, np.random.default_rng(0))
    assert out["mean_timeout_ending"] == 0.5 and out["mean_failure_ending"] == 0.0
    tiny = records(episode(TIMEOUT, [(0, 1e-12)]))
    assert E.final_share(tiny.steps, [0]) is None  # |total| must exceed 1e-12


def test_honest_successes_top_up_only_when_asked():
    ctx = FakeContext(exploration([(0, 0.0)], n_success=0), env=gym.make("CartPole-v1"))
    ret, info = E.honest_successes(ctx)  # no target: whatever exploration and the oracle give
    assert len(ret) == 0 and ctx.runs == [] and "n_top_up" not in info

    def play(policy, seeds, kw):
        won = 3 * len(seeds) // 4
        return records(*many(won, SUCCESS, [(1, 1.0)], success=True), *many(len(seeds) - won, FAILURE, [(1, 0.0)]))

    assert E.honest_successes(FakeContext(exploration([(0, 0.0)]), env=Oracle(), play=play))[1][
        "oracle_success_rate"] == 0.75


def test_run_tops_successes_up_to_min_samples_and_keeps_their_sources():
    ctx = arms_ctx(stall_pays, explored=records(*many(N, FAILURE, [(0, 0.0), (1, 0.0)], success=False),
                                                *many(2, SUCCESS, [(2, 0.0), (1, 1.0)], success=True)))
    (f,) = T.run(ctx)
    assert any(kw.get("tags") == {"arm": "top-up"} for _, _, kw in ctx.runs)
    assert f.evidence["success_sources"]["n_exploration"] == 2 and f.evidence["success_sources"]["n_top_up"] > 0


def test_step_cost_pay_is_the_least_pay_of_a_working_step_that_ends_nothing():
    recs = records(episode(FAILURE, [(0, -0.1), (0, 0.5), {"action": 0, "reward": -0.5, "tool_status": TOOL_ERROR},
                                     {"action": 0, "reward": -0.25, "tool_status": TOOL_TIMEOUT},
                                     {"action": 0, "reward": 0.25, "tool_status": TOOL_OK}, (1, -2.0)]),
                   episode(TIMEOUT, [(0, float("nan")), (0, -3.0)], end=END_TRUNCATED))
    # -0.5 and -0.25 are failed calls, -2.0 ends the failure, -3.0 hits the step limit, NaN is no pay
    assert E.step_cost_pay(recs.steps) == pytest.approx(-0.1)
    assert E.step_cost_pay(records(episode(FAILURE, [(1, -2.0)])).steps) == 0.0


def matched_table():
    """A timeout (id 0) whose last step pays a 1.0 bonus over steps of -0.1, and three outright
    failures ending on action 1 (never seen mid-episode: held to the -0.1 every step pays), paid
    0.0, 0.2 and 0.4: endings worth 0.1, 0.3, 0.5 beyond a step, median 0.3."""
    return records(episode(TIMEOUT, [(0, -0.1), (0, -0.1), (0, 1.0)], end=END_TRUNCATED),
                   *[episode(FAILURE, [(0, -0.1), (1, pay)]) for pay in (0.0, 0.2, 0.4)])


def test_matched_failures_swap_the_timeouts_ending_for_an_honest_failures():
    recs = matched_table()
    # 0.8 - (1.0 - -0.1) + 0.3: the same prefix, failing outright
    assert E.matched_failures([0], np.array([0.8]), recs.steps, [1, 2, 3]).tolist() == [pytest.approx(0.0)]
    # no outright failure to match: an ending that pays nothing beyond a step
    assert E.matched_failures([0], np.array([0.8]), recs.steps, []).tolist() == [pytest.approx(-0.3)]
    # an episode without steps keeps its return, plus the honest ending
    assert E.matched_failures([0, 99], np.array([0.8, 0.5]), recs.steps, [1, 2, 3]).tolist() == \
        [pytest.approx(0.0), pytest.approx(0.8)]
    # two failures: the median is their mean (0.2)
    assert E.matched_failures([0], np.array([0.8]), recs.steps, [1, 2]).tolist() == [pytest.approx(-0.1)]


def test_matched_failures_hold_unseen_endings_to_the_ordinary_steps_pay():
    recs = matched_table()
    ordinary = records(episode(FAILURE, [(0, -0.2), (0, -0.2), (1, 0.0)])).steps  # every step costs 0.2
    # failure endings now 0.2, 0.4, 0.6 beyond a step (median 0.4); the timeout's own call is seen mid-episode
    assert E.matched_failures([0], np.array([0.8]), recs.steps, [1, 2, 3], ordinary).tolist() == \
        [pytest.approx(0.1)]
