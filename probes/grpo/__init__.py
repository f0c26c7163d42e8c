"""Probe ``grpo``: train small policies with GRPO under the rollout pipeline and watch what they learn.

``training`` plans and runs the GRPO runs (``envaudit.grpo`` is the trainer); ``drift`` measures
what moved, ``lessons`` puts each moved behaviour on the ladder and ``verdicts`` holds the
state-matched comparisons they read. Each code is decided in one function of ``decisions`` (its
words in ``text``):

| code | deciding function |
| --- | --- |
| ``learned-exploit`` | ``decide_learned_exploit`` |
| ``timeout-drop-incentive`` | ``decide_timeout_drop_incentive`` |
| ``failure-shortcut`` | ``decide_failure_shortcut`` |
| ``timeout-rewarded`` | ``decide_timeout_rewarded`` |
| ``reward-without-success`` | ``decide_reward_without_success`` |
| ``length-bias`` | ``decide_length_bias`` |
"""

from envaudit.probe import Probe
from envaudit.probes.grpo.decisions import (
    decide_failure_shortcut,
    decide_learned_exploit,
    decide_length_bias,
    decide_reward_without_success,
    decide_timeout_drop_incentive,
    decide_timeout_rewarded,
)
from envaudit.probes.grpo.training import NAME, run

probe = Probe(
    name=NAME,
    run=run,
    summary="train small policies with GRPO under the pipeline: what does training teach, and what is reachable?",
    codes=("learned-exploit", "timeout-drop-incentive", "failure-shortcut", "timeout-rewarded",
           "reward-without-success", "length-bias"),
    weight=4.0,
    order=90,
    preload=("envaudit.grpo.torch_engine",),
    decisions={
        "learned-exploit": decide_learned_exploit,
        "timeout-drop-incentive": decide_timeout_drop_incentive,
        "failure-shortcut": decide_failure_shortcut,
        "timeout-rewarded": decide_timeout_rewarded,
        "reward-without-success": decide_reward_without_success,
        "length-bias": decide_length_bias,
    },
)

__all__ = ["decide_failure_shortcut", "decide_learned_exploit", "decide_length_bias", "decide_reward_without_success",
           "decide_timeout_drop_incentive", "decide_timeout_rewarded", "probe"]
