"""The api probe on deliberately broken envs and their clean twins.

Expected counts come from the fixtures' design: every ``Walk`` episode reaches step ``BREAK_AT``
(the goal is further away than that), so a defect planted at that step shows up exactly once per
episode, in the exploration and in the probe's own rollouts alike.
"""

from __future__ import annotations

import itertools
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest

from envaudit.config import ScanConfig
from envaudit.probe import HUNG_NOTE, ProbeContext, ProbeInputs, ScanShared, registered_probes
from envaudit.probes.api import probe
from envaudit.recording import Recorder
from tests.fixtures import broken_envs as b
from tests.fixtures.context import run_probe, sweep

SMALL = {"episodes": 16, "group_size": 4, "step_timeout_s": 1.0}


def scan(make_env, **options):
    findings, ctx = run_probe(probe, make_env, **{**SMALL, **options})
    return findings, ctx


def by_title(findings):
    return {f.title: f for f in findings}


def serious(findings):
    return [f for f in findings if f.severity >= 2]


def test_registered_first_with_its_code():
    registered = registered_probes(["api"])["api"]
    assert registered is probe
    assert probe.order == 10 and probe.codes == ("env-error", "non-replayable")


@pytest.mark.parametrize("make_env", [
    b.Walk, b.DictWalk, b.BoxActionWalk, b.PingTools,
    lambda: gym.make("CartPole-v1"), lambda: gym.make("FrozenLake-v1"),
    lambda: gym.make("envaudit/FlakySearch-v0"), lambda: gym.make("envaudit/CodeFix-v0"),
    lambda: gym.make("envaudit/Helpdesk-v0"),
], ids=["walk", "dict-obs", "box-action", "tool-env", "cartpole", "frozenlake",
        "flaky-search", "code-fix", "helpdesk"])
def test_clean_envs_get_no_warn_or_fail(make_env):
    findings, ctx = scan(make_env)
    assert serious(findings) == [], [f.summary for f in findings]
    assert "skipped" not in ctx.notes and "check_env" not in ctx.notes


def test_step_that_raises_is_a_fail_once_per_episode():
    findings, _ = scan(b.RaisesAfter)
    f = by_title(findings)["step() raises an exception"]
    assert f.severity == 3 and f.code == "env-error"
    ev = f.evidence
    assert ev["first_step"] == b.BREAK_AT
    assert ev["first_message"] == "RuntimeError: backend connection lost"
    assert ev["count"] == ev["episodes_checked"]  # each episode raises once, at BREAK_AT
    assert set(ev["by_source"]) == {"exploration", "api rollouts"}
    assert f.examples, "exploration episodes that raised are cited"
    assert f"step {b.BREAK_AT}: RuntimeError: backend connection lost" in f.summary
    assert "Catch the failure inside step()" in f.fix and "most likely" in f.fix
    assert [g.title for g in serious(findings)] == ["step() raises an exception"]


def test_nan_reward_is_a_fail_at_the_step_it_happens():
    findings, _ = scan(b.NanReward)
    f = by_title(findings)["Reward is NaN or inf"]
    assert f.severity == 3
    assert f.evidence["first_step"] == b.BREAK_AT and f.evidence["first_message"] == "reward nan"
    assert f.evidence["count"] == f.evidence["episodes_checked"]
    assert "most likely a division by zero" in f.fix
    assert len(serious(findings)) == 1


def test_inf_observation_is_a_fail_found_by_the_probes_own_rollouts():
    findings, ctx = scan(b.InfObservation)
    f = by_title(findings)["Observation contains NaN or inf"]
    assert f.severity == 3 and f.evidence["first_step"] == b.BREAK_AT
    # Exploration records no observations: every occurrence comes from the rollouts, one per episode.
    assert f.evidence["by_source"] == {"api rollouts": ScanConfig().scaled(8)}
    assert len(serious(findings)) == 1


def test_observation_outside_its_space_is_a_warn():
    findings, _ = scan(b.OutsideSpace)
    f = by_title(findings)["Observation outside observation_space"]
    assert f.severity == 2 and f.evidence["first_step"] == b.BREAK_AT
    assert "is not in Box(-20.0, 20.0, (2,), float64)" in f.evidence["first_message"]
    assert [g.severity for g in findings] == [2]


def test_hanging_step_is_a_fail_and_costs_one_deadline():
    start = time.monotonic()
    findings, ctx = scan(b.SleepsForever, step_timeout_s=0.2)
    assert time.monotonic() - start < 3.0
    f = by_title(findings)["step() hangs"]
    assert f.severity == 3 and f.evidence["first_step"] == b.BREAK_AT
    assert "did not return in time (0.2 s deadline)" in f.summary
    assert "Put a deadline on every blocking call inside step()" in f.fix
    assert ctx.notes[HUNG_NOTE].startswith("own rollouts and check_env skipped: the env already hung")


