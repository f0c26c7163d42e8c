"""``failure_rewarded``'s decisions on hand-built envs whose answers are known.

A ``ToolEnv`` stand-in with three calls (``search``, ``fetch``, ``answer``) pays each call by its
tool status (``PAY``); the fake context's ``run`` plays the fault-injection replays step by step
from that table (``tests/fixtures/frames.replayed``) and the farming policy as ``FARM_LEN``
repeats of its call. Every expected number follows from ``PAY`` and the replays the probe asks
for: the pairs it may keep, their exact signed-rank p (all differences equal: 2^-n), Holm over the
tests that can reject, the honest return and the farm's.
"""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
from scipy import stats as st

from envaudit.config import ScanConfig
from envaudit.faults import FaultInjector
from envaudit.findings import Severity
from envaudit.policies import RepeatPolicy
from envaudit.probes.failures import conditioned as FC
from envaudit.probes.failures import rewarded as R
from envaudit.probes.failures import text as FT
from envaudit.protocol import FAILURE, SUCCESS, TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT
from tests.fixtures.frames import FakeContext, episode, many, records, replayed

SEARCH, FETCH, ANSWER = 0, 1, 2
LABELS = ["search", "fetch", "answer"]
TOOLS = ["search", "fetch", "submit"]
PAY = {SEARCH: {TOOL_OK: 0.0, TOOL_ERROR: 0.5, TOOL_TIMEOUT: 0.0},  # a failed search pays 0.5
       FETCH: {TOOL_OK: 0.0, TOOL_ERROR: -0.5, TOOL_TIMEOUT: -0.5},
       ANSWER: {TOOL_OK: 1.0, TOOL_ERROR: 0.0, TOOL_TIMEOUT: 0.0}}
ENDS = {(FETCH, TOOL_TIMEOUT), (ANSWER, TOOL_OK)}  # a fetch timeout ends the episode; a failed answer does not
NATURAL_ERRORS = {(1, SEARCH), (2, FETCH)}  # (seed, call) pairs that fail on their own
MISSED = {(2, FETCH)}  # the forced fault misses this call (it fails on its own: not injected)
FARM_LEN = 4


def tool_env(n=3, catalogue=True):
    unwrapped = SimpleNamespace(catalogue=[SimpleNamespace(tool=t) for t in TOOLS]) if catalogue else SimpleNamespace()
    return SimpleNamespace(action_space=gym.spaces.Discrete(n), unwrapped=unwrapped)


def step_of(pay, broken=()):
    """``broken``: calls that always fail on their own."""
    def step(seed, t, action, forced):
        natural = TOOL_ERROR if (seed, action) in NATURAL_ERRORS or action in broken else TOOL_OK
        injected = forced is not None and (seed, action) not in MISSED
        status = forced if injected else natural
        return {"tool_name": TOOLS[action] if action < len(TOOLS) else f"t{action}", "tool_status": status,
                "reward": pay.get(action, {}).get(status, 0.0), "injected": injected,
                "terminated": (action, status) in ENDS}
    return step


def world(ctx_ref, pay=PAY, broken=()):
    """The fake run: replay plans step by step, a farming policy as FARM_LEN repeats of its call
    under the status its fault rates force (its own status on a plain env)."""
    step = step_of(pay, broken)

    def play(policy, seeds, kw):
        ctx = ctx_ref[0]
        first_id = 1000 * len(ctx.runs)
        if isinstance(policy, RepeatPolicy):
            forced = None
            for w in kw.get("wrappers", ()):
                (rates,) = w.keywords["rates"].values()
                (forced,) = [s for s, r in rates.items() if r == 1.0]
            eps = [episode(FAILURE, [{"action": policy.action, **step(s, t, policy.action, forced)}
                                     for t in range(FARM_LEN)], seed=s) for s in seeds]
            return records(*eps, first_id=first_id)
        return replayed(policy.plan, step, first_id=first_id)
    return play


