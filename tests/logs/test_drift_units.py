"""The drift analysis' parts on hand-built logs, every expected number computed from the log's design.

``curves`` is checked on a two-iteration run whose per-iteration rates are counted by hand below;
``start_iteration``, ``_series``, ``_mean_rise`` and ``_honest`` on arrays and tables built for
the case; ``analyse`` on the runs where it must stop early (one iteration, no success column).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.logs import drift
from envaudit.logs.audit import run_logs
from envaudit.logs.records import to_records
from envaudit.logs.schema import LoggedRun, check_run
from envaudit.stats import MIN_SAMPLES

# Two iterations of four rollouts. Iteration 0: returns 1, 0, 0.5, 0.5 (mean 0.5); lengths 2, 1, 2, 1
# (mean 1.5); one truncated (timeout rate 0.25); success T, F, F, T (0.5). Iteration 1: returns 0, 0,
# 0, 1 (mean 0.25); lengths 2, 2, 2, 1 (mean 1.75); two truncated (0.5); success F, F, F, T (0.25).
EPISODES = pd.DataFrame({
    "episode_id": [f"e{i}" for i in range(8)],
    "group_id": ["a", "a", "b", "b", "c", "c", "d", "d"],
    "iteration": [0, 0, 0, 0, 1, 1, 1, 1],
    "return": [1.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 1.0],
    "end_reason": ["terminated", "truncated", "terminated", "terminated",
                   "truncated", "truncated", "terminated", "terminated"],
    "success": [True, False, False, True, False, False, False, True],
})
# Steps: one row per turn (lengths above). Tool statuses: iteration 0 makes 4 calls, 1 failing
# (episode e1's error): failure rate 1/4, failed-episode rate 1/4. Iteration 1 makes 6 calls, 3
# failing (e4 error, e5 timeout twice): 3/6, failed episodes 2/4. Actions: iteration 0 searches 4
# times of 6 steps, iteration 1 searches 6 of 7.
STEPS = pd.DataFrame([
    # episode, step, action, status
    ("e0", 0, "search", "ok"), ("e0", 1, "answer", None),
    ("e1", 0, "search", "error"),
    ("e2", 0, "search", "ok"), ("e2", 1, "answer", None),
    ("e3", 0, "search", "ok"),
    ("e4", 0, "search", "error"), ("e4", 1, "search", "ok"),
    ("e5", 0, "search", "timeout"), ("e5", 1, "search", "timeout"),
    ("e6", 0, "search", "ok"), ("e6", 1, "answer", None),
    ("e7", 0, "search", "ok"),
], columns=["episode_id", "step", "action", "tool_status"]).assign(
    reward=0.0, tool_name=lambda f: np.where(f["tool_status"].notna(), "kb", None))


def _run(episodes=EPISODES, steps=STEPS) -> LoggedRun:
    return check_run(LoggedRun(episodes.copy(), None if steps is None else steps.copy(), "generic"))


def test_curves_counts_each_iteration_by_hand():
    table = drift.curves(to_records(_run())).set_index("iteration")
    assert table["episodes"].tolist() == [4, 4]
    assert table["return"].tolist() == [0.5, 0.25]
    assert table["mean_length"].tolist() == [1.5, 1.75]
    assert table["timeout_rate"].tolist() == [0.25, 0.5]
    assert table["success_rate"].tolist() == [0.5, 0.25]
    assert table["failure_rate"].tolist() == pytest.approx([1 / 4, 3 / 6])
    assert table["failed_episode_rate"].tolist() == [0.25, 0.5]
    assert table["mix:search"].tolist() == pytest.approx([4 / 6, 6 / 7])
    assert table["mix:answer"].tolist() == pytest.approx([2 / 6, 1 / 7])
    assert set(table["mode"]) == {"logged run"}


def test_curves_leave_nan_where_the_log_lacks_the_column():
    episodes = EPISODES.drop(columns=["success"]).assign(length=[2, 1, 2, 1, 2, 2, 2, 1])
    table = drift.curves(to_records(_run(episodes, None)))
    assert table["success_rate"].isna().all()
    assert table["failure_rate"].isna().all() and table["failed_episode_rate"].isna().all()
    assert not [c for c in table.columns if c.startswith("mix:")]
    assert table["mean_length"].tolist() == [1.5, 1.75]


def test_curves_keep_only_the_most_used_actions():
    # 15 distinct actions, each used once more than the next: a0 15 times ... a14 once.
    rows = [(f"e{k % 8}", k, f"a{j}", None) for j in range(15) for k in range(15 - j)]
    many = pd.DataFrame(rows, columns=["episode_id", "step", "action", "tool_status"])
    many["step"] = many.groupby("episode_id").cumcount()
    table = drift.curves(to_records(_run(EPISODES, many.assign(reward=0.0))))
    mixed = sorted(c for c in table.columns if c.startswith("mix:"))
    assert len(mixed) == drift.MAX_MIX_ACTIONS
    assert mixed == sorted(f"mix:a{j}" for j in range(drift.MAX_MIX_ACTIONS))


def test_start_iteration_weights_and_edges():
    t = np.arange(10)
    # Rising from 4; the two first iterations hold one episode each and noise: weighted, they count little.
    y = np.clip(0.1 * (t - 4), 0.0, None)
    y_noisy = y.copy()
    y_noisy[:2] = [0.3, -0.3]
    w = np.full(10, 50.0)
    w[:2] = 1.0
    assert drift.start_iteration(t, y, np.ones(10)) == 4
    assert drift.start_iteration(t, y_noisy, w) == 4
    # NaN iterations are left out; fewer than three finite values decide nothing.
    assert drift.start_iteration(t, np.where(t % 2 == 0, y, np.nan), np.ones(10)) == 4
    assert drift.start_iteration(t[:2], y[:2], np.ones(2)) is None
    assert drift.start_iteration(t, np.array([np.nan] * 8 + [0.1, 0.2]), np.ones(10)) is None
    # A falling series has no rising start, and the other way round.
    assert drift.start_iteration(t, -y, np.ones(10)) is None
    assert drift.start_iteration(t, y, np.ones(10), rising=False) is None
    # Offset iteration numbers are returned as logged.
    assert drift.start_iteration(t + 100, y, np.ones(10)) == 104


def test_start_iteration_thins_the_knots_of_a_long_run():
    t = np.arange(400)
    y = np.clip(0.01 * (t - 200), 0.0, None)
    start = drift.start_iteration(t, y, np.ones(400))
    assert start is not None and abs(start - 200) <= 400 / drift.MAX_KNOTS


def test_the_series_of_each_move():
    table = pd.DataFrame({"mix:search": [0.1], "timeout_rate": [0.0]})
    assert drift._series("takeover", table, {"action": "search"}) == ("mix:search", True)
    assert drift._series("takeover", table, {"action": "answer"}) == (None, True)
    assert drift._series("timeout", table, {}) == ("timeout_rate", True)
    assert drift._series("failure", table, {}) == ("failed_episode_rate", True)
    assert drift._series("length", table, {}) == ("mean_length", False)
    assert drift._series("reward", table, {}) == ("success_rate", False)
    assert drift._series("quit", table, {}) == (None, True)


def test_mean_rise_is_a_one_sided_welch_test():
    rng = np.random.default_rng(0)
    before, after = rng.normal(0.0, 1.0, 40), rng.normal(1.0, 1.0, 40)
    test = {"diff": 1.0, "diff_ci": [0.5, 1.5]}
    rose = drift._mean_rise(test, (before, after))
    assert rose["test"] == "welch" and rose["p_value"] < 1e-4
    assert rose["diff"] == 1.0 and rose["diff_ci"] == [0.5, 1.5]
    fell = drift._mean_rise(test, (after, before))
    assert fell["p_value"] > 0.99  # one-sided: a fall is no rise
    few = drift._mean_rise(test, (before[: MIN_SAMPLES - 1], after))
    assert few["p_value"] == 1.0 and few["diff"] == 1.0
    assert drift._mean_rise(test, (before[:MIN_SAMPLES], after[:MIN_SAMPLES]))["p_value"] < 0.05
    flat = drift._mean_rise(test, (np.ones(20), np.ones(20)))
    assert flat["p_value"] == 1.0


def _records_table(n_before_fail: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Episodes of two windows: before has ``n_before_fail`` failures paying -1 and 10 successes
    paying 1 (length 3); after adds failures paying -2, and one long episode with a failed call."""
    rows = [dict(outcome="success", ret=1.0, length=3, it=0, err=0) for _ in range(10)]
    rows += [dict(outcome="failure", ret=-1.0, length=1, it=0, err=0) for _ in range(n_before_fail)]
    rows += [dict(outcome="failure", ret=-2.0, length=1, it=1, err=0) for _ in range(MIN_SAMPLES)]
    rows += [dict(outcome="failure", ret=-3.0, length=9, it=1, err=1)]
    eps = pd.DataFrame({"episode_id": range(len(rows)), "outcome": [r["outcome"] for r in rows],
                        "return": [r["ret"] for r in rows], "length": [r["length"] for r in rows],
                        "iteration": [r["it"] for r in rows], "n_tool_errors": [r["err"] for r in rows],
                        "n_tool_timeouts": 0, "end_reason": "terminated"})
    return eps, eps[eps["iteration"] == 0].reset_index(drop=True)