def test_hang_the_exploration_missed_is_found_by_the_rollouts():
    cfg = ScanConfig(seed=1, episodes=4, group_size=2, step_timeout_s=0.2)
    ctx = ProbeContext(ProbeInputs("sleeper", b.SleepsForever, cfg, Recorder().records(), [],
                                   cfg.rollout_pipeline(), "api"),
                       ScanShared(deadline=time.monotonic() + 30, ids=itertools.count()))
    start = time.monotonic()
    findings = probe.run(ctx)
    assert time.monotonic() - start < 2.0  # one deadline, then the env is left alone
    f = by_title(findings)["step() hangs"]
    assert f.evidence["by_source"] == {"api rollouts": 1}
    assert [h.where for h in ctx.hangs] == ["step"]  # later probes know not to step it


def test_non_bool_terminated_is_a_warn_not_a_fail():
    findings, _ = scan(b.NonBoolTerminated)
    f = by_title(findings)["terminated/truncated are not bools"]
    assert f.severity == 2
    assert f.evidence["first_message"] == "terminated is int 0; truncated is int 0"
    assert "Return Python bools" in f.fix
    assert all(g.severity < 3 for g in findings)


def test_info_that_is_not_a_dict_is_one_fail():
    findings, _ = scan(b.InfoNotDict)
    titles = by_title(findings)
    assert titles["info is not a dict"].severity == 3
    assert titles["info is not a dict"].evidence["first_message"] == "info is a list"
    # The recorder's AttributeError on the same info is not reported as a second defect.
    assert "step() raises an exception" not in titles


def test_unknown_tool_status_is_a_warn():
    findings, _ = scan(b.BadToolStatus)
    f = by_title(findings)["Malformed info['tool']"]
    assert f.severity == 2
    assert f.evidence["first_message"] == "unknown tool status 'crashed'"
    assert f.evidence["count"] == f.evidence["episodes_checked"]
    assert "'status': 'ok' | 'error' | 'timeout'" in f.fix


def test_old_reset_api_is_a_fail():
    findings, _ = scan(b.OldResetApi)
    titles = by_title(findings)
    assert titles["reset() or step() returns the wrong shape"].severity == 3
    assert "reset() returned ndarray" in titles["reset() or step() returns the wrong shape"].evidence["first_message"]
    checker = titles["Gymnasium's env checker rejects the env"]
    assert "was not a tuple of the form `(obs, info)`" in checker.summary


def test_checker_determinism_failure_is_a_non_replayable_warn_that_points_to_the_replay_probe():
    findings, _ = scan(b.PythonRandom)
    f = by_title(findings)[NOT_REPLAYED]
    assert f.severity == 2 and "not equivalent" in f.summary
    # Same seed and action, another observation: the catalogue's non-replayable, not an API defect.
    assert f.code == "non-replayable" and f.evidence["behaviour"] == "non-replayable"
    assert "the replay probe shows where replays diverge" in f.fix
    assert all(g.severity < 3 for g in findings)
    assert [g.code for g in serious(findings)] == ["non-replayable"]


NOT_REPLAYED = "Same seed and action, another result under Gymnasium's env checker"
_BACKENDS = itertools.count()  # process-wide, as a load balancer's rotation is


class AlternatingBackend(gym.Env):
    """A lookup tool served by two backends in turn; the slow one draws its latency from np_random.

    Flawed (``shared=True``): the backend rotates process-wide, like a load balancer outside the
    env, so which one serves a call does not follow the seed, and with it how far the env's random
    stream has moved when the next call's failure (30%) is drawn: replaying a seed with the same
    actions gives other failures, hence other observations and rewards. The first step's
    observation is the same either way (only the generator's state differs), which is what
    ``check_env``'s "np_random not updated" check sees. Clean twin: the backend is drawn from
    np_random, so everything follows the seed.
    """

    LENGTH = 7  # odd: consecutive episodes start on different backends

    def __init__(self, shared: bool = True) -> None:
        self.shared = shared
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        slow = next(_BACKENDS) % 2 if self.shared else int(self.np_random.integers(2))
        latency = float(self.np_random.uniform(0.5, 1.0)) if slow else 0.05
        failed = bool(self.np_random.random() < 0.3) if self.t else False
        self.t += 1
        obs = np.array([self.t / self.LENGTH, float(failed)], np.float32)
        info = {"tool": {"name": "lookup", "status": "error" if failed else "ok", "latency_s": latency}}
        return obs, 0.0 if failed else 0.1, self.t >= self.LENGTH, False, info


def test_a_random_stream_that_does_not_follow_the_seed_is_non_replayable_not_an_api_error():
    findings, _ = scan(AlternatingBackend)
    (f,) = serious(findings)
    assert (f.code, f.severity, f.title) == ("non-replayable", 2, NOT_REPLAYED)
    assert "np_random` is not properly been updated after step" in f.summary
    assert f.evidence["behaviour"] == "non-replayable"
    assert serious(scan(lambda: AlternatingBackend(shared=False))[0]) == []


def test_the_checker_and_the_replay_probe_make_one_group():
    from envaudit.scan import run_scan

    config = ScanConfig(seed=0, quick=True, probes=("api", "replay"), fail_on="never")
    groups = [g for g in run_scan(AlternatingBackend, config).finding_groups() if g.severity >= 2]
    assert [(g.code, g.behaviour) for g in groups] == [("non-replayable", "non-replayable")]
    assert {(f.probe, f.code) for f in groups[0].members} == {("api", "non-replayable"),
                                                              ("replay", "non-replayable")}
    clean = run_scan(lambda: AlternatingBackend(shared=False), config).finding_groups()
    assert [g for g in clean if g.severity >= 2] == []


