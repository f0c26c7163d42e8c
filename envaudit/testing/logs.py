"""Logged training runs with known drift, for testing ``envaudit logs``: a policy whose behaviour
changes over iterations by design, played on a bundled env and written in the generic schema.

Each iteration plays ``groups`` GRPO groups of ``group_size`` rollouts from one reset seed. A
rollout follows the drifting behaviour with probability ``Drift.rate(iteration)`` (flat at
``base`` up to iteration ``start``, then rising by ``slope`` per iteration, capped at ``top``: the
policy still attempts the task in four rollouts of ten, as a trained policy keeps exploring),
otherwise it plays honestly: the env's oracle (search, open, answer what it read), or with
probability ``sloppy`` a careless attempt (search, then answer a random candidate without reading).
Both honest modes retry failed calls, so failures cost what the env charges for them.

Drifting behaviours: ``stall`` repeats ``search`` until the step limit (a timeout); ``give_up``
gives up at once (an episode of length 1); ``none`` is a stationary policy. Every random choice
flows from ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.logs.schema import LoggedRun
from envaudit.recording import wrap
from envaudit.seeding import child_rng, child_seed

BEHAVIOURS = ("none", "stall", "give_up")
SCHEMA_END = {"terminated": "terminated", "truncated": "truncated", "tool_timeout": "timeout",
              "tool_error": "error", "env_exception": "error"}


@dataclass(frozen=True)
class Drift:
    """How often the drifting behaviour is played at each iteration."""

    behaviour: str = "none"
    start: int = 0
    base: float = 0.05
    slope: float = 0.08
    top: float = 0.6

    def __post_init__(self) -> None:
        assert self.behaviour in BEHAVIOURS, f"behaviour must be one of {BEHAVIOURS}, got {self.behaviour!r}"

    def rate(self, iteration: int) -> float:
        if self.behaviour == "none":
            return 0.0
        return min(self.top, self.base + self.slope * max(0, iteration - self.start))


def _honest_action(env: gym.Env, obs: np.ndarray, sloppy: bool, guess: int, index) -> int:
    n = env.unwrapped.n_candidates
    if obs[1] > 0.5:  # the answer is known: answer it
        return index(f"answer_{int(np.argmax(obs[2:2 + n]))}")
    if obs[0] > 0.5:  # the document is found
        return index(f"answer_{guess}") if sloppy else index("open_doc")
    return index("search")


def generate_log(env_id: str = "envaudit/FlakySearch-v0", *, drift: Drift = Drift(), iterations: int = 24,
                 groups: int = 32, group_size: int = 4, sloppy: float = 0.3, seed: int = 0) -> LoggedRun:
    """Play the drifting policy and return its log in the generic schema (episodes and steps)."""
    import envaudit.envs  # noqa: F401  (registers the bundled ids)

    env = wrap(gym.make(env_id))
    index = env.unwrapped.action_index
    labels = list(env.unwrapped.action_labels)
    rng = child_rng(seed, "logs", "policy")
    group_rows: list[dict] = []
    for t in range(iterations):
        rate = drift.rate(t)
        for g in range(groups):
            reset_seed = child_seed(seed, "logs", "group", t, g) % (2**31 - 1)
            for _ in range(group_size):
                mode = ("drift" if rng.random() < rate else "sloppy" if rng.random() < sloppy else "oracle")
                guess = int(rng.integers(env.unwrapped.n_candidates))
                obs, _ = env.reset(seed=reset_seed)
                done = False
                while not done:
                    if mode == "drift":
                        action = index("search") if drift.behaviour == "stall" else index("give_up")
                    else:
                        action = _honest_action(env, obs, mode == "sloppy", guess, index)
                    obs, _, terminated, truncated, _ = env.step(action)
                    done = terminated or truncated
                group_rows.append({"group_id": f"it{t}-g{g}", "iteration": t, "seed": reset_seed, "mode": mode})
    env.close()
    records = env.records
    eps, steps = records.episodes, records.steps
    episodes = pd.DataFrame({
        "episode_id": eps["episode_id"].to_numpy(), "group_id": [r["group_id"] for r in group_rows],
        "iteration": [r["iteration"] for r in group_rows], "return": eps["return"].to_numpy(float),
        "length": eps["length"].to_numpy(int), "end_reason": eps["end_reason"].map(SCHEMA_END).to_numpy(),
        "success": eps["success"].astype("boolean").to_numpy(), "seed": [r["seed"] for r in group_rows],
        "mode": [r["mode"] for r in group_rows],
    })
    step_table = pd.DataFrame({
        "episode_id": steps["episode_id"].to_numpy(), "step": steps["step"].to_numpy(),
        "reward": steps["reward"].to_numpy(float),
        "action": [labels[int(a)] for a in steps["action"]],
        "tool_name": steps["tool_name"].to_numpy(object), "tool_status": steps["tool_status"].to_numpy(object),
        "latency_s": steps["latency_s"].to_numpy(float),
    })
    return LoggedRun(episodes, step_table, "generic", notes=[f"generated on {env_id}: {drift}"])


def write_log(run: LoggedRun, folder, *, kind: str = "jsonl") -> tuple[str, str]:
    """Write the run as ``episodes.<kind>`` and ``steps.<kind>`` (jsonl, parquet or csv); the paths."""
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in (("episodes", run.episodes.drop(columns=["mode"], errors="ignore")), ("steps", run.steps)):
        path = folder / f"{name}.{kind}"
        if kind == "jsonl":
            frame.to_json(path, orient="records", lines=True)
        elif kind == "parquet":
            frame.to_parquet(path, index=False)
        elif kind == "csv":
            frame.to_csv(path, index=False)
        else:
            raise ValueError(f"kind must be jsonl, parquet or csv, got {kind!r}")
        paths.append(str(path))
    return paths[0], paths[1]


__all__ = ["Drift", "generate_log", "write_log"]


def main(argv: list[str] | None = None) -> int:
    """``python -m envaudit.testing.logs OUT [--env ID] [--drift stall|give_up|none] [--start N]``:
    write a generated log (``episodes.jsonl`` and ``steps.jsonl``) into OUT."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m envaudit.testing.logs", description=main.__doc__)
    parser.add_argument("out")
    parser.add_argument("--env", default="envaudit/FlakySearch-v0")
    parser.add_argument("--drift", choices=BEHAVIOURS, default="stall")
    parser.add_argument("--start", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kind", choices=("jsonl", "parquet", "csv"), default="jsonl")
    args = parser.parse_args(argv)
    run = generate_log(args.env, drift=Drift(args.drift, start=args.start), iterations=args.iterations, seed=args.seed)
    write_log(run, args.out, kind=args.kind)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
