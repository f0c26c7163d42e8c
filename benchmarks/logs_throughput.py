"""How fast does ``envaudit logs`` read and analyse a large rollout log? Logged steps per second.

A synthetic run in the generic schema (built with numpy, not by playing an env, so that building
it is not what is measured): ``--steps`` logged steps (default one million) over ``--iterations``
iterations of GRPO groups of 8, tool calls that fail 20% of the time, a timeout rate rising from
iteration ``iterations // 3``. It is written as Parquet (and JSONL with ``--jsonl``), then timed:

- read: the generic reader, the episode and step tables into the schema;
- analyse: ``run_logs`` (records, the probes' record analyses, drift over training);
- write: the report folder (tables, plots, HTML).

    python benchmarks/logs_throughput.py                 # 1,000,000 steps
    python benchmarks/logs_throughput.py --steps 100000  # a quick look

Target (issue 14): a million logged steps read and analysed in under a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ACTIONS = np.array(["search", "open_doc", "answer_0", "answer_1", "answer_2", "answer_3", "give_up"], dtype=object)


def synthetic(n_steps: int, iterations: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    mean_length = 8
    n_eps = max(8 * iterations, n_steps // mean_length)
    n_eps -= n_eps % 8
    iteration = np.repeat(np.arange(iterations), int(np.ceil(n_eps / iterations)))[:n_eps]
    group = np.arange(n_eps) // 8
    timeout_p = 0.05 + 0.5 * np.clip((iteration - iterations // 3) / iterations, 0, 1)
    timed_out = rng.random(n_eps) < timeout_p
    success = ~timed_out & (rng.random(n_eps) < 0.5)
    lengths = np.where(timed_out, 12, rng.integers(2, 12, n_eps))
    lengths = np.maximum(1, np.round(lengths * n_steps / lengths.sum())).astype(np.int64)
    episode_of_step = np.repeat(np.arange(n_eps), lengths)
    starts = np.cumsum(lengths) - lengths
    step = np.arange(len(episode_of_step)) - starts[episode_of_step]
    status = np.where(rng.random(len(step)) < 0.2, "error", "ok").astype(object)
    reward = np.zeros(len(step))
    last = np.cumsum(lengths) - 1
    reward[last] = success.astype(float)
    episodes = pd.DataFrame({
        "episode_id": np.arange(n_eps), "group_id": group, "iteration": iteration,
        "return": success.astype(float), "length": lengths,
        "end_reason": np.where(timed_out, "truncated", "terminated"), "success": success,
        "seed": group * 7919 % (2**31 - 1),
    })
    steps = pd.DataFrame({
        "episode_id": episode_of_step, "step": step, "reward": reward,
        "action": ACTIONS[rng.integers(0, len(ACTIONS), len(step))],
        "tool_name": "search", "tool_status": status, "latency_s": rng.random(len(step)),
    })
    return episodes, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--jsonl", action="store_true", help="also time the same log as JSONL")
    args = parser.parse_args()

    from envaudit.config import ScanConfig
    from envaudit.logs import generic
    from envaudit.logs.audit import run_logs
    from envaudit.reporting import write_folder

    episodes, steps = synthetic(args.steps, args.iterations)
    kinds = ["parquet"] + (["jsonl"] if args.jsonl else [])
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            paths = [Path(tmp) / f"episodes.{kind}", Path(tmp) / f"steps.{kind}"]
            for frame, path in zip((episodes, steps), paths, strict=True):
                frame.to_parquet(path) if kind == "parquet" else frame.to_json(path, orient="records", lines=True)
            t0 = time.perf_counter()
            run = generic.read(paths)
            t1 = time.perf_counter()
            report = run_logs(run, ScanConfig(timeout_handling="drop"), label="benchmark")
            t2 = time.perf_counter()
            write_folder(report, Path(tmp) / f"report-{kind}")
            t3 = time.perf_counter()
            n = len(run.steps)
            print(f"{kind}: {n:,} steps, {len(run.episodes):,} episodes, {args.iterations} iterations")
            print(f"  read     {t1 - t0:7.2f} s  {n / (t1 - t0):12,.0f} steps/s")
            print(f"  analyse  {t2 - t1:7.2f} s  {n / (t2 - t1):12,.0f} steps/s")
            print(f"  read + analyse {t2 - t0:7.2f} s  {n / (t2 - t0):12,.0f} steps/s")
            print(f"  write report folder {t3 - t2:7.2f} s")
            print(f"  findings: {', '.join(f'{f.severity} {f.code}' for f in report.findings) or 'none'}")
            print(f"  {report.exploration.get('sampled', 'no sampling')}")


if __name__ == "__main__":
    main()
