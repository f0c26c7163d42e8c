"""ols_bootstrap on synthetic linear models whose coefficients and noise are known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from envaudit.stats import ols_bootstrap

# y = 2 + 3 length - 1.5 failures + noise(sd 0.5); "timeouts" has no effect.
TRUE = {"intercept": 2.0, "length": 3.0, "failures": -1.5, "timeouts": 0.0}
SIGMA = 0.5


def synthetic(rng: np.random.Generator, n: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    columns = {"length": rng.uniform(0, 2, n), "failures": rng.integers(0, 4, n).astype(float),
               "timeouts": rng.normal(0, 1, n)}
    y = TRUE["intercept"] + sum(TRUE[k] * v for k, v in columns.items()) + rng.normal(0, SIGMA, n)
    return y, columns


def test_recovers_known_coefficients_with_honest_standard_errors():
    rng = np.random.default_rng(20)
    n = 400
    y, columns = synthetic(rng, n)
    out = ols_bootstrap(y, columns, rng, n_boot=300)
    assert out["n"] == n and out["dropped"] == [] and list(out["coef"]) == list(TRUE)
    for name, truth in TRUE.items():
        c = out["coef"][name]
        assert abs(c["estimate"] - truth) < 4 * c["se"], name
        # The bootstrap interval sits around the estimate, about 2 * 1.96 classical se wide.
        assert c["ci"][0] < c["estimate"] < c["ci"][1], name
        assert c["ci"][1] - c["ci"][0] == pytest.approx(2 * 1.96 * c["se"], rel=0.25), name
    # Classical standard error of a slope: sigma / sqrt(n var(x)) (columns nearly independent).
    for name in ("length", "failures", "timeouts"):
        expected = SIGMA / math.sqrt(n * np.var(columns[name]))
        assert out["coef"][name]["se"] == pytest.approx(expected, rel=0.1), name
    # Real effects are significant; the null one is not.
    assert out["coef"]["length"]["p_value"] < 1e-50 and out["coef"]["failures"]["p_value"] < 1e-50
    assert out["coef"]["timeouts"]["p_value"] > 0.01
    # R^2 = explained variance / total variance, known from the design.
    explained = TRUE["length"] ** 2 * np.var(columns["length"]) + TRUE["failures"] ** 2 * np.var(columns["failures"])
    assert out["r2"] == pytest.approx(explained / (explained + SIGMA**2), abs=0.02)


def test_single_regressor_matches_scipy_linregress():
    rng = np.random.default_rng(21)
    x = rng.normal(0, 1, 30)
    y = 0.5 + 0.3 * x + rng.normal(0, 1, 30)
    out = ols_bootstrap(y, {"x": x}, rng, n_boot=0)
    ref = st.linregress(x, y)
    assert out["coef"]["x"]["estimate"] == pytest.approx(ref.slope)
    assert out["coef"]["x"]["se"] == pytest.approx(ref.stderr)
    assert out["coef"]["x"]["p_value"] == pytest.approx(ref.pvalue)  # two-sided t-test, n - 2 dof
    assert out["coef"]["intercept"]["estimate"] == pytest.approx(ref.intercept)
    assert out["coef"]["intercept"]["se"] == pytest.approx(ref.intercept_stderr)
    assert out["r2"] == pytest.approx(ref.rvalue**2)
    assert out["coef"]["x"]["ci"] is None  # n_boot=0 skips the intervals
    # A negative slope gets the same two-sided p-value as its mirror image.
    mirrored = ols_bootstrap(y, {"x": -x}, rng, n_boot=0)["coef"]["x"]
    assert mirrored["estimate"] == pytest.approx(-ref.slope) and mirrored["p_value"] == pytest.approx(ref.pvalue)


def test_bootstrap_intervals_cover_at_their_level():
    """Episodes resampled: the 95% interval of a slope covers the true slope in about 95% of
    samples, the 50% one in about half."""
    rng = np.random.default_rng(22)
    reps, n = 200, 60
    hits = {0.95: 0, 0.5: 0}
    for _ in range(reps):
        x = rng.uniform(0, 1, n)
        y = 1.0 + 2.0 * x + rng.normal(0, 1, n)
        for level in hits:
            lo, hi = ols_bootstrap(y, {"x": x}, np.random.default_rng(rng.integers(2**32)),
                                   n_boot=200, level=level)["coef"]["x"]["ci"]
            hits[level] += lo <= 2.0 <= hi
    # sd of a 200-sample coverage: 0.015 at 95%, 0.035 at 50%; the percentile bootstrap runs a
    # little narrow at n = 60.
    assert 0.89 <= hits[0.95] / reps <= 0.99
    assert 0.40 <= hits[0.5] / reps <= 0.60


def test_constant_and_duplicate_columns_are_dropped():
    rng = np.random.default_rng(23)
    x = rng.normal(0, 1, 50)
    y = 1.0 + x + rng.normal(0, 0.1, 50)
    out = ols_bootstrap(y, {"x": x, "flat": np.ones(50), "copy": x.copy(), "z": -x * 2}, rng, n_boot=50)
    # "z" is collinear but not an exact copy: kept (lstsq finds the minimum-norm split).
    assert out["dropped"] == ["flat", "copy"] and list(out["coef"]) == ["intercept", "x", "z"]


def test_too_few_responses_give_no_coefficients():
    rng = np.random.default_rng(24)
    # Two responses, intercept + one column: no residual degrees of freedom.
    out = ols_bootstrap([1.0, 2.0], {"x": [0.0, 1.0]}, rng)
    assert out == {"n": 2, "dropped": [], "coef": {}, "r2": None}
    assert ols_bootstrap([], {"x": []}, rng) == {"n": 0, "dropped": ["x"], "coef": {}, "r2": None}
    # Three responses are enough for one degree of freedom.
    assert set(ols_bootstrap([1.0, 2.0, 2.5], {"x": [0.0, 1.0, 2.0]}, rng, n_boot=10)["coef"]) == {"intercept", "x"}
    with pytest.raises(AssertionError, match="column 'x' has 2 values for 3 responses"):
        ols_bootstrap([1.0, 2.0, 3.0], {"x": [0.0, 1.0]}, rng)


def test_an_exact_fit_has_no_noise():
    rng = np.random.default_rng(25)
    x = np.arange(10.0)
    w = np.r_[np.zeros(5), np.ones(5)]
    out = ols_bootstrap(3.0 + 2.0 * x, {"x": x, "w": w}, rng, n_boot=20)
    assert out["r2"] == pytest.approx(1.0)
    assert out["coef"]["x"]["estimate"] == pytest.approx(2.0) and out["coef"]["x"]["p_value"] == 0.0
    assert out["coef"]["w"]["estimate"] == pytest.approx(0.0, abs=1e-9) and out["coef"]["w"]["p_value"] == 1.0
    assert out["coef"]["x"]["ci"] == pytest.approx([2.0, 2.0])
    # A constant response: nothing to explain, R^2 taken as 1.
    flat = ols_bootstrap(np.full(10, 4.0), {"x": x}, rng, n_boot=0)
    assert flat["r2"] == 1.0 and flat["coef"]["x"]["p_value"] == 1.0
    assert flat["coef"]["intercept"]["p_value"] == 0.0


def test_same_seed_same_intervals():
    y, columns = synthetic(np.random.default_rng(26), 40)
    one = ols_bootstrap(y, columns, np.random.default_rng(1), n_boot=100)
    assert one == ols_bootstrap(y, columns, np.random.default_rng(1), n_boot=100)
    assert one != ols_bootstrap(y, columns, np.random.default_rng(2), n_boot=100)


def test_success_flags_as_a_boolean_column():
    rng = np.random.default_rng(27)
    success = rng.random(60) < 0.4
    length = rng.uniform(1, 10, 60)
    y = 1.0 * success + 0.1 * length + rng.normal(0, 0.1, 60)
    got = ols_bootstrap(y, {"success": success, "length": length}, np.random.default_rng(0), n_boot=50)
    assert got == ols_bootstrap(y, {"success": success.astype(float), "length": length},
                                np.random.default_rng(0), n_boot=50)
    assert got["coef"]["success"]["estimate"] == pytest.approx(1.0, abs=0.1)


def test_r2_of_a_response_with_little_variance():
    # R^2 does not depend on the response's units, including total variance below 1.
    rng = np.random.default_rng(28)
    x = rng.normal(0, 1, 30)
    y = 0.5 + 0.3 * x + rng.normal(0, 1, 30)
    big = ols_bootstrap(y, {"x": x}, rng, n_boot=0)["r2"]
    small = ols_bootstrap(0.01 * y, {"x": x}, rng, n_boot=0)["r2"]
    assert small == pytest.approx(big) and 0.0 < small < 1.0


def test_resampling_can_draw_every_episode():
    # One high-leverage episode sets the slope; about 64% of resamples draw it, so the interval
    # reaches up to the estimate instead of sitting around the slope of the other 29.
    rng = np.random.default_rng(0)
    x = np.r_[10.0, rng.uniform(0, 1, 29)]
    y = np.r_[10.0, rng.normal(0, 0.3, 29)]
    c = ols_bootstrap(y, {"x": x}, np.random.default_rng(1), n_boot=300)["coef"]["x"]
    assert c["estimate"] == pytest.approx(1.0, abs=0.05) and c["ci"][1] > 0.9 * c["estimate"]


def test_exact_fit_judged_relative_to_the_response_scale():
    # At returns of order 1e6 rounding leaves standard errors near 1e-8: still an exact fit, and
    # a coefficient of 1e-9 there is zero.
    x = np.arange(10.0)
    w = np.r_[np.zeros(5), np.ones(5)]
    out = ols_bootstrap(1e6 * (3.0 + 2.0 * x), {"x": x, "w": w}, np.random.default_rng(0), n_boot=0)
    assert out["coef"]["x"]["p_value"] == 0.0 and out["coef"]["intercept"]["p_value"] == 0.0
    assert out["coef"]["w"]["p_value"] == 1.0


def test_default_resamples():
    y, columns = synthetic(np.random.default_rng(29), 30)
    assert ols_bootstrap(y, columns, np.random.default_rng(0)) == \
        ols_bootstrap(y, columns, np.random.default_rng(0), n_boot=1000, level=0.95)
