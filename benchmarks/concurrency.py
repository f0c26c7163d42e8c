"""How much do concurrent rollouts buy? Scan wall time at 1..32 workers, threads and processes.

Two envs stand for the two kinds of slow env: ``SleepyToolEnv``, whose one tool sleeps
``--sleep-ms`` per call (an HTTP request, a sandbox: the process waits, the CPU does not), and
``BusyEnv``, which burns ``--burn-ms`` of CPU per step (a simulator). Each is scanned (exploration
only by default, ``--probes`` adds probes) with the same seed under every executor and worker
count; the table gives wall seconds and the speed-up over one worker of the same executor, beside
the targets (0.8 x N on the sleeping env, 0.8 x cores on the busy one). A scan's wall time includes
starting its worker processes; the "pool up" columns time the same rollouts on a pool whose workers
are already running, which is what every run after the first costs in a scan. Every configuration plays
the same episodes: the report's episode table is checked equal across them.

A third measurement states what isolation costs: the per-step time of a trivial env played inline
(in the scanning process) and in one worker process, for short and long episodes.

A fourth (``--only ray``) states what Ray costs per episode against local worker processes at the
same number of workers, both already up: a trivial env (the cost is all overhead) and the sleeping
tool env (the overhead against 5 x 50 ms of waiting), side by side with the ratio; and with batches
of one episode per actor call, what actors on other nodes of a cluster get. Starting the local Ray
instance and its actors is timed apart: a scan pays it once.

    python benchmarks/concurrency.py --episodes 64 --workers 1,2,4,8,16,32
    python benchmarks/concurrency.py --only ray --workers 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import gymnasium as gym
import numpy as np

from envaudit.execution import ExecutionConfig, ProcessExecutor, default_workers
from envaudit.rollout import RandomPolicy, Runner
from envaudit.scan import run_scan


class SleepyToolEnv(gym.Env):
    """Every step calls one tool that waits ``sleep_ms``; episodes last ``length`` steps."""

    action_space = gym.spaces.Discrete(3)
    observation_space = gym.spaces.Discrete(64)

    def __init__(self, sleep_ms: float = 50.0, length: int = 5) -> None:
        self.sleep_s, self.length = sleep_ms / 1000, length

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        started = time.perf_counter()
        time.sleep(self.sleep_s)
        self.t += 1
        done = self.t >= self.length
        info = {"tool": {"name": "search", "status": "ok", "latency_s": time.perf_counter() - started}}
        if done:
            info["success"] = int(action) == 2
        return self.t, float(int(action) == 2 and done), done, False, info


class BusyEnv(SleepyToolEnv):
    """Every step burns ``burn_ms`` of this thread's CPU time."""

    def __init__(self, burn_ms: float = 5.0, length: int = 5) -> None:
        super().__init__(0.0, length)
        self.burn_s = burn_ms / 1000

    def step(self, action):
        end = time.thread_time() + self.burn_s
        x = 0
        while time.thread_time() < end:
            x += 1
        return super().step(action)


class TrivialEnv(SleepyToolEnv):
    def step(self, action):
        self.t += 1
        return self.t, 0.0, self.t >= self.length, False, {}


def _scan(factory, episodes: int, probes: tuple[str, ...], executor: str, workers: int):
    started = time.perf_counter()
    report = run_scan(factory, env_id=factory.__name__, episodes=episodes, group_size=8, probes=probes,
                      execution=ExecutionConfig(executor, workers=workers))
    return time.perf_counter() - started, report.records.episodes


def _speedups(name, factory, args, out: list[str]) -> None:
    target_of = (lambda n: 0.8 * n) if name == "sleep" else (lambda n: 0.8 * min(n, default_workers()))
    base: dict[str, float] = {}
    reference = None
    rows = []
    for n in args.workers:
        row = [name, str(n)]
        for executor in ("threads", "processes"):
            seconds, episodes = _scan(factory, args.episodes, args.probes, executor, n)
            frame = episodes.drop(columns=[c for c in episodes if c in ("latency_s",)])
            if reference is None:
                reference = frame
            assert frame.equals(reference), f"{executor} x{n} played other episodes than the first run"
            base.setdefault(executor, seconds)
            row += [f"{seconds:7.2f}", f"{base[executor] / seconds:5.2f}x"]
        seconds = _warm_rollouts(factory, args.episodes, n)
        base.setdefault("warm", seconds)
        row += [f"{seconds:7.2f}", f"{base['warm'] / seconds:5.2f}x"]
        row.append(f"{target_of(n):5.1f}x")
        rows.append(row)
        out.append("| " + " | ".join(row) + " |")
        print(out[-1], flush=True)


def _warm_rollouts(factory, episodes: int, workers: int) -> float:
    """Seconds for ``episodes`` rollouts on a process pool whose workers are already running: what
    a scan pays per run once its pool is up (a scan keeps one pool for all its probes)."""
    pool = ProcessExecutor(workers)
    try:
        runner = Runner(factory, executor=pool)
        runner.run(RandomPolicy(), range(workers), rng=np.random.default_rng(0))  # start every worker
        started = time.perf_counter()
        runner.run(RandomPolicy(), range(episodes), rng=np.random.default_rng(0))
        return time.perf_counter() - started
    finally:
        pool.close()


