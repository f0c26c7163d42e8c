"""Fault injection: make a ``ToolEnv``'s tools fail or time out, through the env's real tool path.

The injector installs a hook that ``ToolEnv.call_tool`` consults before running a tool, so the
env's own handling of a failed or timed-out call (its reward, its observation, whether it ends
the episode) is what gets exercised; nothing is faked in ``info``. Faults are drawn from a
generator seeded from the injector's seed and the episode's reset seed, so the same seeds give the
same faults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.protocol import TOOL_ERROR, TOOL_TIMEOUT
from envaudit.toolenv import ToolEnv

Schedule = Sequence["str | None"] | Callable[[str, int], "str | None"]


def _check_rate(name: str, value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value}")
    return value


class FaultInjector(gym.Wrapper):
    """Inject tool errors and timeouts into a ``ToolEnv``.

    ``error_rate`` / ``timeout_rate`` apply to every tool (or only to ``tools`` when given);
    ``rates`` overrides them per tool, e.g. ``{"search": {"error": 0.3, "timeout": 0.1}}``.
    ``schedule`` replaces random draws with an explicit plan: a sequence whose k-th entry is the
    status forced on the k-th tool call of each episode (``None`` for no fault), or a callable
    ``(tool_name, call_index) -> status | None``. ``mode="real"`` makes an injected timeout really
    overrun the tool's deadline instead of simulating it (slower, exercises the deadline itself).
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        error_rate: float = 0.0,
        timeout_rate: float = 0.0,
        rates: Mapping[str, Mapping[str, float]] | None = None,
        tools: Sequence[str] | None = None,
        schedule: Schedule | None = None,
        seed: int = 0,
        mode: str = "simulated",
    ) -> None:
        super().__init__(env)
        base = env.unwrapped
        if not isinstance(base, ToolEnv):
            raise TypeError(
                f"FaultInjector needs an envaudit.ToolEnv, got {type(base).__name__}; faults are "
                "injected through ToolEnv's tool path (plain Gymnasium envs have none): build the "
                "env on envaudit.ToolEnv (add_tool / add_call) to inject faults into it"
            )
        if mode not in ("simulated", "real"):
            raise ValueError(f"mode must be 'simulated' or 'real', got {mode!r}")
        self._base = base
        known = set(base.tools)
        for argument, names in (("tools", tools), ("rates", rates)):
            unknown = sorted(set(names or ()) - known)
            if unknown:
                raise ValueError(
                    f"{argument}= names unknown tool(s) {unknown}; this env's tools are {sorted(known)}"
                )
        targets = list(tools) if tools is not None else sorted(known)
        self.rates: dict[str, tuple[float, float]] = {}
        for name in sorted(known):
            err = _check_rate("error_rate", error_rate) if name in targets else 0.0
            tmo = _check_rate("timeout_rate", timeout_rate) if name in targets else 0.0
            if rates and name in rates:
                extra = set(rates[name]) - {"error", "timeout"}
                if extra:
                    raise ValueError(f"rates[{name!r}] has keys {sorted(extra)}; use 'error' and 'timeout'")
                err = _check_rate(f"rates[{name!r}]['error']", rates[name].get("error", err))
                tmo = _check_rate(f"rates[{name!r}]['timeout']", rates[name].get("timeout", tmo))
            if err + tmo > 1.0:
                raise ValueError(f"error and timeout rates for {name!r} add up to {err + tmo} > 1")
            self.rates[name] = (err, tmo)
        self.schedule = schedule
        self.seed_value = int(seed)
        self.mode = mode
        self._rng = np.random.default_rng(self.seed_value)
        self._calls = 0
        self.injected = {TOOL_ERROR: 0, TOOL_TIMEOUT: 0}

    def _hook(self, name: str) -> str | None:
        k = self._calls
        self._calls += 1
        if self.schedule is not None:
            if callable(self.schedule):
                status = self.schedule(name, k)
            else:
                status = self.schedule[k] if k < len(self.schedule) else None
        else:
            err, tmo = self.rates.get(name, (0.0, 0.0))
            u = self._rng.random()
            status = TOOL_ERROR if u < err else TOOL_TIMEOUT if u < err + tmo else None
        if status is not None:
            if status not in (TOOL_ERROR, TOOL_TIMEOUT):
                raise ValueError(f"a fault schedule entry must be 'error', 'timeout' or None, got {status!r}")
            self.injected[status] += 1
        return status

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._rng = np.random.default_rng([self.seed_value, int(seed)])
        self._calls = 0
        self._base.fault_hook = self._hook
        self._base.fault_mode = self.mode
        return self.env.reset(seed=seed, options=options)

    def close(self) -> None:
        self._base.fault_hook = None
        super().close()


def inject_faults(env: gym.Env, **options: Any) -> FaultInjector:
    """Shorthand for ``FaultInjector(env, **options)``."""
    return FaultInjector(env, **options)
