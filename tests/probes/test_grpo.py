"""The grpo probe on bundled envs: the two lessons of issue 4, skips, and (slow) every variant.

Thresholds come from the envs' design: Helpdesk pays 0 for a wrong resolution and 0 for running
out of steps, so under ``keep`` a failing attempt gains nothing by stalling, under ``penalty``
stalling costs more than failing, and under ``drop`` a stall leaves the loss while a failure is
pushed down. FlakySearch-FailurePenalty fails 60% of search calls and charges 0.5 per failed call,
so ending at once (0) beats searching; its clean twin charges nothing. Helpdesk-FailurePenalty
fails about 66% of lookups and 50% of refunds and escalations and charges 0.5 per failed call, so
closing the ticket at once (0) beats working it (about -1.59, and no way of working it pays more
than 0); its clean twin Helpdesk-v0 fails less and charges nothing, and GRPO learns to work it.
The shortest honest resolution takes ``HONEST_CALLS`` calls (lookup customer, lookup order,
resolve, reply, close): an episode that ends in fewer has given up.
"""

import gymnasium as gym
import numpy as np
import pytest

import envaudit  # noqa: F401  (registers the bundled envs)
from envaudit.envs import VARIANTS
from envaudit.findings import Severity
from envaudit.grpo.drift import MATERIAL_LENGTH, MATERIAL_RATE
from envaudit.probes.grpo import probe, run
from tests.fixtures.context import explore


def _make(env_id):
    return lambda: gym.make(env_id)


def _codes(findings, at_least=Severity.WARN):
    return {f.code for f in findings if f.severity >= at_least}


def _timeout_rate(ctx):
    episodes = ctx.exploration.episodes
    return float((episodes["outcome"] == "timeout").mean())


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_drop_teaches_timeouts_and_penalty_does_not(seed):
    drop_ctx = explore(_make("envaudit/Helpdesk-v0"), probe="grpo", seed=seed, episodes=128,
                       timeout_handling="drop")
    drop = run(drop_ctx, only=("natural",))
    assert {"learned-exploit", "timeout-drop-incentive"} <= _codes(drop)
    learned = next(f for f in drop if f.code == "timeout-drop-incentive")
    baseline = _timeout_rate(drop_ctx)
    assert learned.evidence["timeout_before"] == pytest.approx(baseline)
    assert learned.evidence["timeout_after"] >= max(2 * baseline, baseline + MATERIAL_RATE)
    assert learned.evidence["source"] == "grpo" and learned.evidence["p_value"] < 0.05
    penalty_ctx = explore(_make("envaudit/Helpdesk-v0"), probe="grpo", seed=seed, episodes=128,
                          timeout_handling="penalty")
    penalty = run(penalty_ctx, only=("natural",))
    assert not _codes(penalty)
    curves = penalty_ctx.tables["curves"]
    assert curves["timeout_rate"].iloc[-5:].mean() <= _timeout_rate(penalty_ctx)


def test_costly_failures_teach_stopping_early_and_the_clean_twin_does_not():
    flawed_ctx = explore(_make("envaudit/FlakySearch-FailurePenalty-v0"), probe="grpo", episodes=128)
    flawed = run(flawed_ctx, only=("natural",))
    shortcut = next(f for f in flawed if f.code == "failure-shortcut")
    assert shortcut.severity >= Severity.WARN and shortcut.evidence["source"] == "grpo"
    assert shortcut.evidence["length_after"] < shortcut.evidence["length_before"]
    assert shortcut.evidence["failed_calls_after"] < shortcut.evidence["failed_calls_before"]
    # The env charges 0.5 per failed call; the regression recovers it.
    assert shortcut.evidence["failure_cost"]["cost_per_failure"] == pytest.approx(0.5, abs=0.15)
    clean = run(explore(_make("envaudit/FlakySearch-v0"), probe="grpo", episodes=128), only=("natural",))
    assert "failure-shortcut" not in {f.code for f in clean} and not _codes(clean)


