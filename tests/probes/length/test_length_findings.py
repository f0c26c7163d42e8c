"""The length probe's findings and decision boundaries, on hand-built tables (continued from
``test_length_decisions.py``, whose tables and fake plays these reuse).

Every finding keeps the contract the report and the grouping read (code, probe, behaviour, reward
path, the regression it was judged from) and shows the numbers of its design; the strategies, the
delay check, the success search and the stall replays are handed the arguments the design calls
for (the scan's alpha, the strategy's seeds and tags, the reward scale of the returns written here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from envaudit.findings import Finding, Severity
from envaudit.probes._shared.endings import fmt
from envaudit.probes.length import CODE, decide_length_bias
from envaudit.probes.length import bias as L
from envaudit.probes.length.fading import exploration_fading
from envaudit.protocol import END_TRUNCATED, ERROR, FAILURE, SUCCESS, TIMEOUT, TOOL_TIMEOUT
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.frames import FakeContext, episode, many, records
from tests.probes._shared.test_stall_decisions import LIMIT, J, Staller, ctx_for
from tests.probes.length.test_length_decisions import (
    FIT,
    GIVE_UP,
    QUIT_FIT,
    SUBMIT,
    WORK,
    fading_table,
    farming_ctx,
    finding,
    quit_play,
    run_ctx,
    searchless,
    stall_play,
)

# -- what every finding carries, and the numbers its text shows ------------------------------------

def carries(f: Finding, behaviour: str, fit: dict | None = None, **evidence) -> None:
    """The contract every length finding keeps: its code, probe, behaviour and reward path (the
    grouping key), a summary and a fix; with ``fit``, the regression it was judged from; the
    ``evidence`` values the test's design gives."""
    assert f.code == CODE and f.probe == "length" and f.summary and f.fix
    assert f.evidence["behaviour"] == behaviour and f.evidence.get("reward_path", "env") == "env"
    if fit is not None:
        assert f.evidence["reward_path"] == "env"
        assert f.evidence["length_effect"] == fit["coef"]["length"] and f.evidence["regression"] == fit
        assert f.evidence["n"] == fit["n"] and f.evidence["min_samples"] == MIN_SAMPLES
    for key, value in evidence.items():
        assert f.evidence[key] == (pytest.approx(value) if isinstance(value, float) else value), key


def shows(f: Finding, *numbers: float | None) -> None:
    """The summary shows each number as the report writes numbers (``fmt``), and none is unknown."""
    assert fmt(None) not in f.summary, f.summary
    for x in numbers:
        assert fmt(x) in f.summary, (fmt(x), f.summary)


def ranked_stall_play(pay_per_step: float, length: int = 10):
    """The stall's episodes pay ``pay_per_step`` a step, plus 0.001 x the seed's rank on the last
    step, so that the best-paying episodes (the examples) are known: the last seeds asked for."""
    def play(policy, seeds, kw):
        return records(*[episode(TIMEOUT, [(WORK, pay_per_step)] * (length - 1) + [(WORK, pay_per_step + 0.001 * i)],
                                 success=False, end=END_TRUNCATED, seed=s) for i, s in enumerate(seeds)], first_id=100)
    return play


STRONG_FIT = {"coef": {"length": {"estimate": 0.1, "p_value": 1e-12, "ci": [0.05, 0.15]}, "success": {}}, "n": 40}