def test_honest_failure_is_the_early_one_when_there_are_enough():
    eps, before = _records_table(MIN_SAMPLES)
    honest = drift._honest(eps, before)
    assert sorted(honest.success.tolist()) == [1.0] * 10
    assert honest.failure.tolist() == [-1.0] * MIN_SAMPLES  # the first window's failures only
    assert honest.persist["return"].tolist() == [-3.0]  # kept going after a failed call


def test_honest_failure_falls_back_to_every_logged_failure():
    eps, before = _records_table(MIN_SAMPLES - 1)
    honest = drift._honest(eps, before)
    assert sorted(honest.failure.tolist()) == sorted([-1.0] * (MIN_SAMPLES - 1) + [-2.0] * MIN_SAMPLES + [-3.0])


def test_a_single_iteration_cannot_drift():
    run = _run(EPISODES.assign(iteration=0), STEPS)
    report = run_logs(run, ScanConfig())
    drift_status = next(s for s in report.probes if s.name == "drift")
    assert "single iteration" in drift_status.notes["missing"]
    assert not [f for f in report.findings if f.code == "learned-exploit"]


def _lengths_run(with_success: bool) -> LoggedRun:
    """12 iterations of 32 rollouts, 8 groups; episodes 4 turns long early, 1 turn late."""
    rows = []
    for it in range(12):
        for k in range(32):
            rows.append({"episode_id": f"{it}-{k}", "group_id": f"{it}-{k // 4}", "iteration": it,
                         "return": 0.5 + 0.01 * (k % 3), "length": 4 if it < 6 else 1,
                         "end_reason": "terminated", "success": bool(k % 2)})
    frame = pd.DataFrame(rows)
    return check_run(LoggedRun(frame if with_success else frame.drop(columns=["success"]), None, "generic"))


