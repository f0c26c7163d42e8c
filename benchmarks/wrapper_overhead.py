"""How much does recording cost? Steps/second of trivial envs, bare and under two recorders.

Three stacks are timed on the same env: bare, under Gymnasium's ``RecordEpisodeStatistics`` (the
usual per-episode bookkeeping) and under ``envaudit.AuditWrapper`` (a row per step plus the end
reason and outcome class per episode). Timed blocks of the three stacks are interleaved; each
repeat gives one ratio per stack against its neighbours in that repeat, and the medians and the
min-max spread of those paired ratios are reported, so machine noise hits every stack alike.

The AuditWrapper keeps what it records as it was stepped and builds its rows when the tables are
asked for (once per run of a scan); that build is timed separately ("tables", per recorded step).

Time is the process's CPU time by default: on a shared machine, wall time mostly measures how
long the process waited for a core. ``--clock wall`` times wall-clock instead (use it with
``--tool-deadline``, whose worker-thread handoff waits rather than computes).

Two envs: a ``gymnasium.Env`` whose step is nearly free, and a one-tool ``ToolEnv`` (its tool has
no deadline by default, so the tool path is measured without the worker-thread handoff; pass
``--tool-deadline`` to include it).

    python benchmarks/wrapper_overhead.py --steps 20000 --repeats 15
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from envaudit import AuditWrapper, ToolEnv, ToolResult, Transition
from envaudit.toolenv import ToolCall


class TrivialEnv(gym.Env):
    """Step costs a counter increment; episodes end after ``length`` steps, with a success flag."""

    def __init__(self, length: int = 100) -> None:
        self.length = length
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Discrete(length + 1)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return 0, {}

    def step(self, action):
        self._t += 1
        terminated = self._t >= self.length
        info = {"success": True} if terminated else {}
        return self._t, 1.0, terminated, False, info


class TrivialToolEnv(ToolEnv):
    """One tool that returns its argument; every call earns 1; ends after ``length`` calls."""

    def __init__(self, length: int = 100, deadline_s: float | None = None) -> None:
        super().__init__(max_steps=length)
        self.observation_space = gym.spaces.Discrete(2)
        self.add_tool("echo", lambda x: x, deadline_s=deadline_s)
        self.add_call("echo 0", "echo", x=0)
        self.add_call("echo 1", "echo", x=1)

    def reset_task(self, options):
        return 0

    def transition(self, call: ToolCall, result: ToolResult) -> Transition:
        return Transition(observation=int(result.value or 0), reward=1.0)


CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}

STACKS: dict[str, Callable[[gym.Env], gym.Env]] = {
    "bare": lambda env: env,
    "RecordEpisodeStatistics": lambda env: gym.wrappers.RecordEpisodeStatistics(env),
    "AuditWrapper": lambda env: AuditWrapper(env),
}


def time_block(make_env: Callable[[], gym.Env], stack: Callable[[gym.Env], gym.Env], steps: int,
               clock: Callable[[], float] = time.process_time) -> tuple[float, float | None]:
    """Steps/second of ``steps`` steps (resetting at episode ends) through a freshly built stack,
    and for an ``AuditWrapper`` the seconds its tables then take to build (else None)."""
    env = stack(make_env())
    env.reset(seed=0)
    action = np.int64(1)  # what a policy sampling from Discrete hands over
    step = env.step
    start = clock()
    for _ in range(steps):
        _, _, terminated, truncated, _ = step(action)
        if terminated or truncated:
            env.reset()
    elapsed = clock() - start
    tables = None
    if isinstance(env, AuditWrapper):
        start = clock()
        env.recorder.records()
        tables = clock() - start
    env.close()
    return steps / elapsed, tables


def measure(make_env: Callable[[], gym.Env], steps: int, repeats: int,
            clock: Callable[[], float]) -> tuple[dict[str, list[float]], list[float]]:
    """Steps/second of each stack in each of ``repeats`` interleaved blocks, and the seconds per
    recorded step of the AuditWrapper's table builds."""
    for stack in STACKS.values():  # warm-up: imports, first allocations, thread start
        time_block(make_env, stack, min(steps, 1000), clock)
    rates: dict[str, list[float]] = {name: [] for name in STACKS}
    tables: list[float] = []
    for r in range(repeats):
        names = list(STACKS) if r % 2 == 0 else list(reversed(STACKS))  # no fixed position bias
        for name in names:
            rate, built = time_block(make_env, STACKS[name], steps, clock)
            rates[name].append(rate)
            if built is not None:
                tables.append(built / steps)
    return rates, tables


def _spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} [{format(min(values), fmt)}-{format(max(values), fmt)}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20000, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=15, help="timed blocks per stack (median reported)")
    parser.add_argument("--episode-length", type=int, default=100, help="steps per episode")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="cpu: the process's CPU time (default; robust on a shared machine); wall: wall-clock")
    parser.add_argument("--tool-deadline", type=float, default=None,
                        help="deadline of the ToolEnv's tool in seconds (default none: no worker thread)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.repeats < 1 or args.episode_length < 1:
        parser.error("--steps, --repeats and --episode-length must be at least 1")

    envs = {
        "gymnasium.Env": lambda: TrivialEnv(args.episode_length),
        "ToolEnv": lambda: TrivialToolEnv(args.episode_length, args.tool_deadline),
    }
    print(f"{args.steps} steps per block, {args.repeats} interleaved blocks per stack, "
          f"episodes of {args.episode_length} steps, {args.clock} time; median [min-max]")
    header = f"{'env':<14} {'stack':<24} {'steps/s':>30} {'vs bare':>20} {'vs RES':>20}"
    print(header)
    print("-" * len(header))
    for env_name, make_env in envs.items():
        rates, tables = measure(make_env, args.steps, args.repeats, CLOCKS[args.clock])
        for stack, values in rates.items():
            # Paired ratios: each repeat's blocks ran back to back, so they saw the same machine.
            vs_bare = [b / v for b, v in zip(rates["bare"], values, strict=True)]
            vs_res = [b / v for b, v in zip(rates["RecordEpisodeStatistics"], values, strict=True)]
            print(f"{env_name:<14} {stack:<24} {_spread(values, ',.0f'):>30} "
                  f"{_spread(vs_bare, '.2f'):>20} {_spread(vs_res, '.2f'):>20}")
        per_step = [t * 1e9 for t in tables]
        print(f"{env_name:<14} {'AuditWrapper tables':<24} {_spread(per_step, '.0f'):>22} ns per recorded step "
              "(built once, when asked for)")
    print("(vs bare / vs RES: how many times slower than the bare env / RecordEpisodeStatistics)")


if __name__ == "__main__":
    main()
