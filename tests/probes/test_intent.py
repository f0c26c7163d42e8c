"""The intent probe on envs whose reward without success is known by construction.

In the ``claim`` fixtures, ``claim`` ends the episode with ``success=False`` and pays
``claim_reward``; an honest failure (a wrong submit) pays ``failure_reward`` and a success
``success_reward``. So a policy that claims earns exactly ``claim_reward`` without success, and
the severity follows from where that sits between failure and success.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import envaudit  # noqa: F401 - registers the bundled envs
from envaudit.envs import VARIANTS
from envaudit.findings import Severity
from envaudit.probes.intent import CODE, probe
from tests.fixtures.context import flagged, run_probe
from tests.fixtures.context import only_finding as _only_finding
from tests.fixtures.protocol_envs import FIXTURES, params


def only_finding(findings):
    return _only_finding(findings, code=CODE, probe="intent")


@pytest.mark.parametrize("name", ["claim_pays", "claim_pays_half"])
def test_a_claim_that_pays_without_success_is_caught(name):
    p = params(name)
    # Random exploration succeeds rarely here (claim ends half the episodes): enough episodes to
    # see at least 8 successes, the minimum for comparing with success.
    f = only_finding(run_probe(probe, FIXTURES[name].make(), episodes=160)[0])
    ev = f.evidence
    assert ev["pattern"] == "ends with 'claim'" and ev["policy"] == "repeat 'claim'"
    assert ev["mean_without_success"] == pytest.approx(p["claim_reward"])
    assert ev["policy_success_rate"] == 0.0
    assert ev["mean_honest_failure"] == pytest.approx(p["failure_reward"])
    assert ev["mean_success"] == pytest.approx(p["success_reward"])
    assert ev["n_success"] >= 8
    expected = Severity.FAIL if p["claim_reward"] >= p["success_reward"] else Severity.WARN
    assert f.severity == expected
    assert ev["p_value"] < 1e-6 and "'claim'" in f.summary and "'claim'" in f.fix
    # Examples: claims seen in exploration, then the confirming policy's episodes.
    assert len(f.examples) >= 4


@pytest.mark.parametrize("name", ["clean", "claim_free", "truncation_pays", "truncation_pays_full",
                                  "tool_timeout_pays", "tool_timeout_ends", "step_farming",
                                  "step_farming_small", "step_cost", "flaky", "error_pays"])
def test_no_warning_when_nothing_pays_without_success(name):
    # Timeout pay, per-step pay and pay for failed calls are other probes' findings.
    assert flagged(run_probe(probe, FIXTURES[name].make(), episodes=96)[0]) == []


@pytest.mark.parametrize("make", [FIXTURES["no_success_flag"].make(), lambda: gym.make("CartPole-v1")],
                         ids=["no_success_flag", "CartPole-v1"])
def test_an_env_without_a_success_flag_gets_one_info_note(make):
    f = only_finding(run_probe(probe, make, episodes=32)[0])
    assert f.severity == Severity.INFO
    assert "never sets info['success']" in f.summary and "info['success']" in f.fix


def test_same_seed_same_finding():
    make = FIXTURES["claim_pays_half"].make()
    a = run_probe(probe, make, episodes=64, seed=2)[0]
    b = run_probe(probe, make, episodes=64, seed=2)[0]
    assert [f.to_dict() for f in a] == [f.to_dict() for f in b]


MINE = [v for v in VARIANTS.values() if CODE in v.planted]
CLEAN = [v for v in VARIANTS.values() if v.is_clean]


@pytest.mark.parametrize("variant", MINE, ids=lambda v: v.id)
def test_bundled_variant_planting_reward_without_success_is_caught(variant):
    f = only_finding(run_probe(probe, lambda: gym.make(variant.id), episodes=96)[0])
    assert str(f.severity) == variant.severity


@pytest.mark.parametrize("variant", CLEAN, ids=lambda v: v.id)
def test_bundled_clean_env_is_quiet(variant):
    assert flagged(run_probe(probe, lambda: gym.make(variant.id), episodes=96)[0]) == []
