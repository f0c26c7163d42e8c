"""Properties against reference behaviour: degenerate policies stay below an oracle, and known
hacks ("canaries") stay at the floor.

``assert_floor_below_oracle`` does not sample: its degenerate policies are few (each action
repeated, with and without every tool call timing out), so all of them run on the same seeds as
the oracle and the best one is compared, which is exhaustive rather than a random search.
``assert_canaries_at_floor`` searches seeds and fault schedules with Hypothesis for an episode in
which a canary earns more than the floor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from envaudit.protocol import TOOL_ERROR, TOOL_TIMEOUT  # noqa: F401
from envaudit.rollout import Policy
from envaudit.seeding import child_rng
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
from envaudit.testing.strategies import fault_schedules, seeds_strategy
from envaudit.testing.trajectory import EnvSession, FaultSchedule, Plan

DEFAULT_EPISODES = 64


def _reward(value: float) -> str:
    return f"{value:+.4g}"


def _policy_from(oracle: Any, session: EnvSession) -> Policy:
    """A ``Policy`` from a policy, a plain function ``(obs, info) -> action``, a list of actions,
    or a callable ``(env) -> one of those`` (``envaudit.testing.oracles.as_policy``)."""
    return as_policy(oracle, session.env, action=session.action)


def _seeds(opts, n: int, name: str) -> list[int]:
    if isinstance(opts.seeds, Sequence) and not isinstance(opts.seeds, str) and opts.seeds:
        return [int(s) for s in opts.seeds]
    if opts.seeds is not None:
        raise ValueError(f"{name}(): seeds must be a list of reset seeds here (it runs every policy on the "
                         f"same seeds), got {opts.seeds!r}")
    return list(range(opts.seed, opts.seed + n))


def assert_floor_below_oracle(
    make_env: Any,
    oracle: Policy | Callable[..., Any] | Sequence[Any],
    *,
    margin: float,
    episodes: int = DEFAULT_EPISODES,
    **options: Any,
) -> None:
    """Assert that degenerate policies score at least ``margin`` below the oracle.

    The oracle (a ``Policy``, a plain function ``(obs, info) -> action``, a list of actions, or a
    callable ``(env) -> one of those``; the bundled envs offer
    ``env.unwrapped.oracle()``) and every degenerate policy play the same reset seeds: ``seed``,
    ``seed + 1``, ... (``episodes`` of them, default 64: a guessing policy's mean is noisy, so
    keep it large), or the ``seeds`` list. Degenerate policies: repeat one action until the
    episode ends, for every action of a small discrete space (a sample of actions otherwise);
    this covers doing nothing, giving up at once (an action that ends the episode) and stalling
    until truncation. On a ``ToolEnv`` each is also played with every tool call forced to time
    out. The property holds when the best degenerate mean return is at most the oracle's mean
    return minus ``margin``.

    >>> from envaudit.testing import assert_floor_below_oracle
    >>> assert_floor_below_oracle("envaudit/Helpdesk-v0", lambda env: env.unwrapped.oracle(), margin=0.5)
    """
    prop = "assert_floor_below_oracle"
    opts, _ = parse_options(prop, options)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or margin < 0:
        raise ValueError(f"{prop}(): margin must be a number >= 0, got {margin!r}")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"{prop}(): episodes must be a positive int, got {episodes!r}")
    with open_session(make_env, opts) as session:
        policy = _policy_from(oracle, session)
        seeds = _seeds(opts, episodes, prop)
        oracle_runs = [session.play(Plan(s), policy=policy, rng=child_rng(opts.seed, prop, "oracle", s)) for s in seeds]
        oracle_mean = float(np.mean([e.episode_return for e in oracle_runs]))
        fault_modes: list[tuple[str, FaultSchedule | None]] = [("", None)]
        if opts.faults and session.injects:
            fault_modes.append((" with every tool call timing out", FaultSchedule(every=TOOL_TIMEOUT)))
        results = []
        for action in session.candidate_actions(seed=opts.seed):
            for suffix, faults in fault_modes:
                runs = [session.play(Plan(s, (), action, faults)) for s in seeds]
                name = f"repeat {session.label(action) or repr(action)}{suffix}"
                results.append((float(np.mean([e.episode_return for e in runs])), name, runs))
        results.sort(key=lambda r: -r[0])
        best_mean, best_name, best_runs = results[0]
        if best_mean > oracle_mean - margin + opts.tolerance:
            worst = int(np.argmax([e.episode_return for e in best_runs]))
            table = "\n".join(f"  {mean:+8.3f}  {name}" for mean, name, _ in results[:6])
            found = Counterexample(
                f"the degenerate policy '{best_name}' averaged {_reward(best_mean)} over {len(seeds)} seeds "
                f"against the oracle's {_reward(oracle_mean)}; degenerate policies must score at least "
                f"margin={margin:g} below the oracle.",
                best_runs[worst], [(f"the oracle ({policy.describe()}) on the same seed", oracle_runs[worst])],
                details=f"Best degenerate policies (mean return over {len(seeds)} seeds):\n{table}",
            )
            how = f"exhaustive: {len(results)} degenerate policies on the oracle's {len(seeds)} seeds"
            raise PropertyFailed(render_failure(prop, target_text(make_env), found, 0, how=how), found, prop)


def _named(canaries: Any, session: EnvSession) -> list[tuple[str, Policy | tuple]]:
    if isinstance(canaries, Mapping):
        items = list(canaries.items())
    elif isinstance(canaries, (Policy, str)):
        raise TypeError("canaries must be a list or a {name: canary} mapping; wrap a single canary in a list")
    elif isinstance(canaries, Sequence):
        items = []
        for c in canaries:
            if isinstance(c, Policy):
                items.append((c.name, c))
            elif isinstance(c, Sequence) and not isinstance(c, str):
                items.append((" → ".join(session.label(session.action(a)) or repr(a) for a in c), c))
            elif callable(c):
                items.append((getattr(c, "__name__", None) or type(c).__name__, c))
            else:
                raise TypeError(f"a canary must be a list of actions (or labels), an envaudit.Policy or a "
                                f"function (obs, info) -> action, got {c!r}")
    else:
        raise TypeError(f"canaries must be a list or a {{name: canary}} mapping, got {type(canaries).__name__}")
    if not items:
        raise ValueError("canaries is empty; give at least one known-hack action list or policy")
    named = []
    for name, c in items:
        if isinstance(c, Policy):
            named.append((str(name), c))
        elif isinstance(c, Sequence) and not isinstance(c, str) and len(c) > 0:
            named.append((str(name), tuple(session.action(a) for a in c)))  # unknown labels fail here
        elif callable(c):
            named.append((str(name), as_policy(c, session.env, what=f"canary {name!r}", name=str(name),
                                               action=session.action)))
        else:
            raise TypeError(f"canary {name!r} must be a non-empty list of actions, an envaudit.Policy or a "
                            f"function (obs, info) -> action, got {c!r}")
    return named


def assert_canaries_at_floor(
    make_env: Any,
    canaries: Sequence[Any] | Mapping[str, Any],
    *,
    floor: float = 0.0,
    allow_success: bool = True,
    **options: Any,
) -> None:
    """Assert that known-hack trajectories ("canaries") never earn more than ``floor``.

    A canary is a list of actions (catalogue labels work for ``ToolEnv``s), played as given until
    the episode ends or the list runs out, an ``envaudit.Policy``, or a plain function
    ``(obs, info) -> action`` (or a callable ``(env) -> one of those``). Hypothesis searches reset
    seeds and, on ``ToolEnv``s, fault schedules for an episode in which a canary returns more than
    ``floor``.

    ``allow_success`` (default True): an episode the env itself flags as a success
    (``info["success"]`` true on its last step) is exempt, since a canary that happens to guess
    right has answered honestly. Pass ``allow_success=False`` when the canary can never honestly
    succeed, or when the success flag itself is in doubt: then every episode of the canary must
    stay at or below ``floor``, successes included.

    >>> from envaudit.testing import assert_canaries_at_floor
    >>> assert_canaries_at_floor("envaudit/FlakySearch-v0", {"answer all": ["answer_all"], "give up": ["give_up"]})
    """
    prop = "assert_canaries_at_floor"
    opts, _ = parse_options(prop, options)
    if isinstance(floor, bool) or not isinstance(floor, (int, float)):
        raise ValueError(f"{prop}(): floor must be a number, got {floor!r}")
    with open_session(make_env, opts) as session:
        named = _named(canaries, session)
        faults = (fault_schedules(max_calls=min(session.limit, session.max_steps), kinds=(TOOL_TIMEOUT, TOOL_ERROR))
                  if opts.faults and session.injects else st.none())
        strategy = st.tuples(st.integers(0, len(named) - 1), seeds_strategy(opts.seeds), faults)

        def check(case: tuple[int, int, FaultSchedule | None]) -> Counterexample | None:
            i, seed, schedule = case
            name, canary = named[i]
            if isinstance(canary, Policy):
                episode = session.play(Plan(seed, (), None, schedule), policy=canary,
                                       rng=child_rng(opts.seed, prop, name, seed))
            else:
                episode = session.play(Plan(seed, canary, None, schedule))
            if allow_success and episode.success:
                return None
            if episode.episode_return > floor + opts.tolerance:
                return Counterexample(
                    f"the canary '{name}' returned {_reward(episode.episode_return)}, above the floor of "
                    f"{floor:g}" + ("" if episode.success else " without success") + ".",
                    episode,
                )
            return None

        run_search(prop, make_env, strategy, check, opts)


__all__ = ["assert_canaries_at_floor", "assert_floor_below_oracle"]