def explored_ok():
    """Exploration: every call works. Seeds 0-2 search, fetch, answer (a success, return 1), seed 3 searches."""
    return records(*[episode(SUCCESS, [{"action": a, "tool_name": TOOLS[a], "tool_status": TOOL_OK, "reward": PAY[a][TOOL_OK]}
                                       for a in (SEARCH, FETCH, ANSWER)], success=True) for _ in range(3)],
                   episode(FAILURE, [{"action": SEARCH, "tool_name": "search", "tool_status": TOOL_OK, "reward": 0.0}]))


def make_ctx(exploration=None, pay=PAY, broken=(), **kw):
    ref = []
    kw.setdefault("env", tool_env())
    kw.setdefault("labels", LABELS)
    ctx = FakeContext(explored_ok() if exploration is None else exploration, play=world(ref, pay, broken),
                      is_tool_env=kw.pop("is_tool_env", True), **kw)
    ref.append(ctx)
    return ctx


# -- injection_tests: the paired replays ----------------------------------------------------------
def test_injection_replays_each_call_with_and_without_a_forced_fault():
    ctx = make_ctx()
    tests, arms, charge = R.injection_tests(ctx, np.random.default_rng(0))
    n = R.INJECTION_PAIRS
    fresh = ctx.seeds(n, "fresh")
    (p_ok, s_ok, kw_ok), (p_err, s_err, kw_err), (p_tmo, s_tmo, kw_tmo) = ctx.runs
    assert [p.name for p, _, _ in ctx.runs] == ["replay-ok", "replay-error", "replay-timeout"]
    assert [kw["tags"] for _, _, kw in ctx.runs] == [{"fault": "none"}, {"fault": TOOL_ERROR}, {"fault": TOOL_TIMEOUT}]
    assert [kw["wrappers"][0].keywords["fault"] for kw in (kw_ok, kw_err, kw_tmo)] == [None, TOOL_ERROR, TOOL_TIMEOUT]
    assert all(len(kw["wrappers"]) == 1 for kw in (kw_ok, kw_err, kw_tmo)) and p_err.plan.fault == TOOL_ERROR
    assert s_ok == s_err == s_tmo
    # exploration's own (seed, prefix) first (search after nothing at seeds 0-3; fetch after a search
    # and answer after both at seeds 0-2), then fresh seeds with the call first, n per call
    want = sorted([(s, (SEARCH,)) for s in range(4)] + [(s, (SEARCH,)) for s in fresh[:n - 4]])
    want += sorted([(s, (SEARCH, FETCH)) for s in range(3)] + [(s, (FETCH,)) for s in fresh[:n - 3]])
    want += sorted([(s, (SEARCH, FETCH, ANSWER)) for s in range(3)] + [(s, (ANSWER,)) for s in fresh[:n - 3]])
    assert [(r.seed, r.actions) for r in p_ok.plan.replays] == want
    assert arms == {None: arms[None], TOOL_ERROR: arms[TOOL_ERROR], TOOL_TIMEOUT: arms[TOOL_TIMEOUT]}
    assert arms[TOOL_ERROR].episodes["episode_id"].min() == 2000 and len(arms[None].episodes) == 3 * n

    # search: the error pays 0.5 over the working call; seed 1's search fails in the no-fault arm too,
    # so 11 pairs, every difference +0.5: exact signed-rank p = 2^-11
    t = tests[(SEARCH, TOOL_ERROR)]
    assert t["n_pairs"] == n - 1 and t["diff"] == pytest.approx(0.5) and t["p_value"] == pytest.approx(2.0 ** -11)
    assert t["mean_failed"] == 0.5 and t["mean_ok"] == 0.0 and not t["underpowered"]
    assert t["source"] == "fault injection" and t["tool"] == "search" and t["examples"] == [2000, 2002, 2003]
    assert t["test"].startswith("Wilcoxon signed-rank, same seed and prefix")
    assert tests[(SEARCH, TOOL_TIMEOUT)]["diff"] == 0.0 and tests[(SEARCH, TOOL_TIMEOUT)]["p_value"] == 1.0
    # fetch at seed 2: the fault missed, the call failed on its own: not a forced failure, no pair
    assert tests[(FETCH, TOOL_ERROR)]["n_pairs"] == n - 1 and tests[(FETCH, TOOL_ERROR)]["diff"] == pytest.approx(-0.5)
    assert tests[(FETCH, TOOL_TIMEOUT)]["n_pairs"] == n - 1 and tests[(FETCH, TOOL_TIMEOUT)]["tool"] == "fetch"
    assert tests[(ANSWER, TOOL_ERROR)]["n_pairs"] == n and tests[(ANSWER, TOOL_ERROR)]["diff"] == pytest.approx(-1.0)
    assert tests[(ANSWER, TOOL_TIMEOUT)]["tool"] == "submit"  # the catalogue's tool, not the label
    assert set(tests) == {(a, s) for a in (SEARCH, FETCH, ANSWER) for s in (TOOL_ERROR, TOOL_TIMEOUT)}

    # what a failure is charged: failed rewards where the failure did not end the episode, and the
    # pairs where neither the failed nor the working call ended it
    assert charge[(SEARCH, TOOL_ERROR)] == ([0.5] * n, [(0.5, 0.0)] * (n - 1))
    assert charge[(SEARCH, TOOL_TIMEOUT)] == ([0.0] * n, [(0.0, 0.0)] * (n - 1))
    assert charge[(FETCH, TOOL_ERROR)] == ([-0.5] * (n - 1), [(-0.5, 0.0)] * (n - 1))
    assert charge[(FETCH, TOOL_TIMEOUT)] == ([], [])  # a fetch timeout ends the episode
    assert charge[(ANSWER, TOOL_ERROR)] == ([0.0] * n, [])  # a working answer ends it
    assert charge[(ANSWER, TOOL_TIMEOUT)] == ([0.0] * n, [])


