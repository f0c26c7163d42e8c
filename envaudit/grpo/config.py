"""``GRPOConfig``: every knob of the GRPO trainer, each with its help text, validated once;
``LMSettings``: the knobs only the LM engine has (its config, kept here below the engine)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from envaudit.config import lm_length_checks
from envaudit.pipeline import HANDLINGS, SCALINGS, Pipeline, timeout_handling_pipeline

LOSS_AGGREGATIONS = ("trajectory", "step")
ENGINES = ("torch", "vllm")


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class GRPOConfig:
    """How the GRPO probe trains its policy. Names follow the GRPO paper and CleanRL."""

    group_size: int = _opt(8, "G: rollouts per group, all from the same reset(seed=s).")
    groups_per_iteration: int = _opt(4, "Groups (distinct reset seeds) collected per iteration.")
    iterations: int = _opt(40, "Training iterations: collect groups, compute advantages, update.")
    barren_rollouts: int = _opt(
        0, "Stop once this many rollouts in a row (whole iterations) gave no group a learning signal (every "
        "advantage zero) while the policy stayed the uniform explorer it started as (barren) or, trained, "
        "kept its entropy from climbing back (settled): a behaviour that "
        "would give one shows in fewer than r of its rollouts, where (1 - r) ** barren_rollouts is the "
        "chance of having missed it. torch engine only; 0 never stops for that.")
    learning_rate: float = _opt(3e-3, "Adam learning rate of the policy.")
    clip_coef: float = _opt(0.2, "PPO/GRPO ratio clip range epsilon: ratios outside 1 +- clip_coef stop the gradient.")
    update_epochs: int = _opt(2, "Passes over each iteration's batch (the GRPO paper's mu).")
    num_minibatches: int = _opt(2, "Minibatches per pass, split by trajectory.")
    kl_coef: float = _opt(0.0, "Weight of the KL divergence to the initial policy (beta); 0 turns it off.")
    ent_coef: float = _opt(0.01, "Weight of the entropy bonus (keeps the policy exploring).")
    max_grad_norm: float = _opt(1.0, "Gradient norm clip of each update step.")
    advantage_scaling: str | None = _opt(
        None, "Override the pipeline's advantage scaling: std (GRPO) or none (Dr. GRPO); None keeps the pipeline's.")
    loss_aggregation: str = _opt(
        "trajectory", "trajectory: mean over each trajectory's steps, then over trajectories (GRPO); "
        "step: mean over every step of the batch (DAPO), so long trajectories weigh more.")
    pipeline: Pipeline | str = _opt(
        "keep", "Rollout pipeline the natural mode trains under: a Pipeline, a preset name, or a "
        "timeout handling (keep, zero, penalty, drop).")
    hidden_size: int = _opt(64, "Width of the two hidden layers of the embedded torch policy.")
    text_features: int = _opt(64, "Hash buckets of the bag-of-words features of Text observations.")
    max_steps: int = _opt(500, "Step cap for envs with no step limit of their own.")
    step_timeout_s: float = _opt(5.0, "A reset() or step() that takes longer than this is a hang; training stops.")
    success_threshold: float | None = _opt(
        None, "Return at or above which an episode counts as a success when the env gives no info['success'].")
    seed: int = _opt(0, "Seed of the policy's initial weights, the reset seeds and the action sampling.")
    engine: str = _opt("torch", "Policy engine: torch (embedded MLP over the action catalogue) or vllm (a language "
                       "model that writes text tool calls, sampled on vLLM; envaudit.grpo.lm_engine).")
    model: str | None = _opt(None, "vllm engine: local Hugging Face causal LM directory; None builds a tiny model.")
    max_new_tokens: int | None = _opt(None, "vllm engine: tokens per turn at most (default 12 tiny model, else 96).")
    max_model_len: int | None = _opt(None, "vllm engine: context length (default 1024 tiny model, else min(model's, 4096)).")

    def __post_init__(self) -> None:
        checks = [
            (self.group_size >= 2, f"group_size must be at least 2 (GRPO needs a group), got {self.group_size}"),
            (self.groups_per_iteration >= 1, f"groups_per_iteration must be at least 1, got {self.groups_per_iteration}"),
            (self.iterations >= 1, f"iterations must be at least 1, got {self.iterations}"),
            (self.barren_rollouts >= 0, f"barren_rollouts must be >= 0 (0 never stops), got {self.barren_rollouts}"),
            (self.learning_rate > 0, f"learning_rate must be positive, got {self.learning_rate}"),
            (0 < self.clip_coef < 1, f"clip_coef must be in (0, 1), got {self.clip_coef}; GRPO uses 0.2"),
            (self.update_epochs >= 1, f"update_epochs must be at least 1, got {self.update_epochs}"),
            (self.num_minibatches >= 1, f"num_minibatches must be at least 1, got {self.num_minibatches}"),
            (self.num_minibatches <= self.group_size * self.groups_per_iteration,
             f"num_minibatches ({self.num_minibatches}) exceeds the trajectories per iteration "
             f"(group_size * groups_per_iteration = {self.group_size * self.groups_per_iteration}); "
             "lower num_minibatches or collect more groups"),
            (self.kl_coef >= 0, f"kl_coef must be >= 0 (0 turns the KL term off), got {self.kl_coef}"),
            (self.ent_coef >= 0, f"ent_coef must be >= 0, got {self.ent_coef}"),
            (self.max_grad_norm > 0, f"max_grad_norm must be positive, got {self.max_grad_norm}"),
            (self.advantage_scaling is None or self.advantage_scaling in SCALINGS,
             f"advantage_scaling must be None, 'std' or 'none', got {self.advantage_scaling!r}"),
            (self.loss_aggregation in LOSS_AGGREGATIONS,
             f"loss_aggregation must be 'trajectory' or 'step', got {self.loss_aggregation!r}"),
            (self.hidden_size >= 1, f"hidden_size must be at least 1, got {self.hidden_size}"),
            (self.text_features >= 1, f"text_features must be at least 1, got {self.text_features}"),
            (self.max_steps >= 1, f"max_steps must be at least 1, got {self.max_steps}"),
            (self.step_timeout_s > 0, f"step_timeout_s must be positive, got {self.step_timeout_s}"),
            (self.engine in ENGINES, f"engine must be 'torch' or 'vllm', got {self.engine!r}"),
            (self.model is None or self.engine == "vllm", f"model {self.model!r} is for the vllm engine; set engine='vllm'"),
            *lm_length_checks(self, "set engine='vllm'"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        object.__setattr__(self, "pipeline", _resolve_pipeline(self.pipeline))

    @property
    def rollout_pipeline(self) -> Pipeline:
        """The pipeline the natural mode trains under, with ``advantage_scaling`` applied."""
        assert isinstance(self.pipeline, Pipeline)
        if self.advantage_scaling is None:
            return self.pipeline
        return replace(self.pipeline, advantage_scaling=self.advantage_scaling)

    @property
    def rollouts_per_iteration(self) -> int:
        return self.group_size * self.groups_per_iteration

    def replace(self, **changes: Any) -> GRPOConfig:
        return replace(self, **changes)

    @classmethod
    def from_scan(cls, scan: Any, **overrides: Any) -> GRPOConfig:
        """The trainer settings a scan implies (seed, group size, pipeline, step limits)."""
        base = dict(group_size=scan.group_size, pipeline=scan.rollout_pipeline(), max_steps=scan.max_steps,
                    step_timeout_s=scan.step_timeout_s, success_threshold=scan.success_threshold,
                    seed=scan.seed, engine=getattr(scan, "engine", "torch"), model=getattr(scan, "model", None),
                    max_new_tokens=getattr(scan, "max_new_tokens", None),
                    max_model_len=getattr(scan, "max_model_len", None))
        return cls(**{**base, **overrides})

    def lm_settings(self) -> LMSettings:
        """The vllm engine's ``LMSettings`` for this config."""
        return LMSettings(model=self.model, max_new_tokens=self.max_new_tokens, max_model_len=self.max_model_len)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["pipeline"] = self.rollout_pipeline.to_dict()
        return out


