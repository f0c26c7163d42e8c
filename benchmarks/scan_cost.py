"""What a scan costs when the env's step costs: wall time, env steps and speed-up over one worker.

The env (``SleepWalk`` below) is a 10-step tool-like walk whose ``step`` sleeps ``L`` seconds, as a
step that waits on a sandbox, an HTTP API or an LLM judge does; every reset and step it takes is
counted in a file shared by every process of the scan (one byte appended per call). Each scan runs
in its own process as a user runs it (``python -m envaudit.cli scan``), for every latency, mode,
executor and number of workers asked, and the table puts them side by side: wall seconds, env
steps and resets, and the speed-up over ``--workers 1`` of the same executor (the target: at
least 0.8 x N on the sleeping env).

    python benchmarks/scan_cost.py                                    # the full table (hours at 200 ms)
    python benchmarks/scan_cost.py --latencies 0.005 --modes quick --workers 1 8 --executors threads
    python benchmarks/scan_cost.py --latencies 0.005 --probes grpo --baseline-pythonpath /tmp/envaudit-before

``--env helpdesk`` scans the bundled Helpdesk (a ``ToolEnv``, so the failures probe injects faults
into it) with every step sleeping L instead of SleepWalk; ``--probe-column NAME`` puts that probe's
seconds in the table instead of the GRPO probe's. ``--probes`` scans only those probes (the GRPO
probe's own cost, say); ``--baseline-pythonpath``
runs every case a second time with another envaudit importable from that folder (an older
checkout), for a before/after table (executors the baseline does not have are skipped there).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

LATENCY_VAR = "ENVAUDIT_BENCH_LATENCY_S"
COUNTER_VAR = "ENVAUDIT_BENCH_COUNTER"
LIMIT = 10


def _count(suffix: str) -> None:
    path = os.environ.get(COUNTER_VAR)
    if path:
        fd = os.open(path + suffix, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)


class SleepWalk(gym.Env):
    """Walk right to ``GOAL`` within ``LIMIT`` steps (action 2), or ``submit`` early (action 0:
    success only at the goal); every step sleeps ``$ENVAUDIT_BENCH_LATENCY_S`` seconds."""

    metadata = {"render_modes": []}
    GOAL = 4

    def __init__(self) -> None:
        self.latency_s = float(os.environ.get(LATENCY_VAR, "0"))
        self.action_space = gym.spaces.Discrete(3)
        self.observation_space = gym.spaces.Box(0.0, float(LIMIT), (2,), np.float32)

    def _obs(self) -> np.ndarray:
        return np.array([self.pos, self.t], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        _count(".resets")
        self.pos, self.t = 0, 0
        return self._obs(), {}

    def step(self, action):
        _count(".steps")
        if self.latency_s:
            time.sleep(self.latency_s)
        action = int(action)
        self.t += 1
        if action == 2:
            self.pos += 1
        if action == 0:
            done = self.pos >= self.GOAL
            return self._obs(), float(done), True, False, {"success": done}
        truncated = self.t >= LIMIT
        return self._obs(), -0.01, False, truncated, {"success": False} if truncated else {}


def _slow_helpdesk():
    """The bundled Helpdesk (a ``ToolEnv``: the failures probe injects faults into its tools) whose
    every step sleeps ``$ENVAUDIT_BENCH_LATENCY_S`` and is counted like SleepWalk's."""
    from envaudit.envs.helpdesk import Helpdesk

    class SlowHelpdesk(Helpdesk):
        def reset(self, *, seed=None, options=None):
            _count(".resets")
            return super().reset(seed=seed, options=options)

        def step(self, action):
            _count(".steps")
            latency = float(os.environ.get(LATENCY_VAR, "0"))
            if latency:
                time.sleep(latency)
            return super().step(action)

    return SlowHelpdesk


def make_slow_helpdesk():
    """A ``SlowHelpdesk`` (the scan target ``benchmarks/scan_cost.py:make_slow_helpdesk``)."""
    return _slow_helpdesk()()


SPECS = {"walk": f"{Path(__file__).resolve()}:SleepWalk",
         "helpdesk": f"{Path(__file__).resolve()}:make_slow_helpdesk"}
