"""Statistics behind findings: numbers a reviewer can check, every resample seeded.

Conventions: functions take a ``numpy.random.Generator`` for anything random, return plain
floats/dicts that go straight into a finding's evidence, and state their sample sizes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats as _st

MIN_SAMPLES = 8
"""Below this many episodes per arm a comparison is reported as underpowered, never as a warn/fail."""


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (same order as given), capped at 1."""
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, (m - rank) * p[i])
        adjusted[i] = min(1.0, running)
    return adjusted


def bootstrap_ci(
    x: Sequence[float],
    rng: np.random.Generator,
    *,
    stat: Callable[[np.ndarray], float] = np.mean,
    n_boot: int = 2000,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat(x)``."""
    x = np.asarray(x, dtype=float)
    if len(x) < 2:
        v = float(stat(x)) if len(x) else float("nan")
        return (v, v)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    boots = np.apply_along_axis(stat, 1, x[idx]) if stat is not np.mean else x[idx].mean(axis=1)
    a = (1 - level) / 2
    return float(np.quantile(boots, a)), float(np.quantile(boots, 1 - a))


def diff_means_ci(
    a: Sequence[float], b: Sequence[float], rng: np.random.Generator, *, n_boot: int = 2000, level: float = 0.95
) -> tuple[float, float]:
    """Bootstrap interval of ``mean(a) - mean(b)`` (independent resamples of each arm)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        d = float(np.mean(a) - np.mean(b)) if len(a) and len(b) else float("nan")
        return (d, d)
    ia = rng.integers(0, len(a), size=(n_boot, len(a)))
    ib = rng.integers(0, len(b), size=(n_boot, len(b)))
    d = a[ia].mean(axis=1) - b[ib].mean(axis=1)
    q = (1 - level) / 2
    return float(np.quantile(d, q)), float(np.quantile(d, 1 - q))


def compare(
    a: Sequence[float],
    b: Sequence[float],
    rng: np.random.Generator,
    *,
    alternative: str = "greater",
    labels: tuple[str, str] = ("a", "b"),
) -> dict:
    """Does ``a`` earn more than ``b``? Means, difference with bootstrap CI, Mann–Whitney p-value,
    rank-biserial effect size and sample sizes, ready for a finding's evidence."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    out: dict = {
        f"mean_{labels[0]}": float(a.mean()) if len(a) else None,
        f"mean_{labels[1]}": float(b.mean()) if len(b) else None,
        f"n_{labels[0]}": int(len(a)),
        f"n_{labels[1]}": int(len(b)),
    }
    if len(a) == 0 or len(b) == 0:
        out.update(diff=None, diff_ci=None, p_value=1.0, effect_size=None, underpowered=True)
        return out
    diff = float(a.mean() - b.mean())
    lo, hi = diff_means_ci(a, b, rng)
    if np.ptp(np.concatenate([a, b])) == 0:
        p, effect = 1.0, 0.0
    else:
        res = _st.mannwhitneyu(a, b, alternative=alternative)
        p = float(res.pvalue)
        effect = float(2 * res.statistic / (len(a) * len(b)) - 1)  # rank-biserial in [-1, 1]
    out.update(diff=diff, diff_ci=[lo, hi], p_value=p, effect_size=effect,
               underpowered=bool(min(len(a), len(b)) < MIN_SAMPLES))
    return out


def spearman_ci(x: Sequence[float], y: Sequence[float], rng: np.random.Generator, *, n_boot: int = 1000) -> dict:
    """Spearman rank correlation with its p-value and a bootstrap interval."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"rho": 0.0, "rho_ci": [0.0, 0.0], "p_value": 1.0, "n": int(n)}
    res = _st.spearmanr(x, y)
    idx = rng.integers(0, n, size=(n_boot, n))
    boots = []
    for row in idx:
        xs, ys = x[row], y[row]
        if np.ptp(xs) > 0 and np.ptp(ys) > 0:
            boots.append(_st.spearmanr(xs, ys).statistic)
    lo, hi = (np.quantile(boots, [0.025, 0.975]) if boots else (res.statistic, res.statistic))
    return {"rho": float(res.statistic), "rho_ci": [float(lo), float(hi)], "p_value": float(res.pvalue), "n": int(n)}


def paired_compare(
    a: Sequence[float],
    b: Sequence[float],
    rng: np.random.Generator,
    *,
    alternative: str = "greater",
    labels: tuple[str, str] = ("a", "b"),
    n_boot: int = 2000,
) -> dict:
    """Does ``a`` earn more than ``b`` on the same units (``a[i]`` and ``b[i]`` share a seed)?

    Means, mean paired difference with a bootstrap CI, the Wilcoxon signed-rank p-value (zero
    differences dropped, as in Wilcoxon's original test), the matched-pairs rank-biserial effect
    size in [-1, 1] and the number of pairs, ready for a finding's evidence.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert len(a) == len(b), f"paired_compare needs equal lengths, got {len(a)} and {len(b)}"
    n = len(a)
    out: dict = {
        f"mean_{labels[0]}": float(a.mean()) if n else None,
        f"mean_{labels[1]}": float(b.mean()) if n else None,
        "n_pairs": int(n),
        "paired": True,
    }
    if n == 0:
        out.update(diff=None, diff_ci=None, p_value=1.0, effect_size=None, underpowered=True)
        return out
    d = a - b
    if n >= 2:
        idx = rng.integers(0, n, size=(n_boot, n))
        boots = d[idx].mean(axis=1)
        ci = [float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))]
    else:
        ci = [float(d[0]), float(d[0])]
    nonzero = d[d != 0]
    if len(nonzero) == 0:
        p, effect = 1.0, 0.0
    else:
        res = _st.wilcoxon(nonzero, alternative=alternative)
        p = float(res.pvalue)
        ranks = _st.rankdata(np.abs(nonzero))
        effect = float((ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()) / ranks.sum())
    out.update(diff=float(d.mean()), diff_ci=ci, p_value=p, effect_size=effect,
               underpowered=bool(n < MIN_SAMPLES))
    return out


def proportion_ci(successes: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (sound at 0 and n, unlike the normal interval)."""
    if n <= 0:
        return (float("nan"), float("nan"))
    z = float(_st.norm.ppf(1 - (1 - level) / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (float(max(0.0, centre - half)), float(min(1.0, centre + half)))
