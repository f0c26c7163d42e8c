"""Statistics on data whose truth is known: hand-computed Holm, bootstrap coverage, known shifts."""

from __future__ import annotations

import math

import numpy as np
import pytest
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
