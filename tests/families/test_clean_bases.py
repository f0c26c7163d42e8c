"""Clean bases have the features they claim and are clean by DESIGN.md's ladder, measured by play.

Every expected number comes from the spec: the exact random-play success probability
(``random_success_probability``), the honest success return (``honest_success_return``), the
tools' failure rates, the grader's noise. Monte Carlo means are checked within 4 standard errors.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from envaudit.families import honest_success_return, make_cases, random_success_probability
from envaudit.families.analysis import RARE_BELOW, progress_total

from .play import honest, play, random_labels

CLEAN = [c.spec for c in make_cases(40, 0, seed=11)]


def _within(measured: float, expected: float, se: float, floor: float = 0.01) -> bool:
    return abs(measured - expected) <= 4 * se + floor


def test_clean_returns_are_success_progress_and_step_cost_and_nothing_else():
    # The ladder's exploit behaviours (timing out, failing, quitting, farming, the degenerate
    # answer, delaying success) can only pay through some other term; in a clean base there is none.
    checked = 0
    for spec in CLEAN:
        bonus = spec.progress_bonus()
        for seed in range(6):
            choose = honest(spec) if seed % 3 == 0 else random_labels(spec, np.random.default_rng(seed))
            ep = play(spec, choose, seed)
            credit = 0.0 if ep.success else spec.partial_credit * ep.progress / len(spec.path)
            # progress shaping pays each path step once; the forward bonus is charged back by step_back
            designed = (spec.success_reward * ep.success + bonus * ep.furthest + spec.forward_bonus * ep.progress
                        - spec.step_cost * len(ep.steps) + credit)
            assert ep.ret == pytest.approx(designed, abs=1e-9), (spec.label, [s.label for s in ep.steps])
            checked += 1
    assert checked == 6 * len(CLEAN)


def test_success_pays_far_more_than_failing_slowly_or_giving_up():
    for spec in CLEAN:
        failing_slowly = -spec.step_cost * spec.max_steps
        assert spec.step_cost * spec.max_steps <= 0.6 * spec.success_reward + 1e-9
        assert honest_success_return(spec) > 0 > failing_slowly or spec.step_cost == 0
        # A grader that says yes by mistake is never one that can be asked again and again.
        assert spec.grader_false_positive == 0 or spec.wrong_answer_ends


def _ending_label(spec, ending: str, obs) -> str | None:
    """The call that ends an episode ``ending``'s way from the state ``obs`` shows (None: none here)."""
    if ending == "idle":
        return f"call_{spec.distractors[0]}" if spec.distractors else None
    if ending != "wrong":
        return ending if ending in spec.labels else None
    revealed = obs[2:2 + spec.n_answers] if spec.n_answers > 1 else []
    wrong = [lab for k, lab in enumerate(spec.submit_labels) if not (len(revealed) and revealed[k] > 0.5)]
    full = obs[1] > 0.5
    return (wrong[0] if wrong and (spec.n_answers > 1 or not full) else None) if spec.wrong_answer_ends else None


def _walk_then(spec, cut: int, ending: str):
    """The honest path until ``cut`` steps of progress, then ``ending``'s call (``"stop"``, which
    the catalogue lacks, where there is none from that state)."""
    walk = honest(spec)

    def choose(t, obs, steps):
        here = round(float(obs[0]) * len(spec.path))
        return walk(t, obs, steps) if here < cut else _ending_label(spec, ending, obs) or "stop"
    return choose


def test_partial_credit_pays_every_unfinished_ending_from_one_state_alike():
    # Issue 25, class 1 (clean): after the same honest prefix, giving up, the degenerate answer, a
    # wrong answer and idling into the step limit each end paying the same credit for the progress.
    specs = [s for s in CLEAN if s.partial_credit > 0]
    assert len(specs) >= 3
    compared = 0
    for spec in specs:
        for cut in range(len(spec.path) + 1):
            pays = {}
            for ending in ("give_up", "submit_all", "wrong", "idle"):
                try:
                    ep = play(spec, _walk_then(spec, cut, ending), 5)
                except ValueError:  # "stop": no such ending from this state
                    continue
                if ep.progress == cut and not ep.success:
                    pays[ending] = ep.steps[-1].reward
            expected = spec.partial_credit * cut / len(spec.path) - spec.step_cost - spec.potential(cut)
            assert pays and all(v == pytest.approx(expected, abs=1e-9) for v in pays.values()), (spec.label, cut, pays)
            compared += len(pays) > 1
    assert compared >= 3