def test_a_farming_finding_shows_its_numbers_and_best_examples():
    # 10 steps of 0.1 (+ rank / 1000 on the last) against successes of 0.9: at least as much as success
    ctx = farming_ctx(ranked_stall_play(0.1))
    success, failure = np.full(MIN_SAMPLES, 0.9), np.full(MIN_SAMPLES, 0.2)
    f = L._farming(ctx, STRONG_FIT, success, failure, np.random.default_rng(0))
    n = L.sample_size(ctx, 32)
    mean = 1.0 + 0.001 * (n - 1) / 2
    carries(f, "stall", STRONG_FIT, mean_strategy=mean, mean_strategy_length=10.0, mean_success=0.9,
            mean_failure=0.2)
    assert f.severity == Severity.FAIL
    # the fit's p-value is tiny: the ladder's own p-value is the larger of the two
    assert f.evidence["p_value"] == f.evidence["test"]["p_value"] > STRONG_FIT["coef"]["length"]["p_value"]
    assert f.examples == [100 + n - 1 - i for i in range(5)]  # the five best-paying, best first
    shows(f, mean, 10.0, 0.9)
    # both strategies (the stall and repeating 'work') earn the same on the 8 screen seeds
    screen = 1.0 + 0.001 * 7 / 2
    assert f.evidence["screen"] == pytest.approx({"stall": screen, "repeat work": screen})
    assert f"pays {0.1:+.3g} once progress stops" in f.summary  # each idle step's pay (the tail's)
    # judged in the gap between success and failure: 0.7 of reward
    assert f.evidence["marginal"]["min_effect"] == pytest.approx(L.MIN_EFFECT * 0.7)
    warn = L._farming(farming_ctx(ranked_stall_play(0.05)), STRONG_FIT, np.ones(MIN_SAMPLES),
                      np.full(MIN_SAMPLES, 0.2), np.random.default_rng(0))
    assert warn.severity == Severity.WARN
    carries(warn, "stall", STRONG_FIT, mean_failure=0.2)
    shows(warn, 0.2)
    assert warn.evidence["marginal"]["min_effect"] == pytest.approx(L.MIN_EFFECT * 0.8)


def test_farming_without_successes_is_judged_in_the_spread_of_returns():
    # no honest success: the reward unit is the spread of failures (0) and the stall's returns (0.5)
    ctx = farming_ctx(stall_play(0.05))
    f = L._farming(ctx, STRONG_FIT, np.array([]), np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    n = L.sample_size(ctx, 32)
    spread = float(np.std([0.0] * MIN_SAMPLES + [0.5] * n))
    assert f.severity == Severity.WARN and f.evidence["mean_success"] is None
    assert f.evidence["marginal"]["min_effect"] == pytest.approx(L.MIN_EFFECT * spread)


def test_progress_and_correlation_findings_keep_the_contract():
    def play(policy, seeds, kw):  # progress: the first step pays 0.5, the idle steps nothing
        return records(*[episode(TIMEOUT, [(WORK, 0.5)] + [(WORK, 0.0)] * 9, success=False, end=END_TRUNCATED, seed=s)
                         for s in seeds], first_id=100)
    f = L._farming(farming_ctx(play), FIT, np.ones(MIN_SAMPLES), np.full(MIN_SAMPLES, 0.2), np.random.default_rng(0))
    assert f.severity == Severity.INFO and len(f.examples) == 5
    carries(f, "stall", FIT, mean_strategy=0.5, mean_failure=0.2, p_value=0.001)
    assert f.evidence["marginal"]["mean_tail_pay"] == 0.0
    shows(f, 0.5, 0.2, 0.0)
    f = L._farming(farming_ctx(stall_play(0.0)), FIT, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES),
                   np.random.default_rng(0))
    carries(f, "stall", FIT, p_value=0.001)
    assert f.examples == [] and f"adds {0.1:+.3g}" in f.summary


