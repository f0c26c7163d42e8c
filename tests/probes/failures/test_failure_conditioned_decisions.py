"""``failure_conditioned``'s decision functions on hand-built tables and a fake desk whose rewards
are known by construction.

The desk (actions: 0 ``search``, a call that does not end the episode; 1 ``handoff``, which ends
it; 2 ``quit``, which ends it too): a working search pays ``-STEP``, a failed one pays ``CREDIT``
(more than any ordinary step: the failed step's own reward, which the two-step sums cap at the
cheapest ordinary step), and handing off right after a failed call pays ``BONUS``, after a working
one nothing. Every number asserted follows from these constants, the seeds the context hands out
and the tables the tests write (``tests/fixtures/frames.py``); p-values are scipy's on the same data.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats as st

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.probes.failures import conditioned as FC
from envaudit.probes.failures import text as FT
from envaudit.protocol import END_TRUNCATED, FAILURE, SUCCESS, TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.frames import FakeContext, episode, many, records

STEP, CREDIT, BONUS = 0.1, 0.5, 0.3
SEARCH, HANDOFF, QUIT = 0, 1, 2
TOOLS = {SEARCH: "search", HANDOFF: "handoff"}


def call(status, reward, action=SEARCH, **kw):
    return {"action": action, "tool_name": TOOLS.get(action), "tool_status": status, "reward": reward, **kw}


def desk_steps(seed, actions, fault_at=None, fault=None, *, fails=(), uninjected=(), diverge=()):
    """The desk's steps for ``actions`` from ``seed``: a search fails on its own on the ``fails`` seeds,
    or with ``fault`` forced at index ``fault_at`` (``uninjected`` seeds: the env failed it first)."""
    rows, before = [], None
    for i, a in enumerate(actions):
        last = i == len(actions) - 1
        if a == SEARCH:
            status, injected = TOOL_OK, False
            if fault is not None and i == fault_at:
                status, injected = fault, seed not in uninjected
            elif seed in fails:
                status = TOOL_ERROR
            row = call(status, -STEP if status == TOOL_OK else CREDIT, injected=injected)
        elif a == HANDOFF:
            row = call(TOOL_OK, BONUS if before in (TOOL_ERROR, TOOL_TIMEOUT) else 0.0, action=HANDOFF)
        elif fault is not None and seed in diverge:
            row = {"action": a, "reward": 0.0}
            rows.append({**row, "terminated": True, "truncated": False})
            break  # the episode ended before the replay's last action: it did not hold
        else:
            row = {"action": a, "reward": -STEP}
        row["terminated"] = last and a in (HANDOFF, QUIT)
        row["truncated"] = last and not row["terminated"]
        rows.append(row)
        before = row.get("tool_status")
    return rows


def replay_player(**world):
    """``ctx.play`` for ``ReplayPlan`` policies: each replay played on the desk, the plan told
    which episode played which replay, as the recording wrapper tells it."""
    ids = itertools.count()

    def play(policy, seeds, kw):
        plan = policy.plan
        eps, first = [], None
        for k, r in enumerate(plan.replays):
            eid = next(ids)
            first = eid if first is None else first
            plan.episode_replay[eid] = k
            fault_at = len(r.actions) + plan.fault_at
            eps.append(episode(FAILURE, desk_steps(r.seed, r.actions, fault_at, plan.fault, **world),
                               seed=r.seed, success=False))
        recs = records(*eps, first_id=first or 0)
        recs.steps["injected"] = [bool(x) for x in _column(eps, "injected")]
        return recs

    return play


def _column(eps, key):
    return [s.get(key, False) for e in eps for s in e["steps"]]


class Desk:
    """What the probe reads of a ``ToolEnv``: the catalogue (call -> tool) and the tools."""

    catalogue = [SimpleNamespace(tool="search"), SimpleNamespace(tool="handoff"), SimpleNamespace(tool="quit"),
                 SimpleNamespace(tool="note"), SimpleNamespace(tool="note")]
    tools = ("search", "handoff", "quit")

    @property
    def unwrapped(self):
        return self


def explored(ok_seeds, failed_seeds):
    """Exploration: a search then a handoff from each seed, the search failing on ``failed_seeds``."""
    return records(*[episode(FAILURE, desk_steps(s, (SEARCH, HANDOFF), fails=failed_seeds), seed=s)
                     for s in [*ok_seeds, *failed_seeds]])


# -- sizing the replays ---------------------------------------------------------------------------
def test_natural_ok_rate_is_laplace_smoothed_with_a_floor():
    recs = records(episode(FAILURE, [call(TOOL_OK, 0), call(TOOL_OK, 0), call(TOOL_OK, 0), call(TOOL_ERROR, 0),
                                      {"action": "0", "reward": 0.0, "tool_status": TOOL_ERROR},
                                      call(TOOL_ERROR, 0, action=HANDOFF)]))
    assert FC.natural_ok_rate(recs, SEARCH) == pytest.approx((3 + 1) / (4 + 2))  # the text "0" is no call 0
    assert FC.natural_ok_rate(recs, 7) == pytest.approx(1 / 2)  # never called: (0 + 1) / (0 + 2)
    assert FC.natural_ok_rate(recs, HANDOFF) == pytest.approx(1 / 3)  # (0 + 1) / (1 + 2), above the floor
    never = records(episode(FAILURE, [call(TOOL_ERROR, 0)] * 10))
    assert FC.natural_ok_rate(never, SEARCH) == FC.MIN_OK_RATE  # 1/12 is under the floor


def test_replay_items_take_working_calls_then_fresh_seeds_then_failed_ones():
    recs = records(episode(FAILURE, [(QUIT, 0.0), call(TOOL_OK, 0.0)], seed=10),  # prefix (2,)
                   episode(FAILURE, [call(TOOL_OK, 0.0)], seed=11),
                   episode(FAILURE, [call(TOOL_OK, 0.0)], seed=11),  # the same (seed, prefix): one item
                   episode(FAILURE, [call(TOOL_ERROR, 0.0)], seed=12),
                   episode(FAILURE, [call(TOOL_OK, 0.0, action=HANDOFF)], seed=13))
    rng = np.random.default_rng(0)
    items = FC.replay_items(recs, [SEARCH], 5, rng, [100, 101, 102, 103])
    assert [(r.seed, r.actions) for r in items] == [(10, (2, 0)), (11, (0,)), (100, (0,)), (101, (0,)), (102, (0,))]
    # without enough fresh seeds the failed calls come last
    items = FC.replay_items(recs, [SEARCH], 5, rng, [100])
    assert [(r.seed, r.actions) for r in items] == [(10, (2, 0)), (11, (0,)), (12, (0,)), (100, (0,))]
    # n = 2: the two working calls alone; one action after the other
    items = FC.replay_items(recs, [HANDOFF, SEARCH], 2, rng, [100])
    assert [(r.seed, r.actions) for r in items] == [(13, (1,)), (100, (1,)), (10, (2, 0)), (11, (0,))]
    one = FC.replay_items(recs, [SEARCH], 1, rng, [100])
    assert len(one) == 1 and (one[0].seed, one[0].actions) in {(10, (2, 0)), (11, (0,))}


def test_sized_replay_items_scale_the_fresh_starts_by_the_ok_rate():
    recs = records(episode(FAILURE, [call(TOOL_OK, 0.0)], seed=1), episode(FAILURE, [call(TOOL_ERROR, 0.0)], seed=2),
                   episode(FAILURE, [call(TOOL_ERROR, 0.0)], seed=3), episode(FAILURE, [call(TOOL_ERROR, 0.0)], seed=4))
    rate = (1 + 1) / (4 + 2)  # 1 of 4 calls worked: 1/3
    fresh = list(range(100, 120))
    items = FC.replay_items(recs, [SEARCH], 4, np.random.default_rng(0), fresh, sized=True)
    n_fresh = math.ceil((4 - 1) / rate)  # 9 fresh starts for about 3 working ones
    assert [r.seed for r in items] == [1, *fresh[:n_fresh]]
    # without sizing: just up to n
    assert [r.seed for r in FC.replay_items(recs, [SEARCH], 4, np.random.default_rng(0), fresh)] == [1, 100, 101, 102]
    # the fresh seeds run out: the failed calls fill the sized limit
    items = FC.replay_items(recs, [SEARCH], 4, np.random.default_rng(0), [100], sized=True)
    assert sorted(r.seed for r in items) == [1, 2, 3, 4, 100]


def test_replay_items_skip_episodes_without_a_seed():
    recs = records(episode(FAILURE, [call(TOOL_OK, 0.0)], seed=1), episode(FAILURE, [call(TOOL_OK, 0.0)], seed=2),
                   episode(FAILURE, [call(TOOL_ERROR, 0.0)], seed=3))
    recs.episodes["seed"] = [np.nan, 2.0, np.nan]
    items = FC.replay_items(recs, [SEARCH], 3, np.random.default_rng(0), [])
    assert [(r.seed, r.actions) for r in items] == [(2, (0,))]
    recs.episodes = recs.episodes.drop(index=1)  # an episode the episodes table lacks: no seed either
    assert FC.replay_items(recs, [SEARCH], 3, np.random.default_rng(0), [7]) == [FC.Replay(7, (0,))]


def test_the_two_step_sum_caps_a_failed_call_at_the_cheapest_step():
    assert FC.failed_step_capped(np.array([0.5, -1.0]), -0.1).tolist() == [-0.1, -1.0]
    assert FC.failed_step_capped(0.5, None) == 0.5


# -- fault injection on a ToolEnv -----------------------------------------------------------------
def injection_context(**world):
    fresh = FakeContext(records()).seeds(48, "conditioned-fresh")  # ceil(12 / MIN_OK_RATE) of them
    world = {"fails": {20, 21, fresh[1]}, "uninjected": {fresh[2]}, **world}
    ctx = FakeContext(explored(range(10), [20, 21]), config=ScanConfig(seed=0, quick=True), env=Desk(),
                      play=replay_player(**world), is_tool_env=True, labels=["search", "handoff"])
    return ctx, fresh


def test_injection_pairs_replays_with_and_without_a_fault_on_the_call_before():
    ctx, fresh = injection_context()
    tests = FC.injection_tests(ctx, np.random.default_rng(0))
    # the search is the only call that does not end episodes; next actions: handoff (ends), then search
    assert set(tests) == {("conditioned", SEARCH, s, b) for s in (TOOL_ERROR, TOOL_TIMEOUT) for b in (HANDOFF, SEARCH)}
    # 10 working calls, and (12 - 10) / (11 / 14) -> 3 fresh starts; each replay then each next action
    ok_rate = (10 + 1) / (12 + 2)
    starts = [*range(10), *fresh[:math.ceil(2 / ok_rate)]]
    assert [(p.name, kw["tags"]["fault"]) for p, _, kw in ctx.runs] == [
        ("conditioned-ok", "none"), ("conditioned-error", TOOL_ERROR), ("conditioned-timeout", TOOL_TIMEOUT)]
    assert all(kw["tags"]["fault_on"] == "call before the last" for _, _, kw in ctx.runs)
    assert ctx.runs[0][1] == [s for s in sorted(starts) for _ in (HANDOFF, SEARCH)]
    # pairs: fresh[1]'s search fails on its own without a fault (no ok arm), and fresh[2]'s fault was
    # not the injector's: 11 pairs, every one paying BONUS more after the failure
    n = len(starts) - 2
    t = tests[("conditioned", SEARCH, TOOL_ERROR, HANDOFF)]
    assert t["n_pairs"] == n and t["diff"] == pytest.approx(BONUS) and t["p_value"] == pytest.approx(2.0 ** -n)
    assert t["mean_failed"] == pytest.approx(BONUS) and t["mean_ok"] == 0.0
    # two steps: min(CREDIT, -STEP) + BONUS against -STEP + 0
    assert t["two_step_diff"] == pytest.approx(BONUS) and t["two_step_diff_ci"] == pytest.approx([BONUS, BONUS])
    assert t["two_step_p"] == pytest.approx(2.0 ** -n) and t["ends"] is True
    assert t["path_returns"] == pytest.approx([CREDIT + BONUS] * n)
    assert t["path_seeds"] == sorted(set(starts) - {fresh[1], fresh[2]})
    assert (t["source"], t["kind"], t["call"], t["next"], t["status"], t["tool"]) == (
        "fault injection", "conditioned", SEARCH, HANDOFF, TOOL_ERROR, "search")
    assert (t["call_label"], t["next_label"]) == ("search", "handoff")
    err = ctx.runs[1]
    assert t["records"][1] is not t["records"][0] and len(t["examples"]) == n
    assert set(t["examples"]) <= set(t["records"][0].episodes["episode_id"])
    assert t["records"][0].episodes["seed"].tolist() == err[1]
    ex = t["records"][0].steps.groupby("episode_id")["action"].last().loc[t["examples"]]
    assert (ex == HANDOFF).all()
    # searching again right after: the same either way
    again = tests[("conditioned", SEARCH, TOOL_ERROR, SEARCH)]
    assert again["diff"] == 0.0 and again["p_value"] == 1.0 and again["two_step_diff"] == pytest.approx(0.0)
    assert again["ends"] is False and again["path_returns"] == [] and again["examples"] == []
    assert again["next_label"] == "search" and again["two_step_p"] == 1.0
    assert tests[("conditioned", SEARCH, TOOL_TIMEOUT, HANDOFF)]["n_pairs"] == n


def test_injection_labels_without_labels_and_the_cap():
    ctx, _ = injection_context()
    ctx.labels = None
    t = FC.injection_tests(ctx, np.random.default_rng(0))[("conditioned", SEARCH, TOOL_ERROR, HANDOFF)]
    assert (t["call_label"], t["next_label"]) == ("0", "1")
    capped, _ = injection_context()
    capped.cap_reached = True
    assert FC.injection_tests(capped, np.random.default_rng(0)) == {} and capped.runs == []
    assert capped.skipped == ["failure-conditioned replays (ok arm)"]
    empty = FakeContext(records(), env=Desk())
    assert FC.injection_tests(empty, np.random.default_rng(0)) == {}
    # every action ends episodes: nothing to fail on purpose
    enders = FakeContext(records(*many(3, FAILURE, [call(TOOL_OK, 0.0, action=HANDOFF)])), env=Desk())
    assert FC.injection_tests(enders, np.random.default_rng(0)) == {} and enders.runs == []


def test_injection_without_a_step_reference_sums_the_failed_call_as_it_pays():
    ctx, _ = injection_context()
    # exploration where every non-ending step failed: no ordinary step to cap at
    ctx.exploration = explored([], list(range(12)))
    tests = FC.injection_tests(ctx, np.random.default_rng(0))
    t = tests[("conditioned", SEARCH, TOOL_ERROR, HANDOFF)]
    assert t["two_step_diff"] == pytest.approx(CREDIT + BONUS + STEP)


def test_injection_needs_the_fault_on_the_call_itself():
    ctx, fresh = injection_context(uninjected=set(FakeContext(records()).seeds(48, "conditioned-fresh")) | set(range(10)))
    assert FC.injection_tests(ctx, np.random.default_rng(0)) == {}  # no fault was the injector's


# -- plain envs: exploration -----------------------------------------------------------------------
def test_progress_is_the_tools_that_worked_before_each_step():
    recs = records(episode(FAILURE, [call(TOOL_OK, 0), call(TOOL_ERROR, 0, action=HANDOFF), call(TOOL_OK, 0, action=HANDOFF),
                                     {"action": QUIT, "reward": 0.0, "tool_status": TOOL_OK}]),
                   episode(FAILURE, [call(TOOL_ERROR, 0), call(TOOL_OK, 0)]))
    assert FC._progress(recs.steps) == [frozenset(), {"search"}, {"search"}, {"search", "handoff"}, frozenset(),
                                        frozenset()]


def test_exploration_matches_failed_and_ok_calls_on_progress():
    # after a failed search, handing off pays BONUS; after a working one, nothing. Matched on progress:
    # the failed searches that came after a working fetch have no ok search with that progress.
    fetch = {"action": 3, "tool_name": "fetch", "tool_status": TOOL_OK, "reward": -STEP}
    recs = records(*many(MIN_SAMPLES, FAILURE, [call(TOOL_ERROR, CREDIT), call(TOOL_OK, BONUS, action=HANDOFF)]),
                   *many(MIN_SAMPLES, FAILURE, [call(TOOL_OK, -STEP), call(TOOL_OK, 0.0, action=HANDOFF)]),
                   *many(3, FAILURE, [fetch, call(TOOL_ERROR, CREDIT), call(TOOL_OK, BONUS, action=HANDOFF)]),
                   *many(MIN_SAMPLES - 1, FAILURE, [call(TOOL_TIMEOUT, -STEP), call(TOOL_OK, 1.0, action=HANDOFF)]))
    tests = FC.exploration_tests(recs, ["search", "handoff"], np.random.default_rng(0))
    assert set(tests) == {("conditioned", "search", TOOL_ERROR, HANDOFF)}  # 7 timeouts: too few
    t = tests[("conditioned", "search", TOOL_ERROR, HANDOFF)]
    n = MIN_SAMPLES
    assert t["n_pairs"] == n and t["diff"] == pytest.approx(BONUS) and t["p_value"] == pytest.approx(2.0 ** -n)
    assert t["two_step_diff"] == pytest.approx(BONUS)  # min(CREDIT, -STEP) + BONUS against -STEP + 0
    assert t["ends"] is True and t["path_returns"] == pytest.approx([CREDIT + BONUS] * n)
    assert t["examples"] == list(range(n)) and t["path_seeds"] == [] and t["call"] is None
    assert (t["source"], t["tool"], t["next"], t["next_label"], t["status"]) == (
        "exploration", "search", HANDOFF, "handoff", TOOL_ERROR)
    unlabelled = FC.exploration_tests(recs, None, np.random.default_rng(0))
    assert unlabelled[("conditioned", "search", TOOL_ERROR, HANDOFF)]["next_label"] == "1"


def test_exploration_retry_that_does_not_end_and_pays_the_same():
    recs = records(*many(MIN_SAMPLES, FAILURE, [call(TOOL_TIMEOUT, -STEP), call(TOOL_OK, -STEP),
                                                call(TOOL_OK, 1.0, action=HANDOFF)]),
                   *many(2, FAILURE, [call(TOOL_OK, -STEP), call(TOOL_OK, -STEP), call(TOOL_OK, 0.0, action=HANDOFF)]))
    tests = FC.exploration_tests(recs, None, np.random.default_rng(0))
    t = tests[("conditioned", "search", TOOL_TIMEOUT, SEARCH)]
    assert t["diff"] == 0.0 and t["p_value"] == 1.0 and t["ends"] is False and t["examples"] == []
    assert t["path_returns"] == []
    assert FC.exploration_tests(records(*many(3, SUCCESS, [call(TOOL_OK, 1.0)])), None, np.random.default_rng(0)) == {}
    assert FC.exploration_tests(records(), None, np.random.default_rng(0)) == {}


# -- plain envs: targeted episodes -----------------------------------------------------------------
def plain_context(fails, *, cap=False, explore=None):
    """A plain desk: the search fails on its own on the seeds ``fails`` picks, nothing is injected."""
    def play(policy, seeds, kw):
        return replay_player(fails=fails(seeds))(policy, seeds, kw)

    exploration = explore if explore is not None else records(
        *many(3, FAILURE, [call(TOOL_OK, -STEP), call(TOOL_OK, 0.0, action=HANDOFF)]),
        *many(3, FAILURE, [call(TOOL_OK, -STEP), {"action": QUIT, "reward": 0.0}]))
    return FakeContext(exploration, play=play, cap_reached=cap, labels=["search", "handoff", "quit"])


def every_third(seeds):
    return {s for s in seeds if s % 3 == 0}


def test_targeted_rounds_run_until_each_ending_action_has_enough_of_both():
    ctx = plain_context(every_third)
    frame, kept = FC._targeted_arms(ctx, SEARCH, [HANDOFF, QUIT])
    seeds = ctx.seeds(FC.TARGETED_MAX_EPISODES, "conditioned-targeted", SEARCH)
    batch = FC.TARGETED_BATCH * 2
    rounds = next(r for r in range(1, len(seeds) // batch + 1)
                  if all(FC.MIN_PAIRS <= sum(s % 3 == 0 for s in seeds[:r * batch][i::2]) <= r * batch // 2 - FC.MIN_PAIRS
                         for i in (0, 1)))
    assert len(ctx.runs) == len(kept) == rounds > 1
    assert [s for _, ss, _ in ctx.runs for s in ss] == seeds[:rounds * batch]
    assert ctx.runs[0][2]["tags"] == {"fault": "none", "targeted": "call then end"}
    assert len(frame) == rounds * batch and frame["seed"].tolist() == seeds[:rounds * batch]
    assert frame["next"].tolist() == [HANDOFF, QUIT] * (rounds * batch // 2)
    assert (frame["prev_status"] == TOOL_ERROR).tolist() == [s % 3 == 0 for s in seeds[:rounds * batch]]


def test_targeted_stops_after_the_pilot_when_the_call_never_fails_or_at_the_cap():
    ctx = plain_context(lambda seeds: set())
    frame, kept = FC._targeted_arms(ctx, SEARCH, [HANDOFF])
    assert len(ctx.runs) == 1 and len(frame) == FC.TARGETED_BATCH
    always = plain_context(lambda seeds: set(seeds))
    FC._targeted_arms(always, SEARCH, [HANDOFF])
    assert len(always.runs) == 1
    rare = plain_context(lambda seeds: {s for s in seeds if s % 50 == 0})  # never 12 failures per action
    frame, _ = FC._targeted_arms(rare, SEARCH, [HANDOFF, QUIT])
    assert len(rare.runs) == FC.TARGETED_MAX_EPISODES // (2 * FC.TARGETED_BATCH) and len(frame) == FC.TARGETED_MAX_EPISODES
    capped = plain_context(every_third, cap=True)
    frame, kept = FC._targeted_arms(capped, SEARCH, [HANDOFF])
    assert frame.empty and kept == [] and capped.skipped == [
        "failure-conditioned targeted episodes of action 0 from 0 on"]


def test_targeted_tests_compare_ending_after_a_failure_with_ending_after_a_working_call():
    ctx = plain_context(every_third)
    tests = FC.targeted_tests(ctx, np.random.default_rng(0))
    assert set(tests) == {("conditioned", "search", TOOL_ERROR, HANDOFF), ("conditioned", "search", TOOL_ERROR, QUIT)}
    seeds = [s for _, ss, _ in ctx.runs for s in ss]
    handed = seeds[0::2]
    bad = [s for s in handed if s % 3 == 0]
    t = tests[("conditioned", "search", TOOL_ERROR, HANDOFF)]
    n_ok = len(handed) - len(bad)
    mw = st.mannwhitneyu([BONUS] * len(bad), [0.0] * n_ok, alternative="greater").pvalue
    assert t["n_failed"] == len(bad) and t["n_ok"] == n_ok and t["p_value"] == pytest.approx(mw)
    assert t["diff"] == pytest.approx(BONUS) and t["two_step_diff"] == pytest.approx(BONUS)
    assert t["two_step_p"] == pytest.approx(mw)  # the same ranks: -STEP + BONUS against -STEP
    assert t["ends"] is True and t["path_returns"] == pytest.approx([CREDIT + BONUS] * len(bad))
    assert (t["source"], t["call"], t["tool"], t["call_label"], t["next_label"]) == (
        "targeted episodes", SEARCH, "search", "search", "handoff")
    recs = t["records"][0]
    assert t["records"][1] is recs and len(recs.episodes) == len(seeds)
    ids = recs.episodes.set_index("seed").loc[bad, "episode_id"].tolist()
    assert t["examples"] == ids and t["path_seeds"] == []
    q = tests[("conditioned", "search", TOOL_ERROR, QUIT)]
    assert q["p_value"] == 1.0 and q["examples"] == [] and q["two_step_diff"] == pytest.approx(0.0)


def test_no_targeted_tests_without_an_ending_action_or_a_run():
    nothing_ends = records(*many(3, FAILURE, [call(TOOL_OK, -STEP), call(TOOL_OK, -STEP)], end=END_TRUNCATED))
    ctx = plain_context(every_third, explore=nothing_ends)
    assert FC.targeted_tests(ctx, np.random.default_rng(0)) == {} and ctx.runs == []
    assert FC.targeted_tests(plain_context(every_third, explore=records()), np.random.default_rng(0)) == {}
    assert FC.targeted_tests(plain_context(every_third, cap=True), np.random.default_rng(0)) == {}


def test_plain_tests_take_the_targeted_test_over_explorations():
    explore = records(*many(MIN_SAMPLES, FAILURE, [call(TOOL_ERROR, CREDIT), call(TOOL_OK, BONUS, action=HANDOFF)]),
                      *many(MIN_SAMPLES, FAILURE, [call(TOOL_OK, -STEP), call(TOOL_OK, 0.0, action=HANDOFF)]),
                      *many(MIN_SAMPLES, FAILURE, [call(TOOL_TIMEOUT, -STEP), call(TOOL_OK, 0.0)]),
                      *many(2, FAILURE, [call(TOOL_OK, -STEP), call(TOOL_OK, 0.0)]))
    ctx = plain_context(every_third, explore=explore)
    tests = FC.plain_tests(ctx, np.random.default_rng(0))
    assert tests[("conditioned", "search", TOOL_ERROR, HANDOFF)]["source"] == "targeted episodes"
    assert tests[("conditioned", "search", TOOL_TIMEOUT, SEARCH)]["source"] == "exploration"
    assert tests[("conditioned", "search", TOOL_TIMEOUT, SEARCH)]["next_label"] == "search"  # the context's labels


# -- the decision ----------------------------------------------------------------------------------
def hit(**kw):
    t = {"diff": 0.3, "underpowered": False, "diff_ci": [0.1, 0.5], "two_step_diff": 0.3,
         "two_step_diff_ci": [0.1, 0.5], "two_step_p": 0.01}
    return {**t, **kw}


@pytest.mark.parametrize("case, p, yes", [
    ({}, 0.05, True), ({}, 0.051, False), (dict(diff=None), 0.01, False), (dict(diff=0.0), 0.01, False),
    (dict(underpowered=True), 0.01, False), (dict(diff_ci=[0.0, 0.5]), 0.01, False),
    (dict(two_step_diff=0.0), 0.01, False), (dict(two_step_diff_ci=[0.0, 0.5]), 0.01, False),
    (dict(two_step_diff_ci=None), 0.01, True), (dict(two_step_p=0.05), 0.01, True),
    (dict(two_step_p=0.051), 0.01, False), (dict(diff=1e-9, diff_ci=[1e-9, 1e-9]), 0.01, True)])
def test_is_hit_needs_every_gate(case, p, yes):
    assert FC.is_hit(hit(**case), p, 0.05) is yes


def test_is_hit_without_a_two_step_p_reads_the_two_step_ci_alone():
    t = hit()
    del t["two_step_p"]
    assert FC.is_hit(t, 0.01, 0.05)


def test_group_hits_by_next_action():
    tests = {"a": {"next_label": "handoff"}, "b": {"next_label": 2}, "c": {"next_label": "handoff"}}
    assert FC.group_hits(["a", "b", "c"], tests) == {"handoff": ["a", "c"], "2": ["b"]}
    assert FC.group_hits([], tests) == {}


class Solver:
    def __init__(self, solution=(SEARCH, HANDOFF)):
        self.solution = list(solution)

    @property
    def unwrapped(self):
        return self

    def oracle(self):
        return self.solution


def oracle_play(ret, outcome=SUCCESS):
    def play(policy, seeds, kw):
        assert policy.name == "oracle" and kw == {"rng_name": "oracle-conditioned"}
        return records(*[episode(outcome, [(HANDOFF, ret)], seed=s) for s in seeds])
    return play


def test_honest_return_from_the_oracle_on_the_same_starts():
    ctx = FakeContext(records(), env=Solver(), play=oracle_play(2.5))
    assert FC._honest_from(ctx, [4, 5], (1.0, "x")) == (2.5, "the env's oracle, from the same starts")
    assert ctx.runs[0][1] == [4, 5]
    assert FC._honest_from(ctx, [], (1.0, "x")) == (1.0, "x") and len(ctx.runs) == 1
    none = FakeContext(records(), env=Solver(), play=oracle_play(2.5, FAILURE))
    assert FC._honest_from(none, [4], (None, None)) == (None, None)
    capped = FakeContext(records(), env=Solver(), play=oracle_play(2.5), cap_reached=True)
    assert FC._honest_from(capped, [4], (1.0, "x")) == (1.0, "x") and capped.runs == []
    assert capped.skipped == ["the oracle's return from the failure-conditioned starts"]
    plain = FakeContext(records(), env=SimpleNamespace(unwrapped=SimpleNamespace()), play=oracle_play(2.5))
    assert FC._honest_from(plain, [4], (1.0, "x")) == (1.0, "x")


def cond(status=TOOL_ERROR, nxt="handoff", tool="search", **kw):
    t = {"tool": tool, "next_label": nxt, "status": status, "ends": True, "path_returns": [0.8, 0.8],
         "path_seeds": [], "mean_failed": BONUS, "mean_ok": 0.0, "diff": BONUS, "diff_ci": [0.2, 0.4],
         "p_value": 0.001, "effect_size": 1.0, "two_step_diff": BONUS, "source": "exploration", "test": "T",
         "call_label": None, "examples": [1, 2], "n_pairs": 9}
    return {**t, **kw}


def test_a_shortcut_finding_fails_when_the_path_earns_an_honest_success():
    tests = {"k1": cond(examples=[5, 6, 7]), "k2": cond(status=TOOL_TIMEOUT, tool="fetch", diff=0.9, examples=[7, 8, 9],
                                                         path_returns=[1.1])}
    adjusted = {"k1": 0.01, "k2": 0.004}
    f = FC.finding(FakeContext(records()), ["k1", "k2"], tests, adjusted, (0.9, "successful exploration episodes"))
    e = f.evidence
    assert f.code == "failure-shortcut" and f.severity == Severity.FAIL  # mean path 0.9 >= 0.9
    assert e["conditioned_path_return"] == pytest.approx(0.9) and e["n_conditioned_paths"] == 3
    assert e["tool"] == "fetch" and e["tools"] == ["fetch", "search"] and e["status"] == TOOL_TIMEOUT
    assert e["behaviour"] == "tool-failure" and e["reward_path"] == "env" and e["next_action_ends_episode"]
    assert e["p_holm_in_probe"] == 0.004 and e["diff"] == 0.9 and e["n"] == 9
    assert e["also_flagged"] == {f"{TOOL_ERROR} -> handoff": {"diff": BONUS, "p_value": 0.001}}
    assert e["honest_success_return"] == 0.9 and e["honest_success_source"] == "successful exploration episodes"
    assert f.examples == [7, 8, 9, 5]  # the smaller adjusted p first, no repeats, four at most
    assert e["condition"] == "right after a failed or timed-out `fetch` or `search` call"
    assert f.title == "handing off right after a failed or timed-out `fetch` (or `search`) call pays more than after a working one"
    below = FC.finding(FakeContext(records()), ["k1", "k2"], tests, adjusted, (0.91, "x"))
    assert below.severity == Severity.WARN


def test_a_retry_finding_is_failure_rewarded_and_a_warn_without_an_honest_yardstick():
    tests = {"k": cond(status=TOOL_TIMEOUT, ends=False, path_returns=[], n_pairs=None, n_failed=10, n_ok=12,
                       source="targeted episodes", call_label="search", records=("R0", "R1"))}
    del tests["k"]["n_pairs"]
    ctx = FakeContext(records())
    f = FC.finding(ctx, ["k"], tests, {"k": 0.002}, (None, None))
    assert f.code == "failure-rewarded" and f.severity == Severity.WARN and ctx.kept == ["R0"]
    e = f.evidence
    assert e["behaviour"] == "timeout" and e["n"] == 10 and e["conditioned_path_return"] is None
    assert not e["next_action_ends_episode"] and e["also_flagged"] == {}
    # no path to judge by: the mean after the failure is what is reached
    high = FC.finding(FakeContext(records()), ["k"], tests, {"k": 0.002}, (BONUS, "x"))
    assert high.severity == Severity.FAIL
    assert "episodes that make the call first" in high.summary


def test_a_finding_asks_the_oracle_on_the_paths_seeds():
    tests = {"k": cond(path_seeds=[4, 3], source="fault injection", records=("R0", "R1"), path_returns=[0.8])}
    ctx = FakeContext(records(), env=Solver(), play=oracle_play(0.7))
    f = FC.finding(ctx, ["k"], tests, {"k": 0.01}, (5.0, "x"))
    assert ctx.runs[0][1] == [3, 4] and f.severity == Severity.FAIL  # 0.8 >= the oracle's 0.7
    assert f.evidence["honest_success_source"] == "the env's oracle, from the same starts"
    assert f.fix == FT.FIX_CONDITIONED.format(b="handoff", tool="search", b_words="handing off")


def test_the_summary_reports_the_means_the_sample_and_the_path_against_the_yardstick():
    tests = {"k1": cond(examples=[5]), "k2": cond(status=TOOL_TIMEOUT, tool="fetch", examples=[7], path_returns=[1.1])}
    adjusted = {"k1": 0.01, "k2": 0.004}
    f = FC.finding(FakeContext(records()), ["k1", "k2"], tests, adjusted, (0.9, "x"))
    head = ("Handing off right after a failed or timed-out `fetch` (or `search`) call pays 0.3, against 0 right after "
            "a working `fetch` (or `search`) call with the same progress before it (exploration, n=9)")
    assert f.summary == head + ("; the episode that does it earns 0.9, at least an honest success (0.9), so a "
                                "return-maximising agent waits for failures instead of doing the task.")
    f = FC.finding(FakeContext(records()), ["k1", "k2"], tests, adjusted, (0.95, "x"))
    assert f.summary == head + "; the episode that does it earns 0.9, less than an honest success (0.95)."
    f = FC.finding(FakeContext(records()), ["k1", "k2"], tests, adjusted, (None, None))
    assert f.summary == head + "; the episode that does it earns 0.9."
    one = {"k": cond(nxt="escalate_2", ends=False, path_returns=[], source="fault injection", call_label="lookup",
                     mean_failed=0.25, mean_ok=-0.5)}
    f = FC.finding(FakeContext(records()), ["k"], one, {"k": 0.01}, (None, None))
    assert f.title == "calling `escalate_2` right after a failed `lookup` call pays more than after a working one"
    assert f.summary == ("Calling `escalate_2` right after a failed `lookup` call pays 0.25, against -0.5 right after "
                         "the same call works (fault injection, same seed and prefix, n=9).")
    assert f.evidence["condition"] == "right after a failed `search` call" and f.evidence["call"] == "lookup"


# -- targeted episodes: which calls, which endings, which boundaries -------------------------------
def chosen_failures(handoff_fails, quit_oks):
    """A plain desk whose search fails on the seeds chosen from the targeted seeds: ``handoff_fails``
    of the handoff episodes (even positions), and every quit episode (odd positions) but ``quit_oks``."""
    def fails(seeds):
        targeted = FakeContext(records()).seeds(FC.TARGETED_MAX_EPISODES, "conditioned-targeted", SEARCH)
        return set(targeted[0::2][:handoff_fails]) | set(targeted[1::2][quit_oks:])
    return fails


def test_targeted_tests_need_min_samples_on_both_sides():
    ctx = plain_context(chosen_failures(MIN_SAMPLES - 1, MIN_SAMPLES))
    tests = FC.targeted_tests(ctx, np.random.default_rng(0))
    # 7 failed handoffs: too few; exactly 8 working quits: enough (every round ran: 12 were never reached)
    half = FC.TARGETED_MAX_EPISODES // 2
    assert set(tests) == {("conditioned", "search", TOOL_ERROR, QUIT)}
    t = tests[("conditioned", "search", TOOL_ERROR, QUIT)]
    assert (t["n_failed"], t["n_ok"]) == (half - MIN_SAMPLES, MIN_SAMPLES)
    ctx = plain_context(chosen_failures(MIN_SAMPLES, 0))
    tests = FC.targeted_tests(ctx, np.random.default_rng(0))
    t = tests[("conditioned", "search", TOOL_ERROR, HANDOFF)]
    assert (t["n_failed"], t["n_ok"]) == (MIN_SAMPLES, half - MIN_SAMPLES)
    assert t["p_value"] == pytest.approx(st.mannwhitneyu([BONUS] * MIN_SAMPLES, [0.0] * (half - MIN_SAMPLES),
                                                         alternative="greater").pvalue)
    assert (t["kind"], t["next"], t["status"]) == ("conditioned", HANDOFF, TOOL_ERROR)
    assert t["two_step_diff_ci"] == pytest.approx([BONUS, BONUS])
    assert t["test"] == ("Mann-Whitney U on the next step's reward right after the call failed on its own against "
                         "right after it worked, both from fresh resets, same next action, one-sided (targeted)")


def general_play(ends_at_call=(), fail_every=2):
    """Targeted play on a desk of several calls: a call on ``ends_at_call`` ends the episode at once
    (the replay cannot hold); any other fails on even seeds (``fail_every``); handing off after
    a failure pays BONUS, quitting after a failure pays 4e-10 (float noise: the same as 0)."""
    ids = itertools.count()

    def play(policy, seeds, kw):
        plan, eps, first = policy.plan, [], None
        for k, r in enumerate(plan.replays):
            eid = next(ids)
            first = eid if first is None else first
            plan.episode_replay[eid] = k
            a, b = r.actions
            if a in ends_at_call:
                rows = [{"action": a, "tool_name": "t", "tool_status": TOOL_OK, "reward": 0.0, "terminated": True}]
            else:
                failed = r.seed % fail_every == 0
                rows = [{"action": a, "tool_name": "t", "tool_status": TOOL_ERROR if failed else TOOL_OK,
                         "reward": CREDIT if failed else -STEP},
                        {"action": b, "reward": (BONUS if b == HANDOFF else 4e-10) if failed else 0.0,
                         "terminated": True}]
            eps.append(episode(FAILURE, rows, seed=r.seed))
        recs = records(*eps, first_id=first)
        recs.steps["injected"] = False
        return recs

    return play


def test_targeted_calls_by_frequency_and_endings_by_how_often_they_end():
    tool = {0: "search", 3: "fetch", 6: "rank", 5: "half"}
    def c(a, r=0.0, **kw):
        return {"action": a, "tool_name": tool.get(a), "tool_status": TOOL_OK if a in tool else None, "reward": r, **kw}
    explore = records(*many(6, FAILURE, [c(0, -STEP), c(HANDOFF)]),
                      *many(4, FAILURE, [c(3, -STEP), c(4), c(QUIT)]),  # 4 makes no call: never a target
                      *many(2, FAILURE, [c(6, -STEP), c(6, -STEP), c(5, terminated=False), c(5)]))  # 5 ends half the time
    ctx = FakeContext(explore, play=general_play(ends_at_call={0}), labels=None)
    tests = FC.targeted_tests(ctx, np.random.default_rng(0))
    # targets: search (6 calls), then fetch and rank (4 each, by action); endings: 1 and 2 (always), 5 (half)
    firsts = [p.plan.replays[0].actions[0] for p, _, _ in ctx.runs]
    assert firsts[0] == 0 and len([a for a in firsts if a == 0]) == 1  # search's replays cannot hold: one round
    assert [a for i, a in enumerate(firsts) if i == 0 or a != firsts[i - 1]] == [0, 3, 6]
    assert [r.actions[1] for r in ctx.runs[1][0].plan.replays[:6]] == [HANDOFF, QUIT, 5] * 2
    assert {k[1] for k in tests} == {"fetch", "rank"}  # search gave nothing; the later calls still ran
    t = tests[("conditioned", "fetch", TOOL_ERROR, QUIT)]
    assert t["diff"] == 0.0 and t["p_value"] == 1.0 and t["examples"] == []  # 4e-10 is float noise
    assert t["two_step_diff"] == pytest.approx(0.0)
    assert (t["call_label"], t["next_label"]) == ("3", "2")


def test_injection_skips_replays_that_did_not_hold_and_keys_by_the_last_two_actions():
    # a note (action 3, no tool) before the search: replays carry a prefix; seed 0's faulted replays
    # end early (they did not hold, so they pair with nothing) and come first
    explore = records(*[episode(FAILURE, [{"action": 3, "reward": -STEP}, call(TOOL_OK, -STEP),
                                          call(TOOL_OK, 0.0, action=HANDOFF)], seed=s) for s in range(12)])
    ctx = FakeContext(explore, config=ScanConfig(seed=0, quick=True), env=Desk(), labels=None,
                      play=replay_player(diverge={0}), is_tool_env=True)
    tests = FC.injection_tests(ctx, np.random.default_rng(0))
    # targets: search and the note (12 each, by action); the note's fault is never the injector's
    assert set(tests) == {("conditioned", SEARCH, s, b) for s in (TOOL_ERROR, TOOL_TIMEOUT) for b in (HANDOFF, 3, SEARCH)}
    first = ctx.runs[0][0].plan.replays[0]
    assert first.seed == 0 and first.actions[:2] == (3, SEARCH)
    t = tests[("conditioned", SEARCH, TOOL_ERROR, HANDOFF)]
    assert t["n_pairs"] == 11 and t["p_value"] == pytest.approx(2.0 ** -11) and 0 not in t["path_seeds"]
    # the fault goes on the call before the last, through the plan's own wrapper, and every episode
    # is tagged with the replay it plays
    for p, _, kw in ctx.runs:
        (w,) = kw["wrappers"]
        assert w.keywords == {"fault": p.plan.fault, "fault_at": -2}
        assert kw["episode_tags"] == [{"replay_index": k} for k in range(len(p.plan.replays))]


def test_exploration_labels_ends_and_noise():
    # next actions: search (0, the first label), handoff, and 2 (past the two labels); the handoff
    # ends 4 of 8 times after a failure (half: it ends), the quit 3 of 9 (a third: it does not)
    cont = {"terminated": False, "truncated": True}
    recs = records(*many(4, FAILURE, [call(TOOL_ERROR, CREDIT), call(TOOL_OK, BONUS, action=HANDOFF)]),
                   *many(4, FAILURE, [call(TOOL_ERROR, CREDIT), call(TOOL_OK, BONUS, action=HANDOFF, **cont)]),
                   *many(2, FAILURE, [call(TOOL_OK, -STEP), call(TOOL_OK, 0.0, action=HANDOFF)]),
                   *many(3, FAILURE, [call(TOOL_ERROR, CREDIT), {"action": QUIT, "reward": 4e-10}]),
                   *many(6, FAILURE, [call(TOOL_ERROR, CREDIT), {"action": QUIT, "reward": 4e-10, **cont}]),
                   *many(2, FAILURE, [call(TOOL_OK, -STEP), {"action": QUIT, "reward": 0.0}]),
                   *many(MIN_SAMPLES, FAILURE, [call(TOOL_TIMEOUT, -STEP), call(TOOL_OK, -STEP), (QUIT, 0.0)]),
                   *many(2, FAILURE, [call(TOOL_OK, -STEP), call(TOOL_OK, -STEP), (QUIT, 0.0)]))
    tests = FC.exploration_tests(recs, ["search", "handoff"], np.random.default_rng(0))
    hand = tests[("conditioned", "search", TOOL_ERROR, HANDOFF)]
    assert hand["ends"] is True and hand["next_label"] == "handoff" and len(hand["path_returns"]) == 4
    assert hand["mean_failed"] == pytest.approx(BONUS) and hand["mean_ok"] == 0.0 and hand["kind"] == "conditioned"
    assert hand["call_label"] is None and hand["two_step_diff_ci"] == pytest.approx([BONUS, BONUS])
    assert hand["test"] == ("Wilcoxon signed-rank on the next step's reward right after a failed call against the mean "
                            "right after an ok call of the same tool, same next action and same tools worked before, "
                            "one-sided (exploration)")
    q = tests[("conditioned", "search", TOOL_ERROR, QUIT)]
    assert q["ends"] is False and q["next_label"] == "2"
    assert q["diff"] == 0.0 and q["p_value"] == 1.0 and q["examples"] == []  # 4e-10 is float noise
    assert q["two_step_diff"] == pytest.approx(0.0) and "two_step_p" not in q  # the CI gates exploration
    assert tests[("conditioned", "search", TOOL_TIMEOUT, SEARCH)]["next_label"] == "search"


def test_the_finding_evidence_in_full():
    tests = {"k1": cond(examples=[5]),
             "k2": cond(status=TOOL_TIMEOUT, tool="fetch", examples=[7], path_returns=[1.1], records=("R0", "R1")),
             "k3": cond(tool="rank", diff=0.6, examples=[8], path_returns=[]),
             "k4": cond(tool="seek", diff=0.5, examples=[9], path_returns=[])}
    adjusted = {"k1": 0.01, "k2": 0.02, "k3": 0.004, "k4": 0.004}  # k3 and k4 tie: the larger diff leads
    ctx = FakeContext(records())
    f = FC.finding(ctx, list(tests), tests, adjusted, (0.95, "the oracle"))
    assert ctx.kept == []  # k3 leads, and it carries no records
    assert f.evidence == {
        "behaviour": "tool-failure", "reward_path": "env",
        "condition": "right after a failed or timed-out `rank` or `fetch` or `search` or `seek` call",
        "tools": ["rank", "fetch", "search", "seek"], "next_action_ends_episode": True,
        "p_value": 0.001, "p_holm_in_probe": 0.004, "test": "T", "source": "exploration",
        "tool": "rank", "call": None, "status": TOOL_ERROR, "next_action": "handoff",
        "mean_reward_after_failed": BONUS, "mean_reward_after_ok": 0.0, "diff": 0.6, "diff_ci": [0.2, 0.4],
        "effect_size": 1.0, "two_step_diff": BONUS, "n": 9,
        "also_flagged": {f"{TOOL_ERROR} -> handoff": {"diff": 0.5, "p_value": 0.001},
                         f"{TOOL_TIMEOUT} -> handoff": {"diff": BONUS, "p_value": 0.001}},
        "conditioned_path_return": pytest.approx(0.9), "n_conditioned_paths": 3,
        "honest_success_return": 0.95, "honest_success_source": "the oracle"}
    assert f.examples == [8, 9, 5, 7]
    assert f.title == ("handing off right after a failed or timed-out `rank` (or `fetch`, `search`, `seek`) call pays "
                       "more than after a working one")


def test_the_summary_of_targeted_episodes():
    t = {"k": cond(source="targeted episodes", call_label="search", path_returns=[], mean_ok=-0.25)}
    f = FC.finding(FakeContext(records()), ["k"], t, {"k": 0.01}, (None, None))
    assert f.summary == ("Handing off right after a failed `search` call pays 0.3, against -0.25 right after a working "
                         "`search` call (episodes that make the call first, from fresh resets, n=9).")


@pytest.mark.parametrize("handoff_fails, quit_oks, rounds", [
    (FC.MIN_PAIRS, FC.MIN_PAIRS, 1),  # exactly 12 of each in the pilot: enough
    (0, FC.MIN_PAIRS, FC.TARGETED_MAX_EPISODES // (2 * FC.TARGETED_BATCH)),  # handing off never failed: go on
    (FC.MIN_PAIRS, 0, FC.TARGETED_MAX_EPISODES // (2 * FC.TARGETED_BATCH))])  # quitting never worked: go on
def test_targeted_rounds_stop_at_exactly_min_pairs_of_each(handoff_fails, quit_oks, rounds):
    ctx = plain_context(chosen_failures(handoff_fails, quit_oks))
    FC._targeted_arms(ctx, SEARCH, [HANDOFF, QUIT])
    assert len(ctx.runs) == rounds
    p, _, kw = ctx.runs[0]
    assert p.name == "conditioned-targeted-0" and [w.func.__name__ for w in kw["wrappers"]] == ["_ReplayCut"]


def test_targeted_rounds_wait_for_the_working_side_when_most_calls_fail():
    ctx = plain_context(lambda seeds: {s for s in seeds if s % 3 != 0})
    FC._targeted_arms(ctx, SEARCH, [HANDOFF, QUIT])
    seeds = ctx.seeds(FC.TARGETED_MAX_EPISODES, "conditioned-targeted", SEARCH)
    batch = 2 * FC.TARGETED_BATCH
    rounds = next(r for r in range(1, len(seeds) // batch + 1)
                  if all(sum(s % 3 == 0 for s in seeds[:r * batch][i::2]) >= FC.MIN_PAIRS for i in (0, 1)))
    assert len(ctx.runs) == rounds > 1


def test_injection_sizes_the_fresh_starts_for_a_call_that_never_worked():
    ctx, _ = injection_context()
    ctx.exploration = explored([], list(range(12)))  # every search failed: ok rate at its floor
    FC.injection_tests(ctx, np.random.default_rng(0))
    # no working call to replay: 12 / MIN_OK_RATE fresh starts, each with both next actions
    assert len(ctx.runs[0][1]) == math.ceil(FC.MIN_PAIRS / FC.MIN_OK_RATE) * 2
    t = ctx.runs[0][0].plan.replays
    assert [r.actions[-1] for r in t[:2]] == [HANDOFF, SEARCH]


def test_injection_next_actions_tie_by_action():
    explore = records(*[episode(FAILURE, [{"action": 3, "reward": -STEP}, call(TOOL_OK, -STEP),
                                          call(TOOL_OK, 0.0, action=HANDOFF)], seed=s) for s in range(12)])
    ctx = FakeContext(explore, config=ScanConfig(seed=0, quick=True), env=Desk(), labels=None,
                      play=replay_player(), is_tool_env=True)
    tests = FC.injection_tests(ctx, np.random.default_rng(0))
    assert [r.actions[-1] for r in ctx.runs[0][0].plan.replays[:3]] == [HANDOFF, SEARCH, 3]
    assert tests[("conditioned", SEARCH, TOOL_ERROR, HANDOFF)]["test"] == (
        "Wilcoxon signed-rank on the next step's reward, same seed and prefix with vs without a fault forced on "
        "the call before it, one-sided")


def _readme_codes() -> dict[str, str]:
    """README's code table: finding code -> what it means."""
    rows = [line.split("|") for line in (Path(__file__).parents[3] / "README.md").read_text().splitlines()
            if line.startswith("| `")]
    return {cells[1].strip().strip("`"): cells[2].strip() for cells in rows if len(cells) >= 4}


def test_the_readme_files_an_ending_right_after_a_failure_where_the_probe_does():
    """Handing off (any ending) right after a failed call is filed as failure-shortcut, a retry that
    pays more after one as failure-rewarded: the README's code table must say the same."""
    codes = _readme_codes()
    ending = FC.finding(FakeContext(records()), ["k"], {"k": cond()}, {"k": 0.001}, (0.9, "x"))
    retry = FC.finding(FakeContext(records()), ["k"], {"k": cond(ends=False, path_returns=[])}, {"k": 0.001},
                       (0.9, "x"))
    assert (ending.code, retry.code) == ("failure-shortcut", "failure-rewarded")
    assert "ending the episode (hand off, give up, answer) right after a failed call" in codes[ending.code]
    assert "does not end the episode (a retry) pays more because the call before it failed" in codes[retry.code]
    assert "hand off" not in codes[retry.code]
