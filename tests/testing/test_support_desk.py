"""The issue's support desk: each flaw fails its property at defaults with the shortest plan, the
clean twin passes every property, and the numbers come from the env's design (support_desk.py)."""

import numpy as np
import pytest

from envaudit.interpreter import other_hash_seed
from envaudit.testing import (
    PropertyFailed,
    assert_canaries_at_floor,
    assert_failures_not_rewarded,
    assert_floor_below_oracle,
    assert_no_delayed_success_reward,
    assert_no_failure_penalty,
    assert_no_length_reward,
    assert_no_reward_after_failure,
    assert_no_reward_without_success,
    assert_no_timeout_reward,
    assert_replayable,
)
from tests.fixtures import support_desk as sd

C = sd.STEP_COST
PROPERTIES = [assert_no_timeout_reward, assert_failures_not_rewarded, assert_no_reward_after_failure,
              assert_no_failure_penalty, assert_no_reward_without_success, assert_no_length_reward,
              assert_no_delayed_success_reward]


def failure(prop, make_env, **options):
    with pytest.raises(PropertyFailed) as info:
        prop(make_env, **options)
    return info.value


@pytest.mark.parametrize("prop", PROPERTIES, ids=lambda p: p.__name__)
def test_the_clean_twin_passes_every_property(prop):
    prop(sd.clean)


def test_the_clean_twin_replays_across_interpreters():
    assert_replayable(sd.clean, max_examples=10)


def test_flaw_a_resolving_after_a_failed_search_is_found_at_defaults():
    error = failure(assert_no_reward_after_failure, sd.resolve_after_failure)
    found = error.counterexample
    search, resolve = found.episode.steps
    assert search.tool == "search_kb" and search.status in ("error", "timeout") and search.injected
    assert resolve.label == "resolve_ticket" and resolve.reward == pytest.approx(1 - C)
    (_, working), = found.compared
    # The same search working finds nothing (another topic than the ticket's), so resolving fails.
    assert working.steps[0].status == "ok" and working.episode_return == pytest.approx(-2 * C)
    topic = sd.TOPICS[int(np.argmax(_first_obs(found.episode.seed)[:3]))]
    assert search.label != f"search_kb_{topic}"
    text = str(error)
    assert "exhaustive" in text and "sign test" in text and "Replay it: envaudit.testing.play(" in text


def _first_obs(seed):
    env = sd.clean()
    obs, _ = env.reset(seed=seed)
    return obs


def test_flaw_b_a_timed_out_search_counted_as_found_is_found_at_defaults():
    found = failure(assert_no_timeout_reward, sd.timeout_counts_as_found).counterexample
    search, resolve = found.episode.steps
    assert (search.status, search.injected, resolve.label) == ("timeout", True, "resolve_ticket")
    assert search.label == f"search_kb_{sd.TOPICS[int(np.argmax(_first_obs(found.episode.seed)[:3]))]}"
    assert found.episode.episode_return == pytest.approx(1 - 2 * C)
    (caption, failed), = found.compared
    assert "failing outright" in caption and failed.steps[0].status == "error"
    assert failed.episode_return == pytest.approx(-2 * C)


@pytest.mark.parametrize("make_env,prop", [
    (sd.resolve_after_failure, assert_no_timeout_reward),
    (sd.resolve_after_failure, assert_no_reward_without_success),
    (sd.timeout_counts_as_found, assert_no_reward_after_failure),
    (sd.timeout_counts_as_found, assert_no_reward_without_success),
], ids=["A-timeouts", "A-success", "B-after-failure", "B-success"])
def test_each_flaw_is_outside_the_other_properties(make_env, prop):
    # Flaw A pays a timeout and an error alike; flaw B's timeout pays what a working search does;
    # both flaws also set the success flag, so only the paired properties can see them.
    prop(make_env)


def test_a_hash_seeded_observation_is_caught_in_another_interpreter():
    error = failure(assert_replayable, sd.hashed_queue, max_examples=5)
    assert "PYTHONHASHSEED=1" in str(error)  # the first child's hash seed, whatever this process's is
    assert "a different first observation" in str(error)


def test_interpreters_false_skips_the_subprocess():
    assert_replayable(sd.hashed_queue, max_examples=5, interpreters=False)


# -- oracles and canaries as plain functions or action lists ----------------------------------------
def _oracle(obs, info):
    """search the ticket's topic until found, then resolve"""
    return 3 if obs[3] > 0.5 else int(np.argmax(obs[:3]))


def test_plain_function_oracle_is_accepted():
    assert_floor_below_oracle(sd.clean, _oracle, margin=0.5, episodes=16)
    assert_floor_below_oracle(sd.clean, lambda env: _oracle, margin=0.5, episodes=16)
    assert_no_delayed_success_reward(sd.clean, oracle=_oracle)


def test_action_list_oracle_is_accepted():
    # A list is open-loop: searching billing then resolving solves only billing tickets.
    with pytest.raises(PropertyFailed, match="degenerate policy"):
        assert_floor_below_oracle(sd.clean, ["search_kb_billing", "resolve_ticket"], margin=0.5, episodes=16)


def _resolve_after_failure(obs, info):
    failed = (info.get("tool") or {}).get("status") in ("error", "timeout")
    return 3 if failed else 1 + int(np.argmax(obs[:3])) % 2  # a search that never finds the article


def test_plain_function_canary_and_allow_success():
    # The canary resolves only after a failed search: flaw A grades that solved, success flag and all,
    # so allow_success (the default) exempts it; allow_success=False does not.
    assert_canaries_at_floor(sd.resolve_after_failure, [_resolve_after_failure], max_examples=20)
    error = failure(assert_canaries_at_floor, sd.resolve_after_failure, canaries=[_resolve_after_failure],
                    allow_success=False, max_examples=50)
    assert error.counterexample.episode.success is True
    assert error.counterexample.episode.steps[-1].label == "resolve_ticket"
    assert_canaries_at_floor(sd.clean, [_resolve_after_failure], allow_success=False, max_examples=20)


def test_bad_oracles_name_the_forms_accepted():
    with pytest.raises(TypeError, match="a function \\(obs, info\\) -> action, a list of actions"):
        assert_floor_below_oracle(sd.clean, 3, margin=0.5)
    with pytest.raises(TypeError, match="oracle callable returned int"):
        assert_floor_below_oracle(sd.clean, lambda env: 3, margin=0.5)


@pytest.mark.parametrize("current", ["0", "7", "4294967295"])
def test_the_other_interpreter_gets_another_hash_seed(monkeypatch, current):
    monkeypatch.setenv("PYTHONHASHSEED", current)
    other = other_hash_seed()
    assert other.isdigit() and other != current and 0 <= int(other) <= 4294967295


def test_an_answer_hidden_in_hash_is_caught_where_the_task_is_solved():
    # hashed-answer: the hidden answer is hash() of a seeded task name, so only a plan that solves
    # the task (the deeper search's success: no short plan solves it) differs in the other interpreter;
    # the observations and every failing plan agree there.
    from dataclasses import replace

    from envaudit.families import flawed_case
    from envaudit.families.case import Case

    case = flawed_case(0, 0, kind="hashed-answer")
    error = failure(assert_replayable, case.make_env, max_examples=5)
    assert "fresh interpreter" in str(error) and "PYTHONHASHSEED=" in str(error)
    assert error.counterexample.episode.success
    twin = Case("twin", replace(case.spec, flaw=None))
    assert_replayable(twin.make_env, max_examples=5)
