from dataclasses import fields

import pytest

from envaudit import Pipeline, ScanConfig
from envaudit.grpo import GRPOConfig
from envaudit.grpo.config import config_help


def test_every_field_has_help_text():
    helps = config_help()
    assert set(helps) == {f.name for f in fields(GRPOConfig)}
    assert all(len(text) > 10 for text in helps.values())


@pytest.mark.parametrize("changes, message", [
    ({"group_size": 1}, "group_size must be at least 2 (GRPO needs a group), got 1"),
    ({"clip_coef": 1.5}, "clip_coef must be in (0, 1), got 1.5"),
    ({"learning_rate": 0}, "learning_rate must be positive, got 0"),
    ({"kl_coef": -0.1}, "kl_coef must be >= 0 (0 turns the KL term off), got -0.1"),
    ({"advantage_scaling": "max"}, "advantage_scaling must be None, 'std' or 'none', got 'max'"),
    ({"loss_aggregation": "token"}, "loss_aggregation must be 'trajectory' or 'step', got 'token'"),
    ({"num_minibatches": 9, "group_size": 2, "groups_per_iteration": 4},
     "num_minibatches (9) exceeds the trajectories per iteration (group_size * groups_per_iteration = 8)"),
])
def test_bad_values_name_what_was_received(changes, message):
    with pytest.raises(ValueError) as info:
        GRPOConfig(**changes)
    assert message in str(info.value)


def test_pipeline_given_as_timeout_handling_preset_or_object():
    assert GRPOConfig(pipeline="drop").pipeline.handling_of("timeout") == "drop"
    assert GRPOConfig(pipeline="keep").pipeline.handling_of("timeout") == "keep"
    own = Pipeline(name="mine", handling={"error": "drop"})
    assert GRPOConfig(pipeline=own).pipeline is own
    with pytest.raises(ValueError, match="no pipeline preset 'nope'.*or give a timeout handling"):
        GRPOConfig(pipeline="nope")
    with pytest.raises(TypeError, match="must be an envaudit.Pipeline or a preset name, got int"):
        GRPOConfig(pipeline=3)


def test_advantage_scaling_overrides_the_pipeline_only_when_set():
    assert GRPOConfig(pipeline="drop").rollout_pipeline.advantage_scaling == "std"
    dr = GRPOConfig(pipeline="drop", advantage_scaling="none").rollout_pipeline
    assert dr.advantage_scaling == "none" and dr.handling_of("timeout") == "drop"


def test_from_scan_takes_the_scan_seed_group_size_and_pipeline():
    scan = ScanConfig(seed=7, group_size=4, timeout_handling="penalty", timeout_penalty=-2.0, max_steps=30)
    cfg = GRPOConfig.from_scan(scan, iterations=3)
    assert (cfg.seed, cfg.group_size, cfg.max_steps, cfg.iterations) == (7, 4, 30, 3)
    assert cfg.pipeline.handling_of("timeout") == "penalty" and cfg.pipeline.penalty == -2.0
    assert cfg.to_dict()["pipeline"]["name"] == "timeout-penalty"
