"""The length probe's decision functions on hand-built tables whose answers are known.

The regression's slope is the per-step pay the table was written with; the scripted strategies
play episodes whose returns the test chose (``tests/fixtures/frames.py``), so the ladder's level
and the finding's severity follow from the design, not from a scan.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from envaudit.findings import Finding, Severity
from envaudit.probes.length import CODE, decide_length_bias
from envaudit.probes.length import bias as L
from envaudit.probes.length.fading import exploration_fading
from envaudit.protocol import END_TRUNCATED, FAILURE, SUCCESS, TIMEOUT, TOOL_ERROR
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.frames import FakeContext, episode, many, records
from tests.probes._shared.test_stall_decisions import LIMIT, J, Staller, ctx_for

WORK, SUBMIT = 0, 1


def test_constant_step_reward():
    assert L.constant_step_reward(records(episode(FAILURE, [(0, 1.0), (0, 1.0)])).steps) == 1.0
    assert L.constant_step_reward(records(episode(FAILURE, [(0, 1.0), (0, 0.5)])).steps) is None
    assert L.constant_step_reward(records(episode(FAILURE, [(0, np.inf), (0, np.inf)])).steps) is None
    assert L.constant_step_reward(records().steps) is None


def lengths_table(per_step: float, n: int = 24, success_bonus: float = 1.0):
    """Episodes of 1-6 steps each paying ``per_step``; every third a success paying a bonus on top."""
    eps = []
    for i in range(n):
        length = 1 + i % 6
        won = i % 3 == 0
        steps = [(WORK, per_step)] * (length - 1) + [(SUBMIT, per_step + (success_bonus if won else 0.0))]
        eps.append(episode(SUCCESS if won else FAILURE, steps, success=won))
    return records(*eps)


def test_regress_recovers_the_per_step_pay_with_success_held_fixed():
    fit = L.regress(lengths_table(0.1).episodes, np.random.default_rng(0))
    assert fit["coef"]["length"]["estimate"] == pytest.approx(0.1)
    assert fit["coef"]["success"]["estimate"] == pytest.approx(1.0)
    # per outcome: 8 successes and 16 failures, each of several lengths
    assert set(fit["within_outcome"]) == {SUCCESS, FAILURE}
    assert fit["within_outcome"][FAILURE]["estimate"] == pytest.approx(0.1) and fit["within_outcome"][FAILURE]["n"] == 16
    few = lengths_table(0.1, n=MIN_SAMPLES * 3 - 3).episodes  # 7 successes: too few for their own slope
    assert set(L.regress(few, np.random.default_rng(0))["within_outcome"]) == {FAILURE}
    same = records(*many(MIN_SAMPLES, FAILURE, [(0, 0.0), (1, 1.0)]), *many(MIN_SAMPLES, SUCCESS, [(1, 1.0)]))
    assert L.regress(same.episodes, np.random.default_rng(0))["within_outcome"] == {}  # one length per outcome


def stall_play(pay_per_step: float, length: int = 10, ending: float = 0.0, outcome=TIMEOUT):
    def play(policy, seeds, kw):
        return records(*[episode(outcome, [(WORK, pay_per_step)] * (length - 1) + [(WORK, pay_per_step + ending)],
                                 success=False, end=END_TRUNCATED, seed=s) for s in seeds])
    return play


def test_run_strategies_screens_then_confirms_the_best_earner():
    pays = {"repeat a": 0.2, "repeat b": 0.5, "repeat c": 0.1}

    def play(policy, seeds, kw):
        return records(*[episode(FAILURE, [(0, pays[policy.name])], success=False, seed=s) for s in seeds],
                       episode(SUCCESS, [(0, 9.0)], success=True))  # a success never counts in the screen
    ctx = FakeContext(records(), play=play)
    policies = [L.RepeatPolicy.repeating(i, x) for i, x in enumerate("abc")]
    best, run = L._run_strategies(ctx, policies, "long")
    assert best.name == "repeat b" and run["screen_mean_non_success"] == pytest.approx(pays)
    screened = [s for _, s, _ in ctx.runs[:3]]
    assert screened == [ctx.seeds(8, "long", "screen", p.name) for p in policies]
    assert ctx.runs[3][1] == ctx.seeds(L.sample_size(ctx, 32), "long", "confirm", "repeat b")
    assert len(run["episodes"]) == 33 and ctx.kept == [ctx.kept[0]] and len(ctx.kept) == 1
    assert L._run_strategies(ctx, [], "long") == (None, {})
    capped = FakeContext(records(), play=play, cap_reached=True)
    assert L._run_strategies(capped, policies, "quit") == (None, {}) and capped.skipped == ["quit strategies"]
    only_wins = FakeContext(records(), play=lambda p, s, kw: records(episode(SUCCESS, [(0, 1.0)], success=True)))
    assert L._run_strategies(only_wins, policies, "long") == (None, {})


def test_run_strategies_screens_on_at_least_two_seeds():
    ctx = FakeContext(records(), config=FakeContext(records()).config.__class__(seed=0, quick=True),
                      play=stall_play(0.1))
    L._run_strategies(ctx, [L.RepeatPolicy.repeating(0, "a")], "long")
    assert len(ctx.runs[0][1]) == 2  # 8 // 4


def farming_ctx(play, explored=None):
    # exploration: WORK never ends an episode, SUBMIT always does
    explored = explored or records(*many(MIN_SAMPLES, FAILURE, [(WORK, 0.0), (SUBMIT, 0.0)], success=False))
    return FakeContext(explored, play=play, labels=["work", "submit"])


FIT = {"coef": {"length": {"estimate": 0.1, "p_value": 0.001, "ci": [0.05, 0.15]}, "success": {}}, "n": 40}


def test_farming_that_pays_per_extra_step_is_a_finding_on_the_ladder():
    ctx = farming_ctx(stall_play(0.1))  # 10 steps of 0.1: 1.0, as much as success
    f = L._farming(ctx, FIT, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    assert f.severity == Severity.FAIL and f.title == "Step farming pays as much as success"
    assert f.evidence["mean_strategy"] == pytest.approx(1.0) and f.evidence["mean_strategy_length"] == 10
    assert f.evidence["behaviour"] == "stall" and f.evidence["marginal"]["pays"]
    assert f.evidence["policy"] == "random actions, never 'submit'"  # the stall policy is screened first
    assert f.evidence["p_value"] == max(f.evidence["test"]["p_value"], 0.001)
    warn = L._farming(farming_ctx(stall_play(0.05)), FIT, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES),
                      np.random.default_rng(0))
    assert warn.severity == Severity.WARN and warn.title == "Step farming pays more than failing"


def test_farming_whose_tail_adds_nothing_is_progress_not_farming():
    # the first step pays 0.5 (progress), the nine idle steps after it nothing
    def play(policy, seeds, kw):
        return records(*[episode(TIMEOUT, [(WORK, 0.5)] + [(WORK, 0.0)] * 9, success=False, end=END_TRUNCATED, seed=s)
                         for s in seeds])
    f = L._farming(farming_ctx(play), FIT, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    assert f.severity == Severity.INFO and f.title == "Long episodes keep their progress, extra steps add nothing"
    assert not f.evidence["marginal"]["pays"] and f.evidence["test"]["level"] == "above_alternative"


def test_farming_that_does_not_beat_failure_is_a_correlation():
    f = L._farming(farming_ctx(stall_play(0.0)), FIT, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES),
                   np.random.default_rng(0))
    assert f.severity == Severity.INFO and f.title == "Return rises with episode length"
    assert f.summary.startswith("Beyond success, each extra step adds +0.1")
    nosucc = {**FIT, "coef": {"length": FIT["coef"]["length"]}}
    # WORK is the only action: it ends episodes like every action does, so the stall plays it
    ctx = farming_ctx(stall_play(0.0), explored=records(*many(MIN_SAMPLES, FAILURE, [(WORK, 0.0), (WORK, 0.0)])))
    f = L._farming(ctx, nosucc, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    assert f.summary.startswith("With no success signal to hold fixed, each")
    assert [p.describe() for p, _, _ in ctx.runs[:2]] == ["random actions", "repeat 'work'"]


QUIT_FIT = {"coef": {"length": {"estimate": -0.1, "p_value": 0.002, "ci": [-0.15, -0.05]}}, "n": 40}


def quit_play(pay: float, outcome=FAILURE):
    return lambda policy, seeds, kw: records(*[episode(outcome, [(SUBMIT, pay)], success=False, seed=s)
                                               for s in seeds])


def test_quitting_at_once_that_pays_as_much_as_success_fails():
    ctx = farming_ctx(quit_play(1.0))
    f = L._brevity(ctx, QUIT_FIT, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    assert f.severity == Severity.FAIL and f.title == "Quitting at once pays as much as success"
    assert f.evidence["behaviour"] == "quit" and f.evidence["mean_strategy"] == 1.0
    assert f.evidence["p_value"] == max(f.evidence["test"]["p_value"], 0.002)
    no_slope = L._brevity(farming_ctx(quit_play(1.0)), QUIT_FIT, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES),
                          np.random.default_rng(0), slope=False)
    assert no_slope.evidence["p_value"] == no_slope.evidence["test"]["p_value"]


def test_a_step_cost_that_shortens_episodes_is_info():
    explored = records(*many(MIN_SAMPLES, FAILURE, [(WORK, -0.1), (WORK, -0.1), (SUBMIT, -0.1)], success=False))
    ctx = farming_ctx(quit_play(-0.1), explored)
    f = L._brevity(ctx, QUIT_FIT, np.ones(MIN_SAMPLES), np.full(MIN_SAMPLES, -0.3), np.random.default_rng(0))
    assert f.severity == Severity.INFO and f.title == "A step cost shortens episodes"
    assert f.evidence["typical_step_reward"] == pytest.approx(-0.1) and f.summary.startswith("A typical step pays -0.1")
    assert L._brevity(farming_ctx(quit_play(-0.1), explored), QUIT_FIT, np.ones(MIN_SAMPLES),
                      np.full(MIN_SAMPLES, -0.3), np.random.default_rng(0), slope=False) is None
    # no step that ends nothing: the slope stands in for the typical step
    one_step = records(*many(MIN_SAMPLES, FAILURE, [(SUBMIT, -0.1)], success=False))
    f = L._brevity(farming_ctx(quit_play(-0.1), one_step), QUIT_FIT, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES),
                   np.random.default_rng(0), enders=[])
    assert f.evidence["typical_step_reward"] == -0.1 and "policy" not in f.evidence


def test_quitting_is_judged_against_failures_that_end_another_way():
    # honest failures: 8 that run out of work (0) and 8 that SUBMIT for a 1.0 "bonus"
    explored = records(*many(MIN_SAMPLES, FAILURE, [(WORK, 0.0), (WORK, 0.0)], success=False),
                       *many(MIN_SAMPLES, FAILURE, [(WORK, 0.0), (SUBMIT, 1.0)], success=False))
    failure = explored.episodes["return"].to_numpy(float)
    assert L._failures_not_ending_with(FakeContext(explored), SUBMIT, failure).tolist() == [0.0] * MIN_SAMPLES
    assert L._failures_not_ending_with(FakeContext(explored), 7, failure).tolist() == failure.tolist()
    few = records(*many(MIN_SAMPLES - 1, FAILURE, [(WORK, 0.0)]), *many(3, FAILURE, [(SUBMIT, 1.0)]))
    assert len(L._failures_not_ending_with(FakeContext(few), SUBMIT, np.arange(3.0))) == 3  # too few left: all
    ctx = farming_ctx(quit_play(1.0), explored)
    f = L._brevity(ctx, QUIT_FIT, np.ones(MIN_SAMPLES), failure, np.random.default_rng(0), enders=[SUBMIT])
    assert f.severity == Severity.FAIL  # against the 0 failures, 1.0 is as much as success


def test_quitting_tops_up_too_few_successes_before_placing_it_against_success():
    explored = records(*many(MIN_SAMPLES, FAILURE, [(WORK, 0.0), (SUBMIT, 0.0)], success=False))
    runs = []

    def play(policy, seeds, kw):
        runs.append(policy.name)
        if policy.name == "random":
            return records(*[episode(SUCCESS, [(SUBMIT, 1.0)], success=True, seed=s) for s in seeds])
        return quit_play(1.0)(policy, seeds, kw)

    ctx = farming_ctx(play, explored)
    f = L._brevity(ctx, QUIT_FIT, np.ones(2), np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    assert "random" in runs and f.severity == Severity.FAIL


def test_fading_enders_are_endings_whose_pay_falls_with_the_step():
    # SUBMIT ends every failure; its pay is 1 - 0.1 * step, at steps 0-5
    eps = [episode(FAILURE, [(WORK, 0.0)] * k + [(SUBMIT, 1.0 - 0.1 * k + 0.001 * (i % 2))], success=False)
           for i, k in enumerate(list(range(6)) * 2)]
    ctx = FakeContext(records(*eps))
    assert exploration_fading(ctx, np.random.default_rng(0)) == [SUBMIT]
    flat = [episode(FAILURE, [(WORK, 0.0)] * k + [(SUBMIT, 0.5 + 0.001 * (i % 2))], success=False)
            for i, k in enumerate(list(range(6)) * 2)]
    assert exploration_fading(FakeContext(records(*flat)), np.random.default_rng(0)) == []
    assert exploration_fading(FakeContext(records(*eps[:MIN_SAMPLES - 1])), np.random.default_rng(0)) == []
    same_step = [episode(FAILURE, [(WORK, 0.0), (SUBMIT, 1.0 - 0.1 * i)], success=False) for i in range(12)]
    assert exploration_fading(FakeContext(records(*same_step)), np.random.default_rng(0)) == []


def finding(sev, **evidence):
    return Finding(CODE, sev, "t", "Farming.", evidence, [], "fix", probe="length")


def test_delay_and_farming_are_one_incentive():
    delayed = [finding(Severity.WARN, k=3, delay_action="wait", mean_delayed=1.5, mean_at_once=1.0)]
    (one,) = decide_length_bias("one-incentive", {"delayed": delayed, "farming": finding(Severity.WARN)})
    assert one.summary == ("Farming. Delaying a success pays too: succeeding after 3 more 'wait' earns 1.5 against "
                           "1 at once.")
    assert one.evidence["delay_success"]["k"] == 3
    info = finding(Severity.INFO)
    assert decide_length_bias("one-incentive", {"delayed": delayed, "farming": info}) == delayed + [info]
    assert decide_length_bias("one-incentive", {"delayed": [], "farming": finding(Severity.FAIL)}) == [finding(Severity.FAIL)]


# A continuous action space: the success search (probes/length_search.py) does not apply, so ``run``
# reads exploration only.
class Continuous(gym.Env):
    action_space = gym.spaces.Box(0.0, 1.0, (1,))
    observation_space = gym.spaces.Discrete(1)


NO_SEARCH = Continuous()


def searchless(recs) -> FakeContext:
    return FakeContext(recs, env=NO_SEARCH)


def test_run_reports_a_constant_step_reward_and_unending_play():
    ctx = searchless(records(*many(MIN_SAMPLES, FAILURE, [(0, 1.0), (0, 1.0)])))
    (f,) = L.run(ctx)
    assert f.title == "Return equals length" and f.evidence["reward_per_step"] == 1.0 and f.evidence["n_steps"] == 16
    assert f.evidence["behaviour"] == "stall"
    (f,) = L.run(searchless(records(*many(MIN_SAMPLES, FAILURE, [(0, -0.5)]))))
    assert f.title == "Return equals -0.5 × length" and f.evidence["behaviour"] == "quit"
    assert L.run(searchless(records(*many(MIN_SAMPLES, FAILURE, [(0, 0.0)])))) == []
    few = searchless(records(*many(MIN_SAMPLES - 1, FAILURE, [(0, 1.0)])))
    assert L.run(few) == [] and few.notes["skipped"] == "only 7 exploration episodes (need 8)"
    walk = searchless(records(*[episode(TIMEOUT, [(0, -1.0)] * 3 + [(0, -1.0 - (i % 2))], end=END_TRUNCATED)
                                 for i in range(MIN_SAMPLES)]))
    (f,) = L.run(walk)
    assert f.title == "Every exploration episode ran to the step limit" and f.evidence["length"] == 4
    assert f.evidence["mean_return"] == pytest.approx(-4.5) and f.evidence["behaviour"] == "exploration"


def test_a_failed_call_is_held_fixed_in_the_regression():
    eps = [episode(FAILURE, [{"action": WORK, "reward": -1.0, "tool_status": TOOL_ERROR}] * (i % 3)
                   + [(WORK, 0.0)] * (i % 2) + [(SUBMIT, 0.0)]) for i in range(24)]
    fit = L.regress(records(*eps).episodes, np.random.default_rng(0))
    # each failed call costs 1; length itself pays nothing
    assert fit["coef"]["tool_errors"]["estimate"] == pytest.approx(-1.0)
    assert fit["coef"]["length"]["estimate"] == pytest.approx(0.0, abs=1e-9)


# -- run: which branch the exploration's slope takes ----------------------------------------------
# ``lengths_table(0.1)``: every step pays 0.1, a success 1.0 on top (8 successes, 16 failures of
# 1-6 steps), so return rises with length at exactly 0.1 a step with success held fixed; the
# scripted stall then plays 10 steps of ``stall_pay``.

def run_ctx(explored, play):
    return FakeContext(explored, env=NO_SEARCH, play=play, labels=["work", "submit"])


def test_run_takes_a_rising_slope_to_the_farming_ladder():
    ctx = run_ctx(lengths_table(0.1), stall_play(0.1))  # 10 x 0.1 = 1.0 < 1.1 (the shortest success)
    (f,) = L.run(ctx)
    assert f.code == "length-bias" and f.severity == Severity.WARN and f.evidence["behaviour"] == "stall"
    assert f.evidence["mean_strategy"] == pytest.approx(1.0) and f.evidence["marginal"]["pays"]
    assert ctx.notes["regression"]["coef"]["length"]["estimate"] == pytest.approx(0.1)
    assert ctx.notes["regression"]["success_sources"]["n_exploration"] == 8
    assert f.evidence["mean_success"] == pytest.approx(np.mean([1.1, 1.4] * 4))
    assert f.evidence["mean_failure"] == pytest.approx(np.mean([0.2, 0.3, 0.5, 0.6] * 4))
    assert sorted(f.examples) == sorted(ctx.kept[0].episodes["episode_id"])[:5]
    rich = L.run(run_ctx(lengths_table(0.1), stall_play(0.2)))  # 2.0: more than any success
    assert [x.severity for x in rich] == [Severity.FAIL]


def test_run_takes_a_falling_slope_to_the_quitting_ladder():
    # every step costs 0.1; a success pays 1.0 on top: quitting at once (SUBMIT) pays -0.1
    ctx = run_ctx(lengths_table(-0.1), quit_play(-0.1))
    (f,) = L.run(ctx)
    assert f.severity == Severity.INFO and f.title == "A step cost shortens episodes"
    assert f.evidence["behaviour"] == "quit" and f.evidence["typical_step_reward"] == pytest.approx(-0.1)
    assert ctx.notes["regression"]["coef"]["length"]["estimate"] == pytest.approx(-0.1)
    rich = run_ctx(lengths_table(-0.1), quit_play(1.0))  # quitting pays as much as success
    (f,) = L.run(rich)
    assert f.severity == Severity.FAIL and f.evidence["behaviour"] == "quit" and f.evidence["mean_strategy"] == 1.0


def fading_table():
    """Failures of 1-6 steps end two ways: SUBMIT pays 1 - 0.1 x its step (a brevity bonus that
    fades), GIVE_UP pays 0.1 x its step; successes pay 1.0 whatever their length. At every length
    the failures average 0.5, so return does not depend on length overall (slope 0) and only the
    fading ending, tried on its own, shows the bonus."""
    eps = []
    for i in range(36):
        k = i % 6
        noise = 0.001 * (i % 2)
        eps.append(episode(FAILURE, [(WORK, 0.0)] * k + [(SUBMIT, 1.0 - 0.1 * k + noise)], success=False))
        eps.append(episode(FAILURE, [(WORK, 0.0)] * k + [(GIVE_UP, 0.1 * k + noise)], success=False))
        if i % 3 == 0:
            eps.append(episode(SUCCESS, [(WORK, 0.0)] * k + [(SUBMIT, 1.0 + noise)], success=True))
    return records(*eps)


GIVE_UP = 2


def test_run_tries_a_fading_ending_on_its_own():
    explored = fading_table()
    ctx = run_ctx(explored, quit_play(1.0))
    found = L.run(ctx)
    slope = ctx.notes["regression"]["coef"]["length"]
    assert slope["estimate"] == pytest.approx(0.0, abs=1e-3) and slope["p_value"] > 0.05
    assert [(f.severity, f.evidence["behaviour"]) for f in found] == [(Severity.FAIL, "quit")]
    assert found[0].evidence["policy"] == "repeat 'submit'"
    assert L.run(run_ctx(explored, quit_play(0.5))) == []  # quitting pays half of success: not the top rung


def test_idle_value_holds_progress_fixed_by_replaying_the_same_prefix():
    # The staller's own episodes pay 0.1 a step all the way (progress a random staller keeps
    # making late); replayed, the same prefix idled pays what the env pays an idle step.
    def run_of():
        recs = records(*[episode(TIMEOUT, [(0, 0.1)] * LIMIT, end=END_TRUNCATED, seed=100 + i)
                         for i in range(MIN_SAMPLES + 4)], first_id=9000)
        return {"records": recs, "steps": recs.steps}, recs.episodes

    run, eps = run_of()
    still = L.idle_value(ctx_for(Staller(idle_pay=0.0)), run, eps, 1.0)
    assert still["method"].startswith("replay") and not still["pays"]
    assert still["mean_tail_pay"] == pytest.approx(0.0)
    paid = L.idle_value(ctx_for(Staller(idle_pay=0.1)), run, eps, 1.0)
    assert paid["pays"] and paid["mean_tail_pay"] == pytest.approx(J * 0.1)
    assert paid["pay_per_tail_step"] == pytest.approx(0.1)
    # No discrete action space to replay with: the tail of the staller's own episodes stands in.
    tail = L.idle_value(FakeContext(records()), run, eps, 1.0)
    assert tail["method"].startswith("tail") and tail["pays"]
