"""Rollout-pipeline presets named after the trainers whose behaviour they mirror.

``--pipeline NAME`` answers "what does my trainer's config teach?". Each preset models one
trainer's handling of timed-out and errored rollouts, its group filtering and its advantage
scaling, with the knob it comes from. Where the behaviour sits behind a switch that is off by
default, the preset models the switch turned on (with the switch off the trainer behaves like
``keep``), and says so. The sources were read in the trainers' code at the commits named; a
trainer that changes its code after those may differ.

Sources
-------
rllm (rllm-org/rllm 9beb6e0, 2026-08)
    ``rllm.compact_filtering.enable=true`` (default ``false``) with its sub-flags at the defaults
    of ``rllm/trainer/config/rllm/base.yaml``: ``mask_timeout: true``,
    ``mask_max_turns_exceeded: true``, ``mask_error: true`` (also ``mask_max_prompt_length_exceeded``
    and ``mask_max_response_length_exceeded: true``; ``mask_env_done``/``mask_unknown: false``).
    ``CompactFilteringConfig.should_mask`` (``rllm/trainer/algorithms/config.py``) is applied in
    ``_build_trajectory_groups`` (``rllm/trainer/algorithms/transform.py``) *before* groups are
    formed, so a masked episode leaves both the loss and its group's baseline. GRPO advantages with
    ``algorithm.norm_adv_by_std_in_grpo: true``. envaudit's ``timeout`` class covers both
    ``TerminationReason.TIMEOUT`` and ``MAX_TURNS_EXCEEDED``. rLLM then drops groups with fewer
    than ``rejection_sample.min_trajs_per_group`` (2) trajectories; a lone survivor gets advantage
    0 in envaudit, which trains it no more than dropping it.
skyrl (NovaSky-AI/SkyRL a956457, 2026-08)
    The Harbor integration (``examples/train_integrations/harbor/harbor_generator.py``,
    ``build_step_wise_generator_output``; documented in ``docs/content/docs/harbor/index.mdx``):
    a trial ending in ``AgentTimeoutError`` (not retried) or an error (after
    ``MAX_NUM_RETRIES_PER_TRIAL = 2`` attempts) gets ``loss_mask=[0]``, and so does *every* rollout
    of the same prompt. This is hard-coded, not a config knob. Advantages: GRPO with
    ``trainer.algorithm.grpo_norm_by_std: true``. Not modelled: ``ContextLengthExceededError``
    trains with reward 0 unless ``generator.apply_overlong_filtering=true`` (default ``false``);
    hitting ``agent.kwargs.max_turns`` ends the trial normally, so SkyRL trains it, while envaudit
    counts a step-limit truncation as a timeout.
prime-rl (PrimeIntellect-ai/prime-rl 559b447, v0.8.0)
    ``GRPOAlgorithm.score_group`` (``src/prime_rl/orchestrator/algo/grpo.py``) scores only the
    traces yielded by ``iter_trainable_traces`` (``algo/base.py``), which skips traces with
    ``has_error``: an errored rollout is neither trained nor counted in its group's mean. The
    advantage is ``reward - group mean`` with no std division (``length_penalty`` unset, the
    default). Truncated traces are trained as usual. Not a knob: always on.
trl (huggingface/trl f2cd577, 1.10.0.dev0)
    ``GRPOConfig.mask_truncated_completions=True`` (default ``False``): truncated completions are
    zeroed in the completion mask after the advantages were computed
    (``trl/trainer/grpo_trainer.py``), so their rewards still count in the group mean and std
    (``dropped_in_baseline``). ``scale_rewards="group"`` (default) divides by the group std.
    TRL's truncation is a completion that hits ``max_completion_length``; envaudit applies the
    same handling to step-limit truncations and tool timeouts.
verl (volcengine/verl b178a3c, 0.8.0.dev)
    ``algorithm.filter_groups.enable=true`` (default ``false``; ``FilterGroupsConfig`` in
    ``verl/trainer/config/algorithm.py``), the DAPO dynamic-sampling filter: the DAPO recipe's
    trainer keeps a prompt only when the std of its ``filter_groups.metric`` (``acc`` or
    ``score``) over its rollouts is > 0. envaudit filters on the trained rewards, which is the same
    when the metric is the reward. ``algorithm.norm_adv_by_std_in_grpo: true`` (default).
    Timed-out and errored rollouts are trained at their reward.
openrlhf (OpenRLHF/OpenRLHF 3c3be62, 0.11.0)
    ``--algo.dynamic_filtering_enable`` (default off) with ``--algo.dynamic_filtering_range 0 1``
    (default) and ``--algo.advantage.estimator group_norm``: a prompt's samples are dropped when
    their *mean* reward is not strictly inside the range
    (``openrlhf/trainer/ppo_utils/samples_generator.py``). For rewards in [0, 1] that drops exactly
    the all-0 and all-1 groups, which is what envaudit's zero-variance filter models; on other
    reward scales OpenRLHF's range test differs (a group of all 0.5 is kept; mixed groups whose
    mean falls outside the range are dropped).
dr-grpo
    Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"): advantage = reward - group
    mean, no std division. Knobs: TRL ``scale_rewards="none"`` (with ``loss_type="dr_grpo"``),
    verl ``algorithm.norm_adv_by_std_in_grpo=false``, OpenRLHF
    ``--algo.advantage.estimator dr_grpo``. Every rollout kept. (envaudit models the advantage,
    not Dr. GRPO's length-unbiased loss aggregation.)

Not modelled anywhere: verl and SkyRL give a group of one rollout its raw reward as advantage
(mean 0, std 1); envaudit gives it 0. Trainers divide by the Bessel-corrected std (torch
``std``) or the population std (rLLM, ``np.std``); envaudit uses the population std, which only
rescales advantages and never changes their sign.
"""

