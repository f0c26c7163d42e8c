"""Where a scan's time goes between executors, and whether a change made it faster: side by side.

Each scan runs in its own process as a user runs it (``python -m envaudit.cli scan ...``). For each
env and mode the table gives wall seconds and CPU seconds (the scan's process and every process it
started: fork server, probe hosts, episode workers), each under ``--executor inline`` and the
default ``processes``, and their ratio. On a machine shared with other work, wall time swings with
load; CPU time much less, so read both (the load average is printed with every row).

``--baseline-pythonpath DIR`` scans every case a second time with another envaudit importable
from DIR (an older checkout laid out as a package), alternating baseline and current runs so both
see the same machine state, and compares their report.json (minus timing fields): identical is
the bar for a change that only makes scans faster.

    python benchmarks/scan_speed.py --envs envaudit/Helpdesk-v0 --modes quick
    python benchmarks/scan_speed.py --baseline-pythonpath /tmp/envaudit-main --repeat 2
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
TIMING = ("created", "seconds")


def _subreaper() -> bool:
    """Become the parent of orphaned descendants (the fork server outlives the scan's process by
    a moment), so their CPU time is counted when they are reaped here. Linux only."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def strip_timings(report: dict) -> dict:
    report = {k: v for k, v in report.items() if k not in TIMING}
    report["config"] = {k: v for k, v in report["config"].items() if k != "out"}
    report["probes"] = [{k: v for k, v in p.items() if k != "seconds"} for p in report.get("probes", [])]
    return report


def scan(env_id: str, quick: bool, executor: str, seed: int, pythonpath: str | None, timeout_s: float,
         keep: str | None = None) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "envaudit.cli", "scan", env_id, "--out", out, "--seed", str(seed),
               "--fail-on", "never", "--no-progress", "--executor", executor] + (["--quick"] if quick else [])
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        load = os.getloadavg()[0]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=out)
        cpu, rc, deadline = 0.0, None, time.monotonic() + timeout_s
        while True:  # reap the scan and every descendant it left (fork server, resource tracker)
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                if time.monotonic() > deadline:
                    proc.kill()
                    deadline = float("inf")
                time.sleep(0.02)
                continue
            cpu += usage.ru_utime + usage.ru_stime
            if pid == proc.pid:
                rc = os.waitstatus_to_exitcode(status)
                wall = time.perf_counter() - start
        proc.returncode = rc
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        row = {"env": env_id, "quick": quick, "executor": executor, "wall_s": wall, "cpu_s": cpu, "load": load,
               "base": bool(pythonpath)}
        if rc not in (0, 1, 4):
            return {**row, "error": err.strip()[-300:]}
        text = (Path(out) / "report.json").read_text()
        if keep:
            name = f"{env_id.replace('/', '_')}-{'quick' if quick else 'default'}-{executor}-" \
                   f"{'baseline' if pythonpath else 'current'}-{time.strftime('%H%M%S')}.json"
            Path(keep).mkdir(parents=True, exist_ok=True)
            (Path(keep) / name).write_text(text)
    return {**row, "report": strip_timings(json.loads(text))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="*", help="env ids (default: every bundled env)")
    parser.add_argument("--modes", nargs="*", default=["quick", "default"], choices=["default", "quick"])
    parser.add_argument("--executors", nargs="*", default=["inline", "processes"],
                        choices=["inline", "processes", "threads"])
    parser.add_argument("--baseline-pythonpath", help="PYTHONPATH of another envaudit to compare with")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case (median shown)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds before a scan is killed")
    parser.add_argument("--keep", help="a folder to keep every scan's report.json in")
    args = parser.parse_args()
    if not _subreaper():
        print("note: CPU time counts the scan's process and its reaped children only (no subreaper here)")
    if args.envs:
        envs = args.envs
    else:
        from envaudit.envs import VARIANTS

        envs = sorted(VARIANTS)
    sides = [args.baseline_pythonpath, None] if args.baseline_pythonpath else [None]
    print(f"{'env':38} {'mode':7} {'executor':9} {'side':8} {'wall s':>7} {'cpu s':>7} {'load':>5}  same report")
    for env_id in envs:
        for mode in args.modes:
            reports: dict[tuple[str, bool], dict] = {}
            medians: dict[tuple[str, bool], tuple[float, float]] = {}
            for executor in args.executors:
                rows: dict[bool, list[dict]] = {True: [], False: []}
                for _ in range(args.repeat):
                    for side in sides:  # alternate: baseline and current see the same load
                        r = scan(env_id, mode == "quick", executor, args.seed, side, args.timeout, args.keep)
                        rows[r["base"]].append(r)
                for base, runs in rows.items():
                    if not runs:
                        continue
                    label = "baseline" if base else "current"
                    errors = [r["error"] for r in runs if "error" in r]
                    if errors:
                        print(f"{env_id:38} {mode:7} {executor:9} {label:8} ERROR {errors[0]}")
                        continue
                    same = all(r["report"] == runs[0]["report"] for r in runs)
                    reports[(executor, base)] = runs[0]["report"]
                    wall = statistics.median(r["wall_s"] for r in runs)
                    cpu = statistics.median(r["cpu_s"] for r in runs)
                    medians[(executor, base)] = (wall, cpu)
                    load = statistics.median(r["load"] for r in runs)
                    print(f"{env_id:38} {mode:7} {executor:9} {label:8} {wall:7.1f} {cpu:7.1f} {load:5.1f}  "
                          f"{'yes' if same else 'NO'} (between its {len(runs)} runs)", flush=True)
            for base in (True, False):
                a, b = reports.get(("inline", base)), reports.get(("processes", base))
                if a is not None and b is not None:
                    (wi, ci), (wp, cp) = medians[("inline", base)], medians[("processes", base)]
                    print(f"  {'baseline' if base else 'current'}: processes / inline wall {wp / wi:.2f}x, "
                          f"cpu {cp / ci:.2f}x; same report: {'yes' if a == b else 'NO'}")
            if args.baseline_pythonpath:
                for executor in args.executors:
                    a, b = reports.get((executor, True)), reports.get((executor, False))
                    if a is not None and b is not None:
                        (wb, cb), (wc, cc) = medians[(executor, True)], medians[(executor, False)]
                        print(f"  {executor}: current / baseline wall {wc / wb:.2f}x, cpu {cc / cb:.2f}x; "
                              f"same report: {'yes' if a == b else 'NO'}")


if __name__ == "__main__":
    main()
