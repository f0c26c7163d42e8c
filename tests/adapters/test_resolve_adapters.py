"""Ecosystem targets resolve by prefix; a missing package or a bad id is a usage error (exit 2)."""

from __future__ import annotations

import importlib.util

import pytest

from envaudit.adapters import prefix_of, require, resolve_adapter
from envaudit.cli import _env_args, main
from envaudit.errors import UsageError
from envaudit.resolve import resolve_env


def test_prefixes():
    assert prefix_of("reasoning-gym:leg_counting") == "reasoning-gym"
    assert prefix_of("gem:game:GuessTheNumber-v0-easy") == "gem"
    assert prefix_of("textarena:TicTacToe-v0") == "textarena"
    assert prefix_of("envaudit/CodeFix-v0") is None and prefix_of("mymodule:make") is None


def test_missing_package_names_the_extra():
    with pytest.raises(UsageError, match=r"pip install 'envaudit-rl\[gem\]'"):
        require("envaudit_no_such_package_xyz", package="gem-llm", extra="gem")


def test_empty_id_is_a_usage_error():
    with pytest.raises(UsageError, match="no id after"):
        resolve_adapter("textarena:")


def test_env_args_are_json_when_they_parse():
    assert _env_args(["size=50", "extract=false", "name=leg", "xs=[1,2]", "f=0.5"]) == {
        "size": 50, "extract": False, "name": "leg", "xs": [1, 2], "f": 0.5}
    with pytest.raises(UsageError, match="KEY=VALUE"):
        _env_args(["no-equals-sign"])


def test_env_args_reach_a_factory(tmp_path):
    path = tmp_path / "user_env.py"
    path.write_text("import gymnasium as gym\n"
                    "def make_env(limit=5):\n"
                    "    return gym.wrappers.TimeLimit(gym.make('CartPole-v1'), max_episode_steps=limit)\n")
    _, make = resolve_env(f"{path}:make_env", {"limit": 7})
    assert make().spec.max_episode_steps == 7
    with pytest.raises(UsageError, match="does not take the --env-arg options"):
        resolve_env(f"{path}:make_env", {"nope": 1})


@pytest.mark.skipif(importlib.util.find_spec("gem") is not None, reason="gem-llm is installed here")
def test_cli_exits_2_naming_the_extra_when_the_package_is_missing(capsys):
    assert main(["scan", "gem:game:GuessTheNumber-v0-easy", "--quick", "--no-progress"]) == 2
    assert "pip install 'envaudit-rl[gem]'" in capsys.readouterr().err


def test_unknown_dataset_suggests_a_name():
    pytest.importorskip("reasoning_gym")
    with pytest.raises(UsageError, match="did you mean 'leg_counting'"):
        resolve_env("reasoning-gym:leg_countin")


def test_cli_passes_env_args_to_the_adapter(tmp_path, monkeypatch):
    pytest.importorskip("reasoning_gym")
    import json

    monkeypatch.chdir(tmp_path)
    rc = main(["scan", "reasoning-gym:leg_counting", "--env-arg", "size=20", "--env-arg", "dataset_seed=3",
               "--quick", "--probes", "replay", "--out", "out", "--no-progress"])
    assert rc == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["env_id"] == "reasoning-gym:leg_counting"
    assert (report["fingerprint"]["adapter"]["size"], report["fingerprint"]["adapter"]["dataset_seed"]) == (20, 3)
    assert main(["scan", "reasoning-gym:leg_counting", "--env-arg", "size=-1", "--no-progress"]) == 2
