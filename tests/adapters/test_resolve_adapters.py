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


def test_every_prefix_and_what_is_not_one():
    from envaudit.adapters import ADAPTERS

    assert prefix_of("openenv+http://127.0.0.1:8000") == "openenv+http"
    assert prefix_of("openenv:echo_env.server:EchoEnv") == "openenv" and prefix_of("skyrl-gym:gsm8k") == "skyrl-gym"
    assert prefix_of("verifiers") is None and prefix_of(":leg_counting") is None and prefix_of("") is None
    assert set(ADAPTERS) == {"reasoning-gym", "textarena", "gem", "skyrl-gym", "verifiers", "openenv", "openenv+http"}


def test_a_target_naming_no_ecosystem_lists_them_all():
    with pytest.raises(UsageError) as caught:
        resolve_adapter("tetris:v1")
    assert str(caught.value) == ("'tetris:v1' names no ecosystem; expected one of reasoning-gym:ID, textarena:ID, "
                                 "gem:ID, skyrl-gym:ID, verifiers:ID, openenv:ID, openenv+http:ID")


@pytest.mark.parametrize("target, example", [("textarena:", "textarena:GuessTheNumber-v0"),
                                             ("skyrl-gym:   ", "skyrl-gym:gsm8k")])
def test_an_empty_id_names_an_example_of_the_ecosystem(target, example):
    with pytest.raises(UsageError) as caught:
        resolve_adapter(target)
    assert str(caught.value) == f"{target!r} has no id after {target.split(':')[0] + ':'!r}; e.g. {example}"


def test_tasks_are_refused_where_the_ecosystem_makes_its_own():
    pytest.importorskip("reasoning_gym")
    with pytest.raises(UsageError) as caught:
        resolve_adapter("reasoning-gym:leg_counting", {"tasks": "rows.jsonl"})
    assert str(caught.value) == ("reasoning-gym makes its own tasks and takes no --tasks (env-arg tasks='rows.jsonl'); "
                                 "drop it, or scan an ecosystem whose tasks are rows you supply, e.g. "
                                 "skyrl-gym:gsm8k --tasks rows.jsonl")


def test_the_factory_builds_a_fresh_env_with_the_options():
    pytest.importorskip("reasoning_gym")
    from envaudit.adapters import reasoning_gym

    env_id, make = resolve_adapter(" reasoning-gym: leg_counting ".strip(), {"size": 12})
    assert env_id == "reasoning-gym: leg_counting"
    assert (make.func, make.args, make.keywords) == (reasoning_gym.make, ("leg_counting",), {"size": 12})
    first, second = make(), make()
    try:
        assert first is not second and first.adapter_info["size"] == 12
    finally:
        first.close()
        second.close()


def test_require_imports_or_names_the_extra(tmp_path, monkeypatch):
    import json as json_module

    assert require("json", package="json", extra="none") is json_module
    with pytest.raises(UsageError) as caught:
        require("envaudit_no_such_package_xyz.sub", package="gem-llm", extra="gem")
    assert str(caught.value) == ("the gem adapter needs the 'gem-llm' package, which is not installed; "
                                 "install it with: pip install 'envaudit-rl[gem]'")
    # The package is there but one of its own imports is missing: that is named, not the extra.
    (tmp_path / "envaudit_half_installed.py").write_text("import envaudit_missing_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UsageError) as caught:
        require("envaudit_half_installed", package="half", extra="half")
    assert str(caught.value) == ("importing 'envaudit_half_installed' failed: "
                                 "No module named 'envaudit_missing_dependency_xyz'")


def test_package_version_reads_the_installed_metadata():
    import importlib.metadata

    from envaudit.adapters import package_version

    assert package_version("gymnasium") == importlib.metadata.version("gymnasium")
    assert package_version("envaudit-no-such-distribution") is None


def test_tasks_reach_an_ecosystem_that_takes_them_and_the_options_are_checked_first():
    pytest.importorskip("skyrl_gym")
    pytest.importorskip("reasoning_gym")
    from pathlib import Path

    rows = str(Path(__file__).parent / "data" / "skyrl_gsm8k.jsonl")
    _, make = resolve_adapter("skyrl-gym:gsm8k", {"tasks": rows})
    assert make.args == ("gsm8k",) and make.keywords == {"tasks": rows}
    assert resolve_adapter("reasoning-gym:leg_counting")[1].args == ("leg_counting",)
    with pytest.raises(UsageError, match="size"):  # the adapter's own check saw the option
        resolve_adapter("reasoning-gym:leg_counting", {"size": -1})
