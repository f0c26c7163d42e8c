"""Adapters for the LLM-RL environment ecosystems, resolved by a prefix of the scan target.

``envaudit scan reasoning-gym:leg_counting``, ``textarena:GuessTheNumber-v0``,
``gem:game:GuessTheNumber-v0-easy``, ``skyrl-gym:gsm8k``, ``verifiers:my_env.py``,
``openenv:MODULE:CLASS``, ``openenv+http://HOST:PORT``: the part before the first ``:`` names the
ecosystem, the rest
is the ecosystem's own id. Options reach the adapter as keyword arguments (``--env-arg KEY=VALUE``
on the command line). Each adapter module imports its ecosystem lazily, so a missing package is a
``UsageError`` naming the extra to install, not an ImportError at ``import envaudit``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from envaudit.errors import UsageError

ADAPTERS: dict[str, str] = {
    "reasoning-gym": "envaudit.adapters.reasoning_gym",
    "textarena": "envaudit.adapters.textarena",
    "gem": "envaudit.adapters.gem",
    "skyrl-gym": "envaudit.adapters.skyrl_gym",
    "verifiers": "envaudit.adapters.verifiers",
    "openenv": "envaudit.adapters.openenv",
    "openenv+http": "envaudit.adapters.openenv_server",
}
"""Prefix -> module. A module exposes ``make(target, **env_args) -> gymnasium.Env`` and
``check(target, **env_args)`` (validates the id and the options without building an env). A module
whose tasks are rows the user supplies sets ``TAKES_TASKS = True`` and takes ``tasks=PATH``
(``--tasks``); the others refuse that option."""


def prefix_of(target: str) -> str | None:
    """The adapter prefix of a scan target, or None when it names no ecosystem."""
    head, sep, _ = target.partition(":")
    return head if sep and head in ADAPTERS else None


def require(module: str, *, package: str, extra: str) -> Any:
    """Import an ecosystem's package, or raise ``UsageError`` saying which extra installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.split(".")[0] == exc.name.split(".")[0]:
            raise UsageError(
                f"the {extra} adapter needs the {package!r} package, which is not installed; "
                f"install it with: pip install 'envaudit-rl[{extra}]'") from None
        raise UsageError(f"importing {module!r} failed: {exc}") from exc


def package_version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def resolve_adapter(target: str, env_args: Mapping[str, Any] | None = None
                    ) -> tuple[str, Callable[[], gym.Env]]:
    """``(env_id, make_env)`` for an ecosystem target such as ``reasoning-gym:leg_counting``.

    The id and the options are checked here (a typo is a usage error before any rollout); the
    factory builds a fresh env per call, as the scan needs.
    """
    prefix = prefix_of(target)
    if prefix is None:
        raise UsageError(f"{target!r} names no ecosystem; expected one of "
                         + ", ".join(f"{p}:ID" for p in ADAPTERS))
    name = target[len(prefix) + 1:].strip()
    if not name:
        raise UsageError(f"{target!r} has no id after {prefix + ':'!r}; e.g. {_EXAMPLES[prefix]}")
    module = importlib.import_module(ADAPTERS[prefix])
    kwargs = dict(env_args or {})
    if "tasks" in kwargs and not getattr(module, "TAKES_TASKS", False):
        raise UsageError(f"{prefix} makes its own tasks and takes no --tasks (env-arg tasks={kwargs['tasks']!r}); "
                         f"drop it, or scan an ecosystem whose tasks are rows you supply, e.g. "
                         f"{_EXAMPLES['skyrl-gym']} --tasks rows.jsonl")
    module.check(name, **kwargs)
    return target, functools.partial(module.make, name, **kwargs)


_EXAMPLES = {
    "reasoning-gym": "reasoning-gym:leg_counting",
    "textarena": "textarena:GuessTheNumber-v0",
    "gem": "gem:game:GuessTheNumber-v0-easy",
    "skyrl-gym": "skyrl-gym:gsm8k",
    "verifiers": "verifiers:my_env.py",
    "openenv": "openenv:echo_env.server.echo_env_environment:EchoEnvEnvironment",
    "openenv+http": "openenv+http://127.0.0.1:8000",
}

__all__ = ["ADAPTERS", "package_version", "prefix_of", "require", "resolve_adapter"]
