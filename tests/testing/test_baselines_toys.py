"""assert_floor_below_oracle and assert_canaries_at_floor on toy envs whose rewards are parameters.

FetchTask (plain env): mirror, mirror, submit always succeeds (+1); every repeated action earns 0
except ``claim``, which ends the episode paying ``claim_reward``. PingTool (ToolEnv): ping, ping,
done succeeds (+1); a timed-out ping pays ``timeout_reward`` and PingTool stops after 5 steps.
"""

import gymnasium as gym
import pytest
from hypothesis import strategies as st

from envaudit import SequencePolicy
from envaudit.testing import PropertyFailed, assert_canaries_at_floor, assert_floor_below_oracle
from tests.testing.toy_envs import CLAIM, MIRROR, SUBMIT, FetchTask, OneState, PingTool

SOLVE = SequencePolicy([MIRROR, MIRROR, SUBMIT], name="mirror-mirror-submit")
SEEDS = [0, 1, 2]


def floor_failure(make_env, oracle=SOLVE, **kwargs):
    with pytest.raises(PropertyFailed) as info:
        assert_floor_below_oracle(make_env, oracle, **kwargs)
    return info.value


# -- floor below oracle -------------------------------------------------------------------------
def test_the_margin_is_inclusive_up_to_the_tolerance():
    claim = lambda: FetchTask(claim_reward=0.5)  # noqa: E731
    assert_floor_below_oracle(claim, SOLVE, margin=0.5, seeds=SEEDS)  # 0.5 <= 1 - 0.5
    floor_failure(claim, margin=0.5001, seeds=SEEDS)
    assert_floor_below_oracle(claim, SOLVE, margin=0.6, seeds=SEEDS, tolerance=0.2)
    assert_floor_below_oracle(FetchTask, SOLVE, margin=1.0, episodes=2)


def test_the_failure_names_the_best_degenerate_policy_and_lists_the_top_ones():
    failed = floor_failure(lambda: FetchTask(claim_reward=0.5), margin=0.6, seeds=SEEDS)
    found = failed.counterexample
    assert found.summary == ("the degenerate policy 'repeat claim' averaged +0.5 over 3 seeds against the oracle's "
                             "+1; degenerate policies must score at least margin=0.6 below the oracle.")
    assert found.episode.actions == (CLAIM,) and found.episode.seed == 0
    caption, oracle_run = found.compared[0]
    assert caption == "the oracle (mirror-mirror-submit) on the same seed"
    assert oracle_run.seed == 0 and oracle_run.actions[-1] == SUBMIT and oracle_run.success
    assert found.details == "\n".join([
        "Best degenerate policies (mean return over 3 seeds):",
        "    +0.500  repeat claim",
        "    +0.000  repeat fetch",
        "    +0.000  repeat fetch_mirror",
        "    +0.000  repeat submit",
        "    +0.000  repeat wait",
    ])
    text = str(failed)
    assert text.startswith("assert_floor_below_oracle failed on FetchTask: the degenerate policy 'repeat claim'")
    assert "Counterexample (exhaustive: 5 degenerate policies on the oracle's 3 seeds):" in text
    assert failed.property == "assert_floor_below_oracle"


def test_the_counterexample_is_the_seed_where_the_degenerate_policy_did_best():
    class OddSeedsPay(FetchTask):
        def reset(self, *, seed=None, options=None):
            self.claim_reward = float(seed % 2)  # seeds 1, 3: claim pays 1
            return super().reset(seed=seed, options=options)

    found = floor_failure(OddSeedsPay, margin=0.9, seeds=[2, 3, 4]).counterexample
    assert found.episode.seed == 3 and found.episode.episode_return == 1.0
    assert found.compared[0][1].seed == 3
    assert "averaged +0.3333 over 3 seeds" in found.summary


def test_the_default_seeds_start_at_the_search_seed():
    seen = []

    class Spy(FetchTask):
        def reset(self, *, seed=None, options=None):
            seen.append(seed)
            return super().reset(seed=seed, options=options)

    assert_floor_below_oracle(Spy, SOLVE, margin=1.0, episodes=3, seed=10)
    assert set(seen) == {10, 11, 12}


