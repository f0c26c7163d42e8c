"""What an oracle or a canary may be, turned into something the properties can play.

The scan takes an env's ``oracle()`` as an ``envaudit.Policy``, a plain function
``(obs, info) -> action`` or a list of actions (``envaudit.policies.oracle_policy``); the testing
helpers take the same three, and a callable that builds one of them from the env:

- an ``envaudit.Policy``;
- a plain function ``(obs, info) -> action`` (two positional parameters);
- a list of actions (catalogue labels work on a ``ToolEnv``), played in order;
- a factory ``(env) -> any of the above`` (one positional parameter, e.g.
  ``lambda env: env.unwrapped.oracle()``) or ``() -> any of the above`` (none).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from envaudit.policies import CallablePolicy
from envaudit.rollout import Policy, SequencePolicy


def _positional(fn: Callable[..., Any]) -> int | None:
    """How many positional arguments ``fn`` takes (None: it cannot be told, or ``*args``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


def as_policy(value: Any, env: Any, *, what: str = "oracle", name: str | None = None,
              action: Callable[[Any], Any] = lambda a: a) -> Policy:
    """A ``Policy`` from any of the forms above; ``action`` turns a list's labels into actions.

    >>> from envaudit.testing.oracles import as_policy
    >>> as_policy(lambda obs, info: 0, None).name
    'oracle'
    """
    label = name or what
    if isinstance(value, Policy):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if not value:
            raise ValueError(f"{what} is an empty list of actions; give at least one action")
        return SequencePolicy([action(a) for a in value], name=label)
    if callable(value):
        n = _positional(value)
        if n == 2:
            return CallablePolicy(value, name=label)
        built = value(env) if n in (None, 1) else value()
        if isinstance(built, Policy) or (isinstance(built, Sequence) and not isinstance(built, (str, bytes))):
            return as_policy(built, env, what=what, name=name, action=action)
        if callable(built):
            return CallablePolicy(built, name=label)
        raise TypeError(f"{what} callable returned {type(built).__name__}; expected an envaudit.Policy, a "
                        "function (obs, info) -> action, or a list of actions")
    raise TypeError(
        f"{what} must be an envaudit.Policy, a function (obs, info) -> action, a list of actions, or a "
        f"callable (env) -> one of those such as `lambda env: env.unwrapped.oracle()`; got {type(value).__name__}"
    )


__all__ = ["as_policy"]
