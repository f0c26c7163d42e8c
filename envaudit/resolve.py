"""Resolve what the user typed after ``envaudit scan`` into an env id and a zero-argument factory.

Accepted forms: a Gymnasium id (``CartPole-v1``, ``envaudit/CodeFix-v0``), ``module:attr`` or
``path/to/file.py:attr`` (attr an ``Env`` subclass or a zero-argument factory), and a module or
``.py`` file that exposes ``make_env()``, and an ecosystem target (``reasoning-gym:DATASET``,
``textarena:ENV_ID``, ``gem:ENV_ID``; see ``envaudit.adapters``). ``env_args`` (``--env-arg
KEY=VALUE``) are keyword arguments for the adapter, ``gym.make`` or the factory.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

from envaudit.errors import UsageError

EnvFactory = Callable[[], gym.Env]


def _did_you_mean(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
        close = [lowered[c] for c in close]
    return f"; did you mean {close[0]!r}?" if close else ""


_MAKE_OPTIONS = ("max_episode_steps", "disable_env_checker")  # taken by gym.make, not the env


def _gym_factory(env_id: str, env_args: dict[str, Any]) -> EnvFactory:
    """``gym.make`` with the options, checked now against the registered entry point's signature:
    an option the env does not take is a usage error, not a crash at the first reset."""
    passed = {k: v for k, v in env_args.items() if k not in _MAKE_OPTIONS}
    if passed:
        from gymnasium.envs.registration import load_env_creator

        spec = gym.spec(env_id)
        try:
            creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
            inspect.signature(creator).bind(**{**spec.kwargs, **passed})
        except TypeError as exc:
            raise UsageError(f"{env_id} does not take the --env-arg options {sorted(passed)}: {exc}") from None
        except (ValueError, ImportError, AttributeError):
            pass  # no signature or an entry point that will not load: let the first make tell
    return lambda: gym.make(env_id, **env_args)


def _unknown_gym_id(spec: str) -> UsageError:
    ids = sorted(gym.registry)
    name, _, _version = spec.rpartition("-v")
    if name:
        versions = sorted(i for i in ids if i.rpartition("-v")[0] == name)
        if versions:
            return UsageError(f"no Gymnasium env {spec!r}; did you mean {versions[-1]!r}? "
                              f"(registered versions: {', '.join(versions)})")
    hint = _did_you_mean(spec, ids)
    return UsageError(
        f"no Gymnasium env {spec!r}{hint}" + ("" if hint else
        " (give a registered id, module:attr, path/to/file.py:attr, or a module exposing make_env())")
    )


def _load_file(path: Path) -> Any:
    if not path.exists():
        raise UsageError(f"no such file {str(path)!r}; check the path (relative to {Path.cwd()})")
    module_name = "envaudit_user_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {str(path)!r} as Python; is it a .py file?")
    module = importlib.util.module_from_spec(spec)
    # As `python path/file.py` does: the file's folder comes first on sys.path, so the file imports
    # its sibling modules. It stays there (an env may import lazily, at make or step), and worker
    # processes get it with the rest of sys.path, or add it themselves when they resolve the file.
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            hint = (f"; {exc.name!r} is neither beside the file (its folder {folder} is on the path) nor "
                    f"installed for {sys.executable}: install it, or add its folder to PYTHONPATH")
        raise UsageError(f"importing {str(path)!r} failed: {type(exc).__name__}: {exc}{hint}") from exc
    return module


def _load_module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise UsageError(
                f"no module {name!r}; is it installed or on PYTHONPATH? (for a file, give path/to/file.py)"
            ) from exc
        raise UsageError(f"importing {name!r} failed: {exc}") from exc
    except Exception as exc:
        raise UsageError(f"importing {name!r} failed: {type(exc).__name__}: {exc}") from exc


def _factory_from(obj: Any, where: str, env_args: dict[str, Any] | None = None) -> EnvFactory:
    if env_args:
        not_a_factory = isinstance(obj, gym.Env) or not callable(obj) or (
            inspect.isclass(obj) and not issubclass(obj, gym.Env))
        if not_a_factory:
            return _factory_from(obj, where)  # raises the error it raises without options
        try:
            inspect.signature(obj).bind(**env_args)
        except TypeError as exc:
            raise UsageError(f"{where} does not take the --env-arg options {sorted(env_args)}: {exc}") from None
        except ValueError:
            pass  # builtins without a signature: let the first call tell
        return functools.partial(obj, **env_args)
    if inspect.isclass(obj):
        if not issubclass(obj, gym.Env):
            raise UsageError(f"{where} is a class but not a gymnasium.Env subclass ({obj.__name__})")
        return obj
    if isinstance(obj, gym.Env):
        raise UsageError(
            f"{where} is an env instance; a scan needs fresh envs, so point at its class or a "
            "zero-argument factory function instead"
        )
    if callable(obj):
        try:
            inspect.signature(obj).bind()
        except TypeError:
            raise UsageError(f"{where} must be callable with no arguments; wrap it: def make_env(): return ...") from None
        except ValueError:
            pass  # builtins without a signature: let the first call tell
        return obj
    raise UsageError(f"{where} is a {type(obj).__name__}, not an Env class or a factory")


def resolve_env(spec: str, env_args: dict[str, Any] | None = None) -> tuple[str, EnvFactory]:
    """Return ``(env_id, factory)`` for a user's ENV argument, or raise ``UsageError``."""
    # The bundled envs are registered by envaudit/__init__.py, which Python runs before this module
    # (importing envaudit.envs here would close a circle: envs -> rollout -> resolve -> envs).
    from envaudit.adapters import prefix_of, resolve_adapter

    spec = spec.strip()
    env_args = dict(env_args or {})
    if not spec:
        raise UsageError("ENV is empty; give a Gymnasium id such as CartPole-v1")
    if prefix_of(spec) is not None:  # before module:attr, since ids such as gem:game:X hold colons
        return resolve_adapter(spec, env_args)
    if spec in gym.registry:
        return spec, _gym_factory(spec, env_args)
    head, sep, attr = spec.rpartition(":")
    if sep and head and re.fullmatch(r"[A-Za-z_][\w.]*", attr or ""):
        is_file = head.endswith(".py") or "/" in head or "\\" in head
        module = _load_file(Path(head)) if is_file else _load_module(head)
        if not hasattr(module, attr):
            names = [n for n in vars(module) if not n.startswith("_")]
            raise UsageError(f"{head!r} has no attribute {attr!r}{_did_you_mean(attr, names)}")
        return spec, _factory_from(getattr(module, attr), spec, env_args)
    if spec.endswith(".py") or Path(spec).is_file():
        module = _load_file(Path(spec))
        return spec, _make_env_of(module, spec, env_args)
    if re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*", spec) and "-v" not in spec:
        try:
            module = _load_module(spec)
        except UsageError:
            raise _unknown_gym_id(spec) from None
        return spec, _make_env_of(module, spec, env_args)
    raise _unknown_gym_id(spec)