def test_on_a_tool_env_every_policy_is_also_played_with_every_call_timing_out():
    pays = lambda: PingTool(timeout_reward=0.3)  # noqa: E731 - 5 timed-out pings: +1.5
    solve = ["ping", "ping", "done"]
    found = floor_failure(pays, solve, margin=0.5, seeds=SEEDS).counterexample
    assert "'repeat ping with every tool call timing out' averaged +1.5" in found.summary
    assert found.episode.statuses == ["timeout"] * 5
    assert assert_floor_below_oracle(pays, solve, margin=0.5, seeds=SEEDS, faults=False) is None
    assert "exhaustive: 4 degenerate policies" in str(floor_failure(pays, solve, margin=0.5, seeds=SEEDS))


def test_unlabelled_actions_are_named_by_value():
    class Pays(OneState):
        action_space = gym.spaces.Discrete(2)

        def step(self, action):
            return 0, float(action), True, False, {"success": False}

    found = floor_failure(Pays, [0], margin=0.5, seeds=SEEDS).counterexample
    assert "'repeat 1' averaged +1" in found.summary


@pytest.mark.parametrize("kwargs,error,text", [
    ({"margin": True}, ValueError, "assert_floor_below_oracle(): margin must be a number >= 0, got True"),
    ({"margin": "0.5"}, ValueError, "assert_floor_below_oracle(): margin must be a number >= 0, got '0.5'"),
    ({"margin": 0.5, "episodes": 0}, ValueError, "assert_floor_below_oracle(): episodes must be a positive int, got 0"),
    ({"margin": 0.5, "episodes": True}, ValueError,
     "assert_floor_below_oracle(): episodes must be a positive int, got True"),
    ({"margin": 0.5, "episodes": 2.0}, ValueError,
     "assert_floor_below_oracle(): episodes must be a positive int, got 2.0"),
    ({"margin": 0.5, "seeds": 3}, ValueError,
     "assert_floor_below_oracle(): seeds must be a list of reset seeds here (it runs every policy on the same "
     "seeds), got 3"),
    ({"margin": 0.5, "seeds": []}, ValueError,
     "assert_floor_below_oracle(): seeds must be a list of reset seeds here (it runs every policy on the same "
     "seeds), got []"),
    ({"margin": 0.5, "bogus": 1}, TypeError, None),
])
def test_bad_arguments_are_named(kwargs, error, text):
    with pytest.raises(error) as info:
        assert_floor_below_oracle(FetchTask, SOLVE, **kwargs)
    if text is not None:
        assert str(info.value) == text


def test_zero_margin_is_allowed():
    assert_floor_below_oracle(FetchTask, SOLVE, margin=0, seeds=SEEDS)


# -- canaries -----------------------------------------------------------------------------------
def canary_failure(make_env, canaries, **kwargs):
    with pytest.raises(PropertyFailed) as info:
        assert_canaries_at_floor(make_env, canaries, max_examples=20, **kwargs)
    return info.value


def test_the_floor_is_inclusive_up_to_the_tolerance():
    claim = lambda: FetchTask(claim_reward=0.5)  # noqa: E731
    assert_canaries_at_floor(claim, [["claim"]], floor=0.5, max_examples=5)
    found = canary_failure(claim, [["claim"]], floor=0.4).counterexample
    assert found.summary == "the canary 'claim' returned +0.5, above the floor of 0.4 without success."
    assert_canaries_at_floor(claim, [["claim"]], floor=0.4, tolerance=0.2, max_examples=5)
    with pytest.raises(ValueError, match=r"^assert_canaries_at_floor\(\): floor must be a number, got True$"):
        assert_canaries_at_floor(claim, [["claim"]], floor=True)
    with pytest.raises(ValueError, match="floor must be a number, got '0'"):
        assert_canaries_at_floor(claim, [["claim"]], floor="0")