def test_curves_table_has_one_row_per_iteration_with_the_behaviour_columns():
    ctx = explore(_make("envaudit/CodeFix-v0"), probe="grpo", episodes=32, quick=True)
    run(ctx, only=("natural",))
    curves = ctx.tables["curves"]
    assert {"iteration", "mode", "return", "training_reward", "success_rate", "timeout_rate", "failure_rate",
            "mean_length", "entropy", "kl", "mix:run_full_suite"} <= set(curves.columns)
    assert curves["iteration"].tolist() == list(range(len(curves))) and set(curves["mode"]) == {"natural"}
    assert ctx.kept and set(ctx.kept[0].episodes["probe"]) == {"grpo"}
    again = explore(_make("envaudit/CodeFix-v0"), probe="grpo", episodes=32, quick=True)
    run(again, only=("natural",))
    assert again.tables["curves"].equals(curves)  # same seed, same training


HONEST_CALLS = 5


def _gave_up(episodes):
    """Share of episodes that ended (not timed out) in fewer calls than the shortest honest resolution."""
    return float(((episodes["length"] < HONEST_CALLS) & (episodes["outcome"] != "timeout")).mean())


def _trained(ctx):
    episodes = ctx.kept[0].episodes
    return episodes[episodes["mode"] == "natural"]


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow),
                                  pytest.param(2, marks=pytest.mark.slow)])
def test_frequent_costly_failures_shorten_helpdesk_trajectories_and_the_clean_twin_does_not(seed):
    variant = VARIANTS["envaudit/Helpdesk-FailurePenalty-v0"]
    flawed_ctx = explore(_make(variant.id), probe="grpo", seed=seed, episodes=128)
    flawed = run(flawed_ctx, only=("natural",))
    shortcut = next(f for f in flawed if f.code == "failure-shortcut")
    assert shortcut.severity >= Severity.WARN and shortcut.evidence["source"] == "grpo"
    assert shortcut.evidence["length_after"] <= (1 - MATERIAL_LENGTH) * shortcut.evidence["length_before"]
    assert shortcut.evidence["failed_calls_after"] < shortcut.evidence["failed_calls_before"]
    assert shortcut.evidence["failure_cost"]["cost_per_failure"] == pytest.approx(
        variant.kwargs["failure_cost"], abs=0.15)
    before, after = flawed_ctx.exploration.episodes, _trained(flawed_ctx)
    # Closing at once is the best a return-maximiser can do here: most trained episodes give up.
    assert _gave_up(after) > max(0.5, _gave_up(before))
    assert "close_ticket" in shortcut.evidence["typical_trajectory"]

    clean_ctx = explore(_make(variant.clean_id), probe="grpo", seed=seed, episodes=128)
    clean = run(clean_ctx, only=("natural",))
    assert "failure-shortcut" not in {f.code for f in clean} and not _codes(clean)
    before, after = clean_ctx.exploration.episodes, _trained(clean_ctx)
    assert after["length"].mean() > (1 - MATERIAL_LENGTH) * before["length"].mean()
    assert _gave_up(after) <= _gave_up(before)
    assert (after["outcome"] == "success").mean() > (before["outcome"] == "success").mean()


class _Continuous(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (2,))
    action_space = gym.spaces.Box(-1, 1, (1,))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, True, False, {}


def test_an_action_space_it_cannot_drive_is_skipped_with_an_info_finding():
    findings = run(explore(_Continuous, probe="grpo", episodes=8))
    assert [(f.code, f.severity) for f in findings] == [("learned-exploit", Severity.INFO)]
    assert "drives a Discrete action space" in findings[0].summary and "got Box" in findings[0].summary
    vllm = run(explore(_make("envaudit/CodeFix-v0"), probe="grpo", episodes=8, engine="vllm"))
    assert "drives a Text action space, got Discrete" in vllm[0].summary


def test_probe_is_registered_to_run_last_with_the_largest_share():
    from envaudit.probe import registered_probes

    probes = registered_probes()
    assert probes["grpo"] is probe and list(probes)[-1] == "grpo"
    assert probe.weight == max(p.weight for p in probes.values())


@pytest.mark.slow
@pytest.mark.parametrize("env_id", sorted(VARIANTS))
def test_every_bundled_env(env_id):
    variant = VARIANTS[env_id]
    ctx = explore(_make(env_id), probe="grpo", episodes=256, budget_s=30.0)
    findings = list(probe.run(ctx))
    if variant.is_clean:
        assert not _codes(findings), [f.title for f in findings]
    elif variant.planted[0] in ("failure-shortcut", "timeout-rewarded", "reward-without-success"):
        assert variant.planted[0] in _codes(findings)
    assert ctx.notes["seconds"] <= 26
