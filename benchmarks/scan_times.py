"""How long does a scan take? Wall-clock seconds of default and --quick scans, per env.

Targets (issues 3 and 4): a default scan of any bundled env, GRPO probe included, under 60 s on
2 cores; ``--quick`` under 15 s. Each scan runs in its own process, exactly as a user runs it
(interpreter and torch start-up included), and the table shows the scan's own time, the
process's wall time, the slowest probe and the findings at warn/fail.

    python benchmarks/scan_times.py                  # every bundled env, default and quick
    python benchmarks/scan_times.py --classics       # Gymnasium classics instead
    python benchmarks/scan_times.py --envs envaudit/CodeFix-v0 --modes quick
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLASSICS = ["CartPole-v1", "FrozenLake-v1", "Taxi-v4", "CliffWalking-v1", "Blackjack-v1"]


def bundled() -> list[str]:
    from envaudit.envs import VARIANTS

    return sorted(VARIANTS)


def scan(env_id: str, quick: bool, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "envaudit.cli", "scan", env_id, "--out", out, "--seed", str(seed),
               "--fail-on", "never", "--no-progress"] + (["--quick"] if quick else [])
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            return {"env": env_id, "quick": quick, "wall_s": wall, "error": done.stderr.strip()[-300:]}
        report = json.loads((Path(out) / "report.json").read_text())
    slowest = max(report["probes"], key=lambda p: p["seconds"], default=None)
    flagged = sorted({f"{f['code']}:{f['severity']}" for f in report["findings"] if f["severity"] != "info"})
    return {"env": env_id, "quick": quick, "wall_s": wall, "scan_s": report["seconds"],
            "slowest": f"{slowest['name']} {slowest['seconds']:.1f}s" if slowest else "",
            "flagged": ", ".join(flagged) or "-"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="*", help="env ids (default: every bundled env)")
    parser.add_argument("--classics", action="store_true", help="scan the Gymnasium classics instead")
    parser.add_argument("--modes", nargs="*", default=["default", "quick"], choices=["default", "quick"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    envs = args.envs or (CLASSICS if args.classics else bundled())
    rows = [scan(env, mode == "quick", args.seed) for env in envs for mode in args.modes]
    print(f"{'env':42} {'mode':8} {'wall s':>7} {'scan s':>7} {'target':>7}  {'slowest probe':18} flagged (warn/fail)")
    for r in rows:
        target = 15.0 if r["quick"] else 60.0
        mode = "quick" if r["quick"] else "default"
        if "error" in r:
            print(f"{r['env']:42} {mode:8} {r['wall_s']:7.1f} {'-':>7} {target:7.0f}  ERROR {r['error']}")
            continue
        over = " OVER" if r["wall_s"] > target else ""
        print(f"{r['env']:42} {mode:8} {r['wall_s']:7.1f} {r['scan_s']:7.1f} {target:7.0f}{over}  "
              f"{r['slowest']:18} {r['flagged']}")
    for mode in args.modes:
        walls = [r["wall_s"] for r in rows if ("quick" if r["quick"] else "default") == mode]
        if walls:
            print(f"{mode}: max {max(walls):.1f} s, median {sorted(walls)[len(walls) // 2]:.1f} s over {len(walls)} envs")


if __name__ == "__main__":
    main()