def test_injection_tests_the_most_called_actions_with_the_quick_floor():
    # action 9 called 3 times, 4 twice, 5-8 once, 0-3 never: the 8 most called, ties by index
    calls = [9, 9, 9, 4, 4, 5, 6, 7, 8]
    explored = records(*[episode(FAILURE, [{"action": a, "tool_name": "t", "tool_status": TOOL_OK}]) for a in calls])
    # action 9, the first tested, never works: it has no pair, the others still do
    ctx = make_ctx(explored, env=tool_env(10, catalogue=False), labels=None, broken={9},
                   config=ScanConfig(seed=0, quick=True))
    tests, _, _ = R.injection_tests(ctx, np.random.default_rng(0))
    replays = ctx.runs[0][0].plan.replays
    per = {a: sum(r.actions[-1] == a for r in replays) for a in range(10)}
    assert R.MAX_ACTIONS == 8
    assert [a for a in range(10) if per[a]] == [0, 1, 4, 5, 6, 7, 8, 9]  # 2 and 3 are left out
    # --quick: a quarter of INJECTION_PAIRS (3), but never under INJECTION_MIN_PAIRS
    assert {per[a] for a in per if per[a]} == {R.INJECTION_MIN_PAIRS}
    assert sorted(r.seed for r in replays if r.actions == (0,)) == sorted(ctx.seeds(R.INJECTION_MIN_PAIRS, "fresh"))
    assert {t["tool"] for t in tests.values()} == {str(a) for a in (0, 1, 4, 5, 6, 7, 8)}  # no catalogue, no labels
    assert len(tests) == 2 * 7


def test_injection_tool_names_fall_back_to_the_labels():
    ctx = make_ctx(env=tool_env(catalogue=False))
    tests, _, _ = R.injection_tests(ctx, np.random.default_rng(0))
    assert tests[(ANSWER, TOOL_ERROR)]["tool"] == "answer" and tests[(SEARCH, TOOL_ERROR)]["tool"] == "search"


def test_injection_stops_at_the_cap_before_any_arm_it_cannot_run():
    ctx = make_ctx(cap_reached=True)
    assert R.injection_tests(ctx, np.random.default_rng(0)) == ({}, {}, {})
    assert ctx.runs == [] and ctx.skipped == ["fault injection arm 'ok'"]
    ctx = make_ctx()
    play = ctx.play

    def once(policy, seeds, kw):  # the cap is reached while the first arm runs
        ctx.cap_reached = True
        return play(policy, seeds, kw)

    ctx.play = once
    assert R.injection_tests(ctx, np.random.default_rng(0)) == ({}, {}, {})
    assert len(ctx.runs) == 1 and ctx.skipped == ["fault injection arm 'error'"]


