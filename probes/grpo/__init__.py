"""Probe ``grpo``: train small policies with GRPO under the rollout pipeline and watch what they learn.

``training`` plans and runs the GRPO runs (``envaudit.grpo`` is the trainer); ``drift`` measures
what moved, ``lessons`` puts each moved behaviour on the ladder and ``verdicts`` holds the
state-matched comparisons they read.
"""

from envaudit.probe import Probe
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
)

__all__ = ["probe"]
