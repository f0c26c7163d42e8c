"""The severity ladder's statistics: reward_scale, noninferiority and exploit_ladder.

Arms are built so their place on DESIGN.md's ladder is known by construction: constant returns at
dyadic values (exact in floating point) pin the margin edges; noisy arms check the tests' error
rates by simulation.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats as st

from envaudit.stats import MIN_SAMPLES, compare, exploit_ladder, noninferiority, reward_scale

N = 40  # episodes per arm: well above MIN_SAMPLES, small enough for exact Mann-Whitney ties


def const(value: float, n: int = N) -> np.ndarray:
    return np.full(n, value)


# --- reward_scale ------------------------------------------------------------------------------


def test_reward_scale_is_the_success_gap_when_positive():
    assert reward_scale([1.0, 0.5], [0.0, 0.25]) == 0.625  # 0.75 - 0.125
    # Other arms do not enter while the gap is positive.
    assert reward_scale([1.0], [0.0], [100.0, -100.0]) == 1.0


def test_reward_scale_falls_back_to_the_spread_of_every_arm():
    # Success does not beat the alternative: the unit is the pooled standard deviation.
    success, alternative, other = [0.0, 0.0], [1.0, 1.0], [4.0, 5.0]
    pooled = np.r_[success, alternative, other]
    assert reward_scale(success, alternative, other) == pytest.approx(np.std(pooled))
    assert reward_scale([0.5], [0.5], [0.5, 1.5]) == pytest.approx(np.std([0.5, 0.5, 0.5, 1.5]))
    assert reward_scale([], [0.0, 4.0]) == pytest.approx(2.0)  # no success arm: spread of the rest
    assert reward_scale([0.5], [0.5]) == 1.0  # no gap, no spread: the unit is 1
    assert reward_scale([], []) == 1.0


def test_reward_scale_takes_no_mean_of_an_empty_arm():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert reward_scale([], [0.0, 4.0]) == pytest.approx(2.0)
        assert reward_scale([1.0, 3.0], []) == pytest.approx(1.0)
        assert reward_scale([], [], []) == 1.0


# --- noninferiority ----------------------------------------------------------------------------


def test_noninferiority_reports_the_unshifted_difference():
    rng = np.random.default_rng(10)
    a, b = rng.normal(0.0, 1.0, 60), rng.normal(0.2, 1.0, 50)
    out = noninferiority(a, b, np.random.default_rng(0), margin=0.5, labels=("exploit", "success"))
    assert out["mean_exploit"] == pytest.approx(a.mean()) and out["mean_success"] == pytest.approx(b.mean())
    assert out["diff"] == pytest.approx(a.mean() - b.mean())
    # The interval is of mean(a) - mean(b), the same one compare() would give for the raw arms.
    plain = compare(a, b, np.random.default_rng(0))
    assert out["diff_ci"] == pytest.approx(plain["diff_ci"])
    # The p-value tests a + margin > b, one-sided.
    assert out["p_value"] == pytest.approx(st.mannwhitneyu(a + 0.5, b, alternative="greater").pvalue)
    assert out["margin"] == 0.5 and out["n_exploit"] == 60 and out["n_success"] == 50
    assert out["noninferior"] is (out["diff_ci"][0] >= -0.5)


def test_noninferiority_at_the_margin():
    b = np.linspace(0.0, 1.0, N)
    # a = b - margin exactly: the interval straddles -margin, so not shown non-inferior, and the
    # one-sided test of a + margin > b is not significant (a + margin and b are the same sample).
    at = noninferiority(b - 0.25, b, np.random.default_rng(1), margin=0.25)
    assert at["diff"] == pytest.approx(-0.25)
    assert at["diff_ci"][0] < -0.25 < at["diff_ci"][1]
    assert at["noninferior"] is False and at["p_value"] > 0.4
    # Constant arms exactly at the margin: the degenerate interval [-margin, -margin] counts as
    # non-inferior (the bound is inclusive) yet no test can be significant.
    edge = noninferiority(const(0.75), const(1.0), np.random.default_rng(2), margin=0.25)
    assert edge["diff_ci"] == [-0.25, -0.25] and edge["noninferior"] is True and edge["p_value"] == 1.0
    # Just inside and just outside the margin.
    inside = noninferiority(const(0.8125), const(1.0), np.random.default_rng(3), margin=0.25)
    assert inside["noninferior"] is True and inside["p_value"] < 1e-10
    outside = noninferiority(const(0.6875), const(1.0), np.random.default_rng(4), margin=0.25)
    assert outside["noninferior"] is False and outside["p_value"] > 0.99
    # Margin 0: plain "at least as much".
    assert noninferiority(const(1.0), const(1.0), np.random.default_rng(5), margin=0.0)["noninferior"] is True
    assert noninferiority(const(0.9375), const(1.0), np.random.default_rng(5), margin=0.0)["noninferior"] is False


def test_noninferiority_error_rates_by_simulation():
    """At the margin (true difference exactly -margin) the 95% interval's lower bound clears
    -margin about 2.5% of the time; well inside the margin it almost always does."""
    rng = np.random.default_rng(11)
    margin, reps = 0.75, 200
    false_claims = sum(
        noninferiority(rng.normal(-margin, 1.0, N), rng.normal(0.0, 1.0, N), rng, margin=margin)["noninferior"]
        for _ in range(reps))
    # Binomial(200, 0.025): mean 5, P(X >= 13) < 0.002. The percentile bootstrap runs a little
    # narrow at n = 40, which the bound allows for.
    assert false_claims <= 12
    # Equal arms, margin = 3.35 standard errors of the difference: power Phi(3.35 - 1.96) = 0.92.
    shown = sum(
        noninferiority(rng.normal(0.0, 1.0, N), rng.normal(0.0, 1.0, N), rng, margin=margin)["noninferior"]
        for _ in range(reps))
    assert 0.85 * reps <= shown


def test_noninferiority_rejects_a_negative_margin_and_handles_an_empty_arm():
    with pytest.raises(AssertionError, match="margin must be non-negative, got -0.1"):
        noninferiority([1.0], [1.0], np.random.default_rng(0), margin=-0.1)
    empty = noninferiority([], [1.0, 2.0], np.random.default_rng(0), margin=0.1)
    assert empty["noninferior"] is False and empty["diff"] is None and empty["underpowered"] is True


# --- exploit_ladder ----------------------------------------------------------------------------
# Honest success pays 1, the honest alternative (failing outright) pays 0: scale 1, so with
# min_effect 0.25 both the effect threshold and the non-inferiority margin are 0.25.

SUCCESS, ALTERNATIVE, MIN_EFFECT = const(1.0), const(0.0), 0.25


def ladder(exploit, success=SUCCESS, alternative=ALTERNATIVE, seed=0, **kw):
    kw.setdefault("min_effect", MIN_EFFECT)
    return exploit_ladder(exploit, success, alternative, np.random.default_rng(seed), **kw)


@pytest.mark.parametrize(("exploit_return", "level"), [
    (1.0, "at_least_success"),       # earns what success earns
    (1.5, "at_least_success"),       # earns more
    (0.8125, "at_least_success"),    # within the 0.25 margin of success
    (0.75, "above_alternative"),     # exactly at the margin: CI on the bound, but p = 1
    (0.5, "above_alternative"),      # between alternative and success
    (0.25, "above_alternative"),     # exactly min_effect above the alternative (inclusive)
    (0.1875, None),                  # above the alternative by less than min_effect
    (0.0, None),                     # the alternative itself
    (-0.5, None),                    # worse than the alternative
])
def test_ladder_decision_table_on_constant_arms(exploit_return, level):
    out = ladder(const(exploit_return))
    assert out["scale"] == 1.0 and out["min_effect"] == MIN_EFFECT
    assert out["level"] == level
    assert out["above_alternative"] is (level is not None)


def test_ladder_on_noisy_arms():
    rng = np.random.default_rng(12)
    success, alternative = rng.normal(1.0, 0.1, N), rng.normal(0.0, 0.1, N)
    cases = {"at_least_success": 1.0, "above_alternative": 0.5, None: 0.02}
    for level, mean in cases.items():
        out = exploit_ladder(rng.normal(mean, 0.1, N), success, alternative, rng)
        assert out["level"] == level, (mean, out)
    assert out["scale"] == pytest.approx(success.mean() - alternative.mean())


def test_ladder_p_value_is_the_key_test_of_the_level_reached():
    top = ladder(const(1.0))
    assert top["level"] == "at_least_success"
    assert top["p_value"] == max(top["vs_alternative"]["p_value"], top["vs_success"]["p_value"])
    mid = ladder(const(0.5))
    assert mid["level"] == "above_alternative" and mid["p_value"] == mid["vs_alternative"]["p_value"]
    low = ladder(const(0.0))
    assert low["level"] is None and low["p_value"] == low["vs_alternative"]["p_value"] == 1.0
    # Both comparisons are one-sided Mann-Whitney tests, the success one on the shifted arm.
    rng = np.random.default_rng(13)
    exploit, success, alternative = rng.normal(0.9, 0.2, N), rng.normal(1.0, 0.2, N), rng.normal(0.0, 0.2, N)
    out = exploit_ladder(exploit, success, alternative, rng, min_effect=MIN_EFFECT)
    margin = MIN_EFFECT * (success.mean() - alternative.mean())
    assert out["vs_alternative"]["p_value"] == pytest.approx(
        st.mannwhitneyu(exploit, alternative, alternative="greater").pvalue)
    assert out["vs_success"]["p_value"] == pytest.approx(
        st.mannwhitneyu(exploit + margin, success, alternative="greater").pvalue)
    assert out["vs_success"]["margin"] == pytest.approx(margin)
    # Exploit 0.1 below success, within the 0.25 margin: at least success, and the weaker of the
    # two tests (the success one) is the level's p-value.
    assert out["level"] == "at_least_success"
    assert out["p_value"] == out["vs_success"]["p_value"] > out["vs_alternative"]["p_value"]


def test_ladder_underpowered_arms_reach_no_level_they_cannot_support():
    few = MIN_SAMPLES - 1
    # A handful of exploit episodes earning far more than success: no level at all.
    assert ladder(const(2.0, few))["level"] is None
    assert ladder(const(2.0, few))["vs_alternative"]["underpowered"] is True
    # Too few alternative episodes: likewise.
    assert ladder(const(2.0), alternative=const(0.0, few))["level"] is None
    # Too few success episodes: the exploit clearly beats the alternative, but "at least success"
    # is not shown.
    assert ladder(const(2.0), success=const(1.0, few))["level"] == "above_alternative"
    # Exactly MIN_SAMPLES per arm is enough.
    full = ladder(const(1.0, MIN_SAMPLES), success=const(1.0, MIN_SAMPLES),
                  alternative=const(0.0, MIN_SAMPLES))
    assert full["level"] == "at_least_success"


def test_ladder_without_a_success_arm_stops_at_above_alternative():
    out = ladder(const(5.0), success=[])
    assert out["level"] == "above_alternative" and "vs_success" not in out
    assert out["p_value"] == out["vs_alternative"]["p_value"]


def test_ladder_alpha_is_the_significance_level():
    # Complete separation of 40 against 40 ties: Mann-Whitney's p is about 1e-17 (normal
    # approximation), significant at any usual alpha but not at 1e-30.
    strict = ladder(const(1.0), alpha=1e-30)
    assert strict["vs_alternative"]["p_value"] > 1e-30 and strict["level"] is None
    # A few huge exploit returns: the mean's interval is far above 0, but the ranks barely move
    # (Mann-Whitney p about 0.3). alpha alone decides whether the rank test counts.
    alternative = np.linspace(0.0, 1.0, N)
    exploit = alternative.copy()
    exploit[-8:] += 10.0
    success = const(1.0)
    default = exploit_ladder(exploit, success, alternative, np.random.default_rng(0))
    assert 0.05 < default["vs_alternative"]["p_value"] < 0.5
    assert default["vs_alternative"]["diff_ci"][0] > 0 and default["level"] is None
    loose = exploit_ladder(exploit, success, alternative, np.random.default_rng(0), alpha=0.5)
    assert loose["level"] == "above_alternative"


def test_ladder_needs_the_interval_above_zero_not_only_a_rank_test():
    # 38 of 40 exploit episodes edge above every alternative episode (Mann-Whitney: significant),
    # and the mean difference clears min_effect, but two huge swings of opposite sign make the
    # mean's interval straddle 0: not "clearly" above the alternative.
    rng = np.random.default_rng(15)
    alternative = rng.normal(0.0, 0.01, N)
    exploit = np.r_[np.full(N - 4, 0.05), 10.0, 10.0, -9.5, -9.5]
    success = rng.normal(0.5, 0.01, N)
    out = exploit_ladder(exploit, success, alternative, rng)
    vs_alt = out["vs_alternative"]
    assert vs_alt["p_value"] < 1e-6 and vs_alt["diff"] >= out["min_effect"]
    assert vs_alt["diff_ci"][0] < 0
    assert out["level"] is None and out["above_alternative"] is False


def test_ladder_falls_back_to_the_spread_when_success_does_not_pay_more():
    # Success pays no more than failing: the unit is the spread of all returns.
    success, alternative, exploit = const(0.0), const(0.0), const(1.0)
    out = ladder(exploit, success=success, alternative=alternative)
    assert out["scale"] == pytest.approx(np.std(np.r_[success, alternative, exploit]))
    assert out["level"] == "at_least_success"


def test_ladder_evidence_names_its_arms():
    out = ladder(const(1.0))
    assert {"mean_exploit", "mean_alternative", "n_exploit", "n_alternative"} <= set(out["vs_alternative"])
    assert {"mean_exploit", "mean_success", "n_exploit", "n_success"} <= set(out["vs_success"])


def test_ladder_p_equal_to_alpha_is_not_significant():
    rng = np.random.default_rng(16)
    success, alternative = rng.normal(1.0, 0.2, N), rng.normal(0.0, 0.2, N)
    exploit = rng.normal(0.9, 0.2, N)
    base = exploit_ladder(exploit, success, alternative, np.random.default_rng(0), min_effect=MIN_EFFECT)
    p_alt, p_succ = base["vs_alternative"]["p_value"], base["vs_success"]["p_value"]
    assert base["level"] == "at_least_success" and p_alt < p_succ < 0.05
    # alpha exactly at the success test's p: that test fails, the alternative one still passes.
    at_succ = exploit_ladder(exploit, success, alternative, np.random.default_rng(0), min_effect=MIN_EFFECT, alpha=p_succ)
    assert at_succ["level"] == "above_alternative"
    at_alt = exploit_ladder(exploit, success, alternative, np.random.default_rng(0), min_effect=MIN_EFFECT, alpha=p_alt)
    assert at_alt["level"] is None


def test_ladder_interval_touching_zero_is_not_above_it():
    # 39 exploit episodes earn what the alternative earns, one earns 10: over a third of the
    # resamples miss that one, so the interval's lower end is exactly 0. alpha is opened wide so
    # that only the interval decides.
    exploit = np.r_[10.0, np.zeros(N - 1)]
    out = ladder(exploit, alpha=0.99)
    vs_alt = out["vs_alternative"]
    assert vs_alt["diff_ci"][0] == 0.0 and vs_alt["p_value"] < 0.99 and vs_alt["diff"] >= MIN_EFFECT
    assert out["level"] is None
