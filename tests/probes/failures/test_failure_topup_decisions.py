"""``failure_topup``'s decisions on a hand-built plain env whose failures are known.

A plain Gymnasium stand-in (no fault injection): ``search`` (action 0) is a tool call that fails on
its own for the seeds the test lists, paying ``FAILED_PAY`` against ``OK_PAY`` when it works;
``lock`` (action 1, no tool) before it makes it fail every time. The fake context's ``run`` plays
the top-up's replays from that rule (``tests/fixtures/frames.replayed``), so how many episodes each
round asks for follows from ``MIN_SAMPLES``, ``TOPUP_BATCH`` and the Laplace-smoothed yields
``(count + 1) / (episodes + 2)`` of the rounds before, and each p-value is the exact signed-rank p
of identical differences (2^-n).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from envaudit.probes.failures import topup as T
from envaudit.protocol import FAILURE, TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT
from envaudit.recording import Records
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.frames import FakeContext, episode, records, replayed

SEARCH, LOCK = 0, 1
OK_PAY, FAILED_PAY = 0.0, 0.5


def call(status, reward=None, action=SEARCH, tool="search"):
    if reward is None:
        reward = OK_PAY if status == TOOL_OK else FAILED_PAY
    return {"action": action, "tool_name": tool, "tool_status": status, "reward": reward}


LOCKED = {"action": LOCK, "reward": 0.0}


def explored(errors=(), oks=(), locked=(), timeouts=()):
    """One search per episode (seed = id), its status by seed; ``locked`` seeds lock first."""
    eps = []
    for s in sorted([*errors, *oks, *locked, *timeouts]):
        if s in locked:
            eps.append(episode(FAILURE, [LOCKED, call(TOOL_ERROR)], seed=s))
        else:
            status = TOOL_ERROR if s in errors else TOOL_TIMEOUT if s in timeouts else TOOL_OK
            eps.append(episode(FAILURE, [call(status)], seed=s))
    return records(*eps)


def make_ctx(exploration, fails=lambda i: False, **kw):
    """``fails(i)``: whether the search from nothing fails on the i-th top-up seed of action 0 (True:
    an error; or the failed status)."""
    ref = []
    kw.setdefault("env", SimpleNamespace(action_space=gym.spaces.Discrete(2)))
    ctx = FakeContext(exploration, labels=["search", "lock"], **kw)
    index = {s: i for i, s in enumerate(ctx.seeds(T.TOPUP_MAX_EPISODES, "topup", SEARCH))}

    def step(seed, t, action, forced):
        if action == LOCK:
            return {"reward": 0.0}
        failed = True if t > 0 else fails(index[seed])  # after a lock it always fails
        return call(TOOL_OK if not failed else TOOL_ERROR if failed is True else failed)

    def play(policy, seeds, kw):
        return replayed(policy.plan, step, first_id=1000 * len(ref[0].runs))

    ctx.play = play
    ref.append(ctx)
    return ctx


def sizes(ctx):
    return [len(s) for _, s, _ in ctx.runs]


# -- the small pieces ------------------------------------------------------------------------------
def test_yield_is_laplace_smoothed():
    assert T._yield(0, 0) == 0.5 and T._yield(3, 24) == pytest.approx(4 / 26) and T._yield(9, 10) == pytest.approx(10 / 12)


def test_prefixes_put_those_where_the_call_failed_first_then_the_shortest():
    recs = records(episode(FAILURE, [call(TOOL_OK)]),  # () ok
                   episode(FAILURE, [LOCKED, call(TOOL_OK)]),  # (1,) ok
                   episode(FAILURE, [LOCKED, LOCKED, call(TOOL_ERROR)]),  # (1, 1) failed
                   episode(FAILURE, [{"action": 2}, call(TOOL_TIMEOUT)]),  # (2,) timed out
                   episode(FAILURE, [{"action": 2}, call(TOOL_OK)]),
                   episode(FAILURE, [{"action": 3}, {"action": 2}, call(TOOL_OK)]),  # (3, 2) ok
                   episode(FAILURE, [{"action": 3}, call(TOOL_OK), call(TOOL_ERROR)]))  # (3,) ok, (3, 0) failed
    assert T.MAX_PREFIXES == 4
    # failed first: (2,) and (1, 1) and (3, 0) by length then value; then the ok ones, shortest first
    assert T._prefixes(recs.steps.iloc[::-1], SEARCH) == [(2,), (1, 1), (3, 0), ()]
    assert T._prefixes(recs.steps, 2) == [(), (3,)]


def samples(rows):
    return pd.DataFrame(rows, columns=["history", "tool_status", "reward"])


def test_matched_keeps_failures_whose_history_also_worked():
    s = samples([((), TOOL_OK, 0.0), ((), TOOL_OK, 1.0), ((), TOOL_ERROR, 2.0), (("a",), TOOL_ERROR, 3.0),
                 (("b",), TOOL_OK, 5.0), (("b",), TOOL_TIMEOUT, 4.0), ((), TOOL_TIMEOUT, 9.0)])
    bad, ok = T._matched(s, TOOL_ERROR)
    assert bad["reward"].tolist() == [2.0]  # ("a",) never worked
    assert ok.to_dict() == {(): 0.5, ("b",): 5.0}
    assert T._matched(s, TOOL_TIMEOUT)[0]["reward"].tolist() == [4.0, 9.0]


def test_counts_are_matched_failures_and_the_ok_calls_beside_them():
    s = samples([((), TOOL_OK, 0.0), ((), TOOL_OK, 0.0), ((), TOOL_ERROR, 0.5), (("a",), TOOL_ERROR, 0.5),
                 (("a",), TOOL_TIMEOUT, 0.5), (("b",), TOOL_OK, 0.0), (("c",), TOOL_OK, 0.0), (("c",), TOOL_TIMEOUT, 0.0)])
    # errors: one matched (()); timeouts: one ((c)); ok calls beside an error: 2, beside either: 3
    assert T._counts(s, [TOOL_ERROR]) == ({TOOL_ERROR: 1}, 2)
    assert T._counts(s, [TOOL_ERROR, TOOL_TIMEOUT]) == ({TOOL_ERROR: 1, TOOL_TIMEOUT: 1}, 3)
    assert T._counts(s, [TOOL_TIMEOUT]) == ({TOOL_TIMEOUT: 1}, 1)


# -- the rounds ------------------------------------------------------------------------------------
def test_one_round_sized_from_explorations_rates():
    # exploration: 2 failed, 8 ok searches from nothing. Yields (2+1)/12 and (8+1)/12; 6 failures
    # short, none ok: max(6 / 0.25, 0, TOPUP_BATCH) = 24 episodes; every 4th top-up seed fails: 6 more
    ctx = make_ctx(explored(errors=[0, 1], oks=range(2, 10)), fails=lambda i: i % 4 == 0)
    tests = T.topup_tests(ctx, np.random.default_rng(0))
    assert sizes(ctx) == [24]
    policy, seeds, kw = ctx.runs[0]
    assert policy.name == "topup-0" and seeds == ctx.seeds(T.TOPUP_MAX_EPISODES, "topup", SEARCH)[:24]
    assert kw["tags"] == {"fault": "none", "targeted": "repeat the call"} and len(kw["wrappers"]) == 1
    assert [r.actions for r in policy.plan.replays] == [(SEARCH,)] * 24
    (key,) = tests
    t = tests[key]
    assert key == (SEARCH, TOOL_ERROR)
    # 8 failed calls each against the mean ok reward of their history (0): every difference 0.5
    assert t["n_pairs"] == MIN_SAMPLES and t["diff"] == pytest.approx(FAILED_PAY - OK_PAY)
    assert t["p_value"] == pytest.approx(2.0 ** -MIN_SAMPLES) and not t["underpowered"]
    assert t["n_ok"] == 8 + 18 and t["tool"] == "search" and t["source"] == "targeted episodes"
    assert t["examples"] == [0, 1, 1000] and t["records"].episodes["episode_id"].tolist() == list(range(1000, 1024))
    assert t["topup"] == {"episodes": 24, "rounds": 1, "prefixes": [[]], "pruned_prefixes": [],
                          "matched_failed": {TOOL_ERROR: 8}, "matched_ok": 26, "stopped": "enough",
                          "cap_episodes": T.TOPUP_MAX_EPISODES}
    assert t["test"].startswith("Wilcoxon signed-rank, each failed call's reward against the mean of the ok calls")
    assert ctx.notes == {}


def test_later_rounds_are_sized_from_the_top_ups_own_yields():
    # every 8th seed fails: 3 in the first 24 (5 matched, 3 short); yield (3+1)/(24+2):
    # 3 / (4/26) = 19.5 -> 20 more episodes, which bring 3 more failures (seeds 24, 32, 40)
    ctx = make_ctx(explored(errors=[0, 1], oks=range(2, 10)), fails=lambda i: i % 8 == 0)
    t = T.topup_tests(ctx, np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
    assert sizes(ctx) == [24, 20] and ctx.runs[1][1] == ctx.seeds(T.TOPUP_MAX_EPISODES, "topup", SEARCH)[24:44]
    assert t["topup"]["rounds"] == 2 and t["topup"]["episodes"] == 44 and t["n_pairs"] == 2 + 3 + 3
    assert t["records"].episodes["episode_id"].tolist() == [*range(1000, 1024), *range(2000, 2020)]


def test_a_shortfall_of_ok_calls_sizes_the_round_too():
    # 3 failed, 1 ok: 5 failures short at (3+1)/6, 7 ok short at (1+1)/6: max(7.5, 21, 16) = 21
    # every third top-up seed works: 7 ok (8 with exploration's: exactly enough), 14 failures
    ctx = make_ctx(explored(errors=[0, 1, 2], oks=[3]), fails=lambda i: i % 3 != 0)
    t = T.topup_tests(ctx, np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
    assert sizes(ctx) == [21] and t["topup"]["matched_failed"] == {TOOL_ERROR: 3 + 14}
    assert t["topup"]["matched_ok"] == 1 + 7 and t["n_ok"] == MIN_SAMPLES and not t["underpowered"]


def test_later_rounds_are_sized_by_the_ok_yield_when_ok_calls_are_short():
    # 7 in 8 top-up seeds fail: the 21 of the first round bring 3 ok calls (4 in all, 4 short) at a
    # yield of (3+1)/(21+2): 4 / (4/23) = 23; those bring 3 more (1 short): 1 / ((6+1)/(44+2)) < 16
    ctx = make_ctx(explored(errors=[0, 1, 2], oks=[3]), fails=lambda i: i % 8 != 0)
    t = T.topup_tests(ctx, np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
    assert sizes(ctx) == [21, 23, T.TOPUP_BATCH] and t["topup"]["matched_ok"] == 1 + 3 + 3 + 2


def test_a_single_explored_call_sizes_the_first_round_from_one_call():
    # one failed call: yields (1+1)/(1+2) and (0+1)/(1+2): max(8 / (2/3), 8 / (1/3), 16) = 24
    ctx = make_ctx(explored(errors=[0]), fails=lambda i: i % 2 == 0)
    t = T.topup_tests(ctx, np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
    assert sizes(ctx) == [24] and t["topup"]["matched_failed"] == {TOOL_ERROR: 13} and t["n_ok"] == 12


def test_too_few_ok_calls_beside_the_failures_leave_the_test_underpowered():
    # 2 failed, 1 ok: max(6 / (3/5), 7 / (2/5), 16) = 17.5 -> 18 episodes, 6 of them ok (every third):
    # 14 failures but 7 ok calls, and the scan's cap is reached during that round
    ctx = make_ctx(explored(errors=[0, 1], oks=[2]), fails=lambda i: i % 3 != 0)
    play = ctx.play

    def capped(policy, seeds, kw):
        ctx.cap_reached = True
        return play(policy, seeds, kw)

    ctx.play = capped
    t = T.topup_tests(ctx, np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
    assert sizes(ctx) == [18] and t["topup"]["stopped"] == "the scan's safety cap"
    assert t["n_pairs"] == 14 and t["n_ok"] == 7 and t["underpowered"]


def test_a_prefix_is_dropped_only_after_prune_after_replays():
    # the search fails only after a lock (3 times), and worked 10 times from nothing: 8 matched
    # failures short at (3+1)/(13+2): 30 episodes, 15 per prefix; the lock prefix, 15 replays with
    # failures only, is kept for the next round (16 needed to drop it), and dropped after it
    ctx = make_ctx(explored(oks=range(10), locked=[10, 11, 12]), fails=lambda i: i % 8 == 1)
    T.topup_tests(ctx, np.random.default_rng(0))
    rounds = [[r.actions for r in p.plan.replays] for p, _, _ in ctx.runs]
    assert [len(r) for r in rounds] == [30, 16, 16]
    assert rounds[1].count((LOCK, SEARCH)) == 8 and rounds[2].count((LOCK, SEARCH)) == 0


def test_each_prefix_counts_its_own_statuses():
    # from nothing the search always works, after a lock it always fails: each prefix gave one
    # status, so both are dropped after their 16 replays (8 + 1 short at (2+1)/(8+2+2): 32 episodes)
    ctx = make_ctx(explored(oks=range(8), locked=[8, 9]))
    # no failure shares a history with an ok call: nothing to compare, and the note says why
    assert T.topup_tests(ctx, np.random.default_rng(0)) == {} and sizes(ctx) == [32]
    assert ctx.notes["failure_rewarded_topup"]["search"].startswith(
        "too few failed and ok `search` calls from the same history after 32 top-up episodes (no prefix gave the "
        "call both statuses in 16 replays): failed {'error': 0}, ok 0")


def test_a_prefix_that_never_gives_both_statuses_is_dropped():
    # the search failed only after a lock in exploration, and always does there; from nothing it
    # worked 8 times. Short: 8 matched failures and 8 ok calls beside one, at yields (1+1)/(9+2) and
    # (8+1)/(9+2): max(8 / (2/11), 8 / (9/11), 16) = 44 episodes, alternating the two prefixes (the
    # one where the call failed first)
    ctx = make_ctx(explored(oks=range(8), locked=[8]), fails=lambda i: i % 8 == 1)
    t = T.topup_tests(ctx, np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
    first, second = (p.plan.replays for p, _, _ in ctx.runs)
    assert len(first) == 44 and [r.actions for r in first[:2]] == [(LOCK, SEARCH), (SEARCH,)]
    # from nothing (odd seeds) 1, 9, ..., 41 failed: 6 matched, 2 short; the lock prefix gave 22
    # failures and no ok call: dropped. Yield (28+1)/(44+2): 2 / (29/46) < 16, a batch of 16
    assert len(second) == T.TOPUP_BATCH and all(r.actions == (SEARCH,) for r in second)
    assert t["topup"]["prefixes"] == [[LOCK], []] and t["topup"]["pruned_prefixes"] == [[LOCK]]
    assert t["topup"]["matched_failed"] == {TOOL_ERROR: 8} and t["topup"]["stopped"] == "enough"


def test_no_prefix_left_stops_the_top_up_and_says_so():
    # 4 failed, 8 ok: 4 short at (4+1)/14: 11.2 -> the batch of 16, which never fails: after exactly
    # PRUNE_AFTER replays the only prefix gave one status and is dropped
    ctx = make_ctx(explored(errors=range(4), oks=range(4, 12)))
    t = T.topup_tests(ctx, np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
    assert sizes(ctx) == [T.PRUNE_AFTER] == [T.TOPUP_BATCH]
    info = t["topup"]
    assert info["stopped"] == f"no prefix gave the call both statuses in {T.PRUNE_AFTER} replays"
    assert info["pruned_prefixes"] == [[]] and info["matched_failed"] == {TOOL_ERROR: 4} and info["matched_ok"] == 24
    assert t["n_pairs"] == 4 and t["p_value"] == pytest.approx(2.0 ** -4) and t["underpowered"]
    assert ctx.notes["failure_rewarded_topup"] == {"search": (
        "too few failed and ok `search` calls from the same history after 16 top-up episodes (no prefix gave "
        "the call both statuses in 16 replays): failed {'error': 4}, ok 24, 8 of each needed; whether its "
        "failures pay stays open")}


def test_the_episode_cap_ends_the_top_up():
    # one top-up failure in 320: 24, then 5 / (2/26) = 65, then 5 / (2/91) = 227.5 -> 228, then the
    # 3 left of the cap
    ctx = make_ctx(explored(errors=[0, 1], oks=range(2, 10)), fails=lambda i: i == 0)
    t = T.topup_tests(ctx, np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
    assert sizes(ctx) == [24, 65, 228, 3] and sum(sizes(ctx)) == T.TOPUP_MAX_EPISODES
    assert t["topup"]["stopped"] == f"cap of {T.TOPUP_MAX_EPISODES} episodes reached"
    assert t["topup"]["rounds"] == 4 and t["n_pairs"] == 3 and t["underpowered"]
    assert "after 320 top-up episodes (cap of 320 episodes reached)" in ctx.notes["failure_rewarded_topup"]["search"]


def test_the_scans_safety_cap_stops_it_before_a_round():
    ctx = make_ctx(explored(errors=[0, 1], oks=range(2, 10)), cap_reached=True)
    t = T.topup_tests(ctx, np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
    assert ctx.runs == [] and ctx.skipped == ["failure-rewarded top-up of action 0 from episode 0 on"]
    assert t["records"] is None and t["topup"]["episodes"] == 0 and t["topup"]["rounds"] == 0
    assert t["topup"]["stopped"] == "the scan's safety cap" and t["n_pairs"] == 2 and t["underpowered"]


# -- which calls get a top-up, and the comparison ----------------------------------------------------
def test_only_calls_seen_failing_but_too_rarely_are_topped_up():
    ctx = make_ctx(explored(oks=range(10)))
    assert T.topup_tests(ctx, np.random.default_rng(0)) == {} and ctx.runs == []  # never failed
    ctx = make_ctx(explored(errors=range(MIN_SAMPLES), oks=range(MIN_SAMPLES, 20)))
    assert T.topup_tests(ctx, np.random.default_rng(0)) == {} and ctx.runs == []  # enough already
    ctx = make_ctx(explored(errors=range(MIN_SAMPLES - 1), oks=range(MIN_SAMPLES, 20)), fails=lambda i: i % 2 == 0)
    assert set(T.topup_tests(ctx, np.random.default_rng(0))) == {(SEARCH, TOOL_ERROR)}
    # the most made call needs none, the next one does
    lookups = records(*[episode(FAILURE, [call(TOOL_OK, action=LOCK, tool="lookup")], seed=s) for s in range(30)],
                      first_id=100)
    ctx = make_ctx(Records.concat([lookups, explored(errors=[0], oks=[1])]), cap_reached=True)
    assert set(T.topup_tests(ctx, np.random.default_rng(0))) == {(SEARCH, TOOL_ERROR)}
    box = make_ctx(explored(errors=[0], oks=[1]), env=SimpleNamespace(action_space=gym.spaces.Box(0, 1)))
    assert T.topup_tests(box, np.random.default_rng(0)) == {}
    assert T.topup_tests(make_ctx(records(episode(FAILURE, [LOCKED]))), np.random.default_rng(0)) == {}


def test_both_failed_statuses_share_one_top_up():
    # 2 errors, 3 timeouts, 8 ok: both short, the scarcer (errors) sizes the round. Every 4th
    # top-up seed errs, the one after it times out
    ctx = make_ctx(explored(errors=[0, 1], timeouts=[2, 3, 4], oks=range(5, 13)),
                   fails=lambda i: {0: TOOL_ERROR, 1: TOOL_TIMEOUT}.get(i % 4, False))
    tests = T.topup_tests(ctx, np.random.default_rng(0))
    # a failure of either kind yields (5+1)/(13+2): 6 errors short, 6 / 0.4 = 15 -> the batch of 16,
    # which brings 4 of each (6 errors, 7 timeouts); then 2 short at (8+1)/(16+2): the batch again
    assert sizes(ctx) == [T.TOPUP_BATCH] * 2 and set(tests) == {(SEARCH, TOOL_ERROR), (SEARCH, TOOL_TIMEOUT)}
    assert tests[(SEARCH, TOOL_TIMEOUT)]["n_pairs"] == 11 and tests[(SEARCH, TOOL_ERROR)]["n_pairs"] == 10
    assert tests[(SEARCH, TOOL_ERROR)]["topup"]["matched_failed"] == {TOOL_ERROR: 10, TOOL_TIMEOUT: 11}


def test_at_most_max_calls_calls_are_topped_up_most_made_first():
    # nine tools, action a called 10 + a times (one failure each, once per seed): the 8 most made
    eps = []
    for a in range(9):
        eps += [episode(FAILURE, [call(TOOL_ERROR if s == 0 else TOOL_OK, action=a, tool=f"t{a}")], seed=s)
                for s in range(10 + a)]
    ctx = make_ctx(records(*eps), env=SimpleNamespace(action_space=gym.spaces.Discrete(9)), cap_reached=True)
    tests = T.topup_tests(ctx, np.random.default_rng(0))
    assert T.MAX_CALLS == 8
    assert ctx.skipped == [f"failure-rewarded top-up of action {a} from episode 0 on" for a in range(8, 0, -1)]
    assert set(tests) == {(a, TOOL_ERROR) for a in range(1, 9)} and tests[(3, TOOL_ERROR)]["tool"] == "t3"


def test_each_failure_is_paired_with_the_ok_mean_of_its_own_history():
    # from nothing: ok pays 0 and 0.2 (mean 0.1), failures 0.5; after a lock: ok pays 1, failures
    # 1.5 and 0.9. Differences: 0.4 x 2 (ranks 2.5, 2.5), 0.5 (rank 4), -0.1 (rank 1): one-sided
    # exact p = P(positive rank sum >= 9) over the 16 sign patterns: 10 and 9, 2/16
    eps = [episode(FAILURE, [call(TOOL_OK, 0.0)], seed=0), episode(FAILURE, [call(TOOL_OK, 0.2)], seed=1),
           episode(FAILURE, [call(TOOL_ERROR, 0.5)], seed=2), episode(FAILURE, [call(TOOL_ERROR, 0.5)], seed=3),
           episode(FAILURE, [LOCKED, call(TOOL_OK, 1.0)], seed=4),
           episode(FAILURE, [LOCKED, call(TOOL_ERROR, 1.5)], seed=5),
           episode(FAILURE, [LOCKED, call(TOOL_ERROR, 0.9)], seed=6)]
    ctx = make_ctx(records(*eps), cap_reached=True)
    t = T.topup_tests(ctx, np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
    assert t["n_pairs"] == 4 and t["mean_ok"] == pytest.approx((0.1 + 0.1 + 1.0 + 1.0) / 4)
    assert t["diff"] == pytest.approx((0.4 + 0.4 + 0.5 - 0.1) / 4) and t["p_value"] == pytest.approx(2 / 16)
    assert t["n_ok"] == 3 and t["examples"] == [2, 3, 5]  # the failures that paid more than their history's ok
    # a seed replayed with the same actions is one draw: a second seed-2 failure adds nothing
    again = records(*eps, episode(FAILURE, [call(TOOL_ERROR, 0.5)], seed=2))
    assert T.topup_tests(make_ctx(again, cap_reached=True), np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]["n_pairs"] == 4


def test_rewards_equal_up_to_float_noise_are_equal():
    # a failed call paying 0.1 + 0.2 against ok calls paying 0.3: no difference, p = 1
    noisy = 0.1 + 0.2
    assert noisy != 0.3
    eps = [episode(FAILURE, [call(TOOL_OK, 0.3)], seed=s) for s in range(8)]
    eps += [episode(FAILURE, [call(TOOL_ERROR, noisy)], seed=s) for s in range(8, 12)]
    t = T.topup_tests(make_ctx(records(*eps), cap_reached=True), np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
    assert t["p_value"] == 1.0 and t["diff"] == 0.0 and t["examples"] == []
    assert math.isclose(t["mean_failed"], 0.3)
    # noise below 1e-9 on either side is no difference either
    for failed, ok in ((0.3 + 2e-10, 0.3), (0.3, 0.3 + 2e-10)):
        eps = [episode(FAILURE, [call(TOOL_OK, ok)], seed=s) for s in range(8)]
        eps += [episode(FAILURE, [call(TOOL_ERROR, failed)], seed=s) for s in range(8, 12)]
        t = T.topup_tests(make_ctx(records(*eps), cap_reached=True), np.random.default_rng(0))[(SEARCH, TOOL_ERROR)]
        assert t["diff"] == 0.0 and t["examples"] == []


def test_a_status_without_matched_failures_does_not_end_the_others():
    # errors only after a lock (no ok call there), timeouts from nothing beside ok calls
    recs = records(episode(FAILURE, [LOCKED, call(TOOL_ERROR)], seed=0), episode(FAILURE, [call(TOOL_TIMEOUT)], seed=1),
                   episode(FAILURE, [call(TOOL_OK)], seed=2))
    tests = T.topup_tests(make_ctx(recs, cap_reached=True), np.random.default_rng(0))
    assert set(tests) == {(SEARCH, TOOL_TIMEOUT)}


def test_a_history_reads_a_missing_status_as_none():
    # a step without a tool call may read NaN (a table from parquet) or None: the same history
    recs = records(episode(FAILURE, [LOCKED, call(TOOL_OK)]), episode(FAILURE, [LOCKED, call(TOOL_ERROR)]))
    steps = recs.steps.astype({"tool_status": object})
    steps.loc[2, "tool_status"] = np.nan
    assert T.histories(steps).tolist() == [(), ((LOCK, None),), (), ((LOCK, None),)]
    # indexed like the steps it was given, in whatever order they came (a filtered table keeps its labels)
    shuffled = steps.iloc[[3, 1, 2, 0]]
    assert T.histories(shuffled).to_dict() == T.histories(steps).to_dict()
    assert T.histories(steps.iloc[[3, 2, 1]]).to_dict() == {1: (), 2: (), 3: ((LOCK, None),)}  # step 0 left out


def test_calls_made_equally_often_are_taken_in_action_order():
    # 30 calls, every third made twice (10 of them), the rest once; each fails on its first try.
    # The 8 most made are the first 8 of the ten made twice, in action order
    eps = [episode(FAILURE, [call(TOOL_ERROR, action=a, tool=f"t{a}")] + ([call(TOOL_OK, action=a, tool=f"t{a}")]
                                                                          if a % 3 == 0 else []), seed=a)
           for a in range(30)]
    ctx = make_ctx(records(*eps), env=SimpleNamespace(action_space=gym.spaces.Discrete(30)), cap_reached=True)
    T.topup_tests(ctx, np.random.default_rng(0))
    assert ctx.skipped == [f"failure-rewarded top-up of action {a} from episode 0 on" for a in range(0, 24, 3)]
