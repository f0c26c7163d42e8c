import gymnasium as gym
import pytest

from envaudit.errors import UsageError
from envaudit.resolve import fingerprint, resolve_env

FIXTURE_FILE = "tests/fixtures/user_envs.py"


@pytest.mark.parametrize(
    "spec",
    [
        "CartPole-v1",
        "tests.fixtures.user_envs:CoinEnv",
        "tests.fixtures.user_envs:make_coin",
        "tests.fixtures.user_envs",
        f"{FIXTURE_FILE}:CoinEnv",
        f"{FIXTURE_FILE}:make_coin",
        FIXTURE_FILE,
    ],
)
def test_every_form_resolves_to_a_factory_of_fresh_envs(spec, monkeypatch):
    monkeypatch.syspath_prepend(".")
    env_id, make = resolve_env(spec)
    assert env_id == spec
    a, b = make(), make()
    assert isinstance(a, gym.Env) and a is not b
    a.reset(seed=0)
    a.step(a.action_space.sample())


def test_bundled_namespace_is_registered():
    import envaudit.envs  # noqa: F401

    bundled = [k for k in gym.registry if k.startswith("envaudit/")]
    for env_id in bundled:
        assert resolve_env(env_id)[0] == env_id


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("CartPol-v1", "no Gymnasium env 'CartPol-v1'; did you mean 'CartPole-v1'?"),
        ("Taxi-v3", "no Gymnasium env 'Taxi-v3'; did you mean 'Taxi-v4'?"),
        ("no_such_module_xyz", "no Gymnasium env 'no_such_module_xyz'"),
        ("no_such_module_xyz:Env", "no module 'no_such_module_xyz'; is it installed or on PYTHONPATH?"),
        ("tests.fixtures.user_envs:CoinEnvv", "has no attribute 'CoinEnvv'; did you mean 'CoinEnv'?"),
        ("tests.fixtures.user_envs:instance", "is an env instance; a scan needs fresh envs"),
        ("tests.fixtures.user_envs:not_an_env", "is a int, not an Env class or a factory"),
        ("tests.fixtures.user_envs:needs_args", "must be callable with no arguments"),
        ("missing/file.py:Env", "no such file 'missing/file.py'"),
        ("", "ENV is empty"),
    ],
)
def test_bad_specs_name_the_fix(spec, message, monkeypatch):
    monkeypatch.syspath_prepend(".")
    with pytest.raises(UsageError) as err:
        resolve_env(spec)
    assert message in str(err.value)


def test_fingerprint_identifies_class_spaces_and_spec():
    fp = fingerprint(gym.make("CartPole-v1"))
    assert fp["class"] == "gymnasium.envs.classic_control.cartpole.CartPoleEnv"
    assert fp["spec_id"] == "CartPole-v1" and fp["max_episode_steps"] == 500
    assert len(fp["source_sha256"]) == 16


def test_env_args_on_a_registered_id_are_checked_against_its_entry_point():
    with pytest.raises(UsageError, match=r"CartPole-v1 does not take the --env-arg options \['foo'\]"):
        resolve_env("CartPole-v1", {"foo": 1})
    _, make = resolve_env("CartPole-v1", {"render_mode": "rgb_array", "max_episode_steps": 20})
    env = make()  # gym.make's own options pass to gym.make, the env's to the env
    assert env.spec.max_episode_steps == 20 and env.render_mode == "rgb_array"
