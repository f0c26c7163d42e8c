"""Paired comparisons and proportion intervals on data whose truth is known.

(The additions to envaudit/stats.py made for the exploit and failure probes; test_stats.py covers the rest.)
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from scipy import stats as st

from envaudit.stats import MIN_SAMPLES, paired_compare, proportion_ci, signed_rank_p


def _brute_force_signed_rank(d, alternative):
    d = np.asarray(d, float)
    ranks = st.rankdata(np.abs(d))
    observed = ranks[d > 0].sum()
    sums = [sum(r for r, s in zip(ranks, signs, strict=True) if s) for signs in itertools.product([0, 1], repeat=len(d))]
    sums = np.array(sums)
    return {"greater": np.mean(sums >= observed - 1e-12), "less": np.mean(sums <= observed + 1e-12)}[alternative]


def test_signed_rank_matches_scipy_exact_without_ties_and_brute_force_with_ties():
    rng = np.random.default_rng(0)
    for n in (3, 7, 12):
        d = rng.normal(0.4, 1.0, n)
        for alt in ("greater", "less", "two-sided"):
            assert signed_rank_p(d, alternative=alt) == pytest.approx(st.wilcoxon(d, alternative=alt, method="exact").pvalue)
    tied = [0.2, 0.2, -0.2, 0.5, 0.5, 0.5, -0.1, 0.3]
    for alt in ("greater", "less"):
        assert signed_rank_p(tied, alternative=alt) == pytest.approx(_brute_force_signed_rank(tied, alt))
    # n identical positive differences: only the all-positive sign pattern is as extreme, p = 2^-n.
    assert signed_rank_p([0.2] * 12) == pytest.approx(2.0**-12)
    assert signed_rank_p([0.0, 0.0]) == 1.0
    # Above the exact limit: SciPy's normal approximation.
    d = rng.normal(0.3, 1.0, 40)
    assert signed_rank_p(d) == pytest.approx(st.wilcoxon(d, alternative="greater", method="approx").pvalue)
    with pytest.raises(ValueError, match="alternative must be"):
        signed_rank_p([1.0], alternative="bigger")


def test_paired_compare_finds_a_known_shift_and_not_a_null():
    rng = np.random.default_rng(1)
    base = rng.normal(0.0, 3.0, 40)  # large between-seed spread, removed by pairing
    shifted = base + 0.5 + rng.normal(0, 0.3, 40)
    for test in ("signed-rank", "t"):
        out = paired_compare(shifted, base, rng, labels=("policy", "baseline"), test=test)
        assert out["n_pairs"] == 40 and out["paired"] and not out["underpowered"]
        assert out["p_value"] < 1e-4 and out["diff_ci"][0] < 0.5 < out["diff_ci"][1]
        assert out["mean_policy"] == pytest.approx(shifted.mean()) and out["effect_size"] > 0.8
    # The same data unpaired would not be significant: the shift hides in the spread.
    assert st.mannwhitneyu(shifted, base, alternative="greater").pvalue > 0.05
    null = paired_compare(base, base, rng)
    assert null["p_value"] == 1.0 and null["diff"] == 0.0 and null["effect_size"] == 0.0
    small = paired_compare([1.0] * (MIN_SAMPLES - 1), [0.0] * (MIN_SAMPLES - 1), rng)
    assert small["underpowered"] and small["p_value"] == pytest.approx(0.5 ** (MIN_SAMPLES - 1))
    assert paired_compare([], [], rng)["p_value"] == 1.0
    with pytest.raises(ValueError, match="test must be"):
        paired_compare([1.0], [0.0], rng, test="z")


def test_paired_t_test_sees_a_few_large_differences():
    rng = np.random.default_rng(2)
    # 90 pairs differ by a little against, 10 by a lot in favour: the mean favours a, the ranks barely.
    d = np.r_[np.full(90, -0.05), np.full(10, 2.0)]
    a, b = d, np.zeros_like(d)
    assert paired_compare(a, b, rng, test="t")["p_value"] < 0.01 < paired_compare(a, b, rng)["p_value"]


def test_proportion_ci_wilson_values():
    lo, hi = proportion_ci(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)  # Wilson upper bound at 0/10
    lo, hi = proportion_ci(5, 10)
    assert (lo, hi) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert proportion_ci(10, 10)[1] == 1.0
    assert all(np.isnan(proportion_ci(0, 0)))


# --- known answers: SciPy p-values, the interval's level, edge cases ---------------------------

PAIRED_A = [1.2, 0.8, 1.9, 1.1, 0.4, 1.5, 1.05, 0.9, 1.7, 1.3]
PAIRED_B = [0.7, 0.9, 1.1, 0.6, 0.5, 0.8, 0.95, 0.2, 1.0, 1.25]


def test_paired_p_values_are_scipys_for_each_alternative():
    rng = np.random.default_rng(40)
    d = np.subtract(PAIRED_A, PAIRED_B)
    p = {}
    for alt in ("greater", "less", "two-sided"):
        p[alt] = paired_compare(PAIRED_A, PAIRED_B, rng, alternative=alt)["p_value"]
        assert p[alt] == pytest.approx(st.wilcoxon(d, alternative=alt, method="exact").pvalue)
        t = paired_compare(PAIRED_A, PAIRED_B, rng, alternative=alt, test="t")["p_value"]
        assert t == pytest.approx(st.ttest_rel(PAIRED_A, PAIRED_B, alternative=alt).pvalue)
    # No ties, effect in the "greater" direction: two-sided is twice the smaller one-sided tail.
    assert p["greater"] < 0.05 and p["two-sided"] == pytest.approx(2 * p["greater"])
    assert p["less"] > 0.95
    assert paired_compare(PAIRED_A, PAIRED_B, rng)["p_value"] == p["greater"]  # default: one-sided


def test_paired_effect_size_by_hand():
    # Differences +3, -1, +2, 0 (dropped): ranks of |d| among non-zero 3, 1, 2 -> (3 + 2 - 1) / 6.
    out = paired_compare([3.0, 0.0, 2.0, 5.0], [0.0, 1.0, 0.0, 5.0], np.random.default_rng(0))
    assert out["effect_size"] == pytest.approx(4 / 6)
    assert out["diff"] == pytest.approx(1.0) and out["n_pairs"] == 4
    # One pair: a point interval.
    one = paired_compare([2.0], [0.5], np.random.default_rng(0), labels=("x", "y"))
    assert one["diff_ci"] == [1.5, 1.5] and one["mean_x"] == 2.0 and one["mean_y"] == 0.5
    with pytest.raises(AssertionError, match="equal lengths, got 2 and 1"):
        paired_compare([1.0, 2.0], [1.0], np.random.default_rng(0))


def test_paired_interval_covers_the_true_shift_at_95_percent():
    rng = np.random.default_rng(41)
    reps, covered = 400, 0
    for _ in range(reps):
        base = rng.normal(0.0, 3.0, 60)
        out = paired_compare(base + 0.5 + rng.normal(0, 1.0, 60), base, rng, n_boot=1000)
        covered += out["diff_ci"][0] <= 0.5 <= out["diff_ci"][1]
    assert 0.925 <= covered / reps <= 0.97


def test_paired_underpowered_edge_and_constant_shift():
    rng = np.random.default_rng(42)
    assert paired_compare([1.0] * MIN_SAMPLES, [0.0] * MIN_SAMPLES, rng)["underpowered"] is False
    # Every pair differs by the same amount: the t-test is undefined, the signed-rank test is used.
    same = paired_compare([1.0] * 10, [0.0] * 10, rng, test="t")
    assert same["p_value"] == pytest.approx(2.0**-10) and same["effect_size"] == 1.0


def test_signed_rank_two_sided_with_ties_is_twice_the_smaller_tail():
    tied = [0.2, 0.2, -0.2, 0.5, 0.5, 0.5, -0.1, 0.3]
    greater, less = (_brute_force_signed_rank(tied, alt) for alt in ("greater", "less"))
    assert signed_rank_p(tied, alternative="two-sided") == pytest.approx(min(1.0, 2 * min(greater, less)))
    # Zeros are dropped before ranking.
    assert signed_rank_p([0.0, *tied]) == pytest.approx(signed_rank_p(tied))
    # A symmetric sample: two-sided p capped at 1.
    assert signed_rank_p([1.0, -1.0], alternative="two-sided") == 1.0


def test_signed_rank_switches_to_the_normal_approximation_above_the_exact_limit():
    from envaudit.stats import EXACT_SIGNED_RANK_MAX

    d = np.random.default_rng(43).normal(0.3, 1.0, EXACT_SIGNED_RANK_MAX + 1)
    for alt in ("greater", "less", "two-sided"):
        assert signed_rank_p(d, alternative=alt) == pytest.approx(
            st.wilcoxon(d, alternative=alt, method="approx").pvalue)
    exact = d[:EXACT_SIGNED_RANK_MAX]
    assert signed_rank_p(exact) == pytest.approx(st.wilcoxon(exact, alternative="greater", method="exact").pvalue)


def test_proportion_ci_coverage_is_exact_and_near_nominal():
    """Exact coverage (a sum over the binomial distribution, no simulation) of the Wilson 95%
    interval: close to 95% across p, unlike the normal interval near 0 and 1."""
    for n, p in ((50, 0.3), (100, 0.5), (200, 0.1)):
        coverage = sum(st.binom.pmf(k, n, p) for k in range(n + 1)
                       if proportion_ci(k, n)[0] <= p <= proportion_ci(k, n)[1])
        assert 0.93 <= coverage <= 0.97, (n, p, coverage)
        coverage_80 = sum(st.binom.pmf(k, n, p) for k in range(n + 1)
                          if proportion_ci(k, n, level=0.8)[0] <= p <= proportion_ci(k, n, level=0.8)[1])
        assert 0.76 <= coverage_80 <= 0.85, (n, p, coverage_80)  # Wilson oscillates with n


def test_proportion_ci_wilson_formula_at_other_levels():
    z = st.norm.ppf(0.95)  # 90% two-sided
    k, n = 7, 20
    phat = k / n
    centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n))
    assert proportion_ci(k, n, level=0.9) == pytest.approx((centre - half, centre + half))
    # Closed at the ends, inside (0, 1) otherwise.
    lo, hi = proportion_ci(1, 10)
    assert 0.0 < lo < 0.1 < hi < 1.0
    lo, hi = proportion_ci(9, 10)
    assert 0.0 < lo < 0.9 < hi < 1.0


def test_paired_edge_cases_return_the_full_shape():
    rng = np.random.default_rng(44)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no mean of an empty array
        empty = paired_compare([], [], rng, labels=("x", "y"))
    assert empty == {"mean_x": None, "mean_y": None, "n_pairs": 0, "paired": True, "diff": None,
                     "diff_ci": None, "p_value": 1.0, "effect_size": None, "underpowered": True}
    # Two pairs are resampled, not reported as a point.
    two = paired_compare([1.0, 3.0], [0.0, 0.0], np.random.default_rng(0))
    assert two["diff_ci"] == [1.0, 3.0]
    # Success flags as booleans are 0/1.
    flags_a, flags_b = [True] * 10 + [False] * 2, [False] * 10 + [True] * 2
    assert paired_compare(flags_a, flags_b, np.random.default_rng(0)) == \
        paired_compare(np.array(flags_a, float), np.array(flags_b, float), np.random.default_rng(0))
    # Default resamples: 2000 (40 continuous pairs, so the interval moves with the count).
    a, b = np.random.default_rng(45).normal(size=(2, 40))
    assert paired_compare(a, b, np.random.default_rng(0)) == paired_compare(a, b, np.random.default_rng(0), n_boot=2000)
    assert paired_compare(a, b, np.random.default_rng(0)) != paired_compare(a, b, np.random.default_rng(0), n_boot=2001)


def test_paired_resampling_can_draw_every_pair():
    # One pair carries the whole difference: resamples that draw it give means up to 1.5.
    out = paired_compare(np.r_[5.0, np.zeros(9)], np.zeros(10), np.random.default_rng(0))
    assert out["diff"] == 0.5 and out["diff_ci"][0] <= 0.5 <= out["diff_ci"][1]


def test_proportion_ci_is_closed_exactly_at_the_ends():
    # The formula's lower bound at 0 successes is 0 only up to rounding (about 1e-17 at n = 3).
    for n in range(1, 60):
        assert proportion_ci(0, n)[0] == 0.0 and proportion_ci(n, n)[1] == 1.0
    lo, hi = proportion_ci(1, 1)
    assert 0.0 < lo < 1.0 and hi == 1.0