@pytest.mark.parametrize("regime", ["rare", "common"])
def test_random_play_succeeds_as_often_as_the_exact_probability_says(regime):
    specs = [s for s in CLEAN if s.regime == regime][:4]
    assert specs, f"no {regime} spec among the clean sample"
    for spec in specs:
        p = random_success_probability(spec)
        assert (p < RARE_BELOW) == (regime == "rare")
        n = 300
        wins = [play(spec, random_labels(spec, np.random.default_rng(10_000 + s)), s).success for s in range(n)]
        se = np.sqrt(max(p * (1 - p), 1e-4) / n)
        assert _within(float(np.mean(wins)), p, se), (spec.label, np.mean(wins), p)


def test_the_honest_policy_succeeds_and_earns_the_designed_success_return():
    for spec in CLEAN[:12]:
        eps = [play(spec, honest(spec), s) for s in range(80)]
        won = np.array([e.ret for e in eps if e.success])
        # Failures of the honest walk: the grader's false negatives, and a rare truncation.
        assert len(won) / len(eps) >= 1 - spec.grader_false_negative - 0.1, spec.label
        se = won.std(ddof=1) / np.sqrt(len(won)) if len(won) > 1 else 0.0
        assert _within(float(won.mean()), honest_success_return(spec), se, floor=0.02), spec.label


def test_potential_shaping_telescopes_to_nothing_over_any_episode():
    shaped = [s for s in CLEAN if s.shaping == "potential"]
    assert shaped
    for spec in shaped:
        plain = replace(spec, shaping="none", shaping_scale=0.0)
        for seed in range(5):
            a = play(spec, random_labels(spec, np.random.default_rng(seed)), seed)
            b = play(plain, random_labels(plain, np.random.default_rng(seed)), seed)
            assert a.ret == pytest.approx(b.ret, abs=1e-9)
        walked = play(spec, honest(spec), 0)
        assert any(s.reward > 0 for s in walked.steps[:-1])  # it does pay along the way


def test_progress_shaping_pays_partial_progress_but_never_a_success():
    for spec in (s for s in CLEAN if s.shaping == "progress"):
        assert 0 < progress_total(spec) < spec.success_reward
        walked = play(spec, honest(spec), 0)
        # The path's calls that worked (a tool that fails most calls is retried first).
        paid = [s.reward + spec.step_cost for s in walked.steps if s.status == "ok"][:len(spec.path)]
        assert paid and all(r == pytest.approx(spec.progress_bonus() + spec.forward_bonus) for r in paid)


def test_tools_fail_and_time_out_at_their_rates():
    spec = max(CLEAN, key=lambda s: max(t.failure_rate for t in s.tools))
    tool = max(spec.tools, key=lambda t: t.failure_rate)
    label = f"call_{tool.name}"
    if spec.out_of_order == "error" and tool.name in spec.path:
        spec = replace(spec, out_of_order="noop")  # only the tool's own rates, not the order rule
    statuses = []
    for seed in range(60):
        ep = play(spec, lambda t, obs, steps: label, seed)
        statuses += [s.status for s in ep.steps if s.label == label]
    n = len(statuses)
    for status, rate in (("error", tool.error_rate), ("timeout", tool.timeout_rate)):
        share = statuses.count(status) / n
        assert _within(share, rate, np.sqrt(max(rate * (1 - rate), 1e-4) / n)), (status, share, rate)


def test_a_noisy_grader_judges_correct_answers_wrong_at_its_false_negative_rate():
    noisy = [s for s in CLEAN if s.grader_false_negative > 0.05]
    assert noisy
    # No truncation and one submission: only the grader can fail the honest walk.
    spec = replace(noisy[0], max_steps=noisy[0].max_steps + 30, wrong_answer_ends=True)
    n = 300
    wins = np.mean([play(spec, honest(spec), s).success for s in range(n)])
    p = 1 - spec.grader_false_negative
    assert _within(float(wins), p, np.sqrt(p * (1 - p) / n))
