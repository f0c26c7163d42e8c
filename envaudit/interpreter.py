"""Episodes replayed in a fresh Python interpreter with another ``PYTHONHASHSEED``.

State hidden in ``hash()`` of a string, or in the order of a set of strings, replays the same in
one process and differently in the next: a resumed run, a spawned rollout worker, another machine.
Every other replay of a scan runs in processes that share one hash seed (the scanning process, or
the worker processes forked from one server), so only a replay in a process started with another
hash seed can see it.

``Elsewhere`` starts that process (``sys.executable``, the scan's working folder and ``sys.path``)
and hands it the env (the target spec, resolved there, or the factory, sent with ``cloudpickle``)
and the plans (reset seed and actions); the child plays each plan once, on a new instance, and
sends back what the agent saw: the reset observation and, per step, the action, observation, reward, ``terminated``,
``truncated``, the tool status and the name of an exception ``step`` raised. The caller compares.

This is the one place env code runs outside the executor: the point is a process the executor's
workers are not. Its work is counted in env steps by the caller, and a child that cannot build the
env, raises outside a step or runs past ``timeout_s`` gives a reason instead of episodes.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envaudit.protocol import TOOL_KEY

TIMEOUT_S = 120.0
"""A safety cap on the child; it never decides a verdict (a child that cannot finish gives a reason)."""

_CHILD = """
import pickle, sys
from envaudit.interpreter import child_main
child_main(sys.argv[1], sys.argv[2])
"""


@dataclass
class Replayed:
    """One plan as the other interpreter played it."""

    seed: int | None
    reset_obs: Any
    steps: list[tuple[Any, Any, Any, bool | None, bool | None, str | None, str | None]] = field(default_factory=list)
    """Per step: action, observation, reward, terminated, truncated, tool status, exception name."""


def other_hash_seeds(n: int) -> list[str]:
    """``n`` values of ``PYTHONHASHSEED`` other than this interpreter's: ``1``, ``2``, ... skipping this
    one's. Fixed rather than derived from this one's, so scans run under different hash seeds replay in
    the same other interpreters (and write the same report). Each is an independent draw of whatever
    an env derives from ``hash()`` of a string."""
    current = os.environ.get("PYTHONHASHSEED", "")
    return [s for s in map(str, range(1, n + 2)) if s != current][:n]


def other_hash_seed() -> str:
    """The first of ``other_hash_seeds``: ``1``, or ``2`` when this one's is ``1``."""
    return other_hash_seeds(1)[0]


def _status(info: Any) -> str | None:
    tool = info.get(TOOL_KEY) if isinstance(info, Mapping) else None
    return tool.get("status") if isinstance(tool, Mapping) else None


def play_plans(make_env: Any, plans: Sequence[tuple[int | None, Sequence[Any]]], workers: int = 1) -> list[Replayed]:
    """Each plan played once, each on a new env instance (as the first episode of an instance, so
    state an instance carries from one episode to the next plays no part): ``reset(seed=seed)``,
    then its actions until the episode ends or a step raises. ``workers`` > 1 plays that many plans
    at once on threads (each on its own instance), in plan order."""
    if workers > 1 and len(plans) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(workers, len(plans)), thread_name_prefix="envaudit-elsewhere") as pool:
            return list(pool.map(lambda plan: _play_plan(make_env, *plan), plans))
    return [_play_plan(make_env, seed, actions) for seed, actions in plans]


def _play_plan(make_env: Any, seed: int | None, actions: Sequence[Any]) -> Replayed:
    env = make_env()
    try:
        obs, _ = env.reset(seed=seed)
        played = Replayed(seed, obs)
        for action in actions:
            try:
                obs, reward, terminated, truncated, info = env.step(action)
            except Exception as exc:
                played.steps.append((action, None, None, None, None, None, type(exc).__name__))
                break
            played.steps.append((action, obs, reward, bool(terminated), bool(truncated), _status(info), None))
            if terminated or truncated:
                break
        return played
    finally:
        env.close()


