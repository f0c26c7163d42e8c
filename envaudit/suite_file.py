"""What a suite scans: its entries, read from targets, a ``suite.toml`` or a dataset pattern.

A suite is a list of envs, each scanned as ``envaudit scan`` would scan it alone. Targets come
from the command line (``envaudit scan A B C``), from a suite file, or from a pattern over an
ecosystem's task list (``reasoning-gym:*``, ``reasoning-gym:arc_*``) or over Gymnasium's registry
(``envaudit/*``). A suite file::

    out = "reports/nightly"            # optional; --out wins

    [defaults]                         # any scan option, for every env
    quick = true
    probes = ["api", "timeouts", "length"]

    [[env]]
    target = "envaudit/Helpdesk-v0"

    [[env]]
    target = "envaudit/CodeFix-v0"
    name = "codefix-rllm"              # its report folder (default: the target, slugged)
    pipeline = "rllm"

    [[env]]
    target = "reasoning-gym"           # with tasks: one env per matching dataset
    tasks = ["leg_counting", "basic_*"]
    env_args = { size = 50 }

    [[env]]
    target = "skyrl-gym:gsm8k"         # an adapter fed row files: one env per matching file
    tasks = "data/gsm8k/*.parquet"

Options are layered from general to specific: ``[tool.envaudit]`` of ./pyproject.toml, the suite
file's ``[defaults]``, the command line's flags, then the env's own entry.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import importlib
import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envaudit.config import ScanConfig, normalise_options
from envaudit.errors import UsageError

ENTRY_KEYS = ("target", "name", "env_args", "tasks")
"""Keys of an ``[[env]]`` entry besides the scan options (``ScanConfig`` fields)."""
PATTERN_CHARS = "*?["
IDENTITY_IGNORES = ("out", "fail_on")
"""Config fields that do not change what a scan finds: a finished env is kept when only these differ."""


@dataclass(frozen=True)
class SuiteEntry:
    """One env of a suite: its target, its factory options, the scan config, and its folder name."""

    name: str
    target: str
    env_args: Mapping[str, Any] = field(default_factory=dict)
    config: ScanConfig = field(default_factory=ScanConfig)

    def identity(self, version: str) -> str:
        """A short hash of everything that decides what this env's scan finds; a finished report
        folder with the same identity is kept on resume."""
        config = {k: v for k, v in self.config.to_dict().items() if k not in IDENTITY_IGNORES}
        blob = json.dumps({"target": self.target, "env_args": dict(self.env_args), "config": config,
                           "envaudit_version": version}, sort_keys=True, default=repr)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SuiteFile:
    """A parsed suite file: its ``out``, its ``[defaults]`` and its raw ``[[env]]`` entries."""

    path: Path
    out: str | None
    defaults: dict[str, Any]
    envs: list[dict[str, Any]]


def read_suite_file(path: str | Path) -> SuiteFile:
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--suite {str(path)!r}: no such file; give the path of a suite TOML file")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--suite {path} is not valid TOML ({exc}); fix it") from None
    unknown = sorted(set(data) - {"out", "defaults", "env"})
    if unknown:
        raise UsageError(f"--suite {path}: unknown top-level key {unknown[0]!r}; expected out, [defaults] "
                         "and [[env]] entries")
    envs = data.get("env", [])
    if not isinstance(envs, list) or not envs or not all(isinstance(e, dict) for e in envs):
        raise UsageError(f"--suite {path} has no [[env]] entries; add one per env, e.g.\n"
                         '[[env]]\ntarget = "envaudit/Helpdesk-v0"')
    defaults = normalise_options(data.get("defaults", {}), f"[defaults] of {path}", exclude=("out",),
                                 extra=("env_args",))
    out = data.get("out")
    if out is not None and not isinstance(out, str):
        raise UsageError(f"--suite {path}: out = {out!r}; expected a folder path as a string")
    return SuiteFile(path, out, defaults, envs)


# -- patterns ------------------------------------------------------------------------------------
def is_pattern(text: str) -> bool:
    return any(ch in text for ch in PATTERN_CHARS)


def adapter_tasks(prefix: str) -> list[str]:
    """Every task id an ecosystem ships: the adapter module's ``tasks()`` when it has one (so a new
    adapter lists its own), else what its package registers."""
    from envaudit.adapters import ADAPTERS, require

    module = importlib.import_module(ADAPTERS[prefix])
    if callable(getattr(module, "tasks", None)):
        return sorted(module.tasks())
    if prefix == "reasoning-gym":
        require("reasoning_gym", package="reasoning-gym", extra="reasoning-gym")
        from reasoning_gym.factory import DATASETS

        return sorted(DATASETS)
    if prefix == "textarena":
        require("textarena", package="textarena", extra="textarena")
        from textarena.envs.registration import ENV_REGISTRY

        return sorted(ENV_REGISTRY)
    if prefix == "gem":
        require("gem", package="gem-llm", extra="gem")
        from gem.envs.registration import ENV_REGISTRY as GEM_REGISTRY

        return sorted(GEM_REGISTRY)
    raise UsageError(f"the {prefix} adapter cannot list its tasks, so {prefix}:PATTERN cannot expand; "
                     "name its tasks one by one")


def expand(target: str, tasks: Sequence[str] | None = None) -> list[str]:
    """The targets one entry stands for: itself, or every task id its pattern (or ``tasks``) matches."""
    from envaudit.adapters import ADAPTERS, prefix_of

    head = target.rstrip(":")
    prefix = head if head in ADAPTERS else prefix_of(target)
    if tasks is not None:
        if prefix is None:
            raise UsageError(f"tasks = {list(tasks)!r} needs an ecosystem target such as 'reasoning-gym', "
                             f"got target {target!r}")
        rest = target[len(prefix):].lstrip(":")
        if rest not in ("", "*"):
            raise UsageError(f"target {target!r} with tasks: give the bare ecosystem ({prefix!r}) and list "
                             "the tasks (or patterns) in tasks")
        patterns = list(tasks)
    elif is_pattern(target):
        patterns = [target[len(prefix) + 1:]] if prefix else [target]
    else:
        return [target]
    if prefix is None:
        import gymnasium as gym

        import envaudit.envs  # noqa: F401 - registers the bundled envs
        known, make = sorted(gym.registry), (lambda i: i)
    else:
        known, make = adapter_tasks(prefix), (lambda i: f"{prefix}:{i}")
    out: list[str] = []
    for pattern in patterns:
        hits = [k for k in known if fnmatch.fnmatchcase(k, pattern)] if is_pattern(pattern) else [pattern]
        if not hits:
            where = f"{prefix}'s {len(known)} tasks" if prefix else "Gymnasium's registered ids"
            raise UsageError(f"pattern {pattern!r} matches none of {where}; e.g. {known[0]!r}" if known
                             else f"pattern {pattern!r}: {where} are empty")
        out.extend(make(h) for h in hits)
    return list(dict.fromkeys(out))


def takes_row_files(target: str) -> bool:
    """Whether ``target``'s adapter reads its tasks from row files the user supplies (skyrl-gym)."""
    from envaudit.adapters import ADAPTERS, prefix_of

    prefix = prefix_of(target)
    return prefix is not None and bool(getattr(importlib.import_module(ADAPTERS[prefix]), "TAKES_TASKS", False))


