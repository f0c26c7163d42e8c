"""Recall on the generated flaw kinds the probes used to miss, and silence on their clean twins.

Each flawed instance's twin is the same spec with ``flaw=None`` (``envaudit.families``: the
generator first made the base able to carry the flaw, so the twin differs by exactly the planted
incentive). Severities follow from the generator's design, not from what a scan printed:

- ``timeout-drop`` (1-step tasks): the env is clean; the pipeline drops timed-out rollouts, so a
  failing rollout that times out escapes its negative advantage (the twin keeps every rollout).
- ``failure-cost`` (1-step ToolEnv tasks): every failed call costs `amount` beyond its step, sized
  so that at the env's own failure rates giving up beats persisting (``fail``).
- ``sequence-exploit``: calling two distractors back to back pays more than success with success
  false; random play hits it by chance, and replaying the richest such episode shows it pays (``fail``).
- ``lenient-grader``: every wrong answer pays ``amount`` >= the success reward plus all shaping, so
  with honest successes to compare with (an env with an ``oracle()``) the ending is ``fail``; without
  any success seen it still clearly beats an ending paid like a typical step (``warn``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from envaudit.families import Case, flawed_case
from envaudit.families.evaluate import evaluate_case

SEED = 3
LENIENT = [flawed_case(SEED, i, "lenient-grader") for i in range(6)]


def twin(case: Case) -> Case:
    return Case(f"twin-{case.name}", replace(case.spec, flaw=None, label=f"twin-{case.name}"),
                scan_overrides=case.scan_overrides)


def scan(case: Case, probes: tuple[str, ...]):
    return evaluate_case(case, seed=SEED, quick=True, probes=probes, baseline=False)


def loud(result, code: str) -> list:
    return [f for f in result.incentive_flags if f.code == code]


def test_the_lenient_instances_include_rare_success_envs():
    # The class that was missed: exploration never sees a success there.
    assert any(c.spec.regime == "rare" for c in LENIENT)
    assert any(not c.spec.has_oracle for c in LENIENT) and any(c.spec.has_oracle for c in LENIENT)


@pytest.mark.parametrize("case", LENIENT, ids=lambda c: c.name)
def test_a_grader_that_pays_every_answer_is_named_and_its_twin_is_silent(case):
    result = scan(case, ("intent",))
    found = loud(result, "reward-without-success")
    assert found, f"{case.name}: {result.flags}"
    if case.spec.has_oracle:
        assert any(f.severity == "fail" for f in found), found
    assert not scan(twin(case), ("intent",)).incentive_flags


# -- timeout-drop on 1-step tasks -----------------------------------------------------------------
def _one_step_quit_drops(n: int) -> list[Case]:
    """1-step tasks with a quit action under a dropping pipeline: random play mostly fails outright
    (quits or answers before the one call), so most exploration groups are all-failure and carry
    no advantage to escape from; the groups that do must be found by more play, not by luck."""
    out = []
    for i in range(200):
        case = flawed_case(SEED, i, "timeout-drop")
        if len(case.spec.path) == 1 and case.spec.quit_action:
            out.append(case)
        if len(out) == n:
            return out
    raise AssertionError(f"fewer than {n} 1-step timeout-drop cases with a quit action in 200 draws")


DROPS = _one_step_quit_drops(3)


@pytest.mark.parametrize("case", DROPS, ids=lambda c: c.name)
def test_a_dropping_pipeline_on_a_one_step_task_is_named_and_keeping_timeouts_is_silent(case):
    # The generator's timeout-drop base succeeds often under random play and has tools that time
    # out, so dropping timed-out rollouts lets a failing rollout escape its negative advantage.
    assert dict(case.scan_overrides), "a timeout-drop case scans under a pipeline that drops timeouts"
    result = scan(case, ("pipeline",))
    assert loud(result, "timeout-drop-incentive"), f"{case.name}: {result.flags}"
    kept = Case(f"kept-{case.name}", case.spec)  # the same env, trained on every rollout
    assert not scan(kept, ("pipeline",)).incentive_flags


# -- failure-cost on 1-step tasks -----------------------------------------------------------------
def _one_step_failure_costs(n: int) -> list[Case]:
    """1-step ToolEnv tasks whose failures cost more than their step: persisting's return swings
    by several successes' worth on the rare failed call, so its mean favours giving up while a
    small sample cannot say so."""
    out = []
    for i in range(200):
        case = flawed_case(SEED, i, "failure-cost")
        if len(case.spec.path) == 1 and case.spec.base == "toolenv":
            out.append(case)
        if len(out) == n:
            return out
    raise AssertionError(f"fewer than {n} 1-step ToolEnv failure-cost cases in 200 draws")


COSTS = _one_step_failure_costs(2)


@pytest.mark.parametrize("case", COSTS, ids=lambda c: c.name)
def test_a_large_failure_cost_on_a_one_step_task_is_named_and_its_twin_is_silent(case):
    # By design persisting expects to lose 0.3-0.6 of the success reward to failure charges while
    # giving up loses nothing: at the env's own failure rates, giving up pays more (fail).
    spec = case.spec
    assert spec.flaw.amount * spec.expected_path_failures() > 0.3 * spec.success_reward
    result = scan(case, ("failures",))
    found = loud(result, "failure-shortcut")
    assert any(f.severity == "fail" for f in found), f"{case.name}: {result.flags}"
    assert not scan(twin(case), ("failures",)).incentive_flags


# -- sequence exploits (learned-exploit / exploit-policy) -----------------------------------------
def _sequence_case(seed: int) -> Case:
    """Two reliable distractors whose back-to-back calls end the episode paying 1.2 (success pays
    1) with success false. Random play over 5 actions (3 calls, submit, give_up) takes the pair
    at a given step with probability 1/25, so 64 exploration episodes complete it a few times;
    no single repeated call reaches it."""
    from envaudit.families import EnvSpec, Flaw, ToolSpec

    spec = EnvSpec(tools=(ToolSpec("search", error_rate=0.1), ToolSpec("ping"), ToolSpec("lint")),
                   path=("search",), max_steps=8, quit_action=True, step_cost=0.01,
                   flaw=Flaw("sequence-exploit", amount=1.2, sequence=("ping", "lint")),
                   label=f"sequence-{seed}")
    return Case(spec.label, spec, expected=frozenset({"exploit-policy"}))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_multi_call_exploit_seen_by_chance_is_replayed_and_its_twin_is_silent(seed):
    case = _sequence_case(seed)
    result = evaluate_case(case, seed=seed, quick=True, probes=("exploits",), baseline=False)
    found = loud(result, "exploit-policy")
    # 1.2 beats everything honest success earns (1 less step costs): fail.
    assert any(f.severity == "fail" and "replay" in f.summary for f in found), f"{case.name}: {result.flags}"
    clean = evaluate_case(twin(case), seed=seed, quick=True, probes=("exploits",), baseline=False)
    assert not clean.incentive_flags


@pytest.mark.parametrize("index", [1, 2])
def test_an_ending_is_not_read_as_paid_against_heavily_charged_failed_calls(index):
    # failure-cost charges each failed call several steps' worth; a wrong answer then pays what
    # an ordinary step pays, which is no reward without success.
    case = flawed_case(0, index, "failure-cost")
    assert not loud(scan(case, ("intent",)), "reward-without-success")


def test_confirming_an_ending_on_an_env_that_raises_does_not_crash_the_probe():
    # raise-in-state: some confirmation episodes end in an exception and carry no success flag.
    result = scan(flawed_case(0, 2, "raise-in-state"), ("intent",))
    assert not [f for f in result.flags if f.probe == "intent" and f.code == "env-error"], result.flags