def test_a_move_without_a_success_column_is_an_info_fact():
    report = run_logs(_lengths_run(with_success=False), ScanConfig())
    [finding] = [f for f in report.findings if f.code == "learned-exploit"]
    assert finding.severity == Severity.INFO
    assert finding.evidence["behaviour"] == "exploration" and finding.evidence["source"] == "logs"
    assert "length down (4.00 → 1.00)" in finding.summary
    assert "no success signal" in finding.title


def test_describe_moves():
    assert drift.describe_moves({}) == "nothing moved"
    assert drift.describe_moves({"moves": [{"behaviour": "length down"}, {"behaviour": "timeouts up"}]}) == \
        "length down, timeouts up"


def _reference_start(t, y, w, rising=True):
    """``start_iteration`` written out: every (start, end) knot pair fitted by weighted least squares
    with the residuals summed directly; the earliest start whose best fit is strictly better."""
    keep = np.isfinite(y)
    t, y, w = t[keep].astype(float), y[keep].astype(float), w[keep].astype(float)
    if len(t) < 3:
        return None
    best, best_sse = None, np.inf
    for i, s in enumerate(t[:-1]):
        for e in t[i + 1:]:
            x = np.clip(t - s, 0.0, e - s)
            xm, ym = np.average(x, weights=w), np.average(y, weights=w)
            sxx = float((w * (x - xm) ** 2).sum())
            if sxx <= 0:
                continue
            b = float((w * (x - xm) * (y - ym)).sum()) / sxx
            tiny = 1e-9 * (float(np.abs(y).max()) + 1.0)
            if not (b > tiny if rising else b < -tiny):
                continue
            sse = float((w * (y - ym - b * (x - xm)) ** 2).sum())
            if sse < best_sse - 1e-9 * max(1.0, abs(best_sse) if np.isfinite(best_sse) else 1.0):
                best, best_sse = int(s), sse
    return best


@pytest.mark.parametrize("case", range(40))
def test_start_iteration_is_the_best_ramp_fit(case):
    rng = np.random.default_rng(case)
    n = int(rng.integers(3, 14))
    t = np.sort(rng.choice(np.arange(50), size=n, replace=False)) + int(rng.integers(0, 5))
    start = rng.choice(t)
    y = 0.05 * np.clip(t - start, 0, None) + rng.normal(0, 0.05, n) + 0.3
    w = rng.integers(1, 40, n).astype(float)
    if case % 5 == 0:
        y[rng.integers(0, n)] = np.nan
    rising = bool(case % 3)
    y = y if rising else -y
    assert drift.start_iteration(t, y, w, rising=rising) == _reference_start(t, y, w, rising=rising)


def test_three_iterations_are_enough_to_place_a_start():
    assert drift.start_iteration(np.arange(3), np.array([0.0, 0.0, 1.0]), np.ones(3)) == 1
    assert drift.start_iteration(np.arange(3), np.array([0.0, np.nan, 1.0]), np.ones(3)) is None