from __future__ import annotations

import difflib

from envaudit.errors import UsageError
from envaudit.pipeline import Pipeline
from envaudit.protocol import ERROR, TIMEOUT

PRESETS: dict[str, Pipeline] = {
    p.name: p
    for p in (
        Pipeline(
            name="keep",
            description="Every rollout trained on its env return; GRPO group mean and std. The "
            "baseline the others are compared with.",
        ),
        Pipeline(
            name="rllm",
            handling={TIMEOUT: "drop", ERROR: "drop"},
            dropped_in_baseline=False,
            description="rLLM with rllm.compact_filtering.enable=true (default false) and its "
            "defaults mask_timeout=true, mask_max_turns_exceeded=true, mask_error=true: timed-out "
            "and errored episodes are removed before groups are built (out of the loss and the "
            "baseline); GRPO with norm_adv_by_std_in_grpo=true. As of rllm-org/rllm 9beb6e0.",
        ),
        Pipeline(
            name="skyrl",
            mask_group_on=(TIMEOUT, ERROR),
            description="SkyRL's Harbor generator: when any rollout of a prompt ends in "
            "AgentTimeoutError or an error, every rollout of that prompt gets loss_mask [0] "
            "(hard-coded, no knob); GRPO with trainer.algorithm.grpo_norm_by_std=true. "
            "As of NovaSky-AI/SkyRL a956457.",
        ),
        Pipeline(
            name="prime-rl",
            handling={ERROR: "drop"},
            dropped_in_baseline=False,
            advantage_scaling="none",
            description="prime-rl GRPO: traces with has_error are skipped by "
            "iter_trainable_traces, in training and in the group mean (always on); advantage = "
            "reward - group mean, no std division (length_penalty unset). As of prime-rl v0.8.0 "
            "(559b447).",
        ),
        Pipeline(
            name="trl",
            handling={TIMEOUT: "drop"},
            dropped_in_baseline=True,
            description="TRL GRPOTrainer with mask_truncated_completions=True (default False): "
            "truncated completions leave the loss but their rewards stay in the group mean and "
            "std; scale_rewards='group' (default). As of TRL 1.10.0.dev0 (f2cd577).",
        ),
        Pipeline(
            name="verl",
            filter_zero_variance=True,
            description="verl with algorithm.filter_groups.enable=true (default false), the DAPO "
            "dynamic-sampling filter: groups whose metric has zero std are dropped; "
            "norm_adv_by_std_in_grpo=true (default); timeouts and errors trained at their reward. "
            "As of verl 0.8.0.dev (b178a3c).",
        ),
        Pipeline(
            name="openrlhf",
            filter_zero_variance=True,
            description="OpenRLHF with --algo.dynamic_filtering_enable (default off), range (0, 1) "
            "(default) and estimator group_norm: groups whose mean reward is not strictly inside "
            "(0, 1) are dropped, i.e. the all-0 and all-1 groups for rewards in [0, 1] (modelled "
            "as zero-variance filtering). As of OpenRLHF 0.11.0 (3c3be62).",
        ),
        Pipeline(
            name="dr-grpo",
            advantage_scaling="none",
            description="Dr. GRPO: advantage = reward - group mean, no std division (TRL "
            "scale_rewards='none', verl norm_adv_by_std_in_grpo=false, OpenRLHF estimator "
            "dr_grpo); every rollout kept.",
        ),
    )
}

ALIASES: dict[str, str] = {
    "grpo": "keep",
    "rllm-compact-filtering": "rllm",
    "sky-rl": "skyrl",
    "skyrl-harbor": "skyrl",
    "prime": "prime-rl",
    "primerl": "prime-rl",
    "prime_rl": "prime-rl",
    "dapo": "verl",
    "verl-dapo": "verl",
    "dr_grpo": "dr-grpo",
    "drgrpo": "dr-grpo",
}

TIMEOUT_FIXES: dict[str, str] = {
    "rllm": "In rLLM set rllm.compact_filtering.mask_timeout=false and "
    "mask_max_turns_exceeded=false, so timed-out episodes are trained with the reward your "
    "workflow gives them (make that no more than a failure's).",
    "skyrl": "SkyRL's Harbor generator masks every rollout of a prompt when one hits "
    "AgentTimeoutError (hard-coded in harbor_generator.py): give a timed-out trial the failure "
    "reward instead of masking it, and raise agent.override_timeout_sec so honest attempts finish.",
    "trl": "In TRL set mask_truncated_completions=False, so truncated rollouts keep their (failure) "
    "reward in the loss.",
}


def resolve_name(name: str) -> str:
    """The canonical preset name of ``name`` (case-insensitive, aliases allowed)."""
    key = str(name).strip().lower()
    return ALIASES.get(key, key)


def get_preset(name: str) -> Pipeline:
    """The preset called ``name`` (or one of its aliases), with "did you mean" on a typo."""
    key = resolve_name(name)
    if key in PRESETS:
        return PRESETS[key]
    close = difflib.get_close_matches(key, [*PRESETS, *ALIASES], n=1)
    hint = f"; did you mean {resolve_name(close[0])!r}?" if close else ""
    raise UsageError(
        f"no pipeline preset {name!r}{hint} (presets: {', '.join(PRESETS)}; or use "
        "--timeout-handling keep|zero|penalty|drop for the simple form)"
    )


def timeout_fix(pipeline: Pipeline) -> str:
    """Trainer-specific advice for a pipeline that rewards timing out, when there is any."""
    return TIMEOUT_FIXES.get(resolve_name(pipeline.name), "")
