"""Replayability: the same seed and actions give the same trajectory, on the same env instance,
on a fresh one, and in fresh interpreters with other ``PYTHONHASHSEED``s.

The enumerated short plans (``explore.Explorer``) are replayed first, so a divergence that any
plan shows is found by every run; then Hypothesis searches longer plans with faults. Last, the
short plans are played in two subprocesses with fixed, different hash seeds: state hidden in
``hash()`` of strings, or in the order of a set of strings, replays the same within one process
and differently in the next, which is where a distributed trainer's workers run.
"""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from envaudit.policies import oracle_policy
from envaudit.protocol import TOOL_ERROR, TOOL_TIMEOUT
from envaudit.testing.explore import Explorer
from envaudit.testing.oracles import as_policy
from envaudit.testing.search import (
    Counterexample,
    PropertyFailed,
    open_session,
    parse_options,
    render_failure,
    run_search,
    target_text,
)
from envaudit.testing.strategies import fault_schedules, plans
from envaudit.testing.trajectory import EnvSession, Episode, Plan, short_text

INTERPRETER_PLANS = 48
"""Short plans replayed in the fresh interpreters (plus every action repeated to the end and the solved tasks)."""

INTERPRETER_TIMEOUT_S = 120
"""A safety cap on the subprocess; it never decides a verdict (a replay that cannot run is skipped)."""


def assert_replayable(make_env: Any, *, interpreters: bool = True, oracle: Any = None, **options: Any) -> None:
    """Assert that the same seed and the same actions give the same trajectory.

    Every plan is played three times: twice on one env instance (which has played other
    episodes before) and once on a second instance; the runs must agree on the first
    observation and, step by step, on observations, rewards, ``terminated``/``truncated``, the
    tool called and its status, and the final ``success`` flag (tool latencies are not
    compared). The plans: every short action sequence from a few seeds (exhaustive, shortest
    first), each action repeated to the end, the oracle's episodes replayed open-loop (``oracle``:
    a policy, a function ``(obs, info) -> action``, a list of actions, or a callable
    ``(env) -> one of those``; default the env's ``oracle()`` if it has one; with none, and no short
    plan succeeding, the successes of a deeper search over distinct observations), then a Hypothesis
    search with faults. With
    ``interpreters`` (default) the first 48 short plans, each action repeated to the end and the
    solved tasks (the oracle's or the deeper search's) are also played in two fresh Python
    subprocesses (``PYTHONHASHSEED`` 1 and 2: fixed, so the verdict does not hang on this process's
    own hash seed) and all three must agree; that needs ``make_env`` to be an
    env id or a factory ``cloudpickle`` can send (a module-level function or class, or a lambda
    over such), and is skipped when the subprocess cannot build the env.

    >>> from envaudit.testing import assert_replayable
    >>> assert_replayable("envaudit/Helpdesk-v0", max_examples=20)
    """
    prop = "assert_replayable"
    opts, extra = parse_options(prop, options, ("depth",))
    with open_session(make_env, opts) as first, open_session(make_env, opts) as second:

        def check(plan: Plan) -> Counterexample | None:
            runs = [first.play(plan, keep_observations=True), first.play(plan, keep_observations=True),
                    second.play(plan, keep_observations=True)]
            for caption, other in (("the replay on the same env instance", runs[1]),
                                   ("the replay on a fresh env instance", runs[2])):
                difference = first_difference(runs[0], other)
                if difference is not None:
                    return Counterexample(
                        f"replaying the same seed and actions gave {difference} ({caption}).",
                        runs[0], [(caption, other)],
                    )
            return None

        ex = Explorer(first, seed=opts.seed, seeds=opts.seeds, depth=extra.get("depth"))
        with _seeded_globals(opts.seed):  # an env that draws from the global generators gets the same draws every run
            solved = _oracle_plans(first, ex.seeds, oracle, opts.seed) or _deep_plans(ex)
            every = [n.plan for n in ex.tree()] + [Plan(s, (), a) for s in ex.seeds for a in ex.actions] + solved
            found = next((f for f in map(check, every) if f is not None), None)
        if found is not None:
            how = f"exhaustive over short plans, {len(every)} plans"
            raise PropertyFailed(render_failure(prop, target_text(make_env), found, len(every), how=how), found, prop)
        # The solved tasks too: an answer hidden in hash() shows only where the task is solved.
        short = [n.plan for n in ex.tree()[:INTERPRETER_PLANS]] + [Plan(ex.seeds[0], (), a) for a in ex.actions] + solved
        faults = (fault_schedules(max_calls=min(first.limit, first.max_steps), kinds=(TOOL_ERROR, TOOL_TIMEOUT))
                  if opts.faults and first.injects else None)
        strategy = plans(first, seeds=opts.seeds, faults=faults)
        run_search(prop, make_env, strategy, check, opts)
        if interpreters:
            found = _other_interpreter(make_env, first, short, opts.max_steps)
            if found is not None:
                how = f"exhaustive over short plans, {len(short)} plans, {len(HASH_SEEDS)} fresh interpreters"
                raise PropertyFailed(render_failure(prop, target_text(make_env), found, len(short), how=how), found, prop)


