"""Scoring of scans: what counts as a hit, a false alarm, a tolerated side effect; rates and intervals."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from envaudit.families import flawed_case, make_cases
from envaudit.families.evaluate import CaseResult, Flag, Rate, check_env_verdict, summarise


def result(case, *flags: tuple[str, str], check_env: bool = False, headlines=()) -> CaseResult:
    return CaseResult(
        name=case.name, kind=case.kind, code=case.code, clean=case.is_clean,
        expected=tuple(sorted(case.expected)), tolerated=tuple(sorted(case.tolerated)),
        features=case.features(), flags=tuple(Flag(c, s, "probe", "summary") for c, s in flags),
        check_env_detected=check_env, check_env_message="", scan_seconds=0.0, headlines=tuple(headlines),
    )


CLEAN = make_cases(4, 0, seed=0)
FARMING = flawed_case(0, 0, kind="step-farming")
REPEAT = flawed_case(0, 1, kind="repeat-call-pays")


def test_a_flawed_env_is_hit_by_any_expected_code_and_a_filed_code_hit_is_counted_apart():
    r = result(REPEAT, ("reward-without-success", "fail"))
    assert r.hit and not r.primary_hit and not r.false_alarm
    r = result(REPEAT, ("exploit-policy", "warn"))
    assert r.hit and r.primary_hit


def test_side_effects_are_tolerated_and_other_codes_are_unexplained():
    r = result(FARMING, ("length-bias", "fail"), ("timeout-rewarded", "warn"), ("non-replayable", "warn"))
    assert r.hit
    assert [f.code for f in r.unexplained] == ["non-replayable"]
    assert result(FARMING, ("timeout-rewarded", "warn")).hit is False  # a side effect alone is no hit


def test_a_headline_hit_needs_a_loud_group_headed_by_an_expected_code():
    # Grouped under a reward-without-success headline, farming is found but not headlined as itself.
    r = result(FARMING, ("length-bias", "warn"), ("reward-without-success", "fail"),
               headlines=("reward-without-success",))
    assert r.hit and not r.headline_hit
    assert result(FARMING, ("length-bias", "fail"), headlines=("length-bias",)).headline_hit


def test_a_clean_env_with_any_warn_or_fail_is_a_false_alarm():
    assert result(CLEAN[0], ("exploit-policy", "warn")).false_alarm
    assert not result(CLEAN[1]).false_alarm


def test_summary_rates_per_code_and_false_alarms_with_wilson_intervals():
    rows = [result(CLEAN[0], ("length-bias", "warn")), result(CLEAN[1]), result(CLEAN[2]), result(CLEAN[3]),
            result(FARMING, ("length-bias", "fail")), result(REPEAT, check_env=True)]
    s = summarise(rows)
    assert (s.false_alarms.k, s.false_alarms.n) == (1, 4)
    assert (s.recall_by_code["length-bias"].k, s.recall_by_code["length-bias"].n) == (1, 1)
    assert (s.recall_by_code["exploit-policy"].k, s.recall_by_code["exploit-policy"].n) == (0, 1)
    assert (s.check_env_by_code["exploit-policy"].k, s.overall_recall.k, s.overall_recall.n) == (1, 1, 2)
    assert s.recall_by_code["env-error"].n == 0 and str(s.recall_by_code["env-error"]) == "-"
    # Wilson 95% for 1 of 4: (0.046, 0.699).
    assert s.false_alarms.low == pytest.approx(0.0456, abs=1e-3)
    assert s.false_alarms.high == pytest.approx(0.6994, abs=1e-3)
    assert Rate(0, 10).low == 0.0 and Rate(10, 10).high == 1.0


class _NanReward(gym.Env):
    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), float("nan"), False, False, {}


def test_check_env_flags_a_broken_env_and_passes_clean_generated_ones():
    for case in CLEAN:
        assert check_env_verdict(case) == (False, "")
    detected, message = check_env_verdict(SimpleNamespace(make_env=_NanReward))
    assert detected and message.startswith(("raised", "warned"))