# -- failure_rewarded: which test decides, Holm, severity ------------------------------------------
@pytest.fixture
def no_conditioned(monkeypatch):
    """The failure-conditioned tests (``failure_conditioned``'s own decisions) stubbed: which one
    ran is recorded, and what they return is the test's to choose."""
    calls, cond, args = [], {}, []

    def stub(name):
        def tests(ctx, rng):
            calls.append(name)
            args.append((ctx, rng))
            return dict(cond)
        return tests

    monkeypatch.setattr(FC, "injection_tests", stub("injection"))
    monkeypatch.setattr(FC, "plain_tests", stub("plain"))
    return SimpleNamespace(calls=calls, tests=cond, args=args)


RUNS = SimpleNamespace(get=lambda policy, rate: None)  # a ToolEnv's policy runs (no oracle here)


def test_a_failed_call_that_pays_is_flagged_with_its_farm(no_conditioned):
    ctx = make_ctx()
    injected, arms, _ = R.injection_tests(ctx, np.random.default_rng(0))
    (f,) = R.failure_rewarded(ctx, RUNS, injected, arms)
    assert no_conditioned.calls == ["injection"]
    ((ctx_seen, rng),) = no_conditioned.args  # this scan's context and a generator of its own
    assert ctx_seen is ctx and isinstance(rng, np.random.Generator)
    # Holm over the tests that can reject: search (error) and the four fetch/answer tests whose
    # failed calls pay less (p = 1 but an effect of -1); search (timeout) never differs (p = 1, effect 0)
    e = f.evidence
    assert f.code == "failure-rewarded" and e["tool"] == "search" and e["status"] == TOOL_ERROR
    assert e["p_value"] == pytest.approx(2.0 ** -11) and e["tests_in_probe"] == 5
    assert e["p_holm_in_probe"] == pytest.approx(5 * 2.0 ** -11)
    assert e["behaviour"] == "tool-failure" and e["reward_path"] == "env" and e["source"] == "fault injection"
    assert e["action"] == "search" and e["mean_reward_failed"] == 0.5 and e["mean_reward_ok"] == 0.0
    assert e["diff"] == pytest.approx(0.5) and e["n"] == R.INJECTION_PAIRS - 1 and e["effect_size"] == 1.0
    assert e["also_flagged"] == {} and "exploration" not in e and "topup" not in e
    # the farm: search repeated FARM_LEN times under a 100% error rate, 0.5 a step
    policy, seeds, kw = ctx.runs[3]
    assert isinstance(policy, RepeatPolicy) and policy.action == SEARCH and policy.name == "farm-error"
    assert seeds == ctx.seeds(R.FARM_EPISODES, "farm") and kw["rng_name"] == "farm-0-error"
    assert kw["wrappers"][0].func is FaultInjector and kw["wrappers"][0].keywords == {"rates": {"search": {TOOL_ERROR: 1.0}}}
    assert e["farm_mean_return"] == pytest.approx(0.5 * FARM_LEN)
    assert e["farm_policy"] == "always call `search`, with every call forced to error"
    # the honest success: exploration's successes (search 0 + fetch 0 + answer 1); the farm's 2 beats it
    assert e["honest_success_return"] == 1.0 and e["honest_success_source"] == "successful exploration episodes"
    assert f.severity == Severity.FAIL
    assert f.summary == ("When a `search` call fails, that step pays 0.5 against 0 when it works (fault injection, "
                         "n=11); an agent that makes it fail at will earns 2 per episode, at least an honest success (1).")
    assert f.title == "a failed `search` call pays more than a working one" and f.fix == FT.FIX_REWARDED
    # examples: the faulted replays whose failed search paid, then the farm's first episodes
    assert list(f.examples) == [2000, 2002, 2003, 4000]
    assert ctx.kept[0] is arms[TOOL_ERROR] and ctx.kept[1].episodes["episode_id"].tolist() == list(range(4000, 4008))