def _oracle_plans(session: EnvSession, seeds: list[int], oracle: Any, seed: int) -> list[Plan]:
    """The oracle's episodes as plans (its actions, replayed open-loop): hidden state that only a
    whole solved task reaches, such as an answer drawn outside the env's seed, shows there."""
    policy = as_policy(oracle, session.env, action=session.action) if oracle is not None else oracle_policy(session.env)
    if policy is None:
        return []
    return [Plan(s, session.play(Plan(s), policy=policy, rng=np.random.default_rng([seed, s])).actions) for s in seeds]


def _deep_plans(ex: Explorer) -> list[Plan]:
    """With no oracle and no success among the short plans: the successes a deeper search finds,
    so a task solved only past the enumerated depth is replayed too."""
    if any(n.episode.success for n in ex.tree()):
        return []
    return [Plan(e.seed, e.actions) for e in ex.deep_successes()]


@contextmanager
def _seeded_globals(seed: int) -> Iterator[None]:
    """Python's and NumPy's global generators seeded for the block, then restored (as Hypothesis
    does for each of its cases), so a property's verdict does not depend on who drew before."""
    state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        random.setstate(state)
        np.random.set_state(np_state)


def _summary(episode: Episode) -> tuple:
    from envaudit.testing.matched import state_key

    obs = [state_key(o) for o in (episode.observations or ())]
    steps = tuple((s.reward, s.terminated, s.truncated, s.tool, s.status) for s in episode.steps)
    return tuple(obs), steps, episode.success


_CHILD = """
import pickle, sys
from envaudit.testing.replay import play_summaries
make_env, plans, max_steps = pickle.loads(sys.stdin.buffer.read())
sys.stdout.buffer.write(pickle.dumps(play_summaries(make_env, plans, max_steps)))
"""


def play_summaries(make_env: Any, plans_: list[Plan], max_steps: int) -> list[tuple]:
    """What the subprocess runs: every plan played once, summarised (observation digests)."""
    with EnvSession(make_env, max_steps=max_steps) as session:
        return [_summary(session.play(p, keep_observations=True)) for p in plans_]


HASH_SEEDS = ("1", "2")
"""The ``PYTHONHASHSEED`` of the two fresh interpreters the short plans are replayed in. Two, fixed:
compared with each other their verdict does not depend on this process's own hash seed (one child
and the caller can agree by chance, as an answer drawn from ``hash() % 2`` does half the time)."""


def _other_interpreter(make_env: Any, session: EnvSession, short: list[Plan], max_steps: int) -> Counterexample | None:
    try:
        import cloudpickle

        payload = cloudpickle.dumps((make_env, short, max_steps))
    except Exception:  # a factory that cannot be sent: the in-process replays still ran
        return None
    theirs = _children(payload)
    for i, plan in enumerate(short):
        mine = session.play(plan, keep_observations=True)
        here = _summary(mine)
        runs = [("here", here)] + [(seed, rows[i]) for seed, rows in theirs.items() if i < len(rows)]
        for (a, x), (b, y) in zip(runs, runs[1:], strict=False):
            if x == y:
                continue
            what = _summary_difference(x, y)
            where = (f"in a fresh interpreter (PYTHONHASHSEED={b})" if a == "here"
                     else f"in two fresh interpreters (PYTHONHASHSEED={a} and {b})")
            return Counterexample(
                f"replaying the same seed and actions {where} gave {what}: state hidden in hash() or in the order of "
                "a set of strings.",
                mine, details="The other interpreter's run is not shown step by step; replay the plan there with "
                              f"PYTHONHASHSEED={b} python -c '...play(...)' to see it.")
    return None


