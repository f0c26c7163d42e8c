"""Trainer presets: each validates, names are unique, lookups fail helpfully, and each preset does
to one hand-built group what its trainer's documented knob does."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from envaudit.config import ScanConfig
from envaudit.errors import UsageError
from envaudit.pipeline import Pipeline, group_advantages
from envaudit.presets import ALIASES, PRESETS, get_preset, resolve_name, timeout_fix
from envaudit.protocol import ERROR, FAILURE, SUCCESS, TIMEOUT

EXPECTED = {"keep", "rllm", "skyrl", "prime-rl", "trl", "verl", "openrlhf", "dr-grpo"}

# One group with every outcome class: success 1, failure 0, timeout 0, error 0.
RETURNS = [1.0, 0.0, 0.0, 0.0]
OUTCOMES = [SUCCESS, FAILURE, TIMEOUT, ERROR]


def advantages(name: str):
    return group_advantages(RETURNS, OUTCOMES, get_preset(name))


def test_every_preset_is_a_valid_pipeline_named_after_its_key():
    assert set(PRESETS) == EXPECTED
    names = [p.name for p in PRESETS.values()]
    assert len(names) == len(set(names))
    for key, preset in PRESETS.items():
        assert isinstance(preset, Pipeline) and preset.name == key
        # Rebuilding from the serialised form goes through validation again and gives the same pipeline.
        d = preset.to_dict()
        rebuilt = Pipeline(**{**d, "mask_group_on": tuple(d["mask_group_on"])})
        assert rebuilt == preset
        assert preset.description, f"preset {key!r} does not say where it comes from"


def test_trainer_presets_name_their_source_version():
    for key, preset in PRESETS.items():
        if key not in ("keep", "dr-grpo"):
            assert "As of" in preset.description, key


def test_aliases_point_at_presets_and_lookup_ignores_case():
    assert all(target in PRESETS for target in ALIASES.values())
    assert not set(ALIASES) & set(PRESETS)
    assert get_preset("Prime") is PRESETS["prime-rl"]
    assert get_preset(" SkyRL ") is PRESETS["skyrl"]
    assert get_preset("dr_grpo") is PRESETS["dr-grpo"]
    assert resolve_name("DAPO") == "verl"


def test_unknown_preset_says_did_you_mean_and_lists_the_presets():
    with pytest.raises(UsageError, match=r"no pipeline preset 'rlm'; did you mean 'rllm'\?") as info:
        get_preset("rlm")
    assert "presets: keep, rllm, skyrl, prime-rl, trl, verl, openrlhf, dr-grpo" in str(info.value)
    assert "--timeout-handling" in str(info.value)
    with pytest.raises(ValueError, match="no pipeline preset 'zzzz' \\(presets:"):  # no close match: no hint
        get_preset("zzzz")


def test_scan_config_resolves_presets():
    assert ScanConfig(pipeline="trl").rollout_pipeline() is PRESETS["trl"]
    with pytest.raises(ValueError, match="did you mean 'skyrl'"):
        ScanConfig(pipeline="skyrll").rollout_pipeline()


def test_keep_and_dr_grpo_train_everything():
    # Mean 0.25; none scaling: 0.75, -0.25 x3; std scaling divides by sqrt(0.1875).
    np.testing.assert_allclose(advantages("dr-grpo").advantages, [0.75, -0.25, -0.25, -0.25])
    np.testing.assert_allclose(advantages("keep").advantages,
                               np.array([0.75, -0.25, -0.25, -0.25]) / np.sqrt(0.1875), atol=1e-5)


def test_rllm_masks_timeouts_and_errors_out_of_loss_and_baseline():
    # Left: success 1, failure 0 -> mean 0.5, std 0.5 -> +1, -1.
    ga = advantages("rllm")
    np.testing.assert_allclose(ga.advantages, [1, -1, 0, 0], atol=1e-5)
    np.testing.assert_array_equal(ga.trained, [True, True, False, False])


def test_skyrl_masks_the_whole_group_on_a_timeout_or_an_error():
    assert advantages("skyrl").group_dropped == "masked"
    assert group_advantages([1, 0, 0], [SUCCESS, FAILURE, ERROR], get_preset("skyrl")).group_dropped == "masked"
    clean = group_advantages([1, 0], [SUCCESS, FAILURE], get_preset("skyrl"))
    np.testing.assert_allclose(clean.advantages, [1, -1], atol=1e-5)


def test_prime_rl_skips_errors_in_loss_and_baseline_and_does_not_divide_by_std():
    # Left: 1, 0, 0 -> mean 1/3: 2/3, -1/3, -1/3; the error gets 0.
    ga = advantages("prime-rl")
    np.testing.assert_allclose(ga.advantages, [2 / 3, -1 / 3, -1 / 3, 0])
    np.testing.assert_array_equal(ga.trained, [True, True, True, False])


def test_trl_masks_truncations_from_the_loss_but_not_from_the_group_stats():
    # Baseline over all four (mean 0.25, std sqrt(0.1875)); the timeout is not trained.
    ga = advantages("trl")
    sd = np.sqrt(0.1875)
    np.testing.assert_allclose(ga.advantages, [0.75 / sd, -0.25 / sd, 0, -0.25 / sd], atol=1e-5)
    np.testing.assert_array_equal(ga.trained, [True, True, False, True])


@pytest.mark.parametrize("name", ["verl", "openrlhf"])
def test_dapo_style_presets_drop_groups_whose_rewards_are_all_equal(name):
    flat = group_advantages([0.0, 0.0, 0.0], [FAILURE, FAILURE, TIMEOUT], get_preset(name))
    assert flat.group_dropped == "zero_variance"
    np.testing.assert_allclose(advantages(name).advantages, advantages("keep").advantages)


def test_only_presets_that_drop_timeouts_carry_a_trainer_fix():
    for key, preset in PRESETS.items():
        touches_timeouts = preset.handling_of(TIMEOUT) != "keep" or TIMEOUT in preset.mask_group_on
        assert bool(timeout_fix(preset)) == touches_timeouts, key
    assert timeout_fix(dataclasses.replace(PRESETS["keep"], name="custom")) == ""