def child_main(request_path: str, answer_path: str) -> None:
    """The child's side: read the request, play it, write the episodes (or nothing: the parent reads
    the exit status and stderr)."""
    from envaudit.rollout import enter_scan_place, env_factory

    spec, make_env, where, plans, workers = pickle.loads(Path(request_path).read_bytes())
    enter_scan_place(where)
    episodes = play_plans(env_factory(spec, make_env), plans, workers)
    Path(answer_path).write_bytes(pickle.dumps(episodes))


class Elsewhere:
    """The plans played in a child interpreter with ``hash_seed``; started now, read by ``result``.

    ``spec`` (a target the child resolves) or ``make_env`` (sent with ``cloudpickle``) names the env.
    ``workers``: plans the child plays at once, on threads (``play_plans``); 1 (one after another)
    unless the scan itself steps several instances of the env in one process (``--executor threads``
    or ``asyncio``), since nothing else runs two of them in one process.
    """

    def __init__(self, spec: str | None, make_env: Any, plans: Sequence[tuple[int | None, Sequence[Any]]], *,
                 hash_seed: str | None = None, timeout_s: float = TIMEOUT_S, workers: int = 1) -> None:
        import cloudpickle

        self.hash_seed = hash_seed or other_hash_seed()
        self.timeout_s = timeout_s
        self.plans = [(seed, list(actions)) for seed, actions in plans]
        self._dir = tempfile.TemporaryDirectory(prefix="envaudit-elsewhere-")
        self._request = Path(self._dir.name) / "request.pkl"
        self._answer = Path(self._dir.name) / "answer.pkl"
        self._process: subprocess.Popen | None = None
        self.reason: str | None = None
        try:
            where = (os.getcwd(), list(sys.path))
            self._request.write_bytes(cloudpickle.dumps((spec, None if spec else make_env, where, self.plans,
                                                         max(1, int(workers)))))
        except Exception as exc:  # a factory cloudpickle cannot send
            self.reason = f"the env factory could not be sent to another interpreter ({type(exc).__name__}: {exc})"
            return
        env = dict(os.environ, PYTHONHASHSEED=self.hash_seed,
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self._stderr = open(Path(self._dir.name) / "stderr.txt", "w+b")  # noqa: SIM115 -- read in result()
        self._process = subprocess.Popen([sys.executable, "-c", _CHILD, str(self._request), str(self._answer)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
                                         env=env, cwd=os.getcwd())

    def result(self) -> list[Replayed] | None:
        """The episodes the child played, in plan order; None (and ``reason`` says why) when it could
        not build or play the env, or ran past ``timeout_s``."""
        if self._process is None:
            self._dir.cleanup()
            return None
        try:
            code = self._process.wait(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            self.reason = f"the other interpreter did not finish within {self.timeout_s:g} s"
            return self._done(None)
        if code != 0 or not self._answer.exists():
            self._stderr.seek(0)
            lines = [ln for ln in self._stderr.read().decode("utf-8", "replace").splitlines() if ln.strip()]
            self.reason = (f"the other interpreter exited with {code}"
                           + (f": {lines[-1].strip()[:300]}" if lines else ""))
            return self._done(None)
        try:
            return self._done(pickle.loads(self._answer.read_bytes()))
        except Exception as exc:  # an observation this process cannot unpickle
            self.reason = f"the other interpreter's episodes could not be read here ({type(exc).__name__}: {exc})"
            return self._done(None)

    def _done(self, episodes: list[Replayed] | None) -> list[Replayed] | None:
        self._stderr.close()
        self._dir.cleanup()
        return episodes

    def cancel(self) -> None:
        """Stop the child (the probe stopped early) and remove its files."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        if self._process is not None:
            self._stderr.close()
        self._dir.cleanup()


__all__ = ["TIMEOUT_S", "Elsewhere", "Replayed", "child_main", "other_hash_seed", "other_hash_seeds", "play_plans"]
