import json
import sys

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


_SIBLING = '''
import gymnasium as gym


class Coin(gym.Env):
    action_space = gym.spaces.Discrete(2)
    observation_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        return 0, float(action), True, False, {"success": bool(action)}
'''


@pytest.fixture
def sibling_files(tmp_path, monkeypatch):
    """``desk/bad_envs.py`` importing its sibling ``desk/<name>.py``, as ``python bad_envs.py`` finds it."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # the resolver adds the file's folder to this copy
    name = f"edges_sibling_{tmp_path.name.replace('-', '_')}"
    (tmp_path / "desk").mkdir()
    (tmp_path / "desk" / f"{name}.py").write_text(_SIBLING)
    (tmp_path / "desk" / "bad_envs.py").write_text(f"from {name} import Coin\n\n\ndef make():\n    return Coin()\n")
    yield tmp_path / "desk" / "bad_envs.py"
    sys.modules.pop(name, None)


def test_a_file_imports_its_sibling_module_as_python_does_for_a_script(sibling_files, monkeypatch):
    monkeypatch.chdir(sibling_files.parents[1])
    _, make = resolve_env("desk/bad_envs.py:make")
    assert make().step(1)[1] == 1.0
    assert sys.path[0] == str(sibling_files.parent)  # first, as for a script: its siblings win


def test_a_file_whose_import_is_missing_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "envs.py").write_text("import no_such_helper_module_xyz\n\n\ndef make():\n    pass\n")
    with pytest.raises(UsageError) as err:
        resolve_env(f"{tmp_path}/envs.py:make")
    assert "No module named 'no_such_helper_module_xyz'" in str(err.value)
    assert "install it, or add its folder to PYTHONPATH" in str(err.value)


def test_a_file_importing_its_sibling_scans_in_worker_processes(sibling_files, monkeypatch, capsys):
    """The process executor's workers and the probe host rebuild the env from the spec: the
    sibling must import there too, or every episode would be lost to a worker-side ImportError."""
    from envaudit.cli import main

    monkeypatch.chdir(sibling_files.parents[1])
    rc = main(["scan", "desk/bad_envs.py:make", "--quick", "--probes", "replay", "--workers", "1",
               "--executor", "processes", "--out", "out", "--no-progress"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    report = json.loads((sibling_files.parents[1] / "out" / "report.json").read_text())
    assert report["exploration"]["episodes"] > 0 and report["broken"] is None
    assert [p["status"] for p in report["probes"]] == ["ok"]
