"""``as_policy``: every form an oracle or a canary may take becomes a Policy that plays it."""

import functools

import pytest

from envaudit.policies import CallablePolicy
from envaudit.rollout import Policy, SequencePolicy
from envaudit.testing.oracles import _positional, as_policy


def act(policy, obs=None, info=None):
    """The first action the policy plays (after a reset, as the properties do)."""
    policy.reset(None, None)
    return policy(obs, {} if info is None else info)


def test_positional_counts_required_positional_parameters():
    def two(obs, info):
        return 0

    def one_with_default(env, extra=1):
        return env

    def keyword_only(env, *, flag=True):
        return env

    assert _positional(two) == 2
    assert _positional(one_with_default) == 1  # a defaulted parameter is not required
    assert _positional(keyword_only) == 1
    assert _positional(lambda: 0) == 0
    assert _positional(lambda *args: 0) is None  # *args: cannot be told
    assert _positional(lambda a, *args: 0) is None
    assert _positional(lambda obs, /, info: 0) == 2  # positional-only counts too
    assert _positional(functools.partial(two, 1)) == 1
    assert _positional(print) is None  # (*args, sep=..., ...)
    assert _positional(3) is None  # not inspectable: TypeError
    assert _positional(ValueError) is None  # no signature found: ValueError


def test_a_policy_is_returned_as_it_is():
    policy = SequencePolicy([1], name="mine")
    assert as_policy(policy, None) is policy


def test_a_list_of_actions_is_played_in_order_with_labels_mapped():
    labels = {"fetch": 0, "submit": 2}
    policy = as_policy(["fetch", "submit"], None, action=labels.__getitem__)
    assert isinstance(policy, SequencePolicy) and policy.actions == [0, 2]
    assert policy.name == "oracle"
    assert as_policy((3,), None, what="canary", name="cheat").name == "cheat"
    assert as_policy([4], None, what="canary").name == "canary"  # what names it when name is not given
    assert as_policy([4], None).actions == [4]  # default action: identity


def test_an_empty_list_is_refused_by_name():
    with pytest.raises(ValueError, match="^canary 'x' is an empty list of actions; give at least one action$"):
        as_policy([], None, what="canary 'x'")


@pytest.mark.parametrize("value", ["abc", b"abc"])
def test_strings_are_not_action_lists(value):
    with pytest.raises(TypeError, match=f"oracle must be an envaudit.Policy.*got {type(value).__name__}$"):
        as_policy(value, None)


def test_a_two_argument_function_is_the_policy_itself():
    seen = []

    def choose(obs, info):
        seen.append((obs, info))
        return obs + 1

    policy = as_policy(choose, "ENV", name="plus one")
    assert isinstance(policy, CallablePolicy) and policy.name == "plus one"
    assert act(policy, 4, {"k": 1}) == 5 and seen == [(4, {"k": 1})]


def test_a_factory_of_the_env_is_called_with_it():
    got = []

    def factory(env):
        got.append(env)
        return lambda obs, info: ("from", env)

    policy = as_policy(factory, "ENV", what="canary")
    assert got == ["ENV"] and isinstance(policy, CallablePolicy) and policy.name == "canary"
    assert act(policy) == ("from", "ENV")


def test_a_star_args_factory_is_called_with_the_env():
    policy = as_policy(lambda *args: list(args), "ENV")
    assert isinstance(policy, SequencePolicy) and policy.actions == ["ENV"]


def test_a_zero_argument_factory_is_called_without_it():
    policy = as_policy(lambda: [7, 8], "ENV", name="seq")
    assert isinstance(policy, SequencePolicy) and policy.actions == [7, 8] and policy.name == "seq"


def test_a_factory_returning_a_list_maps_labels_and_keeps_what():
    policy = as_policy(lambda env: ["a", "b"], None, what="canary", action=str.upper)
    assert policy.actions == ["A", "B"] and policy.name == "canary"
    with pytest.raises(ValueError, match="^canary is an empty list"):
        as_policy(lambda env: [], None, what="canary")


def test_a_factory_returning_a_policy_or_a_callable():
    inner = SequencePolicy([5], name="inner")
    assert as_policy(lambda env: inner, None) is inner

    class Chooser:  # a callable object whose signature cannot count as (obs, info)
        def __call__(self, obs, info):
            return "chosen"

    policy = as_policy(lambda: Chooser(), None, name="obj")
    assert isinstance(policy, CallablePolicy) and policy.name == "obj" and act(policy) == "chosen"


@pytest.mark.parametrize("built,kind", [(3, "int"), ("go", "str"), (b"go", "bytes"), (None, "NoneType")])
def test_a_factory_returning_something_else_is_refused_with_its_type(built, kind):
    with pytest.raises(TypeError, match=f"^canary callable returned {kind}; expected an envaudit.Policy, a "
                                        r"function \(obs, info\) -> action, or a list of actions$"):
        as_policy(lambda env: built, None, what="canary")


def test_anything_else_is_refused_with_the_forms_and_its_type():
    with pytest.raises(TypeError) as info:
        as_policy(2.5, None, what="the oracle")
    assert str(info.value) == (
        "the oracle must be an envaudit.Policy, a function (obs, info) -> action, a list of actions, or a "
        "callable (env) -> one of those such as `lambda env: env.unwrapped.oracle()`; got float")


def test_policies_returned_are_policies():
    for value in ([1], lambda o, i: 1, lambda env: [1], lambda: (lambda o, i: 1)):
        assert isinstance(as_policy(value, None), Policy)
