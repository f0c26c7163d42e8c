"""assert_no_reward_without_success: the yardstick (per seed, an oracle's, a fixed number) and the
cases where it cannot decide, on toy envs whose rewards are parameters.

FetchTask: mirror (need) times then submit succeeds, paying 1; ``claim`` ends the episode
unsuccessfully paying ``claim_reward``.
"""

import gymnasium as gym
import numpy as np
import pytest

from envaudit.testing import PropertyFailed, PropertyNotExercised, assert_no_reward_without_success
from envaudit.testing.explore import SEEDS
from tests.testing.toy_envs import FetchTask, PingTool

FEW = {"max_examples": 10}


def failure(make_env, **options):
    with pytest.raises(PropertyFailed) as info:
        assert_no_reward_without_success(make_env, **{**FEW, **options})
    return info.value


def not_exercised(make_env, **options):
    with pytest.raises(PropertyNotExercised) as info:
        assert_no_reward_without_success(make_env, **FEW, **options)
    return info.value


def test_an_unsuccessful_episode_paying_a_success_s_worth_fails_up_to_the_tolerance():
    assert_no_reward_without_success(lambda: FetchTask(claim_reward=0.999), **FEW)
    error = failure(lambda: FetchTask(claim_reward=1.0))
    found = error.counterexample
    assert found.episode.actions == (4,) and found.episode.success is False
    assert found.summary == ("the episode ended with success false and returned +1, as much as a success from the "
                             "same reset seed (+1).")
    caption, success = found.compared[0]
    assert caption == "the success" and success.success and success.seed == found.episode.seed
    assert error.property == "assert_no_reward_without_success"
    assert "Counterexample (exhaustive: every action sequence of up to" in str(error)
    failure(lambda: FetchTask(claim_reward=0.995), tolerance=0.01)


class SeedPay(FetchTask):
    """A success pays 0.5 when one fact is needed and 1 when two are: each seed has its own yardstick."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if info.get("success"):
            reward = 0.5 if self.need == 1 else 1.0
        return obs, reward, terminated, truncated, info


def test_the_yardstick_is_the_best_success_from_the_same_seed():
    found = failure(lambda: SeedPay(claim_reward=0.6)).counterexample  # 0.6 >= 0.5 where one fact is needed
    assert found.summary.endswith("as much as a success from the same reset seed (+0.5).")
    assert found.compared[0][1].seed == found.episode.seed and found.compared[0][1].episode_return == 0.5
    assert_no_reward_without_success(lambda: SeedPay(claim_reward=0.45), **FEW)


def test_a_fixed_limit_replaces_the_yardstick():
    claim = lambda: FetchTask(claim_reward=0.7)  # noqa: E731
    assert_no_reward_without_success(claim, max_return_without_success=0.7, **FEW)
    found = failure(claim, max_return_without_success=0.69).counterexample
    assert found.summary == ("the episode ended with success false and returned +0.7, more than "
                             "max_return_without_success=0.69.")
    assert found.compared == []
    assert_no_reward_without_success(claim, max_return_without_success=0.65, tolerance=0.1, **FEW)
    assert_no_reward_without_success(claim, max_return_without_success=1, **FEW)


def test_a_truncated_unsuccessful_episode_counts():
    found = failure(lambda: FetchTask(truncation_reward=1.0)).counterexample
    assert found.episode.end_reason == "truncated" and found.episode.episode_return >= 1.0


class Secret(gym.Env):
    """Constant observations; only (1,) * 7 + (0,) succeeds (+1), far past any search; ``claim``
    (2) ends the episode unsuccessfully paying ``claim_reward``."""

    action_space = gym.spaces.Discrete(3)
    observation_space = gym.spaces.Discrete(1)
    SOLUTION = [1] * 7 + [0]

    def __init__(self, claim_reward=0.5):
        self.claim_reward = claim_reward

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.played = []
        return 0, {}

    def step(self, action):
        self.played.append(int(action))
        if int(action) == 2:
            return 0, self.claim_reward, True, False, {"success": False}
        if self.played == self.SOLUTION:
            return 0, 1.0, True, False, {"success": True}
        if len(self.played) >= 12:
            return 0, 0.0, False, True, {"success": False}
        return 0, 0.0, False, False, {}


def test_without_any_success_a_paid_failure_cannot_be_judged():
    error = not_exercised(Secret)
    text = str(error)
    assert text.startswith("assert_no_reward_without_success could not decide on Secret: unsuccessful episodes "
                           "returned up to +0.5 (e.g. [2] from seed 0), and no episode succeeded")
    assert "Pass oracle= (a policy" in text and "max_return_without_success=" in text
    assert error.seen["best_unsuccessful"] == 0.5 and error.seen["flagged"] > 0
    assert error.property == "assert_no_reward_without_success"
    assert_no_reward_without_success(lambda: Secret(claim_reward=0.0), **FEW)  # nothing paid: nothing to judge


def test_an_oracle_supplies_the_success():
    assert_no_reward_without_success(Secret, oracle=Secret.SOLUTION, **FEW)
    found = failure(lambda: Secret(claim_reward=1.0), oracle=Secret.SOLUTION).counterexample
    assert found.compared[0][1].actions == tuple(Secret.SOLUTION)
    assert_no_reward_without_success(Secret, max_return_without_success=0.5, **FEW)


def test_the_env_s_own_oracle_is_used_by_default():
    class WithOracle(Secret):
        def oracle(self):
            return list(self.SOLUTION)

    assert_no_reward_without_success(WithOracle, **FEW)
    assert failure(lambda: WithOracle(claim_reward=1.0)).counterexample.compared[0][1].success


def test_no_success_flag_or_no_finished_episode_is_not_exercised():
    error = not_exercised(lambda: FetchTask(report_success=False))
    assert error.seen["flagged"] == 0 and error.seen["finished"] > 0
    assert "none of the" in str(error) and "or raise max_steps" not in str(error)

    class Long(gym.Env):
        action_space = gym.spaces.Discrete(2)
        observation_space = gym.spaces.Box(0, 100, shape=(1,), dtype=np.float32)
        max_steps = 100

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(1, dtype=np.float32), {}

        def step(self, action):
            self.t += 1
            return np.array([self.t], dtype=np.float32), 0.0, False, self.t >= 100, {"success": False}

    error = not_exercised(Long, max_steps=3)
    assert error.seen == {"finished": 0, "flagged": 0}
    assert str(error) == (
        "assert_no_reward_without_success could not exercise its subject on Long: no episode finished within "
        "max_steps=3, so nothing was checked and it fails rather than passing vacuously; make the env set "
        "info['success'] on the last step of an episode (DESIGN.md's info protocol) or raise max_steps")


def test_tool_faults_are_searched_when_on():
    pays = lambda: PingTool(timeout_reward=1.0, end_on_timeout=True)  # noqa: E731 - a timeout pays a success's worth
    found = failure(pays, max_examples=50).counterexample
    assert "timeout" in found.episode.statuses and found.episode.success is False
    assert_no_reward_without_success(pays, faults=False, **FEW)


def test_unknown_options_name_depth_as_known():
    with pytest.raises(TypeError, match=r"unexpected option 'deep'; did you mean 'depth'\?"):
        assert_no_reward_without_success(FetchTask, deep=2)
    assert_no_reward_without_success(FetchTask, depth=1, **FEW)


# -- exact boundaries, counts and where the search looked -----------------------------------------
def full_claim():
    return FetchTask(claim_reward=1.0)


class LateSeedsClaim(FetchTask):
    """``claim`` pays a success's worth (1) only from reset seeds >= 100: beyond the enumerated seeds."""

    def reset(self, *, seed=None, options=None):
        self.claim_reward = 1.0 if seed is not None and seed >= 100 else 0.0
        return super().reset(seed=seed, options=options)