def test_canaries_are_named_by_their_labels_policies_or_functions():
    claim = lambda: FetchTask(claim_reward=0.5)  # noqa: E731
    assert "the canary 'wait → claim' returned +0.5" in str(canary_failure(claim, [["wait", "claim"]]))
    assert "the canary 'claimer' returned" in str(canary_failure(claim, [SequencePolicy([CLAIM], name="claimer")]))

    def always_claim(obs, info):
        return CLAIM

    assert "the canary 'always_claim' returned" in str(canary_failure(claim, [always_claim]))
    named = canary_failure(claim, {"mine": lambda obs, info: CLAIM}).counterexample
    assert named.summary.startswith("the canary 'mine' returned +0.5") and named.episode.actions == (CLAIM,)
    assert "the canary 'hack' returned" in str(canary_failure(claim, {"hack": SequencePolicy([CLAIM])}))
    assert "the canary 'list' returned" in str(canary_failure(claim, {"list": ("wait", "claim")}))


def test_a_callable_object_canary_is_named_by_its_type():
    class Claimer:
        def __call__(self, obs, info):
            return CLAIM

    failed = canary_failure(lambda: FetchTask(claim_reward=0.5), [Claimer()])
    assert "the canary 'Claimer' returned" in str(failed)


def test_unlabelled_canaries_are_named_by_value():
    class Plain(OneState):
        action_space = gym.spaces.Discrete(3)

        def step(self, action):
            return 0, float(action == 2), action == 2, False, {}

    assert "the canary '0 → 2' returned +1, above the floor of 0 without success." in str(
        canary_failure(Plain, [[0, 2]]))


def test_only_the_canary_that_pays_is_reported():
    found = canary_failure(lambda: FetchTask(claim_reward=0.5), [["wait"], ["submit"], ["claim"]]).counterexample
    assert found.episode.actions == (CLAIM,)


def test_policy_canaries_play_from_the_drawn_seed():
    class SeedPays(FetchTask):
        def reset(self, *, seed=None, options=None):
            self.claim_reward = 1.0 if seed == 7 else 0.0
            return super().reset(seed=seed, options=options)

    assert_canaries_at_floor(SeedPays, [SequencePolicy([CLAIM])], seeds=[1, 2], max_examples=10)
    found = canary_failure(SeedPays, [SequencePolicy([CLAIM])], seeds=[1, 7]).counterexample
    assert found.episode.seed == 7


def test_tool_faults_are_searched_on_tool_envs_only_when_on():
    pays = lambda: PingTool(timeout_reward=0.3)  # noqa: E731
    found = canary_failure(pays, {"pinger": ["ping"] * 5}).counterexample  # any timed-out ping pays
    assert found.episode.statuses.count("timeout") == 1 and found.episode.steps[0].injected
    assert found.summary == "the canary 'pinger' returned +0.3, above the floor of 0 without success."
    assert_canaries_at_floor(pays, {"pinger": ["ping"] * 5}, faults=False, max_examples=10)


def test_successes_are_exempt_unless_allow_success_is_false():
    solve = [["fetch_mirror", "fetch_mirror", "submit"]]
    assert_canaries_at_floor(FetchTask, solve, max_examples=5, seeds=0)
    found = canary_failure(FetchTask, solve, allow_success=False, seeds=0).counterexample
    assert found.summary == "the canary 'fetch_mirror → fetch_mirror → submit' returned +1, above the floor of 0."


@pytest.mark.parametrize("canaries,error,text", [
    (3, TypeError, "canaries must be a list or a {name: canary} mapping, got int"),
    (SequencePolicy([0]), TypeError, "canaries must be a list or a {name: canary} mapping; wrap a single canary in a list"),
    ([3], TypeError, "a canary must be a list of actions (or labels), an envaudit.Policy or a function "
                     "(obs, info) -> action, got 3"),
    (["claim"], TypeError, "a canary must be a list of actions (or labels), an envaudit.Policy or a function "
                           "(obs, info) -> action, got 'claim'"),
    ({}, ValueError, "canaries is empty; give at least one known-hack action list or policy"),
    ({"x": []}, TypeError, "canary 'x' must be a non-empty list of actions, an envaudit.Policy or a function "
                           "(obs, info) -> action, got []"),
    ({"x": "claim"}, TypeError, "canary 'x' must be a non-empty list of actions, an envaudit.Policy or a function "
                                "(obs, info) -> action, got 'claim'"),
    ({"x": lambda env: 5}, TypeError, "canary 'x' callable returned int; expected an envaudit.Policy, a function "
                                      "(obs, info) -> action, or a list of actions"),
])
def test_bad_canaries_are_named(canaries, error, text):
    with pytest.raises(error) as info:
        assert_canaries_at_floor(FetchTask, canaries)
    assert str(info.value) == text


