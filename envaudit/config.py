"""``ScanConfig``: every knob of a scan, each with its help text, validated once."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from envaudit.errors import UsageError
from envaudit.findings import Severity
from envaudit.pipeline import HANDLINGS, Pipeline, timeout_handling_pipeline

FAIL_ON = ("info", "warn", "fail", "never")
TIMEOUT_PENALTY = -1.0
"""The training reward of timed-out rollouts under ``timeout_handling="penalty"`` when none is given."""


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class ScanConfig:
    """What a scan does. CLI flags and ``[tool.envaudit]`` keys use these names (dashes or underscores)."""

    seed: int = _opt(0, "Seed of every random choice in the scan: the same seed gives the same report.")
    episodes: int = _opt(256, "Exploration episodes (random policy), collected as GRPO-style groups.")
    group_size: int = _opt(8, "Rollouts per group: G episodes from the same reset(seed=s).")
    max_steps: int = _opt(500, "Step cap for envs with no step limit of their own (episodes are truncated there).")
    step_timeout_s: float = _opt(5.0, "A reset() or step() that takes longer than this is reported as a hang.")
    budget_s: float = _opt(900.0, "Wall-clock safety cap of the whole scan. Work is sized in episodes and "
                           "iterations, not seconds; a scan that hits the cap stops, lists what it skipped "
                           "as incomplete and exits 4.")
    max_env_steps: int | None = _opt(None, "Unit cap beside --budget: once the scan's env steps reach it, no "
                                     "further episodes start; what was skipped is listed as incomplete (exit 4).")
    quick: bool = _opt(False, "Fewer work units for a fast look (about a quarter of the default episodes "
                       "and iterations); the same seed gives the same quick report anywhere.")
    probes: tuple[str, ...] | None = _opt(None, "Probe names to run (default: all registered probes).")
    fail_on: str = _opt("fail", "Exit 1 when a finding group (one incentive) reaches this severity (info, warn, fail, never).")
    timeout_handling: str = _opt("keep", "What the pipeline does with timed-out rollouts: keep, zero, penalty, drop.")
    timeout_penalty: float = _opt(TIMEOUT_PENALTY, "Training reward of timed-out rollouts under --timeout-handling penalty.")
    pipeline: str | None = _opt(None, "A trainer preset for the whole rollout pipeline (overrides --timeout-handling).")
    success_threshold: float | None = _opt(None, "Return at or above which an episode counts as a success when the env gives no info['success'].")
    alpha: float = _opt(0.05, "Family-wise error rate for the Holm correction across a scan's tests.")
    engine: str = _opt("torch", "Policy engine of the GRPO probe: torch (embedded MLP) or vllm (language model).")
    model: str | None = _opt(None, "Local Hugging Face causal LM directory for --engine vllm (default: a tiny model built for the env).")
    max_new_tokens: int | None = _opt(None, "--engine vllm: tokens per turn at most (default 12 for the tiny model, 96 otherwise).")
    max_model_len: int | None = _opt(None, "--engine vllm: context length of the vLLM engine (default 1024 for the tiny model, else min(model's, 4096)).")
    out: str | None = _opt(None, "Report folder (default reports/<env>-<timestamp>/).")

    def __post_init__(self) -> None:
        checks = [
            (self.episodes >= 1, f"episodes must be at least 1, got {self.episodes}"),
            (self.group_size >= 2, f"group_size must be at least 2 (GRPO needs a group), got {self.group_size}"),
            (self.max_steps >= 1, f"max_steps must be at least 1, got {self.max_steps}"),
            (self.step_timeout_s > 0, f"step_timeout_s must be positive, got {self.step_timeout_s}"),
            (self.budget_s > 0, f"budget_s must be positive, got {self.budget_s}"),
            (self.max_env_steps is None or self.max_env_steps >= 1,
             f"max_env_steps must be at least 1, got {self.max_env_steps}"),
            (self.fail_on in FAIL_ON, f"fail_on must be one of {', '.join(FAIL_ON)}, got {self.fail_on!r}"),
            (self.timeout_handling in HANDLINGS,
             f"timeout_handling must be one of {', '.join(HANDLINGS)}, got {self.timeout_handling!r}"),
            (0 < self.alpha < 1, f"alpha must be in (0, 1), got {self.alpha}"),
            (self.engine in ("torch", "vllm"), f"engine must be 'torch' or 'vllm', got {self.engine!r}"),
            (self.model is None or self.engine == "vllm",
             f"model {self.model!r} is for the language-model engine; add --engine vllm or drop --model"),
            *lm_length_checks(self, "add --engine vllm or drop it"),
            *penalty_checks(self),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        if self.probes is not None:
            object.__setattr__(self, "probes", tuple(self.probes))

    @property
    def fail_severity(self) -> Severity | None:
        return None if self.fail_on == "never" else Severity.parse(self.fail_on)

    def scaled(self, n: int) -> int:
        """A number of work units for this scan: ``n`` normally, about a quarter of it under ``--quick``."""
        return max(2, n // 4) if self.quick else n

    def exploration_groups(self) -> tuple[int, int]:
        """``(G, groups)``: exploration plays ``groups`` reset seeds, ``G`` episodes each (the scaled
        ``episodes``, rounded up to whole groups)."""
        n_episodes = self.scaled(self.episodes)
        group_size = min(self.group_size, n_episodes)
        return group_size, max(1, -(-n_episodes // group_size))

    def rollout_pipeline(self) -> Pipeline:
        """The rollout pipeline the scan models: a named preset, or the simple timeout handling."""
        if self.pipeline is not None:
            from envaudit.presets import get_preset

            return get_preset(self.pipeline)
        return timeout_handling_pipeline(self.timeout_handling, self.timeout_penalty)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)}


def config_help() -> dict[str, str]:
    return {f.name: f.metadata["help"] for f in fields(ScanConfig)}


def penalty_checks(config: Any) -> list[tuple[bool, str]]:
    """A timeout penalty is used only under ``timeout_handling="penalty"`` without a preset: given
    under another handling it would be silently ignored, a contradiction in the command."""
    if config.timeout_penalty == TIMEOUT_PENALTY:
        return []
    if config.pipeline is not None:
        return [(False, f"--timeout-penalty {config.timeout_penalty:g} is ignored under --pipeline "
                        f"{config.pipeline}, which sets its own handling; drop --timeout-penalty, or drop "
                        "--pipeline and give --timeout-handling penalty")]
    return [(config.timeout_handling == "penalty",
             f"--timeout-penalty {config.timeout_penalty:g} applies only under --timeout-handling penalty, "
             f"but timed-out rollouts are handled with {config.timeout_handling}; add --timeout-handling "
             "penalty, or drop --timeout-penalty")]


def lm_length_checks(config: Any, fix: str) -> list[tuple[bool, str]]:
    """``max_new_tokens`` / ``max_model_len``: positive, and only for the language-model engine."""
    out = []
    for name in ("max_new_tokens", "max_model_len"):
        value = getattr(config, name)
        out.append((value is None or value >= 1, f"{name} must be at least 1, got {value}"))
        out.append((value is None or config.engine == "vllm", f"{name} is for the vllm engine; {fix}"))
    return out


OPTION_ALIASES = {"step_timeout": "step_timeout_s", "budget": "budget_s"}
"""Keys a table of options may use for ``ScanConfig`` fields (the CLI's flag names)."""


def normalise_options(section: Mapping[str, Any], where: str, *, exclude: Sequence[str] = (),
                      extra: Sequence[str] = ()) -> dict[str, Any]:
    """A table of scan options (``[tool.envaudit]``, a suite file's ``[defaults]`` or ``[[env]]``)
    with keys as ``ScanConfig`` field names; ``exclude`` are fields the table may not set, ``extra``
    keys it may set beside them. An unknown key is a usage error naming the closest known one."""
    names = {f.name for f in fields(ScanConfig)} - set(exclude)
    options: dict[str, Any] = {}
    for key, value in section.items():
        name = OPTION_ALIASES.get(key.replace("-", "_"), key.replace("-", "_"))
        if name not in names and name not in extra:
            known = sorted(names | set(extra))
            close = difflib.get_close_matches(name, known, n=1)
            raise UsageError(f"unknown key {key!r} in {where}"
                             + (f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"))
        options[name] = value
    if isinstance(options.get("probes"), str):
        options["probes"] = [p.strip() for p in options["probes"].split(",") if p.strip()]
    return options
