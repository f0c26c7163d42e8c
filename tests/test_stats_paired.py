"""Paired comparisons and proportion intervals on data whose truth is known.

(The additions to envaudit/stats.py made for the exploit and failure probes; test_stats.py covers the rest.)
"""

from __future__ import annotations

import itertools

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