def _make_env_of(module: Any, spec: str, env_args: dict[str, Any]) -> EnvFactory:
    make = getattr(module, "make_env", None)
    if make is None:
        raise UsageError(f"{spec!r} has no make_env(); add one, or name the attribute as {spec}:ATTR")
    return _factory_from(make, f"{spec}:make_env", env_args)


def fingerprint(env: gym.Env) -> dict[str, Any]:
    """What identifies the env a report was made on: class, source hash, spaces, spec."""
    base = env.unwrapped
    cls = type(base)
    source_hash = None
    try:
        source = Path(inspect.getfile(cls)).read_bytes()
        source_hash = hashlib.sha256(source).hexdigest()[:16]
    except (TypeError, OSError):
        pass
    spec = env.spec
    return {
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "source_sha256": source_hash,
        "observation_space": repr(env.observation_space),
        "action_space": repr(env.action_space),
        "spec_id": spec.id if spec is not None else None,
        "spec_kwargs": {k: repr(v) for k, v in (spec.kwargs or {}).items()} if spec is not None else {},
        "max_episode_steps": spec.max_episode_steps if spec is not None else getattr(base, "max_steps", None),
        "gymnasium_version": gym.__version__,
        # Ecosystem adapters say what they mapped and how (package version, success signal, and
        # replayability risks such as seeding Python's global random).
        **({"adapter": dict(base.adapter_info)} if isinstance(getattr(base, "adapter_info", None), dict) else {}),
    }
