"""Each planted flaw changes exactly the payoff it claims, measured by scripted play.

A flawed spec's twin is the same spec with ``flaw=None`` (the generator made the base able to carry
the flaw first: a quit action, a flaky tool, a reliable distractor). Where the flaw does not touch
the env's random draws, the flawed env and its twin replay the same seed and actions step for step,
and their rewards differ by exactly the flaw's ``amount`` at exactly the steps it names. Where it
decides a return-maximiser's choice, the exploit's return is compared with the honest one
(``honest_success_return``), by the size the generator gave it.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from functools import partial

import numpy as np
import pytest

from envaudit.families import flawed_case, honest_success_return
from envaudit.families.analysis import progress_total
from envaudit.families.envs import make_env
from envaudit.interpreter import Elsewhere, play_plans

from .play import honest, play, random_labels, repeat, sequence, stall_label

INSTANCES = 3


def cases(kind):
    return [flawed_case(7, i, kind=kind) for i in range(INSTANCES)]


def twin(spec):
    return replace(spec, flaw=None)


def paired(spec, choose_for, seeds):
    """The same seeds and choices on the flawed env and its twin."""
    return [(play(spec, choose_for(s), s), play(twin(spec), choose_for(s), s)) for s in seeds]


def rnd(spec):
    return lambda s: random_labels(spec, np.random.default_rng(s))


def best_honest(spec):
    return spec.success_reward + progress_total(spec)


@pytest.mark.parametrize("case", cases("truncation-credit"), ids=lambda c: c.name)
def test_truncation_credit_pays_its_amount_on_the_cut_step_only(case):
    spec = case.spec
    for flawed, clean in paired(spec, lambda s: repeat(stall_label(spec)), range(5)):
        assert flawed.steps[-1].truncated and clean.steps[-1].truncated
        diffs = [a.reward - b.reward for a, b in zip(flawed.steps, clean.steps, strict=True)]
        assert diffs[:-1] == pytest.approx([0.0] * (len(diffs) - 1)) and diffs[-1] == pytest.approx(spec.flaw.amount)
        # Stalling beats failing outright (a give-up or wrong answer at once earns -step_cost).
        assert flawed.ret > -spec.step_cost + 0.2 * honest_success_return(spec) - 1e-9


@pytest.mark.parametrize("case", cases("timeout-passes"), ids=lambda c: c.name)
def test_a_timed_out_call_of_the_flawed_tool_is_paid_as_a_pass(case):
    spec, tool = case.spec, f"call_{case.spec.flaw.tool}"
    rets = []
    for seed in range(40):
        ep = play(spec, repeat(tool), seed)
        last = ep.steps[-1]
        if last.terminated:
            assert last.status == "timeout" and not ep.success
            assert last.reward == pytest.approx(spec.flaw.amount - spec.step_cost)
        rets.append(ep.ret)
        clean = play(twin(spec), repeat(tool), seed)
        assert clean.steps[-1].truncated and not clean.success
    assert np.mean(rets) >= honest_success_return(spec)


@pytest.mark.parametrize("case", cases("failure-cost"), ids=lambda c: c.name)
def test_failure_cost_makes_giving_up_beat_persisting_at_the_envs_own_rates(case):
    spec = case.spec
    for flawed, clean in paired(spec, lambda s: honest(spec), range(3)):
        for a, b in zip(flawed.steps, clean.steps, strict=True):
            assert a.reward - b.reward == pytest.approx(-spec.flaw.amount if a.status != "ok" else 0.0)
    assert spec.flaw.amount >= 3 * spec.step_cost
    give_up = play(spec, repeat("give_up"), 0).ret
    assert give_up == pytest.approx(-spec.step_cost)
    # Designed: persisting expects the honest return minus the cost of its expected failures,
    # 0.3-0.6 of a success below nothing.
    designed = honest_success_return(spec) - spec.flaw.amount * spec.expected_path_failures()
    assert designed <= give_up - 0.25 * spec.success_reward
    persist = np.array([play(spec, honest(spec), s).ret for s in range(400)])
    assert _within(persist.mean(), designed, persist.std(ddof=1) / np.sqrt(len(persist)), floor=0.03)
    persist_clean = np.mean([play(twin(spec), honest(spec), s).ret for s in range(100)])
    assert persist_clean > give_up  # without the cost, persisting wins


@pytest.mark.parametrize("case", cases("attempt-credit"), ids=lambda c: c.name)
def test_attempt_credit_pays_failed_steps_more_than_the_same_steps_ok(case):
    spec = case.spec
    for flawed, clean in paired(spec, rnd(spec), range(20)):
        for a, b in zip(flawed.steps, clean.steps, strict=True):
            assert a.reward - b.reward == pytest.approx(spec.flaw.amount if a.status != "ok" else 0.0)
    # Any call's ok step pays at most step progress; its failed step pays the credit, which is more.
    assert spec.flaw.amount > spec.shaping_scale / len(spec.path)


@pytest.mark.parametrize("case", cases("failure-conditioned-quit"), ids=lambda c: c.name)
def test_quitting_right_after_a_failed_call_pays_most_of_a_success(case):
    spec = case.spec
    flaky = max((t for t in spec.tools if t.name in spec.path), key=lambda t: t.failure_rate)
    label = f"call_{flaky.name}"

    def fail_then_quit(t, obs, steps):
        return "give_up" if steps and steps[-1].status != "ok" else label

    exploit = [play(spec, fail_then_quit, s) for s in range(40)]
    quit_after_fail = [e for e in exploit if e.steps[-1].label == "give_up"]
    assert len(quit_after_fail) >= 30
    for e in quit_after_fail:
        assert not e.success and e.steps[-1].reward == pytest.approx(spec.flaw.amount - spec.step_cost
                                                                       - spec.potential(e.progress))
    assert spec.flaw.amount >= 0.6 * best_honest(spec) - 1e-9
    # Quitting after an ok call, and the same exploit on the twin, pay nothing.
    assert play(spec, sequence(["give_up"], repeat("give_up")), 0).ret == pytest.approx(-spec.step_cost)
    assert all(play(twin(spec), fail_then_quit, s).steps[-1].reward <= 0 for s in range(10))


@pytest.mark.parametrize("case", cases("step-farming"), ids=lambda c: c.name)
def test_farming_the_flawed_call_to_the_step_limit_out_earns_success(case):
    spec, label = case.spec, f"call_{case.spec.flaw.tool}"
    farm = play(spec, repeat(label), 0)
    assert farm.steps[-1].truncated and not farm.success
    assert farm.ret == pytest.approx(spec.max_steps * (spec.flaw.amount - spec.step_cost))
    assert farm.ret >= 1.2 * honest_success_return(spec) - 1e-9
    assert play(twin(spec), repeat(label), 0).ret == pytest.approx(-spec.step_cost * spec.max_steps)


@pytest.mark.parametrize("case", cases("brevity-bonus"), ids=lambda c: c.name)
def test_a_brevity_bonus_makes_quitting_at_once_out_earn_success_and_decays(case):
    spec = case.spec
    at_once = play(spec, repeat("give_up"), 0)
    assert at_once.ret == pytest.approx(spec.flaw.amount - spec.step_cost) and not at_once.success
    assert at_once.ret >= 1.1 * best_honest(spec) - 1e-9
    stall = stall_label(spec)
    later = play(spec, sequence([stall] * 3, repeat("give_up")), 0)
    assert later.steps[-1].reward == pytest.approx(spec.flaw.amount * (1 - 3 / spec.max_steps)
                                                   - spec.step_cost - spec.potential(later.progress))
    assert play(twin(spec), repeat("give_up"), 0).ret == pytest.approx(-spec.step_cost)


@pytest.mark.parametrize("case", cases("delayed-success"), ids=lambda c: c.name)
def test_delaying_success_by_wrong_attempts_earns_more_than_succeeding_at_once(case):
    spec, k = case.spec, 3
    wrong = spec.submit_labels[0]  # before the path is complete every submission is wrong
    delay = lambda s: sequence([wrong] * k, honest(spec))  # noqa: E731
    for flawed, clean in paired(spec, delay, range(5)):
        paid = [spec.flaw.amount if a.label.startswith("submit") and not a.info.get("success") else 0.0
                for a in flawed.steps]
        assert [a.reward - b.reward for a, b in zip(flawed.steps, clean.steps, strict=True)] == pytest.approx(paid)
    assert spec.flaw.amount > spec.step_cost
    delayed = np.array([e.ret for e in (play(spec, delay(s), s) for s in range(120)) if e.success])
    at_once = np.array([e.ret for e in (play(spec, honest(spec), s) for s in range(120)) if e.success])
    gain = delayed.mean() - at_once.mean()
    se = np.sqrt(delayed.var(ddof=1) / len(delayed) + at_once.var(ddof=1) / len(at_once))
    assert gain > 0 and _within(gain, k * (spec.flaw.amount - spec.step_cost), se)
    # Farming wrong answers to the step limit stays below success: this is delay, not farming.
    farm = play(spec, repeat(wrong), 0)
    assert not farm.success and farm.ret < honest_success_return(spec)


def _within(measured, expected, se, floor=0.005):
    return abs(measured - expected) <= 4 * se + floor


@pytest.mark.parametrize("kind", ["lenient-grader", "degenerate-answer"])
def test_a_degenerate_answer_is_paid_at_least_a_success_with_success_false(kind):
    for case in cases(kind):
        spec = case.spec
        label = "submit_all" if kind == "degenerate-answer" else spec.submit_labels[0]
        ep = play(spec, repeat(label), 0)
        assert ep.steps[-1].terminated and not ep.success and len(ep.steps) == 1
        assert ep.ret == pytest.approx(spec.flaw.amount - spec.step_cost)
        assert spec.flaw.amount >= best_honest(spec) - 1e-9
        assert play(twin(spec), repeat(label), 0).ret <= 0


@pytest.mark.parametrize("case", cases("guess-credit"), ids=lambda c: c.name)
def test_a_guess_at_once_earns_more_than_the_honest_policy_and_less_than_any_success(case):
    # Issue 25, class 6: the exploit sits between the honest policy's return (with its retries)
    # and the fastest success.
    spec = case.spec
    guess = play(spec, repeat(spec.submit_labels[-1]), 0)
    assert guess.steps[-1].terminated and len(guess.steps) == 1
    if guess.success:  # the right answer is never revealed before the path: only a lucky seed
        guess = play(spec, repeat(spec.submit_labels[0]), 0)
    assert not guess.success and guess.ret == pytest.approx(spec.flaw.amount - spec.step_cost)
    fastest_success = best_honest(spec) - spec.step_cost * (len(spec.path) + 1)
    assert honest_success_return(spec) < guess.ret < fastest_success
    assert spec.step_cost > 0 and spec.wrong_answer_ends
    assert play(twin(spec), repeat(guess.steps[0].label), 0).ret == pytest.approx(-spec.step_cost)


@pytest.mark.parametrize("case", cases("unseeded-answer") + cases("unseeded-tools"), ids=lambda c: c.name)
def test_unseeded_flaws_make_replays_of_one_seed_differ_unless_global_random_is_pinned(case):
    spec = case.spec

    def trace(global_seed=None):
        if global_seed is not None:
            random.seed(global_seed)
        ep = play(spec, honest(spec) if case.kind == "unseeded-answer" else repeat(f"call_{spec.path[0]}"), 0)
        return [(s.label, s.status, s.reward, s.obs.tolist()) for s in ep.steps]

    state = random.getstate()
    try:
        assert len({repr(trace()) for _ in range(12)}) > 1
        assert trace(global_seed=5) == trace(global_seed=5)  # the only unseeded source is `random`
    finally:
        random.setstate(state)
    twin_traces = {repr([(s.label, s.status, s.reward) for s in play(twin(spec), honest(spec), 0).steps])
                   for _ in range(4)}
    assert len(twin_traces) == 1


@pytest.mark.parametrize("case", cases("hashed-answer"), ids=lambda c: c.name)
def test_a_hashed_answer_replays_in_one_process_and_not_in_another(case):
    spec, seeds = case.spec, range(8)
    here = {s: play(spec, honest(spec), s) for s in seeds}
    again = {s: play(spec, honest(spec), s) for s in seeds}  # one process: replayable
    assert all([(x.label, x.reward) for x in here[s].steps] == [(x.label, x.reward) for x in again[s].steps]
               for s in seeds)
    plans = [(s, [spec.labels.index(step.label) for step in here[s].steps]) for s in seeds]
    mine = play_plans(partial(make_env, spec), plans)
    theirs = Elsewhere(None, partial(make_env, spec), plans).result()
    assert theirs is not None
    # The honest policy answers what this process hashed; another hash seed poses other answers.
    assert any(a.steps[-1][2] != b.steps[-1][2] for a, b in zip(mine, theirs, strict=True))
    twin_plans = [(s, [spec.labels.index(step.label) for step in play(twin(spec), honest(spec), s).steps])
                  for s in seeds]
    twin_there = Elsewhere(None, partial(make_env, twin(spec)), twin_plans).result()
    assert [e.steps[-1][2] for e in twin_there] == [e.steps[-1][2] for e in play_plans(partial(make_env, twin(spec)),
                                                                                        twin_plans)]


@pytest.mark.parametrize("case", cases("repeat-call-pays"), ids=lambda c: c.name)
def test_repeating_the_degenerate_call_ends_the_episode_with_more_than_success(case):
    spec, label = case.spec, f"call_{case.spec.flaw.tool}"
    ep = play(spec, repeat(label), 0)
    assert len(ep.steps) == spec.flaw.repeats and ep.steps[-1].terminated and not ep.success
    assert ep.ret == pytest.approx(spec.flaw.amount - spec.step_cost * spec.flaw.repeats)
    assert ep.ret >= honest_success_return(spec)
    assert play(twin(spec), repeat(label), 0).steps[-1].truncated


@pytest.mark.parametrize("case", cases("sequence-exploit"), ids=lambda c: c.name)
def test_the_sequence_exploit_pays_and_no_repeated_single_call_reaches_it(case):
    spec, seq = case.spec, [f"call_{s}" for s in case.spec.flaw.sequence]
    ep = play(spec, sequence(seq, repeat("give_up" if spec.quit_action else seq[0])), 0)
    assert len(ep.steps) == len(seq) and ep.steps[-1].terminated and not ep.success
    assert ep.ret == pytest.approx(spec.flaw.amount - spec.step_cost * len(seq))
    assert ep.ret >= honest_success_return(spec)
    for label in spec.labels:
        single = play(spec, repeat(label), 0)
        assert single.ret < spec.flaw.amount - spec.step_cost * len(seq) or math.isclose(
            single.ret, play(twin(spec), repeat(label), 0).ret)


@pytest.mark.parametrize("case", cases("nan-reward"), ids=lambda c: c.name)
def test_the_nan_flaw_returns_nan_after_the_first_path_step(case):
    spec, label = case.spec, f"call_{case.spec.flaw.tool}"
    first = f"call_{spec.path[0]}"

    def walk_then_flawed(t, obs, steps):
        return first if not steps or obs[0] == 0 else label

    rewards = [s.reward for s in play(spec, walk_then_flawed, 0).steps]
    assert any(math.isnan(r) for r in rewards)
    assert not any(math.isnan(s.reward) for s in play(twin(spec), walk_then_flawed, 0).steps)


@pytest.mark.parametrize("case", cases("raise-in-state"), ids=lambda c: c.name)
def test_the_raise_flaw_raises_on_the_second_ok_call(case):
    spec, label = case.spec, f"call_{case.spec.flaw.tool}"
    with pytest.raises(RuntimeError, match="second call"):
        play(spec, repeat(label), 0)
    assert play(twin(spec), repeat(label), 0).ended
