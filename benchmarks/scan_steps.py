"""Where a scan's env steps go, and whether fewer steps keep the same verdicts.

Scans each target once (its own process, as a user runs it; inline executor, so the count does
not depend on workers) and prints the scan's env steps per probe from report.json's ``cost``
section, the GRPO runs' iterations and how each stopped, and the findings at warn/fail. With
``--baseline-pythonpath`` every target is scanned a second time with the envaudit importable from
that folder (an older checkout installed with ``pip install --no-deps --target DIR``), and the
table puts the two side by side: steps before and after, their ratio, and whether the set of
``code:severity`` findings is the same.

Target (issue 23): a default scan of the trivial 10-step env at most a quarter of its steps
before, with the same verdicts on every bundled env.

    python benchmarks/scan_steps.py                                         # trivial env + every bundled env
    python benchmarks/scan_steps.py --targets envaudit/Helpdesk-v0 --quick
    python benchmarks/scan_steps.py --baseline-pythonpath /tmp/envaudit-before
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TRIVIAL = "tests.fixtures.cost_envs:CountedWalk"
"""Ten steps whatever the action, reward 1 for action 1: the trivial env of issue 23."""
ROOT = Path(__file__).resolve().parent.parent


def bundled() -> list[str]:
    from envaudit.envs import VARIANTS

    return sorted(VARIANTS)


def scan(target: str, *, quick: bool, seed: int, pythonpath: str | None = None, timeout: float = 3600.0) -> dict:
    """One scan in its own process; its cost, GRPO runs and warn/fail findings (or its error)."""
    env = dict(os.environ)
    # The repository root makes the trivial env (a test fixture) importable; a baseline folder goes first.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, str(ROOT), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "envaudit.cli", "scan", target, "--out", out, "--seed", str(seed),
               "--executor", "inline", "--fail-on", "never", "--no-progress"] + (["--quick"] if quick else [])
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=out)
        except subprocess.TimeoutExpired:
            return {"target": target, "error": f"not done after {timeout:.0f} s"}
        path = Path(out) / "report.json"
        if not path.exists():
            return {"target": target, "error": (done.stderr.strip() or done.stdout.strip())[-300:]}
        report = json.loads(path.read_text())
    grpo = next((p for p in report["probes"] if p["name"] == "grpo"), None)
    runs = (grpo or {}).get("notes", {}).get("runs") or {}
    return {
        "target": target,
        "env_steps": report["cost"]["env_steps"],
        "probes": {name: c["env_steps"] for name, c in report["cost"]["probes"].items()},
        "runs": {name: run_word(r) for name, r in runs.items()},
        "flagged": sorted({f"{f['code']}:{f['severity']}" for f in report["findings"] if f["severity"] != "info"}),
    }


def run_word(r: dict) -> str:
    """A GRPO run in a few characters: its iterations and why it stopped (b barren, s settled,
    d decided, - at its most)."""
    why = next((k[0] for k in ("barren", "settled", "decided") if r.get(k)), "-")
    stood = r.get("stood_in_by")
    return f"<{stood}" if stood else f"{r['iterations']}{why}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", nargs="*", help=f"scan targets (default: {TRIVIAL} and every bundled env)")
    parser.add_argument("--quick", action="store_true", help="--quick scans instead of default ones")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline-pythonpath", help="Scan every target also with the envaudit importable from here.")
    parser.add_argument("--json", help="Also write the rows here.")
    parser.add_argument("--against", help="Rows an earlier run wrote with --json: its 'after' scans are this run's "
                                          "'before' (a baseline measured once, on a quieter machine, say).")
    args = parser.parse_args()
    targets = args.targets or [TRIVIAL, *bundled()]
    earlier = {r["target"]: r["after"] for r in json.loads(Path(args.against).read_text())} if args.against else None
    rows = []
    for target in targets:
        row = {"target": target, "after": scan(target, quick=args.quick, seed=args.seed)}
        if earlier and target in earlier:
            row["before"] = earlier[target]
        elif args.baseline_pythonpath:
            row["before"] = scan(target, quick=args.quick, seed=args.seed, pythonpath=args.baseline_pythonpath)
        rows.append(row)
        print(line(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def line(row: dict) -> str:
    after, before = row["after"], row.get("before")
    if "error" in after or (before and "error" in before):
        return f"{row['target']:45} error: {after.get('error') or before.get('error')}"
    steps = f"{after['env_steps']:>7,}"
    same = ""
    if before:
        steps = f"{before['env_steps']:>7,} -> {after['env_steps']:>7,} ({after['env_steps'] / before['env_steps']:.2f}x)"
        same = " same" if before["flagged"] == after["flagged"] else f" DIFFER (before {', '.join(before['flagged']) or '-'})"
    probes = " ".join(f"{k}={v}" for k, v in after["probes"].items() if v)
    runs = " ".join(f"{k.removeprefix('target-')}:{v}" for k, v in after["runs"].items())
    return f"{row['target']:45} {steps}  [{probes}]  grpo[{runs}]  {', '.join(after['flagged']) or '-'}{same}"


if __name__ == "__main__":
    main()
