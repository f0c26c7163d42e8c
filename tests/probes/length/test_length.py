"""The length probe on envs whose per-step pay is known by construction.

In the plain fixtures every step pays ``step_reward`` and a success adds ``success_reward``, so
the return is exactly ``step_reward * length + success_reward * success`` (+ the truncation or
claim pay): the regression must recover ``step_reward`` as the length effect, and a stall that
never submits earns ``step_reward * max_steps``. CartPole pays 1 per step: return equals length.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envaudit  # noqa: F401 - registers the bundled envs
from envaudit.envs import VARIANTS
from envaudit.findings import Severity
from envaudit.probes.length import CODE, probe
from envaudit.stats import ols_bootstrap
from tests.fixtures.context import flagged, run_probe
from tests.fixtures.context import only_finding as _only_finding
from tests.fixtures.protocol_envs import FIXTURES, params


def only_finding(findings):
    return _only_finding(findings, code=CODE, probe="length")


@pytest.mark.parametrize("name", ["step_farming", "step_farming_small"])
def test_step_farming_is_caught_at_the_severity_its_numbers_give(name):
    p = params(name)
    f = only_finding(run_probe(probe, FIXTURES[name].make(), episodes=96)[0])
    # Every step pays step_reward, so a success submitted k steps later also earns k * step_reward
    # more: delaying success pays (fail by the ladder). One reward path, one finding: when farming
    # alone stays below success, the delay heads the finding and farming is its evidence.
    ev = f.evidence.get("farming", f.evidence)
    assert ev["length_effect"]["estimate"] == pytest.approx(p["step_reward"])
    # The best long strategy never submits: it is truncated at the step limit.
    assert ev["mean_strategy_length"] == p["max_steps"]
    assert ev["mean_strategy"] == pytest.approx(p["step_reward"] * p["max_steps"])
    # Its severity follows from the design: at least a success's return is a fail, else a warn.
    expected = Severity.FAIL if ev["mean_strategy"] >= ev["mean_success"] else Severity.WARN
    assert (name, expected) in {("step_farming", Severity.FAIL), ("step_farming_small", Severity.WARN)}
    delay = f.evidence if f.evidence["behaviour"] == "delay-success" else f.evidence.get("delay_success")
    assert delay is not None and delay["gain"] == pytest.approx(delay["k"] * p["step_reward"])
    assert f.severity == Severity.FAIL
    assert f.evidence["behaviour"] == ("stall" if expected == Severity.FAIL else "delay-success")
    assert ev["mean_strategy"] > ev["mean_failure"] and ev["p_value"] < 1e-6
    assert f.examples and "step" in f.fix


def test_a_step_cost_is_info_with_the_cost_in_words():
    f = only_finding(run_probe(probe, FIXTURES["step_cost"].make(), episodes=96)[0])
    assert f.severity == Severity.INFO
    assert f.evidence["length_effect"]["estimate"] == pytest.approx(params("step_cost")["step_reward"])
    assert f.evidence["typical_step_reward"] == params("step_cost")["step_reward"]
    assert f.summary == ("A typical step pays -0.01 (each extra step lowers the return by -0.01 on average, "
                         "larger penalties included), so shorter episodes earn more; fine if intended.")


def test_a_typical_step_cost_is_told_apart_from_rare_penalties():
    # Taxi: every move pays -1, an illegal pickup/dropoff -10; random play commits many of those.
    f = only_finding(run_probe(probe, lambda: gym.make("Taxi-v4"), episodes=32)[0])
    assert f.severity == Severity.INFO and f.evidence["typical_step_reward"] == -1.0
    assert f.evidence["length_effect"]["estimate"] < -1.0
    assert f.summary.startswith("A typical step pays -1 ")


@pytest.mark.parametrize("name", ["clean", "truncation_pays", "truncation_pays_full", "tool_timeout_pays",
                                  "tool_timeout_ends", "claim_pays", "claim_free", "flaky", "error_pays",
                                  "no_success_flag"])
def test_no_warning_without_per_step_pay(name):
    assert flagged(run_probe(probe, FIXTURES[name].make(), episodes=96)[0]) == []


def test_cartpole_return_equals_length():
    f = only_finding(run_probe(probe, lambda: gym.make("CartPole-v1"), episodes=32)[0])
    assert f.severity == Severity.INFO
    assert f.evidence["reward_per_step"] == 1.0
    assert "return equals length; if that is intended, ignore" in f.summary


def test_same_seed_same_finding():
    make = FIXTURES["step_farming_small"].make()
    a = run_probe(probe, make, episodes=48, seed=5)[0]
    b = run_probe(probe, make, episodes=48, seed=5)[0]
    assert [f.to_dict() for f in a] == [f.to_dict() for f in b]


MINE = [v for v in VARIANTS.values() if CODE in v.planted]
CLEAN = [v for v in VARIANTS.values() if v.is_clean]


@pytest.mark.parametrize("variant", MINE, ids=lambda v: v.id)
def test_bundled_variant_planting_length_bias_is_caught(variant):
    f = only_finding(run_probe(probe, lambda: gym.make(variant.id), episodes=96)[0])
    assert str(f.severity) == variant.severity


@pytest.mark.parametrize("variant", CLEAN, ids=lambda v: v.id)
def test_bundled_clean_env_is_quiet(variant):
    assert flagged(run_probe(probe, lambda: gym.make(variant.id), episodes=96)[0]) == []


def test_regression_recovers_known_coefficients_and_drops_what_it_cannot_tell_apart():
    rng = np.random.default_rng(0)
    n = 300
    length = rng.integers(1, 20, n).astype(float)
    success = rng.integers(0, 2, n).astype(float)
    y = 0.25 * length + 2.0 * success + rng.normal(0, 0.1, n)
    fit = ols_bootstrap(y, {"length": length, "success": success, "constant": np.ones(n), "copy": length},
                        np.random.default_rng(1), n_boot=300)
    assert fit["dropped"] == ["constant", "copy"]
    lo, hi = fit["coef"]["length"]["ci"]
    assert lo < 0.25 < hi and hi - lo < 0.02
    assert fit["coef"]["success"]["estimate"] == pytest.approx(2.0, abs=0.05)
    assert fit["coef"]["length"]["p_value"] < 1e-10 and fit["r2"] > 0.99
    exact = ols_bootstrap(3 * length, {"length": length, "success": success}, rng, n_boot=0)
    assert exact["coef"]["length"]["estimate"] == pytest.approx(3.0)
    assert exact["coef"]["length"]["p_value"] == 0.0 and exact["coef"]["success"]["p_value"] == 1.0
    assert exact["coef"]["length"]["ci"] is None


def test_env_that_random_play_never_finishes_is_said_so():
    class Endless(gym.Env):
        observation_space = gym.spaces.Discrete(1)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return 0, {}

        def step(self, action):
            return 0, -float(action), False, False, {}

    f = only_finding(run_probe(probe, lambda: gym.wrappers.TimeLimit(Endless(), 20), episodes=16)[0])
    assert f.severity == Severity.INFO and f.evidence["length"] == 20 and f.evidence["n"] == 16
    assert "random play never finishes this env" in f.summary


def test_a_brevity_bonus_hidden_in_the_overall_slope_is_caught():
    """Generated brevity-bonus envs: 'give_up' at step t pays amount * (1 - (t - 1) / max_steps),
    with amount above success's pay, so quitting at once out-earns succeeding; mixed with the other
    endings of random play the overall length slope is not significant. Recall over the first 8
    instances: all 8 (6 before the paired replays of ``fading``: in 64 random episodes, where partial
    credit rides on the later quits, instance 3's fading did not show), and their clean twins (the
    same spec with no flaw) give no warn/fail."""
    from dataclasses import replace

    from envaudit.families.envs import make_env
    from envaudit.families.generate import flawed_case

    caught = 0
    for index in range(8):
        spec = flawed_case(0, index, "brevity-bonus").spec
        findings, ctx = run_probe(probe, lambda spec=spec: make_env(spec), episodes=64)
        twin = replace(spec, flaw=None)
        assert flagged(run_probe(probe, lambda twin=twin: make_env(twin), episodes=64)[0]) == []
        if not flagged(findings):
            continue
        f = only_finding(findings)
        assert f.severity == Severity.FAIL and f.evidence["behaviour"] == "quit"
        assert f.evidence["policy"] == "repeat 'give_up'"
        # Quitting at once (t = 1) is paid the whole bonus, above every honest success's return.
        assert f.evidence["mean_strategy"] == pytest.approx(spec.flaw.amount - spec.step_cost)
        assert f.evidence["mean_strategy"] > f.evidence["mean_success"]
        caught += 1
        if index == 3:  # exploration alone does not show this one's bonus fading: the replays do
            assert ctx.notes["fading"]["give_up"]["fades"]
    assert caught == 8


def test_an_ending_that_pays_the_same_whenever_taken_is_no_brevity_bonus():
    # 'claim' pays 1.0 with success=False at whatever step it is taken: reward without success
    # (the intent probe's), not a length effect.
    assert flagged(run_probe(probe, FIXTURES["claim_pays"].make(), episodes=96)[0]) == []