def test_zero_tolerance_makes_the_boundaries_exact():
    failure(full_claim, tolerance=0)  # as much as a success (1 >= 1) fails
    assert_no_reward_without_success(lambda: FetchTask(claim_reward=0.7), max_return_without_success=0.7,
                                     tolerance=0, **FEW)  # no more than the limit passes
    assert_no_reward_without_success(lambda: Secret(claim_reward=0.0), tolerance=0, **FEW)  # nothing paid


def test_counts_of_finished_and_flagged_episodes():
    error = not_exercised(Secret)  # every ending is flagged
    assert error.seen["finished"] == error.seen["flagged"] > 1
    error = not_exercised(lambda: FetchTask(report_success=False))
    assert error.seen["finished"] > 1 and error.seen["flagged"] == 0
    assert str(error).endswith("(DESIGN.md's info protocol)") and error.property == "assert_no_reward_without_success"


def test_the_failure_says_how_far_and_from_which_seeds_it_looked():
    text = str(failure(full_claim, depth=2, seed=3))
    assert f"every action sequence of up to 2 steps from reset seeds 3..{3 + SEEDS - 1}," in text
    assert text.startswith("assert_no_reward_without_success failed on full_claim: ")
    assert text.endswith("Replay it: envaudit.testing.play(full_claim, ['claim'], seed=3)")
    with pytest.raises(TypeError, match=r"^assert_no_reward_without_success\(\) got an unexpected option 'deep'"):
        assert_no_reward_without_success(FetchTask, deep=2)


def test_repeated_actions_play_from_the_enumerated_seeds():
    found = failure(lambda: FetchTask(truncation_reward=1.0)).counterexample  # only a repeat reaches truncation
    assert found.episode.seed == 0 and found.episode.end_reason == "truncated"
    assert found.summary.endswith("as much as a success from the same reset seed (+1).")


def test_a_seed_the_search_drew_is_compared_with_the_best_success_of_the_env():
    error = failure(LateSeedsClaim, max_examples=50)
    found = error.counterexample
    assert found.episode.seed >= 100 and found.episode.success is False
    assert found.summary.endswith("as much as a success from the same env (+1).")
    text = str(error)
    assert text.startswith("assert_no_reward_without_success failed on LateSeedsClaim: ")
    assert "Counterexample (shrunk, after " in text
    assert text.endswith(f"Replay it: envaudit.testing.play(LateSeedsClaim, ['claim'], seed={found.episode.seed})")


def test_the_seeds_option_drives_both_the_enumeration_and_the_search():
    found = failure(LateSeedsClaim, seeds=[150]).counterexample
    assert found.episode.seed == 150 and found.summary.endswith("from the same reset seed (+1).")
    assert_no_reward_without_success(LateSeedsClaim, seeds=[5], max_examples=50)


def test_oracles_are_labels_or_factories_of_the_env():
    assert_no_reward_without_success(FetchTask, oracle=["fetch_mirror", "fetch_mirror", "submit"], **FEW)

    def solve(env):
        return [env.unwrapped.action_labels.index("fetch_mirror")] * 2 + ["submit"]

    assert failure(full_claim, oracle=solve).counterexample.compared[0][1].success
