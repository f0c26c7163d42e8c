"""What a worker process that runs one probe after another must reset, and when it is unfit to reuse.

A probe host (``envaudit.probe_host``) keeps its worker process from one probe to the next, so the
second probe does not pay for a new process, its imports and the first use of its libraries. The
next probe must still get the result a fresh worker would give. Each probe already gets its own
env instances, factory and copy of the scan's records; what else lives in the process is handled
here, in two ways:

- **reset** before every probe: the global random generators (``random``, NumPy's legacy global,
  torch's default), which env code and libraries draw from freely, go back to the state the worker
  had before its first probe, as a fresh worker forked from the same server would have them;
- **checked** after every probe: anything else a probe or its env could leave behind, and the host
  asks for a fresh worker before the next probe when it changed. That is the module state of the
  env and of envaudit (a global rebound, a container grown or shrunk, a class attribute patched, a
  module-level generator drawn from), a few process settings (environment variables, signal
  handlers, NumPy's error handling, torch's threads, dtype and determinism), threads still
  running (an env call abandoned past its deadline), a probe that did not end cleanly, and memory
  that grew past the recycle limit.

The check is a shallow one (identity and size of each global, not a deep copy), so it is cheap
enough to run after every probe. A mutation it cannot see (an element of a list changed in place)
is one the env would make in the scanning process too, under ``--executor inline``.
"""

from __future__ import annotations

import collections
import gc
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

# Library modules whose top level a probe or an env might patch (time.sleep, builtins.open, a
# torch setting); their submodules are too many to watch and are no env's state.
LIBRARIES = ("builtins", "random", "time", "os", "math", "numpy", "numpy.random", "gymnasium", "gymnasium.core",
             "torch")
SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGALRM", "SIGCHLD",
                                                                 "SIGPIPE", "SIGUSR1", "SIGUSR2", "SIGHUP"))
                if s is not None)
THREAD_GRACE_S = 1.0
"""How long threads started by a probe get to end (idle deadline threads end once collected)."""


def _size(value: Any) -> Any:
    """What changes when a global is mutated in place without being rebound (``None``: not watched)."""
    if value is random._inst:  # noqa: SLF001 - the global generator, reset before every probe
        return None
    if isinstance(value, (list, dict, set, collections.deque, bytearray)):
        return len(value)
    if isinstance(value, random.Random):
        return hash(value.getstate())
    if isinstance(value, np.random.Generator):
        return repr(value.bit_generator.state)
    if isinstance(value, np.random.RandomState):
        return hash(value.get_state()[1].tobytes())
    if isinstance(value, np.ndarray) and value.size <= 4096:
        return hash(value.tobytes())
    return None


CACHES = frozenset({"__slotnames__", "__warningregistry__"})
"""Entries Python itself adds as caches (pickling a class, a warning shown once): never state."""


def _namespace(name: str, namespace: dict[str, Any]) -> list[tuple[str, int, Any]]:
    rows = []
    classes = name not in LIBRARIES  # a library's own classes (torch's tensor types) are no env state
    for key, value in list(namespace.items()):
        if key in CACHES:
            continue
        rows.append((key, id(value), _size(value)))
        if classes and isinstance(value, type) and getattr(value, "__module__", None) == name:
            rows.extend((f"{key}.{k}", id(v), _size(v)) for k, v in list(vars(value).items()) if k not in CACHES)
    return rows


def watched_modules(env_modules: Iterable[str]) -> list[str]:
    """The modules whose state a probe must leave as it found them: every loaded module of the
    env's own packages (not the big libraries it builds on), envaudit's, and a few libraries' top level."""
    roots = {m.split(".")[0] for m in env_modules} - {"gymnasium", "numpy", "torch", "scipy", "pandas"}
    roots.add("envaudit")
    names = [m for m in list(sys.modules) if m.split(".")[0] in roots]
    return sorted({*names, *(m for m in LIBRARIES if m in sys.modules)})


def _settings() -> dict[str, Any]:
    out: dict[str, Any] = {"environ": dict(os.environ), "cwd": os.getcwd(), "numpy errors": np.geterr(),
                           "signals": [signal.getsignal(s) for s in SIGNALS]}
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = (torch.get_num_threads(), torch.get_default_dtype(),
                        torch.are_deterministic_algorithms_enabled())
    return out


class Snapshot:
    """The process state around one probe run: taken before it, compared after it."""

    def __init__(self, modules: list[str]) -> None:
        self.modules = modules
        self.state = {m: _namespace(m, vars(sys.modules[m])) for m in modules if m in sys.modules}
        self.settings = _settings()
        self.threads = {t.ident for t in threading.enumerate()}

    def changed(self) -> str | None:
        """What differs now (in words), or None: a fresh worker and this one would give the next
        probe the same process."""
        for name, rows in self.state.items():
            module = sys.modules.get(name)
            now = _namespace(name, vars(module)) if module is not None else []
            if now != rows:
                before = {r[0]: r for r in rows}
                after = {r[0]: r for r in now}
                keys = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
                return f"the state of module {name} changed ({', '.join(keys[:3])})"
        settings = _settings()
        for key, value in self.settings.items():
            if settings.get(key) != value:
                return f"the process's {key} changed"
        started = [t for t in threading.enumerate() if t.ident not in self.threads]
        if started:
            gc.collect()  # idle deadline threads end once their owner is collected
        end = time.monotonic() + THREAD_GRACE_S
        for t in started:
            t.join(max(0.0, end - time.monotonic()))
            if t.is_alive():
                return f"a thread it started is still running ({t.name})"
        return None


class Randomness:
    """The global random generators as the worker had them before its first probe."""

    def __init__(self) -> None:
        self.python = random.getstate()
        self.numpy = np.random.get_state()
        torch = sys.modules.get("torch")
        self.torch = torch.get_rng_state() if torch is not None else None

    def restore(self) -> None:
        random.setstate(self.python)
        np.random.set_state(self.numpy)
        torch = sys.modules.get("torch")
        if torch is not None:
            if self.torch is None:  # first imported by the last probe: its state from here on
                self.torch = torch.get_rng_state()
            torch.set_rng_state(self.torch)