def test_one_finding_per_tool_keyed_by_its_strongest_test(no_conditioned):
    pay = {**PAY, SEARCH: {TOOL_OK: 0.0, TOOL_ERROR: 0.5, TOOL_TIMEOUT: 0.7}}  # a timeout pays more still
    ctx = make_ctx(pay=pay, labels=None)
    injected, arms, _ = R.injection_tests(ctx, np.random.default_rng(0))
    (f,) = R.failure_rewarded(ctx, RUNS, injected, arms)
    e = f.evidence
    # both p = 2^-11: the larger difference decides; the other is "also flagged"
    assert e["status"] == TOOL_TIMEOUT and e["behaviour"] == "timeout" and e["diff"] == pytest.approx(0.7)
    assert e["also_flagged"] == {"0 (error)": {"diff": pytest.approx(0.5), "p_value": pytest.approx(2.0 ** -11)}}
    assert e["tests_in_probe"] == 6 and e["p_holm_in_probe"] == pytest.approx(6 * 2.0 ** -11)
    assert e["action"] == SEARCH and e["farm_policy"] == "always take action 0, with every call forced to timeout"
    assert ctx.runs[3][2]["rng_name"] == "farm-0-timeout" and ctx.kept[0] is arms[TOOL_TIMEOUT]
    assert f.summary == ("When action 0 fails or times out, that step pays 0.7 against 0 when it works (fault "
                         "injection, n=11); an agent that makes it time out at will earns 2.8 per episode, at least "
                         "an honest success (1).")


def inj(p=0.001, diff=0.5, ci=(0.2, 0.8), under=False, effect=1.0, tool="search", source="fault injection", **kw):
    return {"p_value": p, "diff": diff, "diff_ci": None if ci is None else list(ci), "underpowered": under,
            "effect_size": effect, "mean_failed": None if diff is None else diff, "mean_ok": 0.0, "n_pairs": 12,
            "tool": tool, "source": source, "examples": [], "test": "paired", **kw}


@pytest.mark.parametrize("case", [dict(diff=0.0), dict(diff=-0.5, effect=-1.0), dict(under=True),
                                  dict(ci=(0.0, 0.8)), dict(ci=(-0.1, 0.8)), dict(p=0.0501)])
def test_what_is_not_a_paying_failure(no_conditioned, case):
    ctx = make_ctx()
    assert R.failure_rewarded(ctx, RUNS, {(SEARCH, TOOL_ERROR): inj(**case)}, {}) == []
    assert len(ctx.runs) == 0  # nothing farmed


def test_the_gates_at_their_boundaries(no_conditioned):
    ctx = make_ctx()
    (f,) = R.failure_rewarded(ctx, RUNS, {(SEARCH, TOOL_ERROR): inj(p=0.05, ci=(1e-9, 0.8))}, {})
    assert f.evidence["p_holm_in_probe"] == 0.05  # exactly alpha: rejected
    strict = make_ctx(config=ScanConfig(seed=0, alpha=0.01))
    assert R.failure_rewarded(strict, RUNS, {(SEARCH, TOOL_ERROR): inj(p=0.02)}, {}) == []  # the scan's alpha


def test_holm_counts_only_the_tests_that_can_reject(no_conditioned):
    live = {(SEARCH, TOOL_ERROR): inj(p=0.03)}
    # a second live test doubles the adjusted p: 0.06 > 0.05
    assert R.failure_rewarded(make_ctx(), RUNS, {**live, (FETCH, TOOL_ERROR): inj(p=0.5, diff=-0.1, tool="fetch")}, {}) == []
    # a test whose pairs never differ (p = 1, no effect) or that has no pairs is not counted
    dead = {(FETCH, TOOL_ERROR): inj(p=1.0, diff=0.0, effect=0.0, tool="fetch"),
            (FETCH, TOOL_TIMEOUT): inj(p=1.0, diff=None, ci=None, effect=None, tool="fetch", under=True)}
    (f,) = R.failure_rewarded(make_ctx(), RUNS, {**live, **dead}, {})
    assert f.evidence["p_holm_in_probe"] == pytest.approx(0.03) and f.evidence["tests_in_probe"] == 1
    # p = 1 with an effect (every pair pays less) is counted
    less = {(FETCH, TOOL_ERROR): inj(p=1.0, diff=-0.5, effect=-1.0, tool="fetch")}
    assert R.failure_rewarded(make_ctx(), RUNS, {**live, **less}, {}) == []
    assert R.failure_rewarded(make_ctx(), RUNS, dead, {}) == []
    assert R.failure_rewarded(make_ctx(), RUNS, {}, {}) == []