@dataclass(frozen=True)
class LMSettings:
    """Knobs of the LM engine that the MLP engine does not have."""

    model: str | None = _opt(None, "Local Hugging Face causal LM directory; None builds a tiny model for the env.")
    max_new_tokens: int | None = _opt(None, "Tokens per tool call at most (default 12 for the tiny model, 96 otherwise).")
    max_model_len: int | None = _opt(None, "Context length of the vLLM engine (default 1024 tiny, else min(model's, 4096)).")
    learning_rate: float | None = _opt(None, "Adam learning rate (default 5e-4 for the tiny model: the probe has seconds; 1e-6 otherwise).")
    micro_batch_rows: int = _opt(32, "Turns per forward pass of the trainer model, grouped by length (memory, not maths).")

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "max_model_len"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"LMSettings.{name} must be at least 1, got {value}")
        if self.learning_rate is not None and self.learning_rate <= 0:
            raise ValueError(f"LMSettings.learning_rate must be positive, got {self.learning_rate}")
        if self.micro_batch_rows < 1:
            raise ValueError(f"LMSettings.micro_batch_rows must be at least 1, got {self.micro_batch_rows}")


def _resolve_pipeline(value: Pipeline | str) -> Pipeline:
    if isinstance(value, Pipeline):
        return value
    if isinstance(value, str):
        if value in HANDLINGS:
            return timeout_handling_pipeline(value)
        from envaudit.presets import get_preset

        try:
            return get_preset(value)
        except ValueError as exc:
            raise ValueError(f"GRPOConfig.pipeline: {exc}; or give a timeout handling "
                             f"({', '.join(HANDLINGS)}) or an envaudit.Pipeline") from None
    raise TypeError(f"GRPOConfig.pipeline must be an envaudit.Pipeline or a preset name, got "
                    f"{type(value).__name__}")


def config_help() -> dict[str, str]:
    return {f.name: f.metadata["help"] for f in fields(GRPOConfig)}

