import gymnasium as gym
import pytest

from envaudit import SequencePolicy
from envaudit.envs import VARIANTS
from envaudit.testing import PropertyFailed, assert_canaries_at_floor, assert_floor_below_oracle
from tests.testing.toy_envs import SUBMIT, FetchTask

CLEAN = [v.id for v in VARIANTS.values() if v.is_clean]


def oracle(env):
    return env.unwrapped.oracle()


def exploits(env_id):
    env = gym.make(env_id)
    try:
        return env.unwrapped.exploits()
    finally:
        env.close()


@pytest.mark.parametrize("env_id", CLEAN)
def test_degenerate_policies_stay_below_the_oracle_on_clean_envs(env_id):
    assert_floor_below_oracle(env_id, oracle, margin=0.5)


@pytest.mark.parametrize("env_id,degenerate,mean", [
    # each flaw's degenerate policy earns a return fixed by the variant's design
    ("envaudit/FlakySearch-AnswerAll-v0", "repeat answer_all", 1.0),
    ("envaudit/Helpdesk-EngagementBonus-v0", "repeat reply",
     VARIANTS["envaudit/Helpdesk-EngagementBonus-v0"].kwargs["reply_bonus"] * gym.make("envaudit/Helpdesk-v0").unwrapped.max_steps),
])
def test_a_degenerate_policy_that_pays_is_named(env_id, degenerate, mean):
    with pytest.raises(PropertyFailed) as info:
        assert_floor_below_oracle(env_id, oracle, margin=0.5)
    found = info.value.counterexample
    assert f"the degenerate policy '{degenerate}' averaged {mean:+.4g} over 64 seeds" in found.summary
    assert found.compared[0][0].startswith("the oracle")
    assert "exhaustive: " in str(info.value)


def test_forced_timeouts_count_as_a_degenerate_policy():
    with pytest.raises(PropertyFailed, match="run_full_suite") as info:
        assert_floor_below_oracle("envaudit/CodeFix-TimeoutPasses-v0", oracle, margin=0.5)
    assert info.value.counterexample.episode.steps[-1].status == "timeout"


def test_floor_on_a_plain_env_with_a_policy_oracle():
    # FetchTask needs 1 or 2 facts: mirror twice then submit always succeeds (+1); submitting at
    # once succeeds never (0), fetching forever truncates (0): margin 1 holds exactly.
    solve = SequencePolicy([1, 1, SUBMIT], name="mirror-mirror-submit")
    assert_floor_below_oracle(FetchTask, solve, margin=1.0)
    with pytest.raises(PropertyFailed, match="repeat claim"):
        assert_floor_below_oracle(lambda: FetchTask(claim_reward=0.6), solve, margin=0.5)


def test_bad_oracles_and_margins_are_named():
    with pytest.raises(TypeError, match="oracle must be an envaudit.Policy, a function \\(obs, info\\) -> action, a list"):
        assert_floor_below_oracle(FetchTask, 3, margin=0.1)
    with pytest.raises(TypeError, match="oracle callable returned int; expected an envaudit.Policy, a function"):
        assert_floor_below_oracle(FetchTask, lambda env: 3, margin=0.1)
    with pytest.raises(ValueError, match="margin must be a number >= 0"):
        assert_floor_below_oracle(FetchTask, oracle, margin=-1)


@pytest.mark.parametrize("env_id", [v.id for v in VARIANTS.values()])
def test_the_bundled_exploits_are_canaries_at_the_floor_only_on_their_clean_twins(env_id):
    canaries = exploits(env_id)
    planted = set(VARIANTS[env_id].planted)
    caught = {"timeout-rewarded", "failure-rewarded", "reward-without-success", "length-bias"}
    if planted & caught:
        with pytest.raises(PropertyFailed, match="the canary '") as info:
            assert_canaries_at_floor(env_id, canaries)
        episode = info.value.counterexample.episode
        assert episode.success is not True and episode.episode_return > 0
    else:
        assert_canaries_at_floor(env_id, canaries)


def test_canaries_are_action_lists_labels_or_policies():
    assert_canaries_at_floor("envaudit/FlakySearch-v0", [["answer_all"], ["give_up"], SequencePolicy([0])])
    with pytest.raises(PropertyFailed, match="the canary 'answer_all' returned \\+1") as info:
        assert_canaries_at_floor("envaudit/FlakySearch-AnswerAll-v0", [["give_up"], ["answer_all"]])
    assert [s.label for s in info.value.counterexample.episode.steps] == ["answer_all"]


def test_allow_success_exempts_lucky_guesses():
    assert_canaries_at_floor("envaudit/FlakySearch-v0", {"guess": ["answer_0"]})
    with pytest.raises(PropertyFailed, match="the canary 'guess' returned \\+1, above the floor of 0\\."):
        assert_canaries_at_floor("envaudit/FlakySearch-v0", {"guess": ["answer_0"]}, allow_success=False)


def test_bad_canaries_are_named():
    with pytest.raises(ValueError, match="no action labelled 'answer_everything'"):
        assert_canaries_at_floor("envaudit/FlakySearch-v0", [["answer_everything"]])
    with pytest.raises(ValueError, match="canaries is empty"):
        assert_canaries_at_floor("envaudit/FlakySearch-v0", [])
    with pytest.raises(TypeError, match="wrap a single canary in a list"):
        assert_canaries_at_floor("envaudit/FlakySearch-v0", "answer_all")