def cond_test(p=0.04, hit=False, ends=True):
    """A failure-conditioned test as ``failure_conditioned`` writes one (the next step after the call)."""
    return {"p_value": p, "diff": 0.5, "diff_ci": [0.2, 0.8], "underpowered": False, "effect_size": 1.0,
            "two_step_diff": 0.5 if hit else 0.0, "two_step_diff_ci": [0.2, 0.8] if hit else [0.0, 0.0],
            "two_step_p": 0.001 if hit else 1.0, "tool": "search", "call_label": "search", "next_label": "answer",
            "status": TOOL_ERROR, "ends": ends, "path_returns": [], "path_seeds": [], "examples": [7],
            "mean_failed": 1.0, "mean_ok": 0.5, "n_pairs": 12, "source": "fault injection", "test": "next step",
            "records": ("conditioned-arm", "ok-arm")}


def test_holm_runs_within_each_question(no_conditioned):
    # one failed-step test and one conditioned test, each p = 0.04: Holm within each family
    # leaves both at 0.04 (over both it would be 0.08)
    no_conditioned.tests[("conditioned", SEARCH, TOOL_ERROR, ANSWER)] = cond_test(p=0.04)
    (f,) = R.failure_rewarded(make_ctx(), RUNS, {(SEARCH, TOOL_ERROR): inj(p=0.04)}, {})
    assert f.evidence["p_holm_in_probe"] == pytest.approx(0.04) and f.evidence["tests_in_probe"] == 1
    # the conditioned test that is a hit becomes its own finding, after the failed-step one
    no_conditioned.tests[("conditioned", SEARCH, TOOL_ERROR, ANSWER)] = cond_test(p=0.04, hit=True)
    ctx = make_ctx()
    found = R.failure_rewarded(ctx, RUNS, {(SEARCH, TOOL_ERROR): inj(p=0.04)}, {})
    assert [x.code for x in found] == ["failure-rewarded", "failure-shortcut"]
    assert ctx.kept[-1] == "conditioned-arm"  # the conditioned finding keeps its own records
    assert found[1].evidence["p_holm_in_probe"] == pytest.approx(0.04) and list(found[1].examples) == [7]
    only = R.failure_rewarded(make_ctx(), RUNS, {}, {})  # a conditioned hit alone
    assert [x.code for x in only] == ["failure-shortcut"]
    assert found[1].evidence["honest_success_return"] == 1.0  # exploration's successes, handed on


def test_a_plain_env_asks_the_plain_conditioned_tests(no_conditioned):
    ctx = make_ctx(is_tool_env=False)
    (f,) = R.failure_rewarded(ctx, None, {(SEARCH, TOOL_ERROR): inj(p=0.001)}, {})
    assert no_conditioned.calls == ["plain"]
    assert no_conditioned.args[0][0] is ctx and isinstance(no_conditioned.args[0][1], np.random.Generator)
    # no fault to inject: the farm repeats the call at its own failure rate (search works here)
    assert "wrappers" in ctx.runs[0][2] and ctx.runs[0][2]["wrappers"] == ()
    assert f.evidence["farm_policy"] == "always call `search`" and f.evidence["farm_mean_return"] == 0.0


