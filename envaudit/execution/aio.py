"""``--executor asyncio``: many concurrent episodes for envs that wait on I/O (clients of a server).

An env whose ``step`` is an HTTP call, a sandbox run or a database query spends its time waiting.
Its episodes are played many at once (``--workers 64`` is cheap: a waiting episode holds no core),
each on a slot of its own, as the threads executor does. An env that exposes ``async def reset``
and ``async def step`` (a client written for asyncio) is driven natively: every call of every
episode is a coroutine awaited on one event loop of this process (``event_loop``), so a thousand
open connections cost one loop, not a thousand blocking calls; the episode's own bookkeeping (the
policy, recording, the deadline) waits for the coroutine's result (``AsyncBridge``). A sync env
is offloaded to the slot's thread, as under threads. Nothing is isolated: env code that kills the
process kills the scan (use processes for envs that might).

``AsyncBridge`` is applied wherever an env is made (episodes, the GRPO probe's lanes, the scan's
own instance), so an async env can be scanned under any executor; only here does the number of
workers go past the cores.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from envaudit.execution.local import ThreadExecutor

DEFAULT_WORKERS = 64
"""Concurrent episodes of ``--executor asyncio`` when ``--workers`` is not given."""

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def event_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for env coroutines, running on a daemon thread (started on first
    use, and again in a worker process forked from one that had it)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="envaudit-asyncio", daemon=True)
            _thread.start()
        return _loop


def is_async(env: Any) -> bool:
    """Whether ``env``'s own ``reset`` or ``step`` is a coroutine function."""
    return inspect.iscoroutinefunction(getattr(env, "step", None)) or inspect.iscoroutinefunction(
        getattr(env, "reset", None))


def _wait(result: Any) -> Any:
    if not inspect.isawaitable(result):
        return result
    future = asyncio.run_coroutine_threadsafe(_awaited(result), event_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()  # the caller gave up (its deadline, Ctrl-C): the coroutine stops at its next await
        raise


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


class AsyncBridge(gym.Wrapper):
    """An env with ``async`` reset/step, stepped through Gymnasium's sync API: each call is a
    coroutine on this process's event loop, and the caller waits for its result. Everything else
    (spaces, attributes, ``unwrapped``) is the env's own."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return _wait(self.env.reset(seed=seed, options=options))

    def step(self, action: Any) -> Any:
        return _wait(self.env.step(action))

    def close(self) -> None:
        _wait(self.env.close())


def sync_env(env: gym.Env) -> gym.Env:
    """``env`` itself, or bridged when its reset/step are coroutines."""
    return AsyncBridge(env) if is_async(env) else env


def sync_factory(make_env: Callable[[], gym.Env]) -> Callable[[], gym.Env]:
    """``make_env`` whose envs come bridged when their reset/step are coroutines (the scan's own
    factory: its first make, the instances probes inspect, Gymnasium's ``check_env``)."""
    if getattr(make_env, "_envaudit_sync", False):
        return make_env

    @functools.wraps(make_env)
    def made() -> gym.Env:
        return sync_env(make_env())

    made._envaudit_sync = True  # type: ignore[attr-defined]
    return made


class AsyncioExecutor(ThreadExecutor):
    """Many episodes at once for I/O-bound envs: async envs awaited on one event loop, sync envs
    on their slots' threads."""

    kind = "asyncio"

    def __init__(self, workers: int = DEFAULT_WORKERS) -> None:
        super().__init__(workers)
        event_loop()


__all__ = ["DEFAULT_WORKERS", "AsyncBridge", "AsyncioExecutor", "event_loop", "is_async", "sync_env", "sync_factory"]