SPEC = SPECS["walk"]


def scan(latency: float, quick: bool, executor: str, workers: int, probes: list[str] | None,
         pythonpath: str | None, timeout_s: float, spec: str = SPEC) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        counter = os.path.join(tmp, "calls")
        cmd = [sys.executable, "-m", "envaudit.cli", "scan", spec, "--out", os.path.join(tmp, "report"),
               "--fail-on", "never", "--no-progress", "--executor", executor, "--workers", str(workers)]
        cmd += ["--quick"] if quick else []
        cmd += ["--probes", ",".join(probes)] if probes else []
        env = {**os.environ, LATENCY_VAR: str(latency), COUNTER_VAR: counter}
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
            rc, err = done.returncode, done.stderr
        except subprocess.TimeoutExpired:
            rc, err = None, f"not done after {timeout_s:g} s"
        wall = time.perf_counter() - start
        sizes = {k: os.path.getsize(counter + k) if os.path.exists(counter + k) else 0 for k in (".steps", ".resets")}
        probe_s = {}
        report = Path(tmp, "report", "report.json")
        if report.exists():
            data = json.loads(report.read_text())
            probe_s = {p["name"]: p.get("seconds") for p in data.get("probes", []) if "name" in p}
        return {"wall_s": wall, "rc": rc, "steps": sizes[".steps"], "resets": sizes[".resets"], "probe_s": probe_s,
                "error": None if rc in (0, 1, 3) else (err or "")[-300:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 0.005, 0.05, 0.2],
                        help="Seconds each step sleeps (default 0, 5 ms, 50 ms, 200 ms).")
    parser.add_argument("--modes", nargs="+", choices=["quick", "default"], default=["quick", "default"])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--executors", nargs="+", default=["threads", "processes", "asyncio"])
    parser.add_argument("--probes", help="Comma-separated probes to scan (default: every default probe).")
    parser.add_argument("--baseline-pythonpath", help="Scan every case also with the envaudit importable from here.")
    parser.add_argument("--baseline-only", action="store_true", help="Scan only with --baseline-pythonpath's envaudit.")
    parser.add_argument("--timeout", type=float, default=3600.0, help="Seconds a scan may take before it is cut.")
    parser.add_argument("--json", help="Also write the rows here.")
    parser.add_argument("--env", choices=sorted(SPECS), default="walk",
                        help="walk: SleepWalk (a plain env); helpdesk: the bundled Helpdesk ToolEnv, every step sleeping L.")
    parser.add_argument("--probe-column", default="grpo", help="The probe whose seconds get a column (default grpo).")
    args = parser.parse_args(argv)
    probes = args.probes.split(",") if args.probes else None
    sources = [("after", None)] + ([("before", args.baseline_pythonpath)] if args.baseline_pythonpath else [])
    if args.baseline_only:
        sources = sources[1:]
    rows = []
    print(f"| source | L (ms) | mode | executor | workers | wall s | {args.probe_column} s | env steps | resets | speed-up | x N |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for latency in args.latencies:
        for mode in args.modes:
            for executor in args.executors:
                for source, path in sources:
                    if source == "before" and executor == "asyncio":
                        continue
                    first = None
                    for n in args.workers:
                        r = scan(latency, mode == "quick", executor, n, probes, path, args.timeout, SPECS[args.env])
                        first = first if first is not None else r["wall_s"]
                        speedup = first / r["wall_s"]
                        grpo = r["probe_s"].get(args.probe_column)
                        row = {"source": source, "latency_s": latency, "mode": mode, "executor": executor, "workers": n,
                               **r, "speedup": speedup}
                        rows.append(row)
                        cut = "" if r["error"] is None else f" ({r['error'].strip().splitlines()[-1][:60]})"
                        print(f"| {source} | {latency * 1000:g} | {mode} | {executor} | {n} | {r['wall_s']:.1f}{cut} | "
                              f"{'' if grpo is None else f'{grpo:.1f}'} | {r['steps']} | {r['resets']} | "
                              f"{speedup:.2f} | {speedup / n:.2f} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