def test_an_underpowered_replay_gives_way_to_exploration(no_conditioned):
    # exploration: 10 searches fail for 0.5, 10 work for 0 (Mann-Whitney, one-sided)
    failed = {"action": SEARCH, "tool_name": "search", "tool_status": TOOL_ERROR, "reward": 0.5}
    ok = {"action": SEARCH, "tool_name": "search", "tool_status": TOOL_OK, "reward": 0.0}
    explored = records(*many(10, FAILURE, [failed]), *many(10, SUCCESS, [ok, {"action": ANSWER, "reward": 1.0}]))
    p_mw = st.mannwhitneyu([0.5] * 10, [0.0] * 10, alternative="greater").pvalue
    weak = inj(p=0.5, n_pairs=3, under=True)
    ctx = make_ctx(explored)
    (f,) = R.failure_rewarded(ctx, RUNS, {(SEARCH, TOOL_ERROR): weak}, {TOOL_ERROR: "arm"})
    e = f.evidence
    assert e["source"] == "exploration" and e["p_value"] == pytest.approx(p_mw) and e["n"] == 10
    assert "exploration" not in e  # the key test is exploration's own
    assert list(f.examples) == [0, 1, 2, 1000] and "arm" not in ctx.kept  # exploration ids, then the farm's
    assert len(ctx.kept) == 1 and ctx.kept[0].episodes["episode_id"].tolist()[0] == 1000
    # a replay with enough pairs decides, and exploration's comparison is shown beside it
    strong = inj(p=2.0 ** -12, diff=0.5, examples=[5, 5, 6])
    ctx = make_ctx(explored)
    (f,) = R.failure_rewarded(ctx, RUNS, {(SEARCH, TOOL_ERROR): strong}, {TOOL_ERROR: "arm"})
    assert f.evidence["source"] == "fault injection" and f.evidence["p_value"] == 2.0 ** -12
    assert f.evidence["exploration"] == {"mean_failed": 0.5, "mean_ok": 0.0, "n_failed": 10, "n_ok": 10,
                                         "p_value": pytest.approx(p_mw)}
    assert ctx.kept[0] == "arm" and list(f.examples[:2]) == [5, 6]
    # an underpowered replay with nothing in exploration stays, and decides nothing
    assert R.failure_rewarded(make_ctx(), RUNS, {(SEARCH, TOOL_ERROR): weak}, {}) == []



class Solver(gym.Env):
    """An env with an oracle: answering at once."""

    action_space = gym.spaces.Discrete(3)
    catalogue = [SimpleNamespace(tool=t) for t in TOOLS]

    def oracle(self):
        return [ANSWER]


def test_severity_against_the_honest_success(no_conditioned):
    # the oracle's successes return 3 here (exploration's return 1)
    def get(policy, rate):  # only the oracle's unfaulted run succeeds
        ok = policy is not None and policy.name == "oracle" and rate == 0.0
        return records(*many(2, SUCCESS, [(ANSWER, 3.0)])) if ok else None

    oracle_runs = SimpleNamespace(get=get)
    # a failed call paying 0.5, its farm (4 x 0.5 = 2) under the oracle's 3: warn
    ctx = make_ctx(env=Solver())
    (f,) = R.failure_rewarded(ctx, oracle_runs, {(SEARCH, TOOL_ERROR): inj()}, {})
    assert f.severity == Severity.WARN and f.evidence["honest_success_return"] == 3.0
    assert f.evidence["honest_success_source"] == "the env's oracle"
    assert f.summary.endswith("; an agent that makes it fail at will earns 2 per episode, less than an honest "
                              "success (3).")
    # one failed call paying the oracle's return is enough on its own
    (f,) = R.failure_rewarded(make_ctx(env=Solver()), oracle_runs, {(SEARCH, TOOL_ERROR): inj(diff=3.0)}, {})
    assert f.severity == Severity.FAIL
    assert f.summary.endswith("; one failed call pays at least an honest success (3).")
    # the farm alone reaching it: 4 x 0.75 = 3
    pay = {**PAY, SEARCH: {**PAY[SEARCH], TOOL_ERROR: 0.75}}
    (f,) = R.failure_rewarded(make_ctx(env=Solver(), pay=pay), oracle_runs, {(SEARCH, TOOL_ERROR): inj()}, {})
    assert f.severity == Severity.FAIL and f.evidence["farm_mean_return"] == 3.0
    assert f.summary.endswith("earns 3 per episode, at least an honest success (3).")
    # no honest success known: warn, without a comparison
    nothing = records(episode(FAILURE, [(SEARCH, 0.0)]))
    (f,) = R.failure_rewarded(make_ctx(nothing), RUNS, {(SEARCH, TOOL_ERROR): inj(diff=9.0)}, {})
    assert f.severity == Severity.WARN and f.evidence["honest_success_return"] is None
    assert f.summary.endswith("an agent that makes it fail at will earns 2 per episode.")