def expand_rows(target: str, env_args: Mapping[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """For an adapter fed row files, ``tasks`` as a glob (``data/*.parquet``) stands for one env per
    matching file: ``[(env_args, folder suffix)]``; anything else is the entry itself."""
    tasks = env_args.get("tasks")
    if not (isinstance(tasks, str) and is_pattern(tasks) and takes_row_files(target)):
        return [(dict(env_args), "")]
    files = sorted(glob.glob(os.path.expanduser(tasks)))
    if not files:
        raise UsageError(f"tasks pattern {tasks!r} for {target} matches no file (relative to {Path.cwd()}); "
                         "give a glob of row files such as 'data/*.parquet'")
    return [({**env_args, "tasks": f}, f"-{Path(f).stem}") for f in files]


# -- building the entries ------------------------------------------------------------------------
def slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text).strip("-.") or "env"


def _config(options: Mapping[str, Any], where: str) -> ScanConfig:
    try:
        return ScanConfig(**options)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{where}: {exc}") from None


def build_entries(targets: Sequence[str], suite: SuiteFile | None, base: Mapping[str, Any],
                  flags: Mapping[str, Any], env_args: Mapping[str, Any]) -> list[SuiteEntry]:
    """The suite's envs in order, each with its folder name (unique) and its full scan config.

    ``base`` is ``[tool.envaudit]``; ``flags`` are the command line's scan options and ``env_args``
    its ``--env-arg`` options; the suite file's ``[defaults]`` sit between ``base`` and ``flags``,
    and an entry's own keys win over all of them.
    """
    defaults = dict(suite.defaults) if suite else {}
    common_args = {**defaults.pop("env_args", {}), **env_args}
    raw: list[tuple[str, dict[str, Any], str | None, str]] = []  # target, options, name, where
    for target in targets:
        raw.extend((t, {}, None, f"target {t!r}") for t in expand(target))
    for i, env in enumerate(suite.envs if suite else [], 1):
        where = f"[[env]] #{i} of {suite.path}"
        target = env.get("target")
        if not isinstance(target, str) or not target.strip():
            raise UsageError(f"{where} has no target; add target = \"ENV\" (a Gymnasium id, module:attr, "
                             "path/file.py:attr or an ecosystem target)")
        options = normalise_options({k: v for k, v in env.items() if k not in ("target", "name", "tasks")},
                                    where, exclude=("out",), extra=("env_args",))
        tasks = env.get("tasks")
        if isinstance(tasks, str) and takes_row_files(target.strip()):
            # An adapter fed row files: tasks is the row file (or a glob of them), as --tasks is.
            options.setdefault("env_args", {})
            options["env_args"] = {**options["env_args"], "tasks": tasks}
            tasks = None
        if tasks is not None and (not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks)):
            raise UsageError(f"{where}: tasks = {tasks!r}; expected a list of task ids or patterns "
                             "(or, for an adapter fed row files such as skyrl-gym, a row file or a glob of them)")
        expanded = expand(target.strip(), tasks)
        name = env.get("name")
        if name is not None and (not isinstance(name, str) or len(expanded) > 1):
            raise UsageError(f"{where}: name = {name!r} needs a single env (this entry expands to "
                             f"{len(expanded)}); drop name, the folders are named after the task ids")
        raw.extend((t, options, name, where) for t in expanded)
    if not raw:
        raise UsageError("no envs to scan; give ENV (one or more) or --suite FILE")
    entries, taken = [], set()
    for target, options, name, where in raw:
        own_args = options.pop("env_args", {})
        if not isinstance(own_args, dict):
            raise UsageError(f"{where}: env_args = {own_args!r}; expected a table such as {{ size = 50 }}")
        config = _config({**base, **defaults, **flags, **options}, where)
        for env_args, suffix in expand_rows(target, {**common_args, **own_args}):
            folder = slug((name or target) + suffix)
            candidate, n = folder, 1
            while candidate.lower() in taken:  # the same env twice (other options): folder-2, folder-3
                n += 1
                candidate = f"{folder}-{n}"
            taken.add(candidate.lower())
            entries.append(SuiteEntry(candidate, target, env_args, config))
    return entries


__all__ = ["SuiteEntry", "SuiteFile", "adapter_tasks", "build_entries", "expand", "is_pattern",
           "expand_rows", "normalise_options", "read_suite_file", "slug", "takes_row_files"]
