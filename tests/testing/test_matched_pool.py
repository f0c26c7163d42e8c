"""``envaudit.testing.matched`` on a plain env whose tool status is a function of the reset seed:
which replays a pool makes, how it groups them, the verdict and its evidence, and the stratified
test on hand-made strata. Expected counts come from the seeds the pool says it replays."""

import gymnasium as gym
import numpy as np
import pytest

from envaudit.seeding import child_rng
from envaudit.stats import MIN_SAMPLES
from envaudit.testing import matched
from envaudit.testing.matched import (
    ALPHA,
    EXTRA_SEEDS,
    MATCHED_SEEDS,
    MEASURES,
    PERMUTATIONS,
    MatchedPool,
    Verdict,
    return_from,
    state_key,
    step_reward,
    stratified_test,
)
from envaudit.testing.trajectory import EnvSession, Plan

CALL, END, OTHER = 0, 1, 2
STATUS = ("ok", "error", "ok", "error")  # by reset seed % 4


class SeedFault(gym.Env):
    """``call`` (tool ``api``) pays ``pay[status]`` and goes on, its status fixed by the reset seed:
    ``STATUS[seed % 4]`` (with ``timeouts``, seeds = 3 mod 4 time out instead of failing); with
    ``detour`` a seed divisible by 5 reports the call as tool ``backup``. ``end`` (tool ``end``) ends
    the episode paying ``end_after_fault`` after a faulted call, else ``end_ok``. ``other`` calls
    tool ``other`` and pays nothing. The observation is 0, or with ``show`` the seed's parity (which
    then tells the statuses apart: no observation holds both)."""

    action_space = gym.spaces.Discrete(3)
    observation_space = gym.spaces.Box(0, 3, (1,))
    action_labels = ["call", "end", "other"]

    def __init__(self, *, error_pay=0.0, ok_pay=0.0, timeout_pay=0.0, end_ok=0.0, end_after_fault=0.0,
                 show=False, timeouts=False, detour=False):
        self.pay = {"ok": ok_pay, "error": error_pay, "timeout": timeout_pay}
        self.end_ok, self.end_after_fault = end_ok, end_after_fault
        self.show, self.timeouts, self.detour = show, timeouts, detour

    def _obs(self):
        return np.array([self.seed % 2 if self.show else 0], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seed, self.last = seed or 0, None
        return self._obs(), {}

    def step(self, action):
        if int(action) == CALL:
            status = "timeout" if self.timeouts and self.seed % 4 == 3 else STATUS[self.seed % 4]
            self.last = status
            tool = "backup" if self.detour and self.seed % 5 == 0 else "api"
            return self._obs(), self.pay[status], False, False, {"tool": {"name": tool, "status": status}}
        if int(action) == END:
            pay = self.end_ok if self.last in (None, "ok") else self.end_after_fault
            return self._obs(), pay, True, False, {"tool": {"name": "end", "status": "ok"}, "success": self.last == "ok"}
        return self._obs(), 0.0, False, False, {"tool": {"name": "other", "status": "ok"}}


def status_of(seed, timeouts=False):
    return "timeout" if timeouts and seed % 4 == 3 else STATUS[seed % 4]


def pool_for(session, actions=(CALL,), seed=0, index=None, **kw):
    kw.setdefault("subject", "error")
    kw.setdefault("control_sets", [("ok",)])
    pool = MatchedPool(session, seed=0, purpose="test", **kw)
    plan = Plan(seed, actions)
    episode = session.play(plan)
    pool.add(plan, episode, episode.steps[len(actions) - 1 if index is None else index])
    return pool


def test_state_key_tells_observations_apart():
    assert len(state_key(0)) == 16 and state_key(np.zeros(2)) == state_key(np.zeros(2))
    assert state_key(np.zeros(2, np.int32)) != state_key(np.zeros(2, np.float32))  # same bytes, another dtype
    assert state_key(np.zeros((2, 2))) != state_key(np.zeros(4))
    assert state_key(np.arange(4)[::2]) == state_key(np.array([0, 2]))  # a strided view: by value
    assert state_key({"a": 1, "b": 2}) == state_key({"b": 2, "a": 1}) != state_key({"a": 1, "b": 3})
    assert state_key({"a": 1}) != state_key({"b": 1})
    assert state_key((1, 2)) != state_key([1, 2]) and state_key([[1, 2], [3]]) != state_key([[1], [2, 3]])
    assert state_key(1) != state_key(1.0) and state_key("x") != state_key("y")
    assert state_key({"o": np.ones(2)}) != state_key({"o": np.zeros(2)})


def test_the_measures():
    with EnvSession(lambda: SeedFault(error_pay=0.25, end_after_fault=0.5)) as session:
        ep = session.play(Plan(1, (CALL, OTHER, END)))
    assert step_reward(ep, 0) == 0.25 and step_reward(ep, 1) == 0.0
    assert return_from(ep, 0) == 0.75 and return_from(ep, 1) == 0.5 and return_from(ep, 3) == 0.0
    assert MEASURES == {step_reward: "paid on the step", return_from: "returned from the call on"}


def test_replay_seeds_come_from_the_property_seed_and_purpose():
    with EnvSession(SeedFault) as session:
        pool = MatchedPool(session, seed=3, purpose="p", subject="error", control_sets=[("ok",)])
        drawn = child_rng(3, "testing", "p", "replay-seeds").integers(0, 2**31 - 1, size=MATCHED_SEEDS + EXTRA_SEEDS)
        assert pool.replay_seeds == [int(s) for s in drawn[:MATCHED_SEEDS]]
        assert pool.extra_seeds == [int(s) for s in drawn[MATCHED_SEEDS:]]
        other = MatchedPool(session, seed=3, purpose="q", subject="error", control_sets=[("ok",)])
        assert other.replay_seeds != pool.replay_seeds
        assert not pool.to_end and pool.measures == [step_reward] and pool.control_sets == [("ok",)]
        assert not pool.extended and pool.replays == 0 and pool.strata == {}
        both = MatchedPool(session, seed=3, purpose="p", subject="error", control_sets=[["ok", "error"]],
                           measures=(step_reward, return_from))
        assert both.to_end and both.control_sets == [("ok", "error")]


def test_a_prefix_is_replayed_from_its_seed_then_the_others():
    with EnvSession(lambda: SeedFault(error_pay=0.5)) as session:
        pool = pool_for(session, actions=(OTHER, CALL, END), index=1, seed=2)
        (key, samples), = pool.strata.items()
        assert key == ("api", 1, (repr(OTHER), repr(CALL)))  # the prefix up to the call, not the end
        seeds = [2] + [s for s in pool.replay_seeds if s != 2]
        assert pool.replays == len(seeds) == len(samples)
        assert [s.seed for s in samples] == seeds and all(s.index == 1 for s in samples)
        assert [s.status for s in samples] == [status_of(s) for s in seeds]
        assert [s.values for s in samples] == [(0.5 if status_of(s) == "error" else 0.0,) for s in seeds]
        assert all(s.episode.length == 2 and s.state == state_key(np.zeros(1, np.float32)) for s in samples)
        # The same prefix again adds nothing; another one is replayed too.
        ep = session.play(Plan(9, (OTHER, CALL)))
        pool.add(Plan(9, (OTHER, CALL)), ep, ep.steps[1])
        assert pool.replays == len(seeds) and len(pool.strata) == 1
        ep = session.play(Plan(None, (CALL,)))
        pool.add(Plan(None, (CALL,)), ep, ep.steps[0])  # no seed: replayed from seed 0 first
        assert len(pool.strata) == 2 and pool.strata[("api", 0, (repr(CALL),))][0].seed == 0


def test_measured_to_the_end_the_stratum_is_the_whole_plan():
    with EnvSession(lambda: SeedFault(end_after_fault=0.5)) as session:
        pool = pool_for(session, actions=(CALL, END), index=0, measures=(step_reward, return_from))
        (key, samples), = pool.strata.items()
        assert key == ("api", 0, (repr(CALL), repr(END)))
        assert all(s.episode.length == 2 for s in samples)
        assert [s.values for s in samples] == [(0.0, 0.5 if status_of(s.seed) == "error" else 0.0) for s in samples]


def test_replays_that_call_another_tool_at_the_step_are_left_out():
    with EnvSession(lambda: SeedFault(detour=True)) as session:
        pool = pool_for(session, seed=1)
        samples = pool.strata[("api", 0, (repr(CALL),))]
        seeds = [1] + [s for s in pool.replay_seeds if s != 1]
        assert [s.seed for s in samples] == [s for s in seeds if s % 5 != 0] and pool.replays == len(seeds)


def test_at_most_max_strata_prefixes(monkeypatch):
    monkeypatch.setattr(matched, "MAX_STRATA", 2)
    with EnvSession(SeedFault) as session:
        pool = pool_for(session, actions=(CALL,))
        for k in (1, 2):
            plan = Plan(0, (OTHER,) * k + (CALL,))
            ep = session.play(plan)
            pool.add(plan, ep, ep.steps[k])
        assert len(pool.strata) == 2 and pool.replays == 2 * (1 + MATCHED_SEEDS)


def test_extend_replays_every_prefix_once_more_under_the_extra_seeds():
    with EnvSession(SeedFault) as session:
        pool = pool_for(session, seed=0)
        first = pool.replays
        pool.extend()
        assert pool.extended and pool.replays == first + EXTRA_SEEDS
        samples = pool.strata[("api", 0, (repr(CALL),))]
        assert [s.seed for s in samples[first:]] == pool.extra_seeds
        pool.extend()
        assert pool.replays == first + EXTRA_SEEDS


def test_a_failed_call_that_pays_more_is_a_violation():
    with EnvSession(lambda: SeedFault(error_pay=0.5)) as session:
        pool = pool_for(session)
        seeds = [0] + [s for s in pool.replay_seeds if s != 0]
        n_error = sum(status_of(s) == "error" for s in seeds)
        verdict = pool.verdict(1e-9)
        assert isinstance(verdict, Verdict) and verdict.violated and verdict.decided
        assert (verdict.faulted, verdict.compared) == (n_error, len(seeds) - n_error)
        assert verdict.matching == "the same action prefix and observation before the call"
        assert verdict.controls == ("ok",) and verdict.measure == "paid on the step"
        ev = verdict.evidence
        assert ev["n_error"] == n_error and ev["n_control"] == len(seeds) - n_error and ev["strata"] == 1
        assert (ev["mean_error"], ev["mean_control"], ev["diff"], ev["diff_ci"]) == (0.5, 0.0, 0.5, [0.5, 0.5])
        assert ev["p_value"] == pytest.approx(1 / (1 + PERMUTATIONS)) and ev["p_value_holm"] == ev["p_value"]
        assert (ev["alpha"], ev["min_samples"], ev["controls"], ev["measure"]) == (ALPHA, MIN_SAMPLES, ["ok"],
                                                                                    "paid on the step")
        assert (ev["matching"], ev["replays"], ev["prefixes"]) == (verdict.matching, len(seeds), 1)
        faulted, control = verdict.example
        assert faulted.status == "error" and control.status == "ok" and faulted.values == (0.5,)
        # The difference must exceed the tolerance.
        assert not pool.verdict(0.5).violated and pool.verdict(0.49).violated


def test_a_failed_call_that_pays_the_same_or_less_is_no_violation():
    for pay in (0.0, -0.5):
        with EnvSession(lambda pay=pay: SeedFault(error_pay=pay)) as session:
            verdict = pool_for(session).verdict(1e-9)
            assert verdict.decided and not verdict.violated and verdict.evidence["diff"] == pay


def test_two_measures_are_holm_adjusted_and_the_violated_one_is_reported():
    # The step pays the same either way; ending after a failure pays 0.5 more: only the return
    # from the call on shows it, its p-value doubled by Holm over the two measures.
    with EnvSession(lambda: SeedFault(end_after_fault=0.5)) as session:
        pool = pool_for(session, actions=(CALL, END), index=0, measures=(step_reward, return_from))
        verdict = pool.verdict(1e-9)
        assert verdict.violated and verdict.measure == "returned from the call on"
        ev = verdict.evidence
        assert ev["p_value_holm"] == pytest.approx(2 * ev["p_value"]) and ev["diff"] == 0.5
    with EnvSession(SeedFault) as session:
        pool = pool_for(session, actions=(CALL, END), index=0, measures=(step_reward, return_from))
        verdict = pool.verdict(1e-9)
        assert not verdict.violated and verdict.measure == "paid on the step"  # the first measure's


def test_too_few_replays_decide_nothing():
    # Only the source seed's replay is a failure: one faulted call, below MIN_SAMPLES.
    with EnvSession(lambda: SeedFault(error_pay=5.0)) as session:
        pool = MatchedPool(session, seed=0, purpose="test", subject="error", control_sets=[("ok",)])
        pool.replay_seeds = [s for s in pool.replay_seeds if status_of(s) == "ok"]
        ep = session.play(Plan(1, (CALL,)))
        pool.add(Plan(1, (CALL,)), ep, ep.steps[0])
        verdict = pool.verdict(1e-9)
        assert verdict.faulted == 1 and not verdict.decided and verdict.evidence["underpowered"]
        assert not verdict.violated and verdict.evidence["diff"] == 5.0
    assert Verdict(False, {}, "", MIN_SAMPLES, MIN_SAMPLES).decided
    assert not Verdict(False, {}, "", MIN_SAMPLES - 1, 50).decided and not Verdict(False, {}, "", 50, 7).decided


def test_groups_fall_back_to_the_prefix_when_no_observation_holds_both_arms():
    with EnvSession(lambda: SeedFault(error_pay=0.5, show=True)) as session:
        name, controls, found = pool_for(session).groups()
        assert name == "the same action prefix" and controls == ("ok",)
        (faulted, arms), = found
        assert {s.status for s in faulted} == {"error"} and set(arms) == {"ok"}
        assert pool_for(session).verdict(1e-9).matching == "the same action prefix"


def test_control_sets_are_tried_in_order():
    with EnvSession(lambda: SeedFault(timeouts=True)) as session:
        pool = pool_for(session, subject="timeout", control_sets=[("missing",), ("error", "ok")])
        pool.extend()
        name, controls, found = pool.groups()
        assert controls == ("error", "ok") and name == "the same action prefix and observation before the call"
        (faulted, arms), = found
        assert set(arms) == {"error", "ok"} and len(faulted) == sum(s.status == "timeout" for s in pool.strata[
            ("api", 0, (repr(CALL),))])
        pool2 = pool_for(session, subject="timeout", control_sets=[("error",), ("error", "ok")])
        pool2.extend()
        assert pool2.groups()[1] == ("error",)


def test_each_group_takes_the_first_control_set_it_has():
    # Two tools in one pool: ``api`` fails outright and times out, ``ping`` only times out. The
    # outright failures are preferred where a group has them; ``ping``'s group is still compared,
    # with its calls that went through, instead of being dropped because another tool had errors.
    with EnvSession(lambda: SeedFault()) as session:
        pool = MatchedPool(session, seed=0, purpose="test", subject="timeout", control_sets=[("error",), ("error", "ok")])
        ep = session.play(Plan(0, (CALL,)))
        n = MIN_SAMPLES
        pool.strata = {
            ("api", 0, ("a",)): [matched.Sample(i, 0, "timeout" if i < n else "error", (0.0,), "s", ep) for i in range(2 * n)],
            ("ping", 0, ("p",)): [matched.Sample(i, 0, "timeout" if i < n else "ok", (1.0,), "s", ep) for i in range(2 * n)],
        }
        name, controls, found = pool.groups()
        assert controls == ("error", "ok") and name == "the same action prefix and observation before the call"
        assert [sorted(arms) for _, arms in found] == [["error"], ["ok"]]
        assert matched._sizes(found) == (2 * n, 2 * n)


def test_without_enough_in_any_set_the_one_with_most_faulted_calls_is_kept():
    with EnvSession(lambda: SeedFault(timeouts=True)) as session:
        pool = MatchedPool(session, seed=0, purpose="test", subject="timeout", control_sets=[("missing",), ("error",)])
        seeds = pool.replay_seeds
        pool.replay_seeds = [s for s in seeds if s % 4 == 3][:3] + [s for s in seeds if s % 4 == 1][:3]
        ep = session.play(Plan(3, (CALL,)))
        pool.add(Plan(3, (CALL,)), ep, ep.steps[0])
        name, controls, found = pool.groups()
        assert controls == ("error",) and matched._sizes(found) == (4, 3)
        assert name == "the same action prefix and observation before the call"


def test_a_pool_takes_its_number_of_permutations():
    # Every replay of a failed call pays 5 more than a working one: the smallest p-value the
    # permutations allow, 1 / (permutations + 1), so a caller asking many questions can raise it.
    with EnvSession(lambda: SeedFault(error_pay=5.0)) as session:
        for permutations, floor in ((PERMUTATIONS, 1 / (PERMUTATIONS + 1)), (9999, 1e-4)):
            verdict = pool_for(session, permutations=permutations).verdict(1e-9)
            assert verdict.evidence["test"].endswith(f", {permutations} stratified permutations")
            assert verdict.evidence["p_value"] == pytest.approx(floor)


def test_sizes_counts_each_groups_largest_control_arm_once():
    a, b = object(), object()
    assert matched._sizes([]) == (0, 0)
    assert matched._sizes([([a, a], {"ok": [b], "error": [b, b, b]}), ([a], {"ok": [b, b]})]) == (3, 5)


def test_stratified_test_on_hand_made_strata():
    rng = np.random.default_rng(0)
    empty = stratified_test([], rng, label="timeout")
    assert empty == {"n_timeout": 0, "n_control": 0, "strata": 0, "underpowered": True,
                     "test": f"van Elteren stratified Mann-Whitney, {PERMUTATIONS} stratified permutations",
                     "mean_timeout": None, "mean_control": None, "diff": None, "diff_ci": None, "p_value": 1.0}
    ev = stratified_test([([1.0], [0.0]), ([5.0, 5.0, 5.0], [2.0])], rng)
    assert (ev["n_faulted"], ev["n_control"], ev["strata"], ev["underpowered"]) == (4, 2, 2, True)
    # The control mean is weighted by the faulted values of its stratum: (0 + 2 + 2 + 2) / 4.
    assert (ev["mean_faulted"], ev["mean_control"], ev["diff"]) == (4.0, 1.5, 2.5)
    assert 1.0 <= ev["diff_ci"][0] <= ev["diff_ci"][1] <= 3.0
    tied = stratified_test([([0.0] * 9, [0.0] * 9)], rng)
    assert tied["p_value"] == 1.0 and not tied["underpowered"] and tied["diff_ci"] == [0.0, 0.0]
    # One stratum of 2 against 2 with the faulted values on top: 1 of the C(4, 2) = 6 labellings.
    two = stratified_test([([1.0, 1.0], [0.0, 0.0])], np.random.default_rng(1))
    assert two["p_value"] == pytest.approx(1 / 6, abs=0.03)
    below = stratified_test([([0.0] * 8, [1.0] * 8)], rng)
    assert below["p_value"] == pytest.approx(1.0) and below["diff"] == -1.0
    few = stratified_test([([1.0] * 8, [0.0] * 8)], rng, permutations=9)
    assert few["p_value"] == pytest.approx(0.1) and few["test"].endswith("9 stratified permutations")