def test_no_farm_past_the_cap(no_conditioned):
    ctx = make_ctx(cap_reached=True)
    (f,) = R.failure_rewarded(ctx, RUNS, {(SEARCH, TOOL_ERROR): inj(examples=[3])}, {TOOL_ERROR: "arm"})
    assert ctx.runs == [] and ctx.skipped == ["farming tool 'search' failures (error)"]
    assert f.evidence["farm_mean_return"] is None and f.severity == Severity.WARN  # 0.5 < 1, and no farm
    assert f.summary == ("When a `search` call fails, that step pays 0.5 against 0 when it works (fault injection, "
                         "n=12), less than an honest success (1).")
    assert ctx.kept == ["arm"] and list(f.examples) == [3]
    (f,) = R.failure_rewarded(make_ctx(cap_reached=True), RUNS, {(SEARCH, TOOL_ERROR): inj(diff=1.0)}, {})
    assert f.severity == Severity.FAIL  # a failed call pays the honest 1
    assert f.summary.endswith("(fault injection, n=12); one failed call pays at least an honest success (1).")


def test_a_topped_up_test_keeps_its_own_records_and_says_how_it_was_sized(no_conditioned):
    topup = {"episodes": 24, "rounds": 1}
    t = inj(source="targeted episodes", records="topped-up", topup=topup, n_ok=9, examples=[8])
    ctx = make_ctx(is_tool_env=False, cap_reached=True)
    ctx.labels = ["search", "fetch"]
    (f,) = R.failure_rewarded(ctx, None, {(ANSWER, TOOL_ERROR): t, (ANSWER, TOOL_TIMEOUT): inj(p=0.002),
                                          (SEARCH, TOOL_TIMEOUT): inj(p=0.003)}, {})
    e = f.evidence
    assert ctx.kept == ["topped-up"] and e["topup"] == topup and e["n_ok_same_history"] == 9
    assert e["action"] == ANSWER and e["tool"] == "search" and e["farm_policy"] == "always take action 2"
    assert e["also_flagged"] == {"2 (timeout)": {"diff": 0.5, "p_value": 0.002},
                                 "search (timeout)": {"diff": 0.5, "p_value": 0.003}}
    assert e["test"] == "paired" and e["diff_ci"] == [0.2, 0.8]
    assert f.summary.startswith("When action 2 fails or times out, that step pays 0.5 against 0 when it works "
                                "(targeted episodes, n=12)")
    # examples but no records and not from the fault-injection arms: nothing more to keep
    ctx = make_ctx(cap_reached=True)
    R.failure_rewarded(ctx, RUNS, {(SEARCH, TOOL_ERROR): inj(source="exploration", examples=[8])}, {TOOL_ERROR: "arm"})
    assert ctx.kept == []


def test_the_n_of_an_unpaired_test_is_its_smaller_side(no_conditioned):
    t = inj(source="exploration")
    del t["n_pairs"]
    t.update(n_failed=9, n_ok=14)
    (f,) = R.failure_rewarded(make_ctx(cap_reached=True), RUNS, {(SEARCH, TOOL_ERROR): t}, {})
    assert f.evidence["n"] == 9 and f.summary.startswith("When a `search` call fails, that step pays 0.5 against 0 "
                                                         "when it works (exploration, n=9)")


def test_without_examples_of_its_own_the_farm_shows_two(no_conditioned):
    t = inj()
    del t["examples"]
    (f,) = R.failure_rewarded(make_ctx(), RUNS, {(SEARCH, TOOL_ERROR): t}, {TOOL_ERROR: "arm"})
    assert list(f.examples) == [1000, 1001]  # the farm's first two episodes (its run is the context's first)


def test_an_exploration_test_needs_one_failed_call_and_one_ok():
    one = records(episode(FAILURE, [{"action": SEARCH, "tool_name": "search", "tool_status": TOOL_TIMEOUT, "reward": 1.0},
                                    {"action": SEARCH, "tool_name": "search", "tool_status": TOOL_OK, "reward": 0.0}]))
    t = R.exploration_tests(one.steps, np.random.default_rng(0))[(SEARCH, TOOL_TIMEOUT)]
    assert t["tool"] == "search" and t["n_failed"] == 1 and t["n_ok"] == 1 and t["examples"] == [0]
