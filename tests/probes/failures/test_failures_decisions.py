"""The failures probe's decision functions (``failures``, ``failure_charge``, ``failure_confirm``,
``failure_plain``) on hand-built tables whose answers are known.

What a failed call is charged (against the cheapest ordinary step and the same call working),
when that charge is significant after Holm, what a refund pays back, how many pairs the second
look needs (the textbook one-sided power formula), and which episodes show quitting after a
failure: each number follows from the table the test writes (``tests/fixtures/frames.py``).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.probes._shared import endings as E
from envaudit.probes.failures import charge as C
from envaudit.probes.failures import confirm as F
from envaudit.probes.failures import rewarded as R
from envaudit.probes.failures import sweep as P
from envaudit.probes.failures import text as FT
from envaudit.probes.failures.plain import natural_failure_rate, shortcut_exploration
from envaudit.probes.failures.text import FIX_SHORTCUT as FIX_PLAIN
from envaudit.protocol import END_TRUNCATED, FAILURE, SUCCESS, TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT
from envaudit.recording import Records
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.frames import FakeContext, episode, many, records

Z_975, Z_90 = 1.959964, 1.281552  # standard normal quantiles: one-sided alpha 0.025, power 0.9


def call(status, reward, tool="search", action=0, **kw):
    return {"action": action, "tool_name": tool, "tool_status": status, "reward": reward, **kw}


# -- failure_charge: the cheapest ordinary step --------------------------------------------------
def test_step_reference_is_the_cheapest_non_ending_step_that_did_not_fail():
    recs = records(episode(FAILURE, [call(TOOL_OK, 0.5), {"reward": -0.1}, call(TOOL_ERROR, -1.0),
                                     call(TOOL_TIMEOUT, -2.0), call(TOOL_OK, 0.0), {"reward": -5.0}]))
    assert E.step_reference(recs) == pytest.approx(-0.1)  # the -5 ends the episode; -1, -2 failed
    assert E.step_reference(records()) is None
    assert E.step_reference(records(episode(FAILURE, [call(TOOL_ERROR, -1.0), (1, 0.0)]))) is None


def test_exploration_charges_per_tool_and_fault():
    steps = records(
        *many(MIN_SAMPLES + 4, FAILURE, [call(TOOL_ERROR, -1.0), call(TOOL_OK, -0.5), {"reward": -0.1},
                                         call(TOOL_TIMEOUT, -0.1, tool="fetch"), call(TOOL_OK, -0.1, tool="fetch"),
                                         call(TOOL_ERROR, -100.0)])).steps  # the last ends the episode: left out
    fee = C.exploration_charges(steps, -0.1, np.random.default_rng(0), 0.05)
    # 'search' errors pay 0.9 less than the cheapest step, 0.5 less than 'search' working: charged 0.5
    assert fee["charged"] and fee["source"] == "exploration" and fee["step_reward_reference"] == -0.1
    assert fee["charge_per_failure"] == {"search (error)": pytest.approx(0.5)}
    assert fee["max_charge"] == pytest.approx(0.5)
    t = fee["tests"]["search (error)"]
    assert t["mean_failed"] == -1.0 and t["below_cheapest_step"] == pytest.approx(0.9) and t["n"] == MIN_SAMPLES + 4
    assert t["ok_minus_failed"] == pytest.approx(0.5) and t["p_holm"] == pytest.approx(2 * t["p_value"])
    # 'fetch' timeouts pay what every step pays: no charge, and never tested as a charge
    assert fee["tests"]["fetch (timeout)"]["below_cheapest_step"] == pytest.approx(0.0)
    assert set(fee["tests"]) == {"search (error)", "fetch (timeout)"}  # no 'search (timeout)' was seen


def test_a_tool_never_seen_working_is_judged_against_the_cheapest_step_alone():
    steps = records(*many(MIN_SAMPLES, FAILURE, [call(TOOL_TIMEOUT, -1.0), {"reward": 0.0}])).steps
    fee = C.exploration_charges(steps, 0.0, np.random.default_rng(0), 0.05)
    assert fee["charge_per_failure"] == {"search (timeout)": pytest.approx(1.0)}
    assert fee["tests"]["search (timeout)"]["ok_minus_failed"] is None


def test_injected_charges_name_the_call_and_pair_failed_with_ok():
    pairs = {(0, TOOL_ERROR): ([-1.0] * 12, [(-1.0, -0.25)] * 12),
             (5, TOOL_TIMEOUT): ([0.0] * 12, [(0.0, 0.0)] * 12),
             (-1, TOOL_ERROR): ([0.0] * 12, [])}
    fee = C.injected_charges(pairs, 0.0, ["search", "answer"], np.random.default_rng(0), 0.05)
    assert set(fee["tests"]) == {"search (error)", "5 (timeout)", "-1 (error)"}
    assert fee["source"] == "fault injection" and fee["charge_per_failure"] == {"search (error)": pytest.approx(0.75)}
    assert fee["tests"]["-1 (error)"]["ok_minus_failed"] is None
    assert set(C.injected_charges(pairs, 0.0, None, np.random.default_rng(0), 0.05)["tests"]) == {
        "0 (error)", "5 (timeout)", "-1 (error)"}


def test_test_compares_failed_steps_with_the_reference_up_to_float_noise():
    rng = np.random.default_rng(0)
    t = C._test([-0.1 + 1e-12] * 10, [], -0.1, rng)
    assert t["p_value"] == 1.0 and t["ok_minus_failed"] is None  # equal up to noise: no shortfall
    t = C._test([-0.1] * 10, [], -0.1 - 1e-12, rng)
    assert t["p_value"] == 1.0
    t = C._test([-1.0] * 10, [0.2, 0.4], None, rng)  # no reference: 0
    assert t["diff"] == pytest.approx(1.0) and t["ok_minus_failed"] == pytest.approx(0.3)
    assert t["p_value"] == pytest.approx(2.0 ** -10)  # all ten shortfalls positive: exact signed-rank


def decided(p=0.01, diff=0.9, ci=(0.5, 1.0), ok=None, under=False):
    return {"p_value": p, "diff": diff, "diff_ci": list(ci), "ok_minus_failed": ok, "underpowered": under,
            "mean_failed": None if diff is None else -diff, "n_pairs": 12}


def test_decide_charges_a_significant_shortfall_after_holm():
    d = C._decide({"a (error)": decided(p=0.05)}, 0.0, "x", 0.05)
    assert d["charged"] and d["tests"]["a (error)"]["p_holm"] == 0.05  # exactly alpha: rejected
    d = C._decide({"a (error)": decided(p=0.03), "b (error)": decided(p=0.03)}, 0.0, "x", 0.05)
    assert not d["charged"] and d["tests"]["a (error)"]["p_holm"] == pytest.approx(0.06)  # Holm: 2 x 0.03
    assert d["max_charge"] == 0.0 and d["charge_per_failure"] == {}
    d = C._decide({"a (error)": decided(p=0.01), "b (error)": decided(p=0.04, diff=2.0)}, 0.0, "x", 0.05)
    assert d["charge_per_failure"] == {"a (error)": 0.9, "b (error)": 2.0} and d["max_charge"] == 2.0


@pytest.mark.parametrize("case", [
    dict(ref=None), dict(diff=None), dict(under=True), dict(ci=(0.0, 1.0)), dict(ci=(-0.1, 1.0)),
    dict(ok=0.0), dict(ok=-0.3), dict(diff=1e-9), dict(p=0.051)])
def test_decide_leaves_out_what_is_no_charge(case):
    case = dict(case)  # the parameter is shared by every run of the test
    ref = case.pop("ref", 0.0)
    d = C._decide({"a (error)": decided(**case)}, ref, "x", 0.05)
    assert not d["charged"] and d["charge_per_failure"] == {}


def test_the_charge_is_the_smaller_of_the_two_gaps():
    assert C._decide({"a (error)": decided(ok=0.4)}, 0.0, "x", 0.05)["charge_per_failure"] == {"a (error)": 0.4}
    assert C._decide({"a (error)": decided(ok=2.0)}, 0.0, "x", 0.05)["charge_per_failure"] == {"a (error)": 0.9}
    assert C._decide({"a (error)": decided(ok=2e-9)}, 0.0, "x", 0.05)["charge_per_failure"] == {"a (error)": 2e-9}


def test_refunds_pay_back_what_a_failure_costs_beyond_the_cheapest_step():
    recs = records(episode(FAILURE, [call(TOOL_ERROR, -1.0), call(TOOL_TIMEOUT, -0.05), call(TOOL_OK, -3.0)], seed=7),
                   episode(SUCCESS, [call(TOOL_OK, 1.0)], seed=8),
                   episode(FAILURE, [call(TOOL_TIMEOUT, -0.6)], seed=9))
    owed = C.refunds(recs, -0.1)
    assert owed.tolist() == pytest.approx([0.9, 0.0, 0.5])  # the -0.05 failure cost nothing extra
    back = C.refunded_returns(recs, -0.1)
    assert list(back.columns) == ["seed", "return"] and back["seed"].tolist() == [7, 8, 9]
    assert back["return"].tolist() == pytest.approx([-4.05 + 0.9, 1.0, -0.6 + 0.5])


# -- failure_confirm: the second look ------------------------------------------------------------
def test_episodes_needed_follows_the_one_sided_power_formula():
    diffs = np.array([-0.5, 1.5] * 4)  # mean 0.5, sd sqrt(8 / 7)
    n = ((Z_975 + Z_90) * math.sqrt(8 / 7) / 0.25) ** 2
    assert F.episodes_needed(diffs, 0.025, floor=8) == math.ceil(n)
    assert F.episodes_needed(diffs, 0.025, floor=400) == 400
    assert F.episodes_needed(np.array([-3.0, 3.2] * 4), 0.025, floor=8) == F.CONFIRM_MAX_EPISODES
    assert F.episodes_needed(np.array([-1.0, 0.5] * 4), 0.025, floor=8) == 8  # favours persisting
    assert F.episodes_needed(np.array([0.0, 0.0]), 0.025, floor=8) == 8
    assert F.episodes_needed(np.full(4, 0.5), 0.025, floor=6) == 6  # no spread: nothing to plan from
    assert F.episodes_needed(np.array([0.5]), 0.025, floor=3) == 3


def pol(name):
    return SimpleNamespace(name=name)


def returns(seeds, short: bool):
    """'short' earns 0.5 at once; persisting earns 1, or -1 when a failed call charged it 2."""
    if short:
        return records(*[episode(FAILURE, [(1, 0.5)], seed=s) for s in seeds])
    return records(*[episode(SUCCESS, [call(TOOL_ERROR, -2.0), (1, 1.0)] if i % 2 else [(1, 1.0)], seed=s)
                     for i, s in enumerate(seeds)])


def test_second_look_runs_both_policies_on_the_fresh_seeds_it_planned():
    pilot_seeds = list(range(100, 108))
    ctx = FakeContext(records(), play=lambda p, seeds, kw: returns(seeds, p.name == "short"))
    look = F.second_look(ctx, pol("persist"), pol("short"), returns(pilot_seeds, True), returns(pilot_seeds, False), 0.0)
    n = math.ceil(((Z_975 + Z_90) * math.sqrt(8 / 7) / 0.25) ** 2)  # pilot diffs -0.5, 1.5: as above
    assert [(p.name, len(s)) for p, s, _ in ctx.runs] == [("short", n), ("persist", n)]
    assert ctx.runs[0][1] == ctx.runs[1][1]
    cmp = look["short"]
    assert cmp["second_look"] == {"n_pairs": n, "n_first_look": 8, "first_look_mean_diff": 0.5, "alpha": 0.025}
    assert cmp["diff"] == pytest.approx(0.5 - (n // 2 * 1.0 + (n - n // 2) * 1.0 - 2.0 * (n // 2)) / n)
    assert cmp["p_bonferroni"] == pytest.approx(min(1.0, 2 * cmp["p_value"]))
    # refunded, persisting earns 1 every time: the short strategy's edge was the charge
    assert cmp["diff_if_failures_cost_a_step"] == pytest.approx(-0.5)
    assert len(look["records"].episodes) == n and len(look["persist_records"].episodes) == n
    again = F.second_look(ctx, pol("persist"), pol("short"), returns(pilot_seeds, True), returns(pilot_seeds, False),
                          None)
    assert again["short"]["diff_if_failures_cost_a_step"] is None


def test_no_second_look_when_the_first_favours_persisting_or_the_cap_is_reached():
    seeds = list(range(8))
    ctx = FakeContext(records(), play=lambda p, s, kw: returns(s, p.name == "short"))
    same = F.second_look(ctx, pol("persist"), pol("short"), returns(seeds, True), returns(seeds, True), 0.0)
    assert same is None and ctx.runs == []  # a mean difference of 0: no favour
    assert F.second_look(ctx, pol("persist"), pol("short"), records(), records(), 0.0) is None
    capped = FakeContext(records(), play=ctx.play, cap_reached=True)
    assert F.second_look(capped, pol("persist"), pol("short"), returns(seeds, True), returns(seeds, False), 0.0) is None
    assert capped.runs == [] and len(capped.skipped) == 1


# -- failure_plain and failures ------------------------------------------------------------------
def test_natural_failure_rate_is_failed_calls_over_calls():
    eps = pd.DataFrame({"n_tool_calls": [4, 6], "n_tool_errors": [1, 0], "n_tool_timeouts": [0, 2]})
    assert natural_failure_rate(eps) == pytest.approx(0.3)
    assert natural_failure_rate(eps.assign(n_tool_calls=0)) == 0.0


def test_exploration_tests_compare_failed_and_ok_steps_of_one_action():
    recs = records(*many(6, FAILURE, [call(TOOL_OK, 0.0), call(TOOL_ERROR, 0.5), call(TOOL_OK, 0.0, action=1)]),
                   *many(6, FAILURE, [call(TOOL_OK, 0.0), call(TOOL_ERROR, -0.5), call(TOOL_TIMEOUT, 0.0, action=1)]),
                   episode(FAILURE, [call(TOOL_ERROR, 9.0, action="x")]))
    tests = R.exploration_tests(recs.steps, np.random.default_rng(0))
    assert set(tests) == {(0, TOOL_ERROR), (1, TOOL_TIMEOUT)}  # no error of 'x' (not an int), no ok-less pair
    t = tests[(0, TOOL_ERROR)]
    assert t["mean_failed"] == 0.0 and t["mean_ok"] == 0.0 and t["tool"] == "search"
    assert t["examples"] == [0, 1, 2] and t["source"] == "exploration"  # the errors that paid 0.5 > 0
    assert tests[(1, TOOL_TIMEOUT)]["examples"] == []


def test_charge_words_name_the_costliest_calls():
    fee = {"charge_per_failure": {"search (error)": 0.5, "search (timeout)": 0.9, "fetch (error)": 0.9,
                                  "a (error)": 0.1, "b (error)": 0.2}}
    assert FT.charge_words(fee) == ("each failed `fetch`, `search`, `b` and others call costs up to 0.9 beyond the "
                                    "step it takes")
    fee = {"charge_per_failure": {"run (x) (error)": 0.25}}
    assert FT.charge_words(fee) == "each failed `run (x)` call costs up to 0.25 beyond the step it takes"


def test_the_examples_of_quitting_are_episodes_that_quit_right_after_a_failure():
    recs = records(episode(FAILURE, [call(TOOL_ERROR, 0), (9, 0)]),  # 0: yes
                   episode(FAILURE, [(9, 0)]),  # 1: never failed
                   episode(FAILURE, [call(TOOL_OK, 0), (9, 0)]),  # 2: the call before worked
                   episode(FAILURE, [call(TOOL_TIMEOUT, 0), (9, 0)]),  # 3: yes
                   episode(FAILURE, [call(TOOL_ERROR, 0), call(TOOL_OK, 0)]),  # 4: did not quit
                   episode(FAILURE, [call(TOOL_ERROR, 0), (2, 0)]),  # 5: ended another way
                   episode(FAILURE, [call(TOOL_OK, 0), call(TOOL_ERROR, 0), (9, 0)]),  # 6: yes
                   episode(FAILURE, [call(TOOL_ERROR, 0), (9, 0)]))  # 7: yes, but the fourth
    shuffled = SimpleNamespace(steps=recs.steps.iloc[::-1], episodes=recs.episodes)
    assert P._quit_after_failure(shuffled, 9) == [0, 3, 6]
    assert P._quit_after_failure(recs, 9, n=5) == [0, 3, 6, 7]


def test_a_sweep_row_summarises_one_policy_at_one_rate():
    recs = records(episode(SUCCESS, [call(TOOL_ERROR, 0.0), call(TOOL_OK, 1.0)]), episode(FAILURE, [call(TOOL_OK, 0.0)]),
                   episode(FAILURE, [call(TOOL_TIMEOUT, 0.0), call(TOOL_OK, 0.0), (1, 0.5)]))
    policy = SimpleNamespace(name="persist", describe=lambda: "keep calling")
    row = P._row(0.2, policy, recs.episodes, np.random.default_rng(0))
    assert row["rate"] == 0.2 and row["policy"] == "persist" and row["description"] == "keep calling" and row["n"] == 3
    assert row["mean_return"] == pytest.approx(0.5) and row["success_rate"] == pytest.approx(1 / 3)
    assert row["mean_length"] == 2.0 and row["observed_failure_rate"] == pytest.approx(2 / 5)
    assert 0.0 <= row["ci_low"] <= 0.5 <= row["ci_high"] <= 1.0
    empty = P._row(0.0, policy, recs.episodes.iloc[0:0], np.random.default_rng(0))
    assert empty["n"] == 0 and math.isnan(empty["mean_return"]) and empty["observed_failure_rate"] == 0.0
    assert math.isnan(empty["ci_low"]) and math.isnan(empty["success_rate"]) and math.isnan(empty["mean_length"])


def test_paired_returns_are_matched_by_seed():
    a = records(*[episode(FAILURE, [(1, float(s))], seed=s) for s in range(10)])
    b = records(*[episode(FAILURE, [(1, float(s) - 0.5)], seed=s) for s in reversed(range(12))])
    t = P._paired(a, b, np.random.default_rng(0))
    assert t["n_pairs"] == 10 and t["diff"] == pytest.approx(0.5) and t["mean_short"] == pytest.approx(4.5)
    assert t["p_value"] == pytest.approx(2.0 ** -10)  # every pair +0.5: the t-test falls back to exact ranks


class Solver(gym.Env):
    action_space = gym.spaces.Discrete(2)

    def oracle(self):
        return [1]


def test_honest_success_prefers_the_oracles_successes():
    explored = records(*many(3, SUCCESS, [(1, 1.0)]), episode(FAILURE, [(1, 0.0)]))
    assert R.honest_success(FakeContext(explored), None) == (1.0, "successful exploration episodes")
    assert R.honest_success(FakeContext(records(episode(FAILURE, [(1, 0.0)]))), None) == (None, None)
    runs = SimpleNamespace(get=lambda policy, rate: records(*many(2, SUCCESS, [(1, 3.0)])))
    ctx = FakeContext(explored, env=Solver())
    assert R.honest_success(ctx, runs) == (3.0, "the env's oracle")
    failing = SimpleNamespace(get=lambda policy, rate: records(episode(FAILURE, [(1, 0.0)])))
    assert R.honest_success(ctx, failing) == (1.0, "successful exploration episodes")
    assert R.honest_success(ctx, SimpleNamespace(get=lambda p, r: None))[0] == 1.0  # the cap stopped it
    assert R.honest_success(FakeContext(explored, env=gym.make("CartPole-v1")), runs)[0] == 1.0  # no oracle


def test_a_scan_config_alpha_is_what_the_confirm_halves():
    assert ScanConfig(seed=0).alpha == 0.05


# -- failure_plain: the shortcut from exploration alone -------------------------------------------
FAIL_CALL = {"action": 0, "reward": -1.0, "tool_name": "search", "tool_status": TOOL_ERROR}
OK_CALL = {"action": 0, "reward": 0.0, "tool_name": "search", "tool_status": TOOL_OK}
CHARGED = {"charged": True, "step_reward_reference": 0.0}


def plain_env(n=MIN_SAMPLES + 2, persist_wins=False):
    """A failed call costs 1. After one, quitting (action 1) pays 0.5 at once; persisting works on
    and answers for 0 (or, ``persist_wins``, for 0.5 and a success)."""
    end = (2, 0.5) if persist_wins else (2, 0.0)
    return records(*many(n, FAILURE, [FAIL_CALL, (1, 0.5)], success=False),  # short: 0.5 after the failure
                   *many(n, SUCCESS if persist_wins else FAILURE, [FAIL_CALL, (3, 0.0), (3, 0.0), end],
                         success=persist_wins),
                   *many(n, FAILURE, [FAIL_CALL, (3, 0.0), FAIL_CALL, (3, 0.0), (2, 0.0)], success=False),
                   *many(n, SUCCESS, [OK_CALL, (2, 1.0)], success=True))


def test_plain_shortcut_when_quitting_after_a_charged_failure_pays_more():
    ctx = FakeContext(plain_env())
    (f,) = shortcut_exploration(ctx, CHARGED)
    assert f.code == "failure-shortcut" and f.severity == Severity.WARN  # no persisting episode succeeded
    e = f.evidence
    assert e["mean_after_failure_short"] == pytest.approx(0.5) and e["n_short"] == MIN_SAMPLES + 2
    assert e["mean_after_failure_persist"] == pytest.approx(-0.5) and e["n_persist"] == 2 * (MIN_SAMPLES + 2)
    assert e["failure_cost"] < 0 and e["failure_cost_ci"][1] < 0 and e["honest_after_failure_return"] is None
    assert e["failure_cost_model"] == "OLS of return on success, length, failures" and e["behaviour"] == "quit"
    assert e["natural_failure_rate"] == pytest.approx(4 / 5) and list(f.examples) == [0, 1, 2]
    won = shortcut_exploration(FakeContext(plain_env(persist_wins=True)), CHARGED)
    assert won[0].severity == Severity.FAIL and won[0].evidence["honest_after_failure_return"] == pytest.approx(0.5)


def test_no_plain_shortcut_without_a_charge_or_enough_episodes():
    ctx = FakeContext(plain_env())
    assert shortcut_exploration(ctx, {"charged": False}) == [] and "failure_shortcut" in ctx.notes
    assert shortcut_exploration(FakeContext(plain_env(n=MIN_SAMPLES - 1)), CHARGED) == []
    clean = records(*many(MIN_SAMPLES, SUCCESS, [OK_CALL, (2, 1.0)], success=True))
    assert shortcut_exploration(FakeContext(clean), CHARGED) == []  # no failed call at all
    assert shortcut_exploration(FakeContext(records()), CHARGED) == []
    # every episode fails once: the failure count does not vary, so its cost cannot be fitted
    same = records(*many(12, FAILURE, [FAIL_CALL, (1, 0.5)]), *many(12, FAILURE, [FAIL_CALL, (3, 0.0), (3, 0.0), (2, 0.0)]))
    assert shortcut_exploration(FakeContext(same), CHARGED) == []


def test_no_plain_shortcut_when_quitting_pays_no_more_than_persisting():
    recs = records(*many(10, FAILURE, [FAIL_CALL, (1, 0.0)]), *many(10, FAILURE, [FAIL_CALL, (3, 0.0), (3, 0.0), (2, 0.0)]),
                   *many(10, FAILURE, [FAIL_CALL, (3, 0.0), FAIL_CALL, (3, 0.0), (2, 1.0)]),
                   *many(10, SUCCESS, [OK_CALL, (2, 1.0)], success=True))
    assert shortcut_exploration(FakeContext(recs), CHARGED) == []


def test_injected_charges_label_bounds_and_reference():
    pairs = {(2, TOOL_ERROR): ([-1.0] * 12, [])}
    fee = C.injected_charges(pairs, -0.5, ["search", "answer"], np.random.default_rng(0), 0.05)
    assert set(fee["tests"]) == {"2 (error)"}  # index 2 is past the two labels
    assert fee["tests"]["2 (error)"]["below_cheapest_step"] == pytest.approx(0.5)  # against -0.5, not 0


def test_float_noise_below_1e9_is_no_shortfall():
    assert C._test([-0.1 + 2e-10] * 10, [], -0.1, np.random.default_rng(0))["p_value"] == 1.0
    assert C._test([-0.1] * 10, [], -0.1 + 2e-10, np.random.default_rng(0))["p_value"] == 1.0


def test_episodes_needed_edge_cases():
    # sd exactly 1 (0, 1, 2: mean 1): ((z + z') * 1 / 0.5)^2 = 42.03 -> 43
    assert F.episodes_needed(np.array([0.0, 1.0, 2.0]), 0.025, floor=3) == math.ceil(((Z_975 + Z_90) / 0.5) ** 2) == 43
    # two differences already have a spread: 0 and 1, sd 1/sqrt(2), mean 0.5
    assert F.episodes_needed(np.array([0.0, 1.0]), 0.025, floor=2) == math.ceil(((Z_975 + Z_90) * 2 ** -0.5 / 0.25) ** 2)
    assert F.episodes_needed(np.array([-1.0, 1.0] * 4), 0.025, floor=8) == 8  # a mean of exactly 0: no favour


def test_second_look_asks_for_its_own_seeds_tags_and_streams():
    pilot = list(range(100, 108))
    ctx = FakeContext(records(), play=lambda p, seeds, kw: returns(seeds, p.name == "short"))
    look = F.second_look(ctx, pol("persist"), pol("short"), returns(pilot, True), returns(pilot, False), 0.0)
    n = len(ctx.runs[0][1])
    assert ctx.runs[0][1] == ctx.seeds(n, "sweep", "second-look")
    assert [kw for _, _, kw in ctx.runs] == [
        {"tags": {"fault_rate": 0.0, "look": "second"}, "rng_name": "short@second-look"},
        {"tags": {"fault_rate": 0.0, "look": "second"}, "rng_name": "persist@second-look"}]
    cmp = look["short"]
    d = np.array([0.5 - (1.0 if i % 2 == 0 else -1.0) for i in range(n)])
    assert cmp["p_value"] == pytest.approx(st.ttest_1samp(d, 0.0, alternative="greater").pvalue)  # a paired t-test
    assert cmp["mean_short"] == 0.5 and "mean_persist" in cmp
    capped = FakeContext(records(), play=ctx.play, cap_reached=True)
    F.second_look(capped, pol("persist"), pol("short"), returns(pilot, True), returns(pilot, False), 0.0)
    assert capped.skipped == ["second look at the env's own failure rates ('short')"]


def test_second_look_bonferroni_is_capped_at_1_and_both_runs_are_refunded():
    pilot = list(range(100, 108))

    def play(policy, seeds, kw):
        if policy.name == "short":  # a failed call charged 0.5, then an answer for 1: 0.5, or 1 refunded
            return records(*[episode(FAILURE, [call(TOOL_ERROR, -0.5), (1, 1.0)], seed=s) for s in seeds])
        return records(*[episode(SUCCESS, [(1, 1.0)], seed=s) for s in seeds])  # persisting always earns 1

    look = F.second_look(FakeContext(records(), play=play), pol("persist"), pol("short"), returns(pilot, True),
                         returns(pilot, False), 0.0)
    assert look["short"]["diff"] == pytest.approx(-0.5) and look["short"]["p_bonferroni"] == 1.0
    assert look["short"]["diff_if_failures_cost_a_step"] == pytest.approx(0.0)


def test_plain_failure_cost_is_the_regressions_exact_coefficient():
    # four kinds of episode, four unknowns: return = 0.75 + 0.75 success - 0.25 length - 0.75 failures
    # exactly (short: -0.5, length 2, 1 failure; persisting: -1 and -2, lengths 4 and 5, 1 and 2
    # failures; success: 1, length 2, none); episodes without a tool call are left out of the fit
    base = plain_env()
    no_calls = records(*many(10, SUCCESS, [(2, 1.0)], success=True), first_id=1000)
    both = Records.concat([base, no_calls])
    (f,) = shortcut_exploration(FakeContext(both), CHARGED)
    assert f.evidence["failure_cost"] == pytest.approx(-0.75)
    assert f.evidence["failure_cost_ci"] == pytest.approx([-0.75, -0.75])
    assert f.summary == ("Each tool failure costs 0.75 reward beyond its step, and after a first failure, episodes that "
                         "ended within a step earned 0.5 from there against -0.5 for those that went on (exploration, "
                         "n=10+20).")
    ctx = FakeContext(base)
    shortcut_exploration(ctx, {"charged": False})
    assert ctx.notes["failure_shortcut"] == ("no failed step paid less than the same tool working and less than the "
                                             "cheapest ordinary step: failures cost only the step they take")


def test_plain_failure_cost_model_without_a_success_flag():
    recs = plain_env()
    recs.episodes["outcome"] = recs.episodes["outcome"].replace({FAILURE: "unknown", SUCCESS: "unknown"})
    found = shortcut_exploration(FakeContext(recs), CHARGED)
    (f,) = found  # still a failure charge and a shortcut; no success column in the fit
    assert f.evidence["failure_cost_model"] == "OLS of return on length, failures" and f.evidence["failure_cost"] < 0


def test_plain_shortcut_evidence_and_who_counts_as_short():
    cut = records(*many(10, FAILURE, [FAIL_CALL, (3, 0.5)], end=END_TRUNCATED), first_id=2000)  # cut, not quitting
    (f,) = shortcut_exploration(FakeContext(Records.concat([plain_env(), cut])), CHARGED)
    e = f.evidence
    assert e["n_short"] == MIN_SAMPLES + 2 and e["n_persist"] == 2 * (MIN_SAMPLES + 2)
    assert e["behaviour"] == "quit" and e["reward_path"] == "env" and e["failure_charge"] == CHARGED
    assert e["test"] == ("Mann-Whitney U on the return after the first failure, ended within a step vs went on, "
                         "one-sided")
    assert e["p_value"] < 0.05 and e["diff_ci"][0] > 0 and f.fix == FIX_PLAIN


def test_no_plain_shortcut_when_failures_cost_nothing_in_the_return():
    free = {**FAIL_CALL, "reward": 0.0}
    recs = records(*many(10, FAILURE, [free, (1, 0.5)]), *many(10, FAILURE, [free, (3, 0.0), (3, 0.0), (2, 0.0)]),
                   *many(10, FAILURE, [free, (3, 0.0), free, (3, 0.0), (2, 0.0)]),
                   *many(10, SUCCESS, [OK_CALL, (2, 1.0)], success=True))
    # return = 0.75 + 0.75 success - 0.25 length + 0.25 failures: a failure costs nothing
    assert shortcut_exploration(FakeContext(recs), CHARGED) == []
    strict = FakeContext(plain_env(), config=ScanConfig(seed=0, alpha=1e-12))
    assert shortcut_exploration(strict, CHARGED) == []  # the after-failure comparison must be significant


# -- failure_topup: histories and distinct draws ----------------------------------------------------------
def test_a_history_is_the_actions_and_tool_statuses_before_each_step():
    from envaudit.probes.failures.topup import histories

    recs = records(episode(FAILURE, [call(TOOL_ERROR, 0.3), call(TOOL_OK, 0.0), {"action": 2, "reward": 1.0}]),
                   episode(FAILURE, [{"action": 2, "reward": 0.0}]))
    assert histories(recs.steps).tolist() == [(), ((0, TOOL_ERROR),), ((0, TOOL_ERROR), (0, TOOL_OK)), ()]


def test_a_seed_replayed_with_the_same_actions_is_one_draw():
    from envaudit.probes.failures.topup import samples_of

    # A GRPO group plays seed 7 three times: the first search is the same draw each time. Seed 8 is
    # another draw; so is seed 7's second search (another history).
    recs = records(*many(3, FAILURE, [call(TOOL_ERROR, 0.3), call(TOOL_OK, 0.0)], seed=7),
                   episode(FAILURE, [call(TOOL_ERROR, 0.3)], seed=8))
    got = samples_of(recs, 0)
    assert sorted(zip(got["seed"], got["tool_status"], strict=True)) == [(7, TOOL_ERROR), (7, TOOL_OK), (8, TOOL_ERROR)]


# -- failure_conditioned: the two-step sum counts a failed call at most as an ordinary step -------------
STEP, PHI0, PHI1, CREDIT = 0.01, 0.05, 0.45, 0.7
"""Potential-based shaping (the episode's end hands the potential back) with attempt credit: a call
pays -STEP + PHI1 - PHI0 when it works and -STEP + CREDIT when it fails; ending pays -STEP - phi."""


def _ending_after(first_steps, n=MIN_SAMPLES + 2):
    """n episodes: ``first_steps`` then ending (action 1), each from its own seed."""
    return [episode(FAILURE, [*first_steps], seed=None) for _ in range(n)]


def test_ending_after_a_paid_failure_is_no_failure_condition_when_only_the_potential_differs():
    from envaudit.probes.failures import conditioned as FC

    end = {"action": 1, "tool_name": "submit", "tool_status": TOOL_OK, "terminated": True}
    recs = records(*_ending_after([call(TOOL_ERROR, -STEP + CREDIT, tool="t"), {**end, "reward": -STEP - PHI0}]),
                   *_ending_after([call(TOOL_OK, -STEP + PHI1 - PHI0, tool="t"), {**end, "reward": -STEP - PHI1}]),
                   # an idle step: what an ordinary step pays (the step reference)
                   *_ending_after([{"action": 2, "reward": -STEP}, {**end, "reward": -STEP - PHI0}], n=2))
    assert E.step_reference(recs) == pytest.approx(-STEP)
    t = FC.exploration_tests(recs, None, np.random.default_rng(0))[("conditioned", "t", TOOL_ERROR, 1)]
    # Ending right after the failure pays PHI1 - PHI0 more: the potential a working call made and the
    # end handed back. With the failed call counted as an ordinary step the pair pays the same; the
    # credit is the failed step's own (failure-rewarded's), not a reward for ending after it.
    assert t["diff"] == pytest.approx(PHI1 - PHI0) and t["two_step_diff"] == pytest.approx(0.0)
    assert not FC.is_hit(t, t["p_value"], 0.05)
    assert FC.failed_step_capped(-STEP + CREDIT, -STEP) == -STEP and FC.failed_step_capped(-1.0, -STEP) == -1.0
    assert FC.failed_step_capped(0.5, None) == 0.5


def test_ending_that_pays_a_bonus_right_after_a_failure_still_is_one():
    from envaudit.probes.failures import conditioned as FC

    bonus = 0.5
    end = {"action": 1, "tool_name": "submit", "tool_status": TOOL_OK, "terminated": True}
    recs = records(*_ending_after([call(TOOL_ERROR, -STEP, tool="t"), {**end, "reward": -STEP - PHI0 + bonus}]),
                   *_ending_after([call(TOOL_OK, -STEP + PHI1 - PHI0, tool="t"), {**end, "reward": -STEP - PHI1}]))
    t = FC.exploration_tests(recs, None, np.random.default_rng(0))[("conditioned", "t", TOOL_ERROR, 1)]
    assert t["two_step_diff"] == pytest.approx(bonus) and FC.is_hit(t, t["p_value"], 0.05)