def _children(payload: bytes) -> dict[str, list]:
    """Every plan's summary from a fresh interpreter per ``HASH_SEEDS``; a child that could not
    build or play the env is left out: nothing to compare with it."""
    out = {}
    for seed in HASH_SEEDS:
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        try:
            done = subprocess.run([sys.executable, "-c", _CHILD], input=payload, capture_output=True, env=env,
                                  timeout=INTERPRETER_TIMEOUT_S, check=False)
            theirs = pickle.loads(done.stdout) if done.returncode == 0 else None
        except Exception:  # the child could not build or play the env, or hung: nothing to compare
            continue
        if theirs is not None:
            out[seed] = theirs
    return out


def _summary_difference(a: tuple, b: tuple) -> str:
    obs_a, steps_a, success_a = a
    obs_b, steps_b, success_b = b
    if obs_a[:1] != obs_b[:1]:
        return "a different first observation after reset"
    for i in range(max(len(steps_a), len(steps_b))):
        if i >= len(steps_a) or i >= len(steps_b):
            return f"an episode of {len(steps_a)} steps here and {len(steps_b)} there"
        if steps_a[i] != steps_b[i]:
            return f"a different step {i} (reward, ending, tool, status: {steps_a[i]} here, {steps_b[i]} there)"
        if obs_a[i + 1:i + 2] != obs_b[i + 1:i + 2]:
            return f"a different observation after step {i}"
    return f"a different success flag ({success_a} here, {success_b} there)"


def first_difference(a: Episode, b: Episode) -> str | None:
    """Where two plays of the same plan first differ, in words; None when they agree."""
    obs_a, obs_b = a.observations or (), b.observations or ()
    if obs_a and obs_b and not same_value(obs_a[0], obs_b[0]):
        return f"a different first observation after reset ({_short(obs_a[0])} vs {_short(obs_b[0])})"
    for i in range(max(a.length, b.length)):
        if i >= a.length or i >= b.length:
            shorter, longer = ("first run", "replay") if i >= a.length else ("replay", "first run")
            return f"an episode that ended after {i} steps on the {shorter} but went on on the {longer}"
        x, y = a.steps[i], b.steps[i]
        for what, u, v in (("tool call", (x.tool, x.status), (y.tool, y.status)),
                           ("reward", x.reward, y.reward),
                           ("terminated flag", x.terminated, y.terminated),
                           ("truncated flag", x.truncated, y.truncated)):
            if not same_value(u, v):
                return f"a different {what} at step {i} ({_fmt(u)} vs {_fmt(v)})"
        if len(obs_a) > i + 1 and len(obs_b) > i + 1 and not same_value(obs_a[i + 1], obs_b[i + 1]):
            return f"a different observation after step {i} ({_short(obs_a[i + 1])} vs {_short(obs_b[i + 1])})"
    if a.success != b.success:
        return f"a different success flag ({a.success} vs {b.success})"
    return None


def _reward(value: float) -> str:
    return f"{value:+.4g}"


def _fmt(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 2:
        return f"{value[0]} → {value[1]}" if value[0] is not None else "no tool"
    if isinstance(value, float):
        return _reward(value)
    return str(value)


def _short(value: Any) -> str:
    return short_text(value, 60)


def same_value(a: Any, b: Any) -> bool:
    """Equality for observations: arrays elementwise (NaN equals NaN), containers recursively."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape:
            return False
        try:
            return bool(np.array_equal(x, y, equal_nan=True))
        except TypeError:  # object or string arrays have no NaN
            return bool(np.array_equal(x, y))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    try:
        return bool(a == b)
    except Exception:  # values that cannot be compared are treated as different
        return False


__all__ = ["HASH_SEEDS", "assert_replayable", "first_difference", "play_summaries", "same_value"]
