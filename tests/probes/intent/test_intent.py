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
from tests.fixtures.context import flagged, misses, off_design, run_probe, sweep
from tests.fixtures.context import only_finding as _only_finding
from tests.fixtures.protocol_envs import FIXTURES, params
from tests.fixtures.raise_envs import NotesCrash


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


# (clean, claim_free and step_cost are swept over seeds below.)
@pytest.mark.parametrize("name", ["truncation_pays", "truncation_pays_full", "tool_timeout_pays",
                                  "tool_timeout_ends", "step_farming", "step_farming_small", "flaky",
                                  "error_pays"])
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


# -- rates over exploration seeds -----------------------------------------------------------------
SWEEP = {"episodes": 48, "quick": True}
"""Small exploration and ``--quick`` work units, so that every sweep fits the default run."""


def _caught(severity: Severity):
    return lambda findings: any(f.code == CODE and f.severity == severity for f in findings)


@pytest.mark.parametrize("name", ["claim_pays", "claim_pays_half"])
def test_a_paying_claim_is_caught_at_its_severity_at_7_of_8_seeds(name):
    """>= 7/8 exploration seeds (SWEEP_SEEDS' margin: a probe with 60% power passes with
    probability 0.11, one with 95% with 0.94) report the claim at the severity its pay gives:
    fail when it pays as much as success, warn when only more than failing. "As much as success"
    needs >= MIN_SAMPLES honest successes, which random play on these envs often lacks (a claim ends
    half its episodes): the probe tops them up with random play."""
    p = params(name)
    severity = Severity.FAIL if p["claim_reward"] >= p["success_reward"] else Severity.WARN
    per_seed = sweep(probe, FIXTURES[name].make(), **SWEEP)
    missed = misses(per_seed, _caught(severity))
    assert len(missed) <= 1, f"{name}: {FIXTURES[name].doc}; missed at seeds {missed}"


def test_bundled_lenient_grader_is_caught_at_7_of_8_seeds():
    """Same margin: ``answer_all`` pays +1 with success false, as much as success: a fail."""
    variant = VARIANTS["envaudit/FlakySearch-AnswerAll-v0"]
    per_seed = sweep(probe, lambda: gym.make(variant.id), **SWEEP)
    missed = misses(per_seed, _caught(Severity.parse(variant.severity)))
    assert len(missed) <= 1, f"{variant.id}: missed at seeds {missed}"


CLEAN_SWEEP = {
    # Nothing pays without success (claim_free's claim pays 0; step_cost's cost is paid by every
    # step, success or not, and is held fixed by the length control): no finding, info included.
    "clean": (FIXTURES["clean"].make(), []),
    "claim_free": (FIXTURES["claim_free"].make(), []),
    "step_cost": (FIXTURES["step_cost"].make(), []),
    "FlakySearch-v0": (lambda: gym.make("envaudit/FlakySearch-v0"), []),
    # No success flag at all: the one info note saying the check was skipped, nothing else.
    "no_success_flag": (FIXTURES["no_success_flag"].make(), [(CODE, "info", "intent")]),
}


@pytest.mark.parametrize("name", sorted(CLEAN_SWEEP))
def test_clean_twins_give_exactly_their_designed_findings_at_every_seed(name):
    """8/8 seeds give exactly the findings the env's design allows. Pooled over the four twins
    whose design allows none, 0 of 32 runs bounds the false-alarm rate below 3/32 = 9.4% (95%)."""
    make, expected = CLEAN_SWEEP[name]
    assert off_design(sweep(probe, make, **SWEEP), expected) == {}


# -- an env that raises in some state ------------------------------------------------------------
@pytest.mark.parametrize("crashes", [True, False], ids=["raises", "clean-twin"])
def test_a_step_that_raised_does_not_make_an_unpaid_ending_look_paid(crashes):
    findings, _ = run_probe(probe, lambda: NotesCrash(crashes), episodes=96)
    assert flagged(findings) == []


def test_an_ending_that_pays_is_still_caught_beside_a_step_that_raised():
    # submit_all pays 0.4 on top of the step cost: more than an honest failure, less than success (1).
    f = only_finding(run_probe(probe, lambda: NotesCrash(all_pays=0.4), episodes=96)[0])
    assert f.severity == Severity.WARN and f.evidence["pattern"] == "ends with 'submit_all'"
    assert f.evidence["mean_without_success"] == pytest.approx(0.4 - NotesCrash.COST)