def _per_step(length: int, episodes: int, repeats: int = 5) -> tuple[float, float]:
    """Seconds per step of ``TrivialEnv`` inline and in one running worker process: the median of
    ``repeats`` interleaved blocks, so load on the machine hits both alike."""
    factory = lambda: TrivialEnv(length=length)  # noqa: E731
    seeds = list(range(episodes))
    pool = ProcessExecutor(1)
    inline, process = [], []
    try:
        Runner(factory, executor=pool).run(RandomPolicy(), seeds[:4], rng=np.random.default_rng(0))  # warm
        for _ in range(repeats):
            for runner, times in ((Runner(factory), inline), (Runner(factory, executor=pool), process)):
                started = time.perf_counter()
                runner.run(RandomPolicy(), seeds, rng=np.random.default_rng(0))
                times.append((time.perf_counter() - started) / (length * episodes))
    finally:
        pool.close()
    return statistics.median(inline), statistics.median(process)


def _ray_per_episode(factories, workers: int, repeats: int = 3) -> None:
    """Seconds per episode on ``workers`` running worker processes and on as many running Ray
    actors, for each ``(name, factory, episodes)``: the median of ``repeats`` interleaved blocks, so
    load on the machine hits both alike. Both must play the same episodes."""
    from envaudit.execution.ray_exec import RayExecutor, ray_module, start_ray

    started = time.perf_counter()
    start_ray(None, 2 * workers)  # room for both Ray executors' actors
    ray_start = time.perf_counter() - started
    pool, actors, single = ProcessExecutor(workers), RayExecutor(workers), RayExecutor(workers, max_batch=1)
    print(f"ray: local instance started in {ray_start:.1f} s (load average {_load()})", flush=True)
    print("| env | episodes | workers | processes ms/episode | ray ms/episode | ray / processes | "
          "ray - processes ms/episode | ray, batches of 1 ms/episode | ray 1 / processes | load average |", flush=True)
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    try:
        for k, executor in enumerate((pool, actors, single)):  # start every worker and actor before timing
            started = time.perf_counter()
            Runner(factories[0][1], executor=executor).run(RandomPolicy(), range(4 * workers),
                                                           rng=np.random.default_rng(0))
            if k:
                print(f"ray: {workers} actors started and warm in {time.perf_counter() - started:.1f} s", flush=True)
        for name, factory, episodes in factories:
            times: dict[str, list[float]] = {"processes": [], "ray": [], "ray1": []}
            frames = {}
            for _ in range(repeats):
                for label, executor in (("processes", pool), ("ray", actors), ("ray1", single)):
                    started = time.perf_counter()
                    result = Runner(factory, executor=executor).run(RandomPolicy(), range(episodes),
                                                                    rng=np.random.default_rng(0))
                    times[label].append((time.perf_counter() - started) / episodes)
                    frames[label] = result.records.episodes.drop(columns=["latency_s"], errors="ignore")
            for label in ("ray", "ray1"):
                assert frames[label].equals(frames["processes"]), f"{name}: {label} played other episodes"
            proc, on_ray, one = (statistics.median(times[k]) for k in ("processes", "ray", "ray1"))
            print(f"| {name} | {episodes} | {workers} | {proc * 1e3:.2f} | {on_ray * 1e3:.2f} | {on_ray / proc:.2f}x | "
                  f"{(on_ray - proc) * 1e3:+.2f} | {one * 1e3:.2f} | {one / proc:.2f}x | {_load()} |", flush=True)
    finally:
        pool.close()
        actors.close()
        single.close()
        ray_module().shutdown()


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=64, help="exploration episodes per scan")
    parser.add_argument("--workers", default="1,2,4,8,16,32", help="worker counts, comma-separated")
    parser.add_argument("--sleep-ms", type=float, default=50.0)
    parser.add_argument("--burn-ms", type=float, default=5.0)
    parser.add_argument("--probes", default="", help="probes to run after exploration (default: none)")
    parser.add_argument("--only", choices=("sleep", "cpu", "overhead", "ray"), action="append")
    args = parser.parse_args()
    args.workers = [int(w) for w in args.workers.split(",")]
    args.probes = tuple(p for p in args.probes.split(",") if p)
    only = set(args.only or ("sleep", "cpu", "overhead", "ray"))
    print(f"cores available: {default_workers()} (os.cpu_count {os.cpu_count()}); load average {_load()}; "
          f"{args.episodes} episodes of "
          f"5 steps per scan; probes: {', '.join(args.probes) or 'none (exploration only)'}")
    out = ["| env | workers | threads scan s | speed-up | processes scan s | speed-up | "
           "processes, pool up: rollouts s | speed-up | target |",
           "|---|---|---|---|---|---|---|---|---|"]
    if only & {"sleep", "cpu"}:
        print("\n".join(out), flush=True)
    sleepy = type("SleepyToolEnv", (SleepyToolEnv,), {"__init__": lambda self: SleepyToolEnv.__init__(self, args.sleep_ms)})
    busy = type("BusyEnv", (BusyEnv,), {"__init__": lambda self: BusyEnv.__init__(self, args.burn_ms)})
    if "sleep" in only:
        _speedups("sleep", sleepy, args, out)
    if "cpu" in only:
        _speedups("cpu", busy, args, out)
    if "ray" in only:
        trivial = type("TrivialEnv", (TrivialEnv,), {"__init__": lambda self: TrivialEnv.__init__(self, 0.0, 10)})
        _ray_per_episode([("trivial, 10 steps", trivial, 400), (f"sleep {args.sleep_ms:g} ms x 5 steps", sleepy,
                                                                 max(args.episodes, 8 * args.workers[0]))],
                         args.workers[0])
    if "overhead" in only:
        for length in (10, 100):
            inline, process = _per_step(length, max(20, 4000 // length))
            print(f"per-step cost of a trivial env, {length}-step episodes: inline {inline * 1e6:.0f} us, "
                  f"one worker process {process * 1e6:.0f} us ({process / inline:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