def test_farming_repeats_the_actions_that_paid_most_in_exploration():
    # seven non-ending actions 2..8, action a paying a / 100 a step in exploration; SUBMIT ends
    explored = records(*[episode(FAILURE, [(a, a / 100), (a, a / 100), (SUBMIT, 0.0)], success=False)
                         for a in range(2, 9) for _ in range(2)])

    def play(policy, seeds, kw):  # a repeated action pays what it paid in exploration, per step
        pay = policy.action / 100 if isinstance(policy, L.RepeatPolicy) else 0.0
        return records(*[episode(TIMEOUT, [(policy.action if pay else 2, pay)] * 10, success=False,
                                 end=END_TRUNCATED, seed=s) for s in seeds])

    ctx = FakeContext(explored, play=play)
    L._farming(ctx, FIT, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    screened = [p for p, _, _ in ctx.runs[:-1]]
    assert len(screened) == L.MAX_STRATEGIES
    assert [p.describe() for p in screened] == ["random actions, never '1'"] + [f"repeat '{a}'" for a in (8, 7, 6, 5, 4)]
    assert [s for _, s, _ in ctx.runs[:-1]] == [ctx.seeds(8, "long", "screen", p.name) for p in screened]
    # the best of the screen (repeating 8) is the one confirmed
    assert ctx.runs[-1][0].describe() == "repeat '8'"


def ranked_quit_play(pay: float, outcome=FAILURE):
    """Quitting at once with SUBMIT pays ``pay`` + 0.001 x the seed's rank (the best examples are the
    last seeds); any other action ends the episode for nothing."""
    def play(policy, seeds, kw):
        action = policy.action  # the action the policy repeats ends the episode at once
        paid = pay if action == SUBMIT else 0.0
        return records(*[episode(outcome, [(action, paid + 0.001 * i)], success=False, seed=s)
                         for i, s in enumerate(seeds)], first_id=100)
    return play


def test_a_brevity_finding_shows_its_numbers_and_best_examples():
    ctx = farming_ctx(ranked_quit_play(1.0))
    success = np.full(MIN_SAMPLES, 0.9)
    f = L._brevity(ctx, QUIT_FIT, success, np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    n = L.sample_size(ctx, 32)
    mean = 1.0 + 0.001 * (n - 1) / 2
    assert f.severity == Severity.FAIL
    carries(f, "quit", QUIT_FIT, mean_strategy=mean, mean_success=0.9, policy="repeat 'submit'")
    assert f.examples == [100 + n - 1 - i for i in range(5)]
    shows(f, mean, 0.9)
    # the screen and the confirmation are the quitting strategy's own seeds
    assert [s for _, s, _ in ctx.runs] == [ctx.seeds(8, "quit", "screen", "repeat submit"),
                                           ctx.seeds(n, "quit", "confirm", "repeat submit")]


def test_quitting_on_an_error_is_another_behaviour():
    # the quitting action ends every episode on an error, not as a failure: nothing to place on the ladder
    ctx = farming_ctx(ranked_quit_play(1.0, outcome=TIMEOUT))
    f = L._brevity(ctx, QUIT_FIT, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    assert f.severity == Severity.INFO and f.evidence["mean_strategy"] is None
    carries(f, "quit", QUIT_FIT, mean_success=1.0)


def test_a_step_cost_finding_shows_the_typical_step_and_the_slope():
    # every non-ending step costs 0.1; the slope (0.25 a step) also carries rarer penalties
    explored = records(*many(MIN_SAMPLES, FAILURE, [(WORK, -0.1), (WORK, -0.1), (SUBMIT, -0.1)], success=False))
    fit = {"coef": {"length": {"estimate": -0.25, "p_value": 0.002, "ci": [-0.3, -0.2]}}, "n": 40}
    f = L._brevity(farming_ctx(quit_play(-0.1), explored), fit, np.ones(MIN_SAMPLES), np.full(MIN_SAMPLES, -0.3),
                   np.random.default_rng(0))
    assert f.severity == Severity.INFO and f.examples == []
    carries(f, "quit", fit, typical_step_reward=-0.1, p_value=0.002)
    assert f"pays {-0.1:+.3g}" in f.summary and f"by {-0.25:+.3g}" in f.summary


def test_quitting_is_judged_at_the_scans_alpha(monkeypatch):
    seen = []
    real = L.exploit_ladder

    def ladder(*args, **kw):
        seen.append(kw["alpha"])
        return real(*args, **kw)

    monkeypatch.setattr(L, "exploit_ladder", ladder)
    config = FakeContext(records()).config.__class__(seed=0, alpha=0.01)
    # too few successes: placed against failure, topped up by random play, placed again
    ctx = FakeContext(farming_ctx(None).exploration, config=config, play=topping_up([1.0] * MIN_SAMPLES),
                      labels=["work", "submit"])
    L._brevity(ctx, QUIT_FIT, np.ones(2), np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    stall = FakeContext(farming_ctx(None).exploration, config=config, play=stall_play(0.1), labels=["work", "submit"])
    L._farming(stall, FIT, np.ones(MIN_SAMPLES), np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    assert seen == [0.01, 0.01, 0.01]


def topping_up(found: list[float]):
    """Random play (the top-up) finds successes paying ``found`` in its first batch and none after;
    quitting (SUBMIT) pays 1.0."""
    left = list(found)

    def play(policy, seeds, kw):
        if policy.name == "random":
            wins = [episode(SUCCESS, [(SUBMIT, r)], success=True) for r in left]
            left.clear()
            return records(*wins, episode(FAILURE, [(WORK, 0.0), (SUBMIT, 0.0)], success=False))
        return quit_play(1.0)(policy, seeds, kw)
    return play


def test_too_few_successes_are_searched_for_after_random_play(monkeypatch):
    asked = []

    def search(ctx, n):  # the success search (probes/length_search.py) finds eight of 1.1
        asked.append((ctx, n))
        return [type("Success", (), {"ret": 1.1})()] * n

    monkeypatch.setattr(L, "searched_successes", search)
    ctx = farming_ctx(topping_up([0.9, 0.9]))
    f = L._brevity(ctx, QUIT_FIT, np.ones(2), np.zeros(MIN_SAMPLES), np.random.default_rng(0))
    assert asked == [(ctx, MIN_SAMPLES)]
    # two random successes of 0.9 and eight searched ones of 1.1, all placed against quitting
    assert f.evidence["mean_success"] == pytest.approx((2 * 0.9 + 8 * 1.1) / 10)
    assert f.evidence["test"]["vs_success"]["n_success"] == 10
    asked.clear()
    enough = L._brevity(farming_ctx(topping_up([1.0] * MIN_SAMPLES)), QUIT_FIT, np.ones(2), np.zeros(MIN_SAMPLES),
                        np.random.default_rng(0))
    assert asked == [] and enough.severity == Severity.FAIL  # random play found enough: no search
    monkeypatch.setattr(L, "searched_successes", lambda ctx, n: [])
    none = L._brevity(farming_ctx(topping_up([])), QUIT_FIT, np.ones(2), np.zeros(MIN_SAMPLES),
                      np.random.default_rng(0))
    assert none.evidence["mean_success"] is None  # no success anywhere: nothing to show


def test_quitting_is_placed_against_the_failures_that_end_another_way():
    # 8 failures that run out of work (0) and 8 that SUBMIT for a 1.0 "bonus"
    explored = records(*many(MIN_SAMPLES, FAILURE, [(WORK, 0.0), (WORK, 0.0)], success=False),
                       *many(MIN_SAMPLES, FAILURE, [(WORK, 0.0), (SUBMIT, 1.0)], success=False))
    failure = explored.episodes["return"].to_numpy(float)
    f = L._brevity(farming_ctx(quit_play(1.0), explored), QUIT_FIT, np.ones(MIN_SAMPLES), failure,
                   np.random.default_rng(0), enders=[SUBMIT])
    assert f.evidence["test"]["vs_alternative"]["mean_alternative"] == 0.0
    assert f.evidence["test"]["vs_alternative"]["n_alternative"] == MIN_SAMPLES


# -- run: its findings, its arguments to the delay check, the fading ending's own strategies -------

def test_runs_own_findings_keep_the_contract():
    (f,) = L.run(searchless(records(*many(MIN_SAMPLES, FAILURE, [(0, 0.5), (0, 0.5)]))))
    carries(f, "stall", reward_per_step=0.5, n_steps=16, n=MIN_SAMPLES)
    assert fmt(0.5) in f.summary
    walk = searchless(records(*[episode(TIMEOUT, [(0, -1.0)] * 3 + [(0, -1.0 - (i % 2))], end=END_TRUNCATED)
                                for i in range(MIN_SAMPLES)]))
    (f,) = L.run(walk)
    carries(f, "exploration", n=MIN_SAMPLES, length=4, mean_return=-4.5)
    # every episode 2 steps long but ended by the env: no step limit, and no length to regress on
    same_length = searchless(records(*[episode(FAILURE, [(0, 0.0), (1, 0.1 * (i % 3))]) for i in range(MIN_SAMPLES)]))
    assert L.run(same_length) == []


def test_run_hands_the_delay_check_its_actions_and_reward_scale(monkeypatch):
    asked = []
    delayed = finding(Severity.FAIL, behaviour="delay-success")

    def delay(ctx, others, scale, rng, *, candidates):
        assert isinstance(rng, np.random.Generator)  # the check's draws come from the scan's seed
        asked.append((others, scale, candidates))
        return delayed

    monkeypatch.setattr(L, "delay_success", delay)
    # no success: 8 failures that SUBMIT for 0 and 8 timeouts whose last step costs 1
    explored = records(*many(MIN_SAMPLES, FAILURE, [(WORK, 0.0), (SUBMIT, 0.0)], success=False),
                       *many(MIN_SAMPLES, TIMEOUT, [(WORK, 0.0), (WORK, -1.0)], success=False, end=END_TRUNCATED))
    assert L.run(searchless(explored)) == [delayed]  # one length: nothing else to say
    # no success to measure against: the unit is the spread of the failures' and every episode's returns
    spread = float(np.std([0.0] * MIN_SAMPLES + [0.0] * MIN_SAMPLES + [-1.0] * MIN_SAMPLES))
    assert asked == [([WORK], pytest.approx(spread), [WORK, SUBMIT])]
    # with a fading ending beside it, the delay finding stays first
    asked.clear()
    ctx = run_ctx(fading_table(), quit_play(1.0))
    found = L.run(ctx)
    assert found[0] is delayed and [f.evidence["behaviour"] for f in found] == ["delay-success", "quit"]
    assert asked[0][0] == [WORK] and asked[0][2] == [WORK, SUBMIT, GIVE_UP]
    # only the fading ending (SUBMIT) is tried as quitting, not every ending action
    assert {p.describe() for p, _, _ in ctx.runs} == {"repeat 'submit'"}


# -- "one-incentive": the delay check at a higher rung heads the finding ---------------------------

def test_a_delay_above_farming_heads_the_finding_and_takes_farmings_fix():
    d = Finding(CODE, Severity.FAIL, "Delaying success pays", "Delay.", {"k": 3}, [7], "delay fix", probe="length")
    farming = Finding(CODE, Severity.WARN, "Farming", "Farming.", {"mean_strategy": 0.8}, [1], "farming fix",
                      probe="length")
    (one,) = decide_length_bias("one-incentive", {"delayed": [d], "farming": farming})
    assert one.severity == Severity.FAIL and one.examples == [7] and one.fix == "farming fix"
    assert one.summary.startswith("Delay. ") and fmt(0.8) in one.summary[len("Delay."):]
    assert one.evidence == {"k": 3, "farming": {"mean_strategy": 0.8}}


# -- regress: every outcome and tool failure held fixed ----------------------------------------------

def test_regress_holds_timeouts_errors_and_tool_timeouts_fixed():
    # length pays 0.1 a step; a success 1.0, a timeout -2, an error -3, each timed-out call -0.5
    eps = []
    for i in range(48):
        length, outcome = 2 + i % 5, (SUCCESS, FAILURE, TIMEOUT, ERROR)[i % 4]
        calls = i % 3
        bonus = {SUCCESS: 1.0, FAILURE: 0.0, TIMEOUT: -2.0, ERROR: -3.0}[outcome]
        steps = ([{"action": WORK, "reward": 0.1 - 0.5, "tool_status": TOOL_TIMEOUT}] * calls
                 + [(WORK, 0.1)] * (length - calls - 1) + [(SUBMIT, 0.1 + bonus)])
        eps.append(episode(outcome, steps, success=outcome == SUCCESS))
    fit = L.regress(records(*eps).episodes, np.random.default_rng(0))
    expected = {"length": 0.1, "success": 1.0, "timed_out": -2.0, "errored": -3.0, "tool_timeouts": -0.5}
    assert {k: fit["coef"][k]["estimate"] for k in expected} == pytest.approx(expected)
    assert set(fit["within_outcome"]) == {SUCCESS, FAILURE, TIMEOUT, ERROR}


# -- idle_value: what the replay's answer carries -----------------------------------------------------

def test_idle_value_carries_the_replays_numbers_and_tags():
    recs = records(*[episode(TIMEOUT, [(0, 0.1)] * LIMIT, end=END_TRUNCATED, seed=100 + i)
                     for i in range(MIN_SAMPLES + 4)], first_id=9000)
    ctx = ctx_for(Staller(idle_pay=0.1))
    paid = L.idle_value(ctx, {"records": recs, "steps": recs.steps}, recs.episodes, 1.0)
    assert paid["mean_tail_steps"] == J and paid["p_value"] == paid["replay"]["idle_steps_pay"]["p_value"]
    assert "examples" not in paid["replay"] and paid["replay"]["n_prefixes"] == MIN_SAMPLES + 4
    assert {kw["tags"]["stalling"] for _, _, kw in ctx.runs} == {"length"}
    # exploration with no honest ending to replay against: the strategy's own tails stand in
    no_ender = ctx_for(Staller(), exploration=records(*many(12, FAILURE, [(0, 0.0), (0, 0.0)])))
    tail = L.idle_value(no_ender, {"records": recs, "steps": recs.steps}, recs.episodes, 1.0)
    assert tail["method"].startswith("tail") and tail["pays"]


# -- _run_strategies: a cap reached between strategies keeps what was screened -----------------------

@dataclass
class CapAfter(FakeContext):
    free: int = 2  # safety-cap checks that pass before the cap is reached

    def over_cap(self, skipped: str) -> bool:
        self.free -= 1
        if self.free < 0:
            self.skipped.append(skipped)
        return self.free < 0


def test_a_cap_between_strategies_confirms_the_best_screened_so_far():
    ctx = CapAfter(records(), play=stall_play(0.1))
    policies = [L.RepeatPolicy.repeating(i, x) for i, x in enumerate("abc")]
    best, run = L._run_strategies(ctx, policies, "long")
    assert best is policies[0] and list(run["screen_mean_non_success"]) == ["repeat a"]
    assert ctx.skipped == ["long strategy 'repeat b' and those after it"]
    assert run["records"] is ctx.kept[0]  # the confirmed run's records, for the stall replays


def test_constant_step_reward_of_one_step():
    assert L.constant_step_reward(records(episode(FAILURE, [(0, 0.25)])).steps) == 0.25


# -- exploration_fading: the boundaries of "enough to fit" --------------------------------------------------

def endings(action, pays_by_step, copies: int, first: int = 0):
    return [episode(FAILURE, [(WORK, 0.0)] * k + [(action, pay + 0.001 * (i % 2))], success=False)
            for i in range(copies) for k, pay in enumerate(pays_by_step)]


def test_fading_enders_at_their_boundaries():
    rng = np.random.default_rng(0)
    # exactly MIN_SAMPLES endings, at exactly two steps: enough
    two_steps = endings(SUBMIT, [1.0, 0.5], MIN_SAMPLES // 2)
    assert exploration_fading(FakeContext(records(*two_steps)), rng) == [SUBMIT]
    # a pay that rises with the step is no brevity bonus, however significant
    rising = endings(SUBMIT, [0.1 * k for k in range(6)], 2)
    assert exploration_fading(FakeContext(records(*rising)), rng) == []
    # an ending with too few samples does not stop the next one from being checked
    mixed = endings(SUBMIT, [1.0], 3) + endings(GIVE_UP, [1.0 - 0.1 * k for k in range(6)], 2)
    assert exploration_fading(FakeContext(records(*mixed)), rng) == [GIVE_UP]
