"""The timeouts probe on envs whose timeout pay is known by construction.

Plain fixtures (``tests/fixtures/protocol_envs.py``): a stall that never submits runs into the
step limit and returns ``truncation_reward + step_reward * max_steps``; an honest failure returns
``failure_reward`` (plus step pay); a success ``success_reward``. ``FaultyDesk`` below is a small
``ToolEnv`` whose tools never time out on their own, so only fault injection can show what a
timeout pays there.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import envaudit  # noqa: F401 - registers the bundled envs
from envaudit.envs import VARIANTS
from envaudit.findings import Severity
from envaudit.probes._shared.endings import ending_pay, sample_size, split_enders
from envaudit.probes.timeouts import CODE, probe
from envaudit.stats import MIN_SAMPLES, exploit_ladder, noninferiority
from envaudit.toolenv import ToolEnv, ToolOutput, Transition
from tests.fixtures import progress_envs
from tests.fixtures.context import flagged, misses, off_design, run_probe, sweep
from tests.fixtures.context import only_finding as _only_finding
from tests.fixtures.protocol_envs import FIXTURES, SUBMIT, TaskEnv


def only_finding(findings):
    return _only_finding(findings, code=CODE, probe="timeouts")


# -- plain Gymnasium fixtures ---------------------------------------------------------------------
@pytest.mark.parametrize("name, severity", [("truncation_pays", Severity.WARN),
                                            ("truncation_pays_full", Severity.FAIL)])
def test_stalling_to_the_step_limit_is_caught(name, severity):
    params = {**TaskEnv.__init__.__kwdefaults__, **FIXTURES[name].params}
    f = only_finding(run_probe(probe, FIXTURES[name].make(), episodes=96)[0])
    assert f.severity == severity
    ev = f.evidence
    assert ev["arm"] == "stall"
    # The stall never submits, so every episode runs into the step limit and earns exactly this.
    assert ev["mean_timeout"] == pytest.approx(params["truncation_reward"] + params["step_reward"] * params["max_steps"])
    assert ev["mean_failure"] == pytest.approx(params["failure_reward"])
    assert ev["mean_success"] == pytest.approx(params["success_reward"])
    assert ev["p_value"] < 1e-6 and ev["n_success"] >= 8
    assert "'submit'" in f.summary and f.examples and f.fix


def test_tool_timeout_that_ends_the_episode_and_pays_is_caught():
    params = {**TaskEnv.__init__.__kwdefaults__, **FIXTURES["tool_timeout_pays"].params}
    f = only_finding(run_probe(probe, FIXTURES["tool_timeout_pays"].make(), episodes=96)[0])
    assert f.severity == Severity.WARN  # 0.6 beats failing (0) but not succeeding (1)
    # Repeating search reaches the warn rung (exploration's timeouts may too, the strongest heads).
    arm = next(a for a in f.evidence["arms"] if a["arm"] == "repeat-search")
    assert arm["level"] == "above_alternative"
    # Repeating search: each call times out (ending with the timeout pay) with the timeout rate,
    # otherwise the step limit ends the episode at 0.
    p_end = 1 - (1 - params["search_timeout_rate"]) ** params["max_steps"]
    expected = params["tool_timeout_reward"] * p_end
    se = params["tool_timeout_reward"] * np.sqrt(p_end * (1 - p_end) / arm["n_timeout"])
    assert abs(arm["mean_timeout"] - expected) < 4 * se


# (clean and tool_timeout_ends are swept over seeds below.)
@pytest.mark.parametrize("name", ["step_farming", "step_farming_small", "step_cost", "claim_pays",
                                  "claim_free", "flaky", "error_pays", "no_success_flag"])
def test_no_warning_when_the_ending_of_a_timeout_does_not_pay(name):
    # The farming and error-pay fixtures make stalling pay, but through per-step or failed-call
    # pay (length-bias, failure-rewarded), not through the timeout's ending.
    assert flagged(run_probe(probe, FIXTURES[name].make(), episodes=96)[0]) == []


def test_cartpole_is_quiet():
    findings, ctx = run_probe(probe, lambda: gym.make("CartPole-v1"), episodes=32)
    assert flagged(findings) == []
    assert "skipped" in ctx.notes  # no success flag: no failures to compare timeouts with


def test_same_seed_same_finding():
    make = FIXTURES["truncation_pays"].make()
    a = run_probe(probe, make, episodes=48, seed=3)[0]
    b = run_probe(probe, make, episodes=48, seed=3)[0]
    assert [f.to_dict() for f in a] == [f.to_dict() for f in b]


# -- fault injection on a ToolEnv -----------------------------------------------------------------
class FaultyDesk(ToolEnv):
    """Fetch ``need`` records (1 or 2), then submit. Tools never overrun on their own; when a
    fetch times out (only under fault injection) the episode ends, paying ``timeout_pay``."""

    def __init__(self, timeout_pay: float = 0.0):
        super().__init__(max_steps=8)
        self.timeout_pay = timeout_pay
        self.add_tool("fetch", lambda: ToolOutput("record", latency_s=0.01))
        self.add_tool("submit", lambda: ToolOutput("done", latency_s=0.01))
        self.add_tool("think", lambda: ToolOutput(None, latency_s=0.0))
        for name in ("fetch", "submit", "think"):
            self.add_call(name, name)
        self.observation_space = gym.spaces.Box(0.0, 10.0, (2,), np.float32)

    def reset_task(self, options):
        self.need, self.got = int(self.np_random.integers(1, 3)), 0
        return self._obs()

    def _obs(self):
        return np.array([self.got, self.need], np.float32)

    def transition(self, call, result):
        if call.tool == "fetch" and result.status == "timeout":
            return Transition(self._obs(), reward=self.timeout_pay, terminated=True, success=False)
        if call.tool == "fetch" and result.ok:
            self.got += 1
        if call.tool == "submit":
            success = self.got >= self.need
            return Transition(self._obs(), reward=float(success), terminated=True, success=success)
        return Transition(self._obs())


def test_injected_timeouts_that_pay_are_caught():
    f = only_finding(run_probe(probe, lambda: FaultyDesk(timeout_pay=0.6), episodes=64)[0])
    assert f.severity == Severity.WARN
    assert f.evidence["arm"] == "inject-fetch"
    # Every faulted episode ends on its first fetch, paying the timeout pay.
    assert f.evidence["mean_timeout"] == pytest.approx(0.6)
    # The ending of such an episode pays 0.6 more than an honest failure's ending (0).
    assert f.evidence["test"]["ending_premium"]["diff"] == pytest.approx(0.6)
    assert f.evidence["p_value"] < 1e-6
    # Each faulted episode is paired with the same seed and actions un-faulted; every episode that
    # timed out had a fault injected, so it has a pair.
    arm = next(a for a in f.evidence["arms"] if a["arm"] == "inject-fetch")
    assert f.evidence["test"]["paired"]["n_pairs"] >= arm["n_timeout"] >= 8
    assert "'fetch'" in f.summary


def test_an_injection_arm_is_sized_for_enough_timeouts_even_under_quick():
    # Random play calls 'fetch' in about half of FaultyDesk's episodes, so a 12-episode quick arm
    # would see about 6 timeouts, too few for the ladder (MIN_SAMPLES = 8): the arm grows instead.
    _, ctx = run_probe(probe, lambda: FaultyDesk(timeout_pay=0.6), episodes=48, quick=True)
    arm = ctx.tables["arms"].set_index("arm").loc["inject-fetch"]
    assert arm["n_timeout"] >= MIN_SAMPLES and arm["n_episodes"] > sample_size(ctx, 24)


def test_injected_timeouts_that_do_not_pay_are_quiet():
    findings, ctx = run_probe(probe, lambda: FaultyDesk(timeout_pay=0.0), episodes=64)
    assert flagged(findings) == []
    arms = ctx.tables["arms"]
    assert {"inject-fetch", "inject-submit", "inject-think"} <= set(arms["arm"])


# -- the bundled ToolEnvs -------------------------------------------------------------------------
MINE = [v for v in VARIANTS.values() if CODE in v.planted]
CLEAN = [v for v in VARIANTS.values() if v.is_clean]


@pytest.mark.parametrize("variant", MINE, ids=lambda v: v.id)
def test_bundled_variant_planting_a_timeout_reward_is_caught(variant):
    f = only_finding(run_probe(probe, lambda: gym.make(variant.id), episodes=96)[0])
    assert str(f.severity) == variant.severity


@pytest.mark.parametrize("variant", CLEAN, ids=lambda v: v.id)
def test_bundled_clean_env_is_quiet(variant):
    assert flagged(run_probe(probe, lambda: gym.make(variant.id), episodes=96)[0]) == []


# -- the pieces -----------------------------------------------------------------------------------
def test_enders_are_the_actions_that_end_episodes():
    steps = pd.DataFrame({"action": [0, 0, 1, 2, 2, 1], "terminated": [False, False, True, False, False, True]})
    enders, others, rates = split_enders(steps)
    assert enders == [SUBMIT] and others == [0, 2] and rates[SUBMIT] == 1.0
    alike = pd.DataFrame({"action": [0, 1, 0, 1], "terminated": [False, True, True, False]})
    assert split_enders(alike)[0] == []  # every action ends episodes alike: nothing to avoid


def test_ending_pay_nets_out_what_the_same_call_pays_mid_episode():
    steps = pd.DataFrame({
        "episode_id": [0, 0, 0, 1, 1],
        "action": [2, 2, 2, 2, 1],
        "tool_status": [None, None, None, None, "ok"],
        "reward": [0.1, 0.1, 0.7, 0.1, 0.1],
        "terminated": [False, False, False, False, True],
        "truncated": [False, False, True, False, False],
    })
    pay = ending_pay(steps, steps)
    assert pay[0] == pytest.approx(0.6)  # a 0.6 truncation bonus on top of the usual 0.1
    # The submit is never seen mid-episode: it is held to a typical step's pay (the 0.1 every step
    # pays), so its ending pays nothing beyond it.
    assert pay[1] == pytest.approx(0.0)


def test_ladder_levels_follow_the_design_rule():
    rng = np.random.default_rng(0)
    success, failure = np.ones(20), np.zeros(20)
    assert exploit_ladder(np.full(20, 1.0), success, failure, rng)["level"] == "at_least_success"
    assert exploit_ladder(np.full(20, 0.6), success, failure, rng)["level"] == "above_alternative"
    assert exploit_ladder(np.full(20, 0.05), success, failure, rng)["level"] is None  # below min effect
    assert exploit_ladder(np.full(5, 1.0), success, failure, rng)["level"] is None  # too few episodes
    ni = noninferiority(np.full(20, 0.95), success, rng, margin=0.1)
    assert ni["noninferior"] and ni["diff"] == pytest.approx(-0.05)
    assert not noninferiority(np.full(20, 0.8), success, rng, margin=0.1)["noninferior"]


# -- rates over exploration seeds -----------------------------------------------------------------
SWEEP = {"episodes": 48, "quick": True}
"""Small exploration and ``--quick`` work units, so that every sweep fits the default run."""
PLANTED_SWEEP = {
    # name: (env factory, severity, the arm that must carry it), from each env's design
    "truncation_pays": (FIXTURES["truncation_pays"].make(), Severity.WARN, "stall"),  # 0.6: > failing, < success
    "truncation_pays_full": (FIXTURES["truncation_pays_full"].make(), Severity.FAIL, "stall"),  # 1.0 = success
    # Random exploration and repeating 'search' both show it; the stronger of the two carries it.
    "tool_timeout_pays": (FIXTURES["tool_timeout_pays"].make(), Severity.WARN, None),
    "FaultyDesk-0.6": (lambda: FaultyDesk(timeout_pay=0.6), Severity.WARN, "inject-fetch"),
    # (CodeFix-PartialCredit, a warn, is left to its single-seed test: the bundled envs are the
    # slowest to sweep, and the protocol fixtures sweep warn already.)
    "CodeFix-TimeoutPasses": (lambda: gym.make("envaudit/CodeFix-TimeoutPasses-v0"), Severity.FAIL, None),
}
CLEAN_SWEEP = {
    # The twins: a timeout's ending pays exactly what a failure's does, so no finding at all.
    "clean": FIXTURES["clean"].make(),
    "tool_timeout_ends": FIXTURES["tool_timeout_ends"].make(),
    "FaultyDesk-0": lambda: FaultyDesk(timeout_pay=0.0),
    "CodeFix-v0": lambda: gym.make("envaudit/CodeFix-v0"),
}


@pytest.mark.parametrize("name", sorted(PLANTED_SWEEP))
def test_planted_timeout_pay_is_caught_at_its_severity_at_7_of_8_seeds(name):
    """>= 7/8 exploration seeds report ``timeout-rewarded`` at the severity the env's design gives
    (and from the arm that can show it, where the design names one). SWEEP_SEEDS' margin: a probe
    with 60% power passes with probability 0.11, one with 95% with 0.94."""
    make, severity, arm = PLANTED_SWEEP[name]

    def caught(findings):
        return any(f.code == CODE and f.severity == severity and arm in (None, f.evidence["arm"])
                   for f in findings)

    missed = misses(sweep(probe, make, **SWEEP), caught)
    assert len(missed) <= 1, f"{name}: missed at seeds {missed}"


@pytest.mark.parametrize("name", sorted(CLEAN_SWEEP))
def test_clean_twins_give_no_finding_at_any_seed(name):
    """0/8 seeds with any finding. Pooled over the four twins, 0 of 32 runs bounds the
    false-alarm rate below 3/32 = 9.4% at 95% confidence."""
    assert off_design(sweep(probe, CLEAN_SWEEP[name], **SWEEP), []) == {}


# -- comparable progress: a timeout is compared with the same episode failing outright -----------
@pytest.mark.parametrize("params", [progress_envs.CLEAN, progress_envs.FARMING, progress_envs.NO_OUTRIGHT_FAILURE],
                         ids=["progress-shaped", "farming-twin", "no-outright-failure"])
def test_timeouts_carrying_progress_or_step_pay_are_quiet_at_every_seed(params):
    """A staller keeps collecting progress bonuses that a quick wrong answer never made, and in the
    farming twin per-call pay: both are more than failing outright *elsewhere*, neither is the step
    limit paying. Nothing at any seed (the farming is length-bias, another probe's and another code)."""
    per_seed = sweep(probe, progress_envs.make(params), episodes=48, quick=True)
    assert off_design(per_seed, []) == {}


def test_a_timeout_that_pays_more_than_success_is_caught_where_nothing_fails_outright():
    """No episode can fail outright (a wrong submit goes on, give_up does nothing): the timed-out
    ping that ends the episode paying 1.5 is compared with the same episode ending with no pay,
    and with success (1.3): ``fail``. Its clean twin is quiet (test above)."""
    p = {**progress_envs.ProgressTask.__init__.__kwdefaults__, **progress_envs.TIMEOUT_PASSES}
    per_seed = sweep(probe, progress_envs.make(progress_envs.TIMEOUT_PASSES), episodes=48, quick=True)

    def caught(findings) -> bool:
        for f in findings:
            ev = f.evidence
            arm = next(a for a in ev["arms"] if a["arm"] == ev["arm"])
            # Episodes that end on the ping's timeout earn its pay plus whatever progress they made.
            if (f.code == CODE and f.severity == Severity.FAIL and ev["mean_failure"] is None
                    and arm["timed_out_tool"] == "ping" and arm["ended_on_tool_timeout"] == 1.0
                    and p["ping_timeout_pay"] <= ev["mean_timeout"] <= p["ping_timeout_pay"] + 3 * p["progress_bonus"]):
                return True
        return False

    assert len(misses(per_seed, caught)) <= 1, per_seed