def test_wall_clock_in_info_is_only_info():
    findings, _ = scan(b.ClockInInfo)
    f = by_title(findings)["Gymnasium's env checker reports a defect"]
    assert f.severity == 1 and "Deterministic step info are not equivalent" in f.summary
    assert "info carries wall-clock values" in f.fix
    assert serious(findings) == []


def test_checker_warnings_are_info_and_leave_the_warning_filters_alone():
    before = list(warnings.filters)
    findings, _ = scan(lambda: gym.make("CartPole-v1"))
    assert list(warnings.filters) == before
    f = by_title(findings)["Gymnasium's env checker warns"]
    assert f.severity == 1
    assert "A Box observation space minimum value is -infinity. This is probably too low." in f.evidence["warnings"]
    assert not any("unwrapped" in w for w in f.evidence["warnings"])


def test_no_time_left_skips_check_env_but_keeps_the_cheap_checks():
    findings, ctx = scan(b.RaisesAfter, budget_s=0.0)
    assert ctx.notes["check_env"] == "skipped: the scan's wall-clock safety cap was reached"
    assert {g["skipped"] for g in ctx.skipped} >= {"Gymnasium's check_env"}
    assert by_title(findings)["step() raises an exception"].evidence["by_source"] == {"exploration": 16}


def test_same_seed_same_findings():
    first = [f.to_dict() for f in scan(b.NanReward, seed=5)[0]]
    second = [f.to_dict() for f in scan(b.NanReward, seed=5)[0]]
    assert first == second


# -- rates over exploration seeds -----------------------------------------------------------------
# Each defect sits at a fixed step that every episode reaches, and the api probe's checks are not
# statistical: whatever the exploration seed, every broken env must give exactly the findings its
# defect causes (8/8), and every clean twin none at all (pooled, 0 of 32 runs bounds the
# false-alarm rate below 3/32 = 9.4% at 95% confidence).
BROKEN_SWEEP = {
    "raises": (b.RaisesAfter, [("fail", "step() raises an exception")]),
    "nan-reward": (b.NanReward, [("fail", "Reward is NaN or inf")]),
    # Its Box is unbounded (to admit the inf), which Gymnasium's checker warns about.
    "inf-observation": (b.InfObservation, [("fail", "Observation contains NaN or inf"),
                                           ("info", "Gymnasium's env checker warns")]),
    "outside-space": (b.OutsideSpace, [("warn", "Observation outside observation_space")]),
    # The checker warns about the int flags too, and then stops on an episode it misreads as ended.
    "non-bool-terminated": (b.NonBoolTerminated, [("warn", "terminated/truncated are not bools"),
                                                  ("info", "Gymnasium's env checker warns"),
                                                  ("warn", "Gymnasium's env checker reports a defect")]),
    "info-not-dict": (b.InfoNotDict, [("fail", "info is not a dict"),
                                      ("fail", "Gymnasium's env checker rejects the env")]),
    "bad-tool-status": (b.BadToolStatus, [("warn", "Malformed info['tool']")]),
    "old-reset-api": (b.OldResetApi, [("fail", "reset() or step() returns the wrong shape"),
                                      ("fail", "Gymnasium's env checker rejects the env")]),
    # Benign: a wall-clock value in info fails only the checker's determinism check, at info.
    "clock-in-info": (b.ClockInInfo, [("info", "Gymnasium's env checker reports a defect")]),
    "walk": (b.Walk, []),
    "dict-obs": (b.DictWalk, []),
    "box-action": (b.BoxActionWalk, []),
    "tool-env": (b.PingTools, []),
}


@pytest.mark.parametrize("name", sorted(BROKEN_SWEEP))
def test_exactly_the_designed_findings_at_every_seed(name):
    make, expected = BROKEN_SWEEP[name]
    per_seed = sweep(probe, make, **{**SMALL, "quick": True})
    design = sorted(("env-error", sev, "api", title) for sev, title in expected)
    off = {seed: found for seed, fs in per_seed.items()
           if (found := sorted((f.code, str(f.severity), f.probe, f.title) for f in fs)) != design}
    assert off == {}, f"{name}: expected {design}"


class NanFromTheFirstStep(gym.Env):
    """Seeded and replayable, but every reward is NaN: check_env's two same-seed runs compare
    unequal only because NaN equals nothing."""

    observation_space = gym.spaces.Discrete(4)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return int(self.np_random.integers(4)), {}

    def step(self, action):
        self.t += 1
        return int(self.np_random.integers(4)), float("nan"), False, self.t >= 5, {}


def test_nan_rewards_are_an_env_error_not_a_replay_failure():
    findings, _ = scan(NanFromTheFirstStep)
    assert {f.code for f in serious(findings)} == {"env-error"}  # the checker's defect included
    assert "Reward is NaN or inf" in by_title(findings)
