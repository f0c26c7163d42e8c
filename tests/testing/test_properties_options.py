"""``assert_no_timeout_reward`` and ``assert_failures_not_rewarded`` pass their options to the
enumeration, and name themselves and the target in what they raise (named toy factories)."""

import pytest

from envaudit.testing import PropertyFailed, assert_failures_not_rewarded, assert_no_timeout_reward
from tests.testing.toy_envs import FetchTask, PingTool


def paid_timeout():
    return PingTool(timeout_reward=0.5)


def paid_error():
    return PingTool(error_reward=0.5)


def paid_truncation():
    return FetchTask(truncation_reward=0.5)


@pytest.mark.parametrize("prop,make_env,target", [(assert_no_timeout_reward, paid_timeout, "paid_timeout"),
                                                  (assert_failures_not_rewarded, paid_error, "paid_error")],
                         ids=["timeouts", "failures"])
@pytest.mark.parametrize("options,depth,seeds", [({}, 3, "0..3"), (dict(depth=1, seed=3), 1, "3..6"),
                                                 (dict(depth=2, seeds=[5, 6]), 2, "5..6")])
def test_the_enumeration_follows_the_options(prop, make_env, target, options, depth, seeds):
    with pytest.raises(PropertyFailed) as info:
        prop(make_env, max_examples=1, **options)
    text = str(info.value)
    assert info.value.property == prop.__name__ and text.startswith(f"{prop.__name__} failed on {target}: ")
    assert f"exhaustive: every action sequence of up to {depth} steps from reset seeds {seeds}, shortest first" in text
    assert f"Replay it: envaudit.testing.play({target}, " in text


@pytest.mark.parametrize("prop", [assert_no_timeout_reward, assert_failures_not_rewarded], ids=lambda p: p.__name__)
def test_an_unknown_option_names_the_property(prop):
    with pytest.raises(TypeError, match=rf"^{prop.__name__}\(\) got an unexpected option 'deepth'; did you mean"):
        prop(FetchTask, deepth=1)


def test_a_truncation_paid_when_an_action_is_repeated_is_found_after_the_search():
    # One generated case (the empty plan) shows nothing; every action repeated to FetchTask's limit
    # of six steps is truncated and paid 0.5, against 0 for ending the same prefix by claiming.
    with pytest.raises(PropertyFailed) as info:
        assert_no_timeout_reward(paid_truncation, max_examples=1, depth=1)
    text, ce = str(info.value), info.value.counterexample
    assert info.value.property == "assert_no_timeout_reward"
    assert text.startswith("assert_no_timeout_reward failed on paid_truncation: the episode was truncated")
    assert "Counterexample (exhaustive: every action sequence of up to 1 steps from reset seeds 0..3" in text
    assert ce.episode.seed == 0 and ce.episode.length == 6 and ce.episode.end_reason == "truncated"
