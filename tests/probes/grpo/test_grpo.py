"""The grpo probe on bundled envs: the two lessons of issue 4, skips, and (slow) every variant.
The ladder on envs of this suite's own making (``tests/grpo/ladder_envs.py``) is at the end.

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

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import envaudit  # noqa: F401  (registers the bundled envs)
from envaudit.envs import VARIANTS
from envaudit.findings import Severity
from envaudit.probes.grpo import probe
from envaudit.probes.grpo.drift import MATERIAL_LENGTH, MATERIAL_RATE
from envaudit.probes.grpo.training import QUICK_EVAL_GROUPS, QUICK_ITERATIONS, run
from tests.fixtures.context import explore, only_finding
from tests.grpo.ladder_envs import Booking, Combination, DelayedAnswer, Sequence


def _make(env_id):
    return lambda: gym.make(env_id)


def _codes(findings, at_least=Severity.WARN):
    return {f.code for f in findings if f.severity >= at_least}


def _timeout_rate(ctx):
    episodes = ctx.exploration.episodes
    return float((episodes["outcome"] == "timeout").mean())


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_drop_teaches_timeouts_and_penalty_does_not(seed):
    drop_ctx = explore(_make("envaudit/Helpdesk-v0"), probe="grpo", seed=seed, episodes=128, quick=True,
                       timeout_handling="drop")
    drop = run(drop_ctx, only=("natural",))
    assert {"learned-exploit", "timeout-drop-incentive"} <= _codes(drop)
    assert {f.evidence["behaviour"] for f in drop} == {"timeout"}
    assert next(f for f in drop if f.code == "timeout-drop-incentive").evidence["reward_path"] == "pipeline"
    learned = next(f for f in drop if f.code == "timeout-drop-incentive")
    # Examples are timed-out episodes of the trained policy, each once.
    kept = drop_ctx.kept[0].episodes.set_index("episode_id")
    assert learned.examples and len(set(learned.examples)) == len(learned.examples)
    assert (kept.loc[learned.examples, "outcome"] == "timeout").all()
    baseline = _timeout_rate(drop_ctx)
    assert learned.evidence["timeout_before"] == pytest.approx(baseline)
    # The rise the finding claims is material by the probe's own rule (drift.MATERIAL_RATE).
    assert learned.evidence["timeout_after"] >= baseline + MATERIAL_RATE
    assert learned.evidence["source"] == "grpo" and learned.evidence["p_value"] < 0.05
    penalty_ctx = explore(_make("envaudit/Helpdesk-v0"), probe="grpo", seed=seed, episodes=128, quick=True,
                          timeout_handling="penalty")
    penalty = run(penalty_ctx, only=("natural",))
    assert not _codes(penalty)
    curves = penalty_ctx.tables["curves"]
    assert curves["timeout_rate"].iloc[-5:].mean() <= _timeout_rate(penalty_ctx)


def test_costly_failures_teach_stopping_early_and_the_clean_twin_does_not():
    flawed_ctx = explore(_make("envaudit/FlakySearch-FailurePenalty-v0"), probe="grpo", episodes=128, quick=True)
    flawed = run(flawed_ctx, only=("natural",))
    shortcut = next(f for f in flawed if f.code == "failure-shortcut")
    assert shortcut.severity >= Severity.WARN and shortcut.evidence["source"] == "grpo"
    assert shortcut.evidence["length_after"] < shortcut.evidence["length_before"]
    assert shortcut.evidence["failed_calls_after"] < shortcut.evidence["failed_calls_before"]
    # The env charges 0.5 per failed call; the regression recovers it.
    assert shortcut.evidence["failure_cost"]["cost_per_failure"] == pytest.approx(0.5, abs=0.15)
    clean = run(explore(_make("envaudit/FlakySearch-v0"), probe="grpo", episodes=128, quick=True), only=("natural",))
    assert "failure-shortcut" not in {f.code for f in clean} and not _codes(clean)


def test_farming_a_paying_call_to_the_step_limit_is_no_failure_shortcut():
    # Generated step-farming-1-4 (seed 1): run_tests pays 0.32 a call and never fails, get_weather
    # (the task's tool) fails 18% of the time; GRPO learns to call run_tests until the step limit
    # (length 1.7 -> 5, failed calls 0.08 -> 0). Its episodes run longer, not shorter: whatever a
    # failed call costs, that is farming (learned-exploit), not giving up on failures.
    from envaudit.config import ScanConfig
    from envaudit.families.envs import make_env
    from envaudit.families.generate import make_cases
    from envaudit.scan import run_scan

    spec = {c.name: c for c in make_cases(20, 20, seed=1)}["step-farming-1-4"].spec
    findings = run_scan(lambda: make_env(spec), ScanConfig(seed=1, quick=True, probes=("grpo",))).findings
    assert "failure-shortcut" not in {f.code for f in findings}
    farmed = next(f for f in findings if f.code == "learned-exploit")
    assert farmed.severity == Severity.FAIL and "call_run_tests" in farmed.summary


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
    flawed_ctx = explore(_make(variant.id), probe="grpo", seed=seed, episodes=128, quick=True)
    flawed = run(flawed_ctx, only=("natural",))
    shortcut = next(f for f in flawed if f.code == "failure-shortcut")
    assert shortcut.severity >= Severity.WARN and shortcut.evidence["source"] == "grpo"
    assert shortcut.evidence["behaviour"] == "quit" and shortcut.evidence["quit_vs_persist"]["holds"]
    assert shortcut.evidence["length_after"] <= (1 - MATERIAL_LENGTH) * shortcut.evidence["length_before"]
    assert shortcut.evidence["failed_calls_after"] < shortcut.evidence["failed_calls_before"]
    assert shortcut.evidence["failure_cost"]["cost_per_failure"] == pytest.approx(
        variant.kwargs["failure_cost"], abs=0.15)
    before, after = flawed_ctx.exploration.episodes, _trained(flawed_ctx)
    # Closing at once is the best a return-maximiser can do here: most trained episodes give up.
    assert _gave_up(after) > max(0.5, _gave_up(before))
    assert "close_ticket" in shortcut.evidence["typical_trajectory"]

    clean_ctx = explore(_make(variant.clean_id), probe="grpo", seed=seed, episodes=128, quick=True)
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
    ctx = explore(_make(env_id), probe="grpo", episodes=256, budget_s=300.0)
    findings = list(probe.run(ctx))
    if variant.is_clean:
        assert not _codes(findings), [f.title for f in findings]
    elif variant.planted[0] in ("failure-shortcut", "timeout-rewarded"):
        assert variant.planted[0] in _codes(findings)
    elif variant.planted[0] == "reward-without-success":
        # The same incentive (grouping contract): reached by the targeted search, or learned.
        assert "reward-without-success" in _codes(findings) or any(
            f.code == "learned-exploit" and f.severity == Severity.FAIL
            and f.evidence["behaviour"] == "degenerate-answer" for f in findings)
    # Every run did the work it was sized for: nothing was cut by the safety cap.
    assert all(r["stopped"] is None for r in ctx.notes["runs"].values())


# -- the revised ladder on envs of our own making (tests/grpo/ladder_envs.py) -------------------
def _flagged(findings):
    return [(f.code, str(f.severity), f.title) for f in findings if f.severity >= Severity.WARN]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_clean_step_cost_env_with_a_quit_action_raises_no_warning(seed):
    # Combination: every step costs 0.02 and nothing else costs anything; success pays about
    # 1 - 0.02 * steps, far more than quitting at once (-0.02). Whatever GRPO collapses to here is
    # a training fact (info), never an exploit and never failure-shortcut.
    ctx = explore(Combination, probe="grpo", seed=seed, episodes=128, quick=True)
    findings = run(ctx)
    assert not _flagged(findings)
    assert "failure-shortcut" not in {f.code for f in findings}
    for f in findings:
        if f.code == "learned-exploit" and f.evidence.get("verdict") == "exploration-collapse":
            assert f.evidence["behaviour"] == "exploration" and "not an exploit" in f.title
            # Its examples are episodes that ended without success, not honest successes.
            kept = ctx.kept[0].episodes.set_index("episode_id")
            assert (kept.loc[f.examples, "outcome"] != "success").all()


def test_delaying_success_is_length_bias_at_fail_and_the_clean_twin_is_silent():
    # DelayedAnswer pays 0.1 per wrong answer and 1 for the right one, which the observation shows:
    # succeeding after k wrong answers earns 1 + 0.1 k, more than succeeding at once (1).
    ctx = explore(DelayedAnswer, probe="grpo", episodes=128, quick=True)
    delay = only_finding([f for f in run(ctx) if f.code == "length-bias"], code="length-bias", probe="grpo")
    assert delay.severity == Severity.FAIL and delay.evidence["behaviour"] == "delay-success"
    test = delay.evidence["delayed_vs_fastest"]
    # Per extra step a delayed success earns the format score (0.1) more than the fastest one.
    assert test["diff"] == pytest.approx(0.1 * delay.evidence["extra_steps"], rel=0.25)
    assert delay.evidence["fastest_success"] == {"length": 1, "return": 1.0}
    kept = pd.concat([r.episodes for r in ctx.kept], ignore_index=True).set_index("episode_id")
    shown = kept.loc[delay.examples]
    assert len(set(delay.examples)) == len(delay.examples) >= 1
    assert (shown["outcome"] == "success").all() and (shown["length"] > 1).all() and (shown["return"] > 1).all()
    clean = run(explore(lambda: DelayedAnswer(format_score=0.0), probe="grpo", episodes=128, quick=True))
    assert not _flagged(clean) and "length-bias" not in {f.code for f in clean}


@pytest.mark.parametrize("seed", range(4))
def test_a_hand_off_paid_after_a_failed_search_is_named_and_shown(seed):
    # Booking: handing off right after a failed search pays 1.3, otherwise 0; booking after a
    # search that worked pays 1. Searching until a search fails and then handing off out-earns
    # success (the ladder's fail), so a return-maximiser keeps the hand-off, and every hand-off it
    # keeps is paid only because the search failed. (At a hand-off pay of 0.8 retrying the search
    # earns more, ~0.96, so GRPO need not keep it; the failures probe owns that case by fault
    # injection: tests/probes/test_failures.py.)
    ctx = explore(lambda: Booking(handoff_pay=1.3), probe="grpo", episodes=128, quick=True, seed=seed)
    findings = run(ctx, only=("natural",))
    learned = only_finding([f for f in findings if f.code == "learned-exploit"], code="learned-exploit",
                           probe="grpo")
    assert learned.severity == Severity.FAIL and learned.evidence["verdict"] == "failure-conditioned"
    assert learned.evidence["behaviour"] == "tool-failure"
    assert "right after a failed tool call" in learned.summary
    # The summary never contradicts its evidence: a rise in success is said and explained.
    rose = learned.evidence["success_after"] > learned.evidence["success_before"]
    assert ("Success rose" in learned.summary) == rose
    # Every example ends with a hand-off right after a failed search, and none succeeded.
    steps = ctx.kept[0].steps
    for episode in learned.examples:
        last_two = steps[steps["episode_id"] == episode].sort_values("step").tail(2)
        assert last_two["tool_status"].tolist()[0] == "error" and last_two["action_label"].tolist()[-1] == "handoff"
    assert len(set(learned.examples)) == len(learned.examples) >= 1
    clean = run(explore(lambda: Booking(handoff_pay=0.0), probe="grpo", episodes=128, quick=True, seed=seed),
                only=("natural",))
    assert not _flagged(clean)


def test_a_three_call_sequence_among_eight_actions_is_found_and_the_clean_twin_is_silent():
    # Sequence: press_3, press_4, press_3 back to back ends the episode paying 1.5 with success
    # false; honest success pays 1 - 4 * 0.02. Random play (two of eight actions end the episode)
    # rarely meets the sequence; the timing-out search learns to keep pressing and meets it, and
    # the replay of what it met earns the sequence's pay every time: as much as success, a fail.
    ctx = explore(Sequence, probe="grpo", episodes=64, quick=True)
    findings = run(ctx, only=("target-timeout",))
    found = only_finding([f for f in findings if f.code == "reward-without-success"],
                         code="reward-without-success", probe="grpo")
    assert found.severity == Severity.FAIL and found.evidence["run"] == "replay-met"
    assert "`press_3`, `press_4`, `press_3`" in found.summary
    assert found.evidence["ladder"]["level"] == "at_least_success"
    # Every example is a replayed episode that ended on the sequence, paid it, and did not succeed.
    kept = pd.concat([r.episodes for r in ctx.kept], ignore_index=True).set_index("episode_id")
    shown = kept.loc[found.examples]
    assert len(set(found.examples)) == len(found.examples) >= 1
    assert (shown["outcome"] == "failure").all() and (shown["return"] >= 1.5 - 0.02 * 16).all()
    clean_ctx = explore(lambda: Sequence(sequence_pay=0.0), probe="grpo", episodes=64, quick=True)
    clean = run(clean_ctx, only=("target-timeout",))
    assert not _flagged(clean) and "reward-without-success" not in {f.code for f in clean}


def _busy(n):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def test_the_same_seed_gives_the_same_curves_and_findings_idle_or_under_load():
    # Booking's tools fail by the env's own seeded draws and have no wall-clock deadline, so any
    # difference between the two runs would be the probe's own (work sized by the clock). Every
    # run of the probe (natural, faults, targeted) takes part.
    def once():
        ctx = explore(Booking, probe="grpo", episodes=32, quick=True, timeout_handling="drop")
        findings = run(ctx)
        return ctx, [f.to_dict() for f in findings]

    idle_ctx, idle = once()
    hogs = _busy(2)
    try:
        loaded_ctx, loaded = once()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    pd.testing.assert_frame_equal(idle_ctx.tables["curves"], loaded_ctx.tables["curves"])
    pd.testing.assert_frame_equal(idle_ctx.tables["targets"], loaded_ctx.tables["targets"])
    assert idle == loaded
    runs = idle_ctx.notes["runs"]
    assert set(runs) == {"natural", "faults", "target-success", "target-timeout", "target-no_success"}
    # Work is what the config sizes, not what the clock allowed: every run its iterations, or fewer
    # where it stopped as barren, settled or decided (counted in rollouts, the same under load).
    for name, r in runs.items():
        limit = QUICK_ITERATIONS.get(name, QUICK_ITERATIONS["target"])
        assert r["iterations"] == limit or (r["barren"] or r["settled"] or r["decided"]) and r["iterations"] < limit
    assert any(r["settled"] for r in runs.values()) and any(r["decided"] for r in runs.values())
    played = {r["eval_episodes"] for r in runs.values() if r["evaluated_on"] == "eval seeds"}
    assert played == {QUICK_EVAL_GROUPS * idle_ctx.config.group_size}


def test_reaching_the_safety_cap_is_recorded_as_incomplete_not_as_fewer_findings():
    ctx = explore(Combination, probe="grpo", episodes=32, quick=True, budget_s=1e-9)
    assert run(ctx) == []
    gaps = ctx.skipped
    assert [g["probe"] for g in gaps] == ["grpo"] and "natural" in gaps[0]["skipped"]
    assert "safety cap" in gaps[0]["reason"]
