"""What does Ray cost? One suite scanned three ways: one env after another in this process, N
local worker processes (``--workers N``) and N Ray CPUs (``--executor ray``, a local instance).

The suite is every bundled env (11 variants and their text twins), each a small quick scan. Ray's
overhead is its wall time against local processes on the same suite at the same parallelism,
with and without starting the Ray instance (a cluster that is already up does not pay the
start). Every run must give the same findings; the script checks that before printing.

    python benchmarks/suite_ray.py --workers 2
    python benchmarks/suite_ray.py --workers 4 --probes api,exploits,timeouts,length --episodes 32
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from envaudit.suite import run_suite
from envaudit.suite_exec import ray_module, start_ray
from envaudit.suite_file import build_entries


def _findings(folder: Path, names: list[str]) -> dict[str, list]:
    out = {}
    for name in names:
        report = json.loads((folder / name / "report.json").read_text())
        out[name] = [(f["code"], f["severity"], f["title"]) for f in report["findings"]]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="local worker processes and Ray CPUs")
    parser.add_argument("--targets", default="envaudit/*", help="comma-separated targets or patterns")
    parser.add_argument("--probes", default="api,exploits,timeouts")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--no-sequential", action="store_true", help="skip the one-after-another run")
    args = parser.parse_args()
    entries = build_entries(args.targets.split(","), None, base={},
                            flags={"quick": True, "episodes": args.episodes, "probes": args.probes.split(",")},
                            env_args={})
    names = [e.name for e in entries]
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = [("processes", {"workers": args.workers})]
        if not args.no_sequential:
            runs.insert(0, ("sequential", {}))
        for label, options in runs:
            start = time.perf_counter()
            run_suite(entries, root / label, **options)
            times[label] = time.perf_counter() - start
        start = time.perf_counter()
        start_ray(None, args.workers)
        times["ray start"] = time.perf_counter() - start
        start = time.perf_counter()
        run_suite(entries, root / "ray", executor="ray", workers=args.workers)
        times["ray"] = time.perf_counter() - start
        ray_module().shutdown()
        reference = _findings(root / "processes", names)
        for label in [*(r[0] for r in runs), "ray"]:
            assert _findings(root / label, names) == reference, f"{label} found something else"
    n = len(entries)
    print(f"suite: {n} envs ({args.targets}), quick scans of {args.probes}, {args.episodes} episodes; "
          f"{args.workers} workers; same findings in every run")
    print(f"{'run':<34}{'wall s':>9}{'s/env':>8}")
    rows = [(label, times[label]) for label in ("sequential", "processes") if label in times]
    rows += [("ray (instance already up)", times["ray"]),
             ("ray (incl. starting the instance)", times["ray"] + times["ray start"])]
    for label, seconds in rows:
        print(f"{label:<34}{seconds:>9.1f}{seconds / n:>8.2f}")
    print(f"ray / local processes: {times['ray'] / times['processes']:.2f}x (instance up), "
          f"{(times['ray'] + times['ray start']) / times['processes']:.2f}x (with its start of "
          f"{times['ray start']:.1f} s)")
    if "sequential" in times:
        print(f"local processes / sequential: {times['processes'] / times['sequential']:.2f}x")


if __name__ == "__main__":
    main()
