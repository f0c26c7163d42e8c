"""Probe ``grpo``: train small policies with GRPO under the rollout pipeline and watch what they learn.

``training`` plans and runs the GRPO runs (``envaudit.grpo`` is the trainer), sparing those whose
answer is already in hand (``sparing``: the natural run standing in for the success search, the
ceilings that decide a targeted run early); ``met`` replays what the searches met on their way;
``drift`` measures what moved, ``lessons`` puts each moved behaviour on the ladder and ``verdicts``
holds the state-matched comparisons they read. Each code is decided in one function of ``decisions`` (its
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

from envaudit.findings import Finding
from envaudit.probe import HUNG_NOTE, Probe, ProbeContext
from envaudit.probes.grpo.decisions import (
    decide_failure_shortcut,
    decide_learned_exploit,
    decide_length_bias,
    decide_reward_without_success,
    decide_timeout_drop_incentive,
    decide_timeout_rewarded,
)
from envaudit.probes.grpo.training import NAME, planned_episodes, run


def train_unless_hung(ctx: ProbeContext) -> list[Finding]:
    """The probe's run; none once the env has hung in exploration (the probe plays beside the
    others, so it sees only exploration's hangs): its lockstep groups step envs outside ``ctx.run``,
    and each would wait on the hang again (a deadline per group, minutes per scan). A hang of its
    own stops the run it meets it in and skips the runs after it."""
    if ctx.env_hung("GRPO training"):
        return []
    found = run(ctx)
    hung = [name for name, r in ctx.notes.get("runs", {}).items() if r.get("stopped") == "hang"]
    if hung:  # its own hang: the run stopped there, and its numbers are not read
        r = ctx.notes["runs"][hung[0]]
        ctx.notes.setdefault(HUNG_NOTE, f"GRPO run {hung[0]!r} stopped at a hang after {r['iterations']} "
                                        f"iteration{'s' if r['iterations'] != 1 else ''}; the runs that would "
                                        "have started after its wave were skipped")
    return found


probe = Probe(
    name=NAME,
    run=train_unless_hung,
    summary="train small policies with GRPO under the pipeline: what does training teach, and what is reachable?",
    codes=("learned-exploit", "timeout-drop-incentive", "failure-shortcut", "timeout-rewarded",
           "reward-without-success", "length-bias"),
    weight=4.0,
    order=90,
    beside=True,  # its iterations leave workers idle (lockstep turns, updates) that the others fill
    preload=("envaudit.grpo.torch_engine",),
    plan=planned_episodes,
    plan_is_cap=True,
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
