"""Statistics on data whose truth is known: hand-computed Holm, bootstrap coverage, known shifts."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats as st
from scipy.stats import norm

from envaudit.stats import MIN_SAMPLES, bootstrap_ci, compare, diff_means_ci, holm, spearman_ci


def test_holm_by_hand():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running max 0.06
    got = holm([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(got, [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(holm([0.5, 0.6]), [1.0, 1.0])  # capped at 1
    np.testing.assert_allclose(holm([0.02, 0.02, 0.5]), [0.06, 0.06, 0.5])  # ties
    np.testing.assert_allclose(holm([0.2]), [0.2])
    assert len(holm([])) == 0


def test_bootstrap_ci_covers_the_true_mean():
    rng = np.random.default_rng(0)
    n, reps, mu = 50, 200, 2.0
    covered = 0
    for _ in range(reps):
        lo, hi = bootstrap_ci(rng.normal(mu, 1.0, n), rng, n_boot=1000)
        covered += lo <= mu <= hi
    # nominal 95%; the percentile bootstrap runs a little narrow at n=50. 200 reps: sd ~ 0.016
    assert 0.88 <= covered / reps <= 0.99


def test_bootstrap_ci_width_and_other_stats():
    rng = np.random.default_rng(1)
    x = rng.normal(0.0, 1.0, 400)
    lo, hi = bootstrap_ci(x, rng)
    assert hi - lo == pytest.approx(2 * 1.96 / math.sqrt(400), rel=0.15)  # 2 z sigma / sqrt(n)
    lo90, hi90 = bootstrap_ci(x, np.random.default_rng(1), level=0.9)
    assert hi90 - lo90 == pytest.approx(2 * 1.645 / math.sqrt(400), rel=0.15)
    mlo, mhi = bootstrap_ci(x, rng, stat=np.median, n_boot=500)
    assert mlo < 0.0 < mhi
    assert bootstrap_ci([3.0], rng) == (3.0, 3.0)
    assert all(math.isnan(v) for v in bootstrap_ci([], rng))
    assert bootstrap_ci(x, np.random.default_rng(7)) == bootstrap_ci(x, np.random.default_rng(7))


def test_diff_means_ci_covers_the_true_difference():
    rng = np.random.default_rng(2)
    covered = 0
    for _ in range(100):
        lo, hi = diff_means_ci(rng.normal(1.0, 1.0, 60), rng.normal(0.5, 2.0, 40), rng, n_boot=1000)
        covered += lo <= 0.5 <= hi
    assert 0.85 <= covered / 100 <= 1.0
    assert diff_means_ci([1.0], [0.25, 0.75], rng) == (0.5, 0.5)


def test_compare_two_known_distributions():
    rng = np.random.default_rng(3)
    a, b = rng.normal(1.0, 1.0, 1000), rng.normal(0.0, 1.0, 1000)
    out = compare(a, b, rng, labels=("timeout", "failure"))
    assert out["n_timeout"] == 1000 and out["n_failure"] == 1000
    assert out["diff"] == pytest.approx(1.0, abs=4 * math.sqrt(2 / 1000))
    assert out["diff_ci"][0] < 1.0 < out["diff_ci"][1]
    assert out["p_value"] < 1e-6
    # rank-biserial = 2 P(A > B) - 1, with P(A > B) = Phi(1 / sqrt 2) for a unit shift
    expected = 2 * norm.cdf(1 / math.sqrt(2)) - 1
    assert out["effect_size"] == pytest.approx(expected, abs=0.08)
    assert out["underpowered"] is False

    reverse = compare(b, a, rng)
    assert reverse["p_value"] > 0.99 and reverse["effect_size"] == pytest.approx(-expected, abs=0.08)
    two_sided = compare(b, a, rng, alternative="two-sided")
    assert two_sided["p_value"] < 1e-6


def test_compare_degenerate_inputs():
    rng = np.random.default_rng(4)
    same = compare([1.0] * 10, [1.0] * 10, rng)
    assert (same["p_value"], same["effect_size"], same["diff"]) == (1.0, 0.0, 0.0)
    empty = compare([], [1.0, 2.0], rng)
    assert empty["underpowered"] and empty["p_value"] == 1.0 and empty["mean_a"] is None
    # complete separation: every a beats every b, yet too few a's to support a finding
    small = compare(np.arange(MIN_SAMPLES - 1) + 100.0, np.arange(20.0), rng)
    assert small["underpowered"] is True and small["effect_size"] == 1.0 and small["p_value"] < 1e-4


def test_spearman_ci_on_a_known_correlation():
    rng = np.random.default_rng(5)
    r = 0.8  # Pearson r of a bivariate normal; Spearman rho = (6 / pi) asin(r / 2)
    x = rng.normal(size=500)
    y = r * x + math.sqrt(1 - r**2) * rng.normal(size=500)
    expected = 6 / math.pi * math.asin(r / 2)
    out = spearman_ci(x, y, rng, n_boot=300)
    assert out["n"] == 500 and out["p_value"] < 1e-10
    assert out["rho"] == pytest.approx(expected, abs=0.06)
    assert out["rho_ci"][0] < expected < out["rho_ci"][1]
    flat = spearman_ci(x, np.ones(500), rng)
    assert flat == {"rho": 0.0, "rho_ci": [0.0, 0.0], "p_value": 1.0, "n": 500}
    assert spearman_ci([1.0, 2.0], [2.0, 1.0], rng)["p_value"] == 1.0


def test_child_seeds_use_every_bit_of_the_seed():
    from envaudit.seeding import child_seed

    assert child_seed(0, "x") != child_seed(2**32, "x")
    assert child_seed(5, "x") == child_seed(5, "x") != child_seed(5, "y")
    with pytest.raises(ValueError, match="seed must be non-negative"):
        child_seed(-1)


# --- known answers: p-values against SciPy, coverage by simulation, level and edge cases --------

FIXED_A = [0.9, 1.3, 0.2, 1.8, 1.1, 0.7, 1.5, 0.95, 1.25, 0.6]
FIXED_B = [0.4, 0.8, 0.1, 1.0, 0.3, 0.55, 0.05, 0.65, 1.2, 0.35, 0.75, 0.15]


def test_compare_p_value_is_scipys_mann_whitney_for_each_alternative():
    rng = np.random.default_rng(30)
    p = {alt: compare(FIXED_A, FIXED_B, rng, alternative=alt)["p_value"] for alt in ("greater", "less", "two-sided")}
    for alt, got in p.items():
        assert got == pytest.approx(st.mannwhitneyu(FIXED_A, FIXED_B, alternative=alt).pvalue)
    # One-sided in the direction of the effect is half the two-sided p; the other side is near 1.
    assert p["greater"] < 0.01 < p["two-sided"] < 0.02 and p["less"] > 0.99
    assert p["two-sided"] == pytest.approx(2 * p["greater"], rel=0.05)
    # The default question is "does a earn more": one-sided greater.
    assert compare(FIXED_A, FIXED_B, rng)["p_value"] == p["greater"]
    # Rank-biserial from U: every pair counted, ties half.
    u = sum((x > y) + 0.5 * (x == y) for x in FIXED_A for y in FIXED_B)
    assert compare(FIXED_A, FIXED_B, rng)["effect_size"] == pytest.approx(2 * u / (10 * 12) - 1)


def test_compare_interval_is_diff_means_ci_at_95_percent():
    out = compare(FIXED_A, FIXED_B, np.random.default_rng(31), labels=("x", "y"))
    assert out["diff_ci"] == list(diff_means_ci(FIXED_A, FIXED_B, np.random.default_rng(31), level=0.95, n_boot=2000))
    assert out["mean_x"] == pytest.approx(np.mean(FIXED_A)) and out["mean_y"] == pytest.approx(np.mean(FIXED_B))
    assert out["diff"] == pytest.approx(np.mean(FIXED_A) - np.mean(FIXED_B))
    assert (out["n_x"], out["n_y"]) == (10, 12)


def test_compare_is_underpowered_below_min_samples_only():
    rng = np.random.default_rng(32)
    enough = np.arange(MIN_SAMPLES, dtype=float)
    assert compare(enough + 100, enough, rng)["underpowered"] is False
    assert compare(enough[:-1] + 100, enough, rng)["underpowered"] is True
    assert compare(enough + 100, enough[:-1], rng)["underpowered"] is True
    one_empty = compare([1.0, 2.0], [], rng, labels=("x", "y"))
    assert one_empty["mean_x"] == 1.5 and one_empty["mean_y"] is None and one_empty["diff"] is None
    assert one_empty["diff_ci"] is None and one_empty["effect_size"] is None
    # Constant but different arms are a real difference: a complete separation, not "no spread".
    split = compare([1.0] * 10, [0.0] * 10, rng)
    assert split["p_value"] < 1e-4 and split["effect_size"] == 1.0


def test_bootstrap_ci_coverage_by_simulation():
    """400 samples of 100 from a known skewed distribution (exponential, mean 1): the 95%
    interval covers the mean in 93-97% of them, the 80% interval in 76-84%."""
    rng = np.random.default_rng(33)
    reps, n = 400, 100
    hits = {0.95: 0, 0.8: 0}
    for _ in range(reps):
        x = rng.exponential(1.0, n)
        for level in hits:
            lo, hi = bootstrap_ci(x, rng, n_boot=1000, level=level)
            hits[level] += lo <= 1.0 <= hi
    # Binomial sd at 400 samples: 0.011 (95%), 0.020 (80%); the percentile interval of a skewed
    # mean at n = 100 runs about 1 point narrow.
    assert 0.925 <= hits[0.95] / reps <= 0.97
    assert 0.74 <= hits[0.8] / reps <= 0.84


def test_bootstrap_ci_default_level_is_95_percent():
    x = np.random.default_rng(34).normal(0, 1, 200)
    assert bootstrap_ci(x, np.random.default_rng(0)) == bootstrap_ci(x, np.random.default_rng(0), level=0.95, n_boot=2000)
    lo, hi = bootstrap_ci([0.0, 1.0], np.random.default_rng(0))
    assert lo == 0.0 and hi == 1.0  # two values are resampled, not returned as a point


def test_bootstrap_ci_of_the_median_is_not_of_the_mean():
    # Exponential(1): median ln 2 = 0.69, mean 1. n = 2000: both intervals are about +-0.05 wide.
    x = np.random.default_rng(35).exponential(1.0, 2000)
    mlo, mhi = bootstrap_ci(x, np.random.default_rng(0), stat=np.median, n_boot=300)
    assert mlo < math.log(2) < mhi and mhi < 0.9
    lo, hi = bootstrap_ci(x, np.random.default_rng(0), n_boot=300)
    assert lo < 1.0 < hi and lo > 0.9


def test_diff_means_ci_coverage_and_level():
    rng = np.random.default_rng(36)
    reps = 400
    hits = {0.95: 0, 0.8: 0}
    for _ in range(reps):
        a, b = rng.normal(1.0, 1.0, 80), rng.normal(0.5, 2.0, 60)
        for level in hits:
            lo, hi = diff_means_ci(a, b, rng, n_boot=1000, level=level)
            hits[level] += lo <= 0.5 <= hi
    assert 0.925 <= hits[0.95] / reps <= 0.97
    assert 0.74 <= hits[0.8] / reps <= 0.84
    # Defaults are 95% and 2000 resamples.
    a, b = rng.normal(0, 1, 30), rng.normal(0, 1, 30)
    assert diff_means_ci(a, b, np.random.default_rng(1)) == diff_means_ci(a, b, np.random.default_rng(1), n_boot=2000, level=0.95)
    # Two values per arm are resampled; fewer give the point difference.
    lo, hi = diff_means_ci([0.0, 1.0], [0.0, 1.0], np.random.default_rng(2))
    assert lo < 0 < hi
    assert diff_means_ci([1.0, 2.0], [0.5], rng) == (1.0, 1.0)
    assert all(math.isnan(v) for v in diff_means_ci([], [1.0, 2.0], rng))


def test_spearman_matches_scipy_and_its_interval_is_95_percent():
    rng = np.random.default_rng(37)
    x = rng.normal(size=200)
    y = 0.5 * x + rng.normal(size=200)
    out = spearman_ci(x, y, np.random.default_rng(0), n_boot=400)
    ref = st.spearmanr(x, y)
    assert out["rho"] == pytest.approx(ref.statistic) and out["p_value"] == pytest.approx(ref.pvalue)
    # Fisher's z for Spearman: se = sqrt(1.06 / (n - 3)); the 95% interval is about
    # 2 * 1.96 se wide on the z scale.
    width_z = math.atanh(out["rho_ci"][1]) - math.atanh(out["rho_ci"][0])
    assert width_z == pytest.approx(2 * 1.96 * math.sqrt(1.06 / 197), rel=0.15)
    # A negative correlation keeps its sign and two-sided p-value.
    neg = spearman_ci(x, -y, np.random.default_rng(0), n_boot=50)
    assert neg["rho"] == pytest.approx(-ref.statistic) and neg["p_value"] == pytest.approx(ref.pvalue)
    # Three points are enough for a rank correlation.
    three = spearman_ci([1.0, 2.0, 3.0], [1.0, 3.0, 2.0], np.random.default_rng(0), n_boot=50)
    assert three["rho"] == pytest.approx(0.5) and three["n"] == 3


def test_spearman_interval_skips_resamples_without_spread():
    # Four points, three tied: about a third of the resamples have a constant x. They are left
    # out, so the interval stays finite.
    out = spearman_ci([0.0, 0.0, 0.0, 1.0], [0.0, 1.0, 2.0, 3.0], np.random.default_rng(0), n_boot=200)
    lo, hi = out["rho_ci"]
    assert math.isfinite(lo) and math.isfinite(hi) and -1.0 <= lo <= out["rho"] <= hi <= 1.0


def test_holm_caps_at_one_when_the_running_product_exceeds_it():
    # 0.6 * 2 = 1.2, then max(1.2, 0.7 * 1): both capped.
    np.testing.assert_allclose(holm([0.7, 0.6]), [1.0, 1.0])
    np.testing.assert_allclose(holm([0.01, 0.6, 0.7]), [0.03, 1.0, 1.0])


def test_empty_arms_give_nan_or_none_without_numpy_warnings():
    rng = np.random.default_rng(38)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the mean of an empty array warns: never taken
        assert all(math.isnan(v) for v in bootstrap_ci([], rng))
        assert all(math.isnan(v) for v in diff_means_ci([], [1.0, 2.0], rng))
        assert all(math.isnan(v) for v in diff_means_ci([1.0, 2.0], [], rng))
        assert compare([], [], rng)["mean_a"] is None


def test_success_flags_may_come_as_booleans():
    """Success flags arrive as bools (``info['success']``); the statistics treat them as 0/1."""
    flags_a = [True] * 9 + [False] * 3
    flags_b = [True] * 2 + [False] * 10
    as_float = (np.array(flags_a, float), np.array(flags_b, float))
    got = compare(flags_a, flags_b, np.random.default_rng(0))
    assert got == compare(*as_float, np.random.default_rng(0))
    assert got["p_value"] < 0.01 and got["diff"] == pytest.approx(7 / 12)
    length = np.arange(12.0)
    assert spearman_ci(flags_a, length, np.random.default_rng(0), n_boot=50) == \
        spearman_ci(as_float[0], length, np.random.default_rng(0), n_boot=50)
    assert spearman_ci(length, flags_a, np.random.default_rng(0), n_boot=50) == \
        spearman_ci(length, as_float[0], np.random.default_rng(0), n_boot=50)


def test_spearman_constant_inputs_and_default_resamples():
    rng = np.random.default_rng(39)
    x = rng.normal(size=30)
    # A constant first argument has no ranks to correlate, like a constant second one.
    assert spearman_ci(np.full(30, 2.0), x, rng) == {"rho": 0.0, "rho_ci": [0.0, 0.0], "p_value": 1.0, "n": 30}
    assert spearman_ci([0.0, 1.0, 2.0], [5.0, 5.0, 5.0], rng)["rho"] == 0.0
    # Spread of exactly 1 is still spread.
    assert spearman_ci([0.0, 0.5, 1.0], [0.0, 1.0, 2.0], rng, n_boot=20)["rho"] == pytest.approx(1.0)
    y = x + rng.normal(size=30)
    assert spearman_ci(x, y, np.random.default_rng(0)) == spearman_ci(x, y, np.random.default_rng(0), n_boot=1000)


def test_spearman_interval_spreads_when_ties_are_in_either_argument():
    # Ties in x or in y: resamples with spread in both remain, and they do not all agree.
    tied, spread = [0.0, 0.0, 0.0, 1.0], [0.0, 1.0, 2.0, 3.0]
    for x, y in ((tied, spread), (spread, tied)):
        lo, hi = spearman_ci(x, y, np.random.default_rng(0), n_boot=200)["rho_ci"]
        assert math.isfinite(lo) and math.isfinite(hi) and lo < hi


def test_spearman_interval_falls_back_to_the_estimate_without_usable_resamples():
    # Seed 4 draws rows [2, 2, 2] for the one resample: constant, so no resample has spread.
    assert list(np.random.default_rng(4).integers(0, 3, size=(1, 3))[0]) == [2, 2, 2]
    out = spearman_ci([0.0, 0.0, 1.0], [0.0, 1.0, 2.0], np.random.default_rng(4), n_boot=1)
    assert out["rho_ci"] == [pytest.approx(out["rho"])] * 2 and out["rho"] == pytest.approx(st.spearmanr([0, 0, 1], [0, 1, 2]).statistic)


def test_holm_treats_a_p_value_that_could_not_be_computed_as_no_evidence():
    # NaN (a test on NaN returns) is never significant and still counts as a test.
    np.testing.assert_allclose(holm([float("nan"), 0.01]), [1.0, 0.02])
    np.testing.assert_allclose(holm([0.01, float("nan"), 0.02]), [0.03, 1.0, 0.04])
