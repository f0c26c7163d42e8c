"""``group_advantages`` on hand-computed groups: every handling, the baseline switch, group masking,
zero-variance filtering and std vs none scaling. Expected numbers are worked out in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envaudit.pipeline import Pipeline, group_advantages, timeout_handling_pipeline
from envaudit.protocol import ERROR, FAILURE, SUCCESS, TIMEOUT, UNKNOWN

S, F, T, E = SUCCESS, FAILURE, TIMEOUT, ERROR
NONE = {"advantage_scaling": "none"}


def adv(returns, outcomes, **pipeline):
    return group_advantages(returns, outcomes, Pipeline(**pipeline))


def test_keep_with_std_scaling_is_grpo():
    # returns 1, 0, 0, 1: mean 0.5, population std 0.5 -> advantages +-1 (eps 1e-6 aside).
    ga = adv([1, 0, 0, 1], [S, F, F, S])
    np.testing.assert_allclose(ga.advantages, [1, -1, -1, 1], atol=1e-5)
    assert ga.trained.all() and ga.group_dropped is None
    np.testing.assert_array_equal(ga.training_rewards, [1, 0, 0, 1])


def test_keep_trains_a_timeout_on_its_env_return():
    # Timeout kept at 0.5: mean (1 + 0 + 0.5) / 3 = 0.5, so with no scaling 0.5, -0.5, 0.
    ga = adv([1, 0, 0.5], [S, F, T], **NONE)
    np.testing.assert_allclose(ga.advantages, [0.5, -0.5, 0.0])


def test_zero_trains_the_class_on_reward_zero():
    # Timeout's 0.5 becomes 0: trained 1, -1, 0 -> mean 0, std sqrt(2/3).
    ga = group_advantages([1, -1, 0.5], [S, F, T], timeout_handling_pipeline("zero"))
    sd = math.sqrt(2 / 3)
    np.testing.assert_allclose(ga.advantages, [1 / sd, -1 / sd, 0.0], atol=1e-5)
    np.testing.assert_array_equal(ga.training_rewards, [1, -1, 0])


def test_penalty_trains_the_class_on_the_penalty():
    # Timeout's 5 becomes -2: trained 1, 0, -2 -> mean -1/3; deviations 4/3, 1/3, -5/3;
    # population std sqrt((16 + 1 + 25) / 27) = sqrt(42/27).
    ga = group_advantages([1, 0, 5], [S, F, T], timeout_handling_pipeline("penalty", penalty=-2.0))
    sd = math.sqrt(42 / 27)
    np.testing.assert_allclose(ga.advantages, [4 / 3 / sd, 1 / 3 / sd, -5 / 3 / sd], atol=1e-5)


def test_drop_without_the_dropped_rollout_in_the_baseline():
    # Timeout dropped: baseline over 1, 0, 0 -> mean 1/3; advantages 2/3, -1/3, (0), -1/3.
    ga = group_advantages([1, 0, 0.9, 0], [S, F, T, F],
                          Pipeline(handling={T: "drop"}, dropped_in_baseline=False, **NONE))
    np.testing.assert_allclose(ga.advantages, [2 / 3, -1 / 3, 0.0, -1 / 3])
    np.testing.assert_array_equal(ga.trained, [True, True, False, True])
    assert np.isnan(ga.training_rewards[2]) and ga.group_dropped is None


def test_drop_with_the_dropped_rollout_in_the_baseline():
    # Baseline over all four returns 1, 0, 0.9, 0: mean 0.475; the timeout itself is not trained.
    ga = group_advantages([1, 0, 0.9, 0], [S, F, T, F],
                          Pipeline(handling={T: "drop"}, dropped_in_baseline=True, **NONE))
    np.testing.assert_allclose(ga.advantages, [0.525, -0.475, 0.0, -0.475])
    # With std scaling the std is over all four too: sqrt(mean of squared deviations).
    dev = np.array([0.525, -0.475, 0.425, -0.475])
    sd = math.sqrt(float(np.mean(dev**2)))
    std = group_advantages([1, 0, 0.9, 0], [S, F, T, F], Pipeline(handling={T: "drop"}, dropped_in_baseline=True))
    np.testing.assert_allclose(std.advantages, [0.525 / sd, -0.475 / sd, 0.0, -0.475 / sd], atol=1e-5)


def test_every_rollout_dropped_leaves_the_group_out():
    ga = group_advantages([0, 0], [T, T], timeout_handling_pipeline("drop"))
    np.testing.assert_array_equal(ga.advantages, [0, 0])
    assert not ga.trained.any() and ga.group_dropped == "masked"


def test_errors_and_unknown_are_handled_like_any_class():
    # Error dropped (not in baseline), unknown kept: baseline over 1, 0, 0.5 -> mean 0.5.
    ga = adv([1, 0, 7, 0.5], [S, F, E, UNKNOWN], handling={E: "drop"}, **NONE)
    np.testing.assert_allclose(ga.advantages, [0.5, -0.5, 0.0, 0.0])
    np.testing.assert_array_equal(ga.trained, [True, True, False, True])


def test_whole_group_masking():
    pipeline = Pipeline(mask_group_on=(T,), **NONE)
    masked = group_advantages([1, 0, 0], [S, F, T], pipeline)
    np.testing.assert_array_equal(masked.advantages, [0, 0, 0])
    assert not masked.trained.any() and masked.group_dropped == "masked"
    # A group without the class trains as usual: mean 0.5 -> +-0.5.
    clean = group_advantages([1, 0], [S, F], pipeline)
    np.testing.assert_allclose(clean.advantages, [0.5, -0.5])
    assert clean.trained.all() and clean.group_dropped is None


def test_zero_variance_filter():
    pipeline = Pipeline(filter_zero_variance=True)
    flat = group_advantages([1, 1, 1], [S, S, S], pipeline)
    assert flat.group_dropped == "zero_variance" and not flat.trained.any()
    np.testing.assert_array_equal(flat.advantages, [0, 0, 0])
    # Without the filter the same group stays in the loss with advantage 0 (0 / (0 + eps)).
    unfiltered = group_advantages([1, 1, 1], [S, S, S], Pipeline())
    assert unfiltered.group_dropped is None and unfiltered.trained.all()
    np.testing.assert_array_equal(unfiltered.advantages, [0, 0, 0])
    # Dropping the timeout leaves 0, 0: flat, so filtered; counting it in the baseline (0, 0, 1)
    # makes the group vary, so it stays, and the failures get -1/3 each (none scaling).
    outcomes = [F, F, T]
    drop = dict(handling={T: "drop"}, filter_zero_variance=True)
    assert adv([0, 0, 1], outcomes, **drop).group_dropped == "zero_variance"
    kept = adv([0, 0, 1], outcomes, dropped_in_baseline=True, **drop, **NONE)
    assert kept.group_dropped is None
    np.testing.assert_allclose(kept.advantages, [-1 / 3, -1 / 3, 0.0])


def test_std_versus_none_scaling():
    # returns 4, 0: mean 2, so none gives +-2 and std (population std 2) gives +-1. In general std
    # scaling is none scaling divided by the group std: it never flips a sign.
    np.testing.assert_allclose(adv([4, 0], [S, F], **NONE).advantages, [2, -2])
    np.testing.assert_allclose(adv([4, 0], [S, F]).advantages, [1, -1], atol=1e-5)
    rng = np.random.default_rng(0)
    r = rng.normal(size=8)
    outcomes = [S] * 8
    none, std = adv(r, outcomes, **NONE).advantages, adv(r, outcomes).advantages
    np.testing.assert_allclose(std, none / (np.std(r) + 1e-6))


def test_empty_group_and_mismatched_lengths():
    ga = group_advantages([], [], Pipeline())
    assert len(ga.advantages) == 0 and ga.group_dropped is None
    with pytest.raises(AssertionError, match="2 returns but 1 outcome"):
        group_advantages([1, 0], [S], Pipeline())


@pytest.mark.parametrize("kwargs, message", [
    ({"handling": {"timed_out": "drop"}}, "unknown outcome class 'timed_out'"),
    ({"handling": {T: "skip"}}, "handling for 'timeout' is 'skip'; expected one of keep, zero, penalty, drop"),
    ({"mask_group_on": ("oops",)}, "mask_group_on names unknown outcome classes"),
    ({"advantage_scaling": "batch"}, "advantage_scaling must be 'std' or 'none', got 'batch'"),
])
def test_pipeline_rejects_bad_configs_with_the_fix_in_the_message(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Pipeline(**kwargs)
    with pytest.raises(ValueError, match="timeout handling must be one of"):
        timeout_handling_pipeline("ignore")