def test_a_seed_strategy_is_accepted():
    assert_canaries_at_floor(FetchTask, [["claim"]], seeds=st.integers(0, 3), max_examples=5)


# -- what the first run of the mutation score left ----------------------------------------------
def claim_env():
    return FetchTask(claim_reward=0.5)


def test_one_episode_is_enough_and_zero_tolerance_keeps_ties_passing():
    assert_floor_below_oracle(FetchTask, SOLVE, margin=1.0, episodes=1)
    assert_floor_below_oracle(claim_env, SOLVE, margin=0.5, seeds=SEEDS, tolerance=0)  # 0.5 is not above 0.5
    assert_canaries_at_floor(claim_env, [["claim"]], floor=0.5, tolerance=0, max_examples=5)


def test_the_failure_names_the_property_and_the_factory():
    text = str(floor_failure(claim_env, margin=0.6, seeds=SEEDS))
    assert text.startswith("assert_floor_below_oracle failed on claim_env: ")
    assert text.endswith("Replay it: envaudit.testing.play(claim_env, ['claim'], seed=0)")
    text = str(canary_failure(claim_env, [["claim"]]))
    assert text.startswith("assert_canaries_at_floor failed on claim_env: the canary 'claim' returned +0.5")
    assert text.endswith("Replay it: envaudit.testing.play(claim_env, ['claim'], seed=0)")
    with pytest.raises(TypeError, match=r"^assert_canaries_at_floor\(\) got an unexpected option 'bogus'"):
        assert_canaries_at_floor(claim_env, [["claim"]], bogus=1)
    with pytest.raises(TypeError, match=r"^assert_floor_below_oracle\(\) got an unexpected option 'bogus'"):
        assert_floor_below_oracle(claim_env, SOLVE, margin=0.5, bogus=1)


def test_factories_are_given_the_env_and_labels_are_mapped():
    def claim_index(env):
        return [env.unwrapped.action_labels.index("claim")]

    assert canary_failure(claim_env, {"f": claim_index}).counterexample.episode.actions == (CLAIM,)
    assert canary_failure(claim_env, {"f": lambda env: ["wait", "claim"]}).counterexample.episode.actions == (3, CLAIM)
    solve = lambda env: [env.unwrapped.action_labels.index("fetch_mirror")] * 2 + ["submit"]  # noqa: E731
    assert_floor_below_oracle(FetchTask, solve, margin=1.0, seeds=SEEDS)


def test_the_table_lists_the_six_best():
    class Ladder(OneState):
        """Action a ends the episode paying a / 8; only action 7 succeeds."""

        action_space = gym.spaces.Discrete(8)

        def step(self, action):
            return 0, int(action) / 8, True, False, {"success": int(action) == 7}

    details = floor_failure(Ladder, [7], margin=0.5, seeds=SEEDS).counterexample.details.split("\n")
    assert details[1:] == [f"    +{a / 8:.3f}  repeat {a}" for a in (7, 6, 5, 4, 3, 2)]


def test_list_canaries_play_from_the_drawn_seed():
    class SeedPays(FetchTask):
        def reset(self, *, seed=None, options=None):
            self.claim_reward = 1.0 if seed == 7 else 0.0
            return super().reset(seed=seed, options=options)

    assert canary_failure(SeedPays, [["claim"]], seeds=[1, 7]).counterexample.episode.seed == 7


def test_policy_canaries_get_the_drawn_faults_and_timeouts_are_tried_first():
    pays = lambda: PingTool(timeout_reward=0.3)  # noqa: E731
    found = canary_failure(pays, [SequencePolicy([0], name="pinger")]).counterexample
    assert "timeout" in found.episode.statuses and found.summary.startswith("the canary 'pinger' returned +0.3")
    both = lambda: PingTool(timeout_reward=0.3, error_reward=0.3)  # noqa: E731 - either fault pays the same
    found = canary_failure(both, {"pinger": ["ping"] * 5}).counterexample
    assert [s for s in found.episode.statuses if s != "ok"] == ["timeout"]
