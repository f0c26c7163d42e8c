"""What a scan spends, in the env's own units: steps and episodes (resets), per probe.

Counted from what each run played (every recorded episode's length; a GRPO run's training and
evaluation rollouts), never from a clock: the counts are part of report.json and are the same for
the same seed whatever the executor or its number of workers. ``--max-env-steps`` caps the total;
work the cap stops is listed as incomplete, like work the wall-clock ``--budget`` stops.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pandas as pd

STEPS_CAP_REASON = "the --max-env-steps cap of {cap:,} env steps was reached"


class EnvCost:
    """Env steps and episodes per probe (``explore`` for exploration), in the order first counted."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = cap
        self.by_probe: dict[str, dict[str, int]] = {}

    def add(self, probe: str, steps: int, episodes: int) -> None:
        entry = self.by_probe.setdefault(probe, {"env_steps": 0, "episodes": 0})
        entry["env_steps"] += int(steps)
        entry["episodes"] += int(episodes)

    def add_episodes(self, probe: str, episodes: pd.DataFrame) -> None:
        """Count recorded episodes: one reset each, their lengths in steps."""
        steps = int(episodes["length"].sum()) if len(episodes) and "length" in episodes else 0
        self.add(probe, steps, len(episodes))

    @property
    def env_steps(self) -> int:
        return sum(e["env_steps"] for e in self.by_probe.values())

    @property
    def episodes(self) -> int:
        return sum(e["episodes"] for e in self.by_probe.values())

    def reached(self) -> bool:
        """True once the scan's steps reached ``--max-env-steps``."""
        return self.cap is not None and self.env_steps >= self.cap

    def cap_reason(self) -> str:
        return STEPS_CAP_REASON.format(cap=self.cap or 0)

    def section(self) -> dict[str, Any]:
        """report.json's ``cost``: deterministic counts only (how long they took is ``seconds``)."""
        return {"env_steps": self.env_steps, "episodes": self.episodes, "max_env_steps": self.cap,
                "probes": {name: dict(v) for name, v in self.by_probe.items()}}


def cost_line(cost: dict[str, Any], seconds: float, workers: int | None = None) -> str:
    """The terminal's last line: what the scan cost in env units, and how fast it went."""
    steps, episodes = int(cost.get("env_steps", 0)), int(cost.get("episodes", 0))
    rate = f", {steps / seconds:,.0f} env steps/s" if seconds > 0 else ""
    on = f" on {workers} worker{'s' if workers != 1 else ''}" if workers else ""
    return f"cost: {steps:,} env steps, {episodes:,} episodes in {seconds:.1f} s{on}{rate}"


class CountingEnv(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Counts every ``reset`` and ``step`` of an env a probe drives itself (not through ``run``,
    whose episodes are counted from their records) into the scan's cost, under the probe's name.

    A ``RecordConstructorArgs``, so an env remade from ``env.spec`` (Gymnasium's ``check_env`` does
    that for registered envs) is counted into the same tally."""

    def __init__(self, env: gym.Env, cost: EnvCost, probe: str) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, cost=cost, probe=probe)
        gym.Wrapper.__init__(self, env)
        self._cost, self._probe = cost, probe

    def reset(self, **kwargs: Any) -> Any:
        self._cost.add(self._probe, 0, 1)
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        self._cost.add(self._probe, 1, 0)
        return self.env.step(action)
