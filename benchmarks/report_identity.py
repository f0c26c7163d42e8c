"""Do two trees write the same reports? report.json (timings aside) for every bundled env and for
generated detection cases, written to a folder, and two such folders compared.

A refactor that moves code must not move a number. Run this before it (on the old tree) and after
it (on the new), then compare:

    python benchmarks/report_identity.py write /tmp/before              # on the old tree
    python benchmarks/report_identity.py write /tmp/after               # on the new tree
    python benchmarks/report_identity.py compare /tmp/before /tmp/after

``write`` scans each bundled variant (``envaudit.envs.registry.VARIANTS``) at its default
configuration, seed 0, and the first ``--n-clean``/``--n-flawed`` cases of
``benchmarks/detection.py --quick`` the way that benchmark scans them (its global-random pinning
included). ``compare`` prints one line per report that differs, with the first differing path, and
exits 1 if any does.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

TIMINGS = ("seconds", "created")


def without_timings(data: dict) -> dict:
    """report.json less what the clock decides (durations, the creation stamp)."""
    out = {k: v for k, v in data.items() if k not in TIMINGS}
    out["probes"] = [{k: v for k, v in p.items() if k != "seconds"} for p in data.get("probes", [])]
    return out


def _scan_bundled(env_id: str) -> tuple[str, dict]:
    from envaudit.config import ScanConfig
    from envaudit.scan import run_scan

    report = run_scan(env_id, ScanConfig(seed=0, fail_on="never", budget_s=3600.0))
    return env_id.replace("/", "_"), without_timings(report.to_dict())


def _scan_case(args: tuple) -> tuple[str, dict]:
    from envaudit.config import ScanConfig
    from envaudit.families import make_cases
    from envaudit.scan import run_scan
    from envaudit.seeding import child_seed

    index, n_clean, n_flawed = args
    case = make_cases(n_clean, n_flawed, seed=0)[index]
    config = ScanConfig(seed=0, quick=True, budget_s=3600.0, fail_on="never", **case.overrides())
    state = random.getstate()
    random.seed(child_seed(0, "families", "global-random", case.name, "scan"))
    try:
        report = run_scan(case.make_env, config, env_id=case.name)
    finally:
        random.setstate(state)
    return "case_" + case.name.replace("/", "_"), without_timings(report.to_dict())


def write(out: Path, n_clean: int, n_flawed: int, jobs: int, only_cases: bool) -> None:
    from envaudit.envs.registry import VARIANTS

    out.mkdir(parents=True, exist_ok=True)
    work = [(_scan_case, (i, n_clean, n_flawed)) for i in range(n_clean + n_flawed)]
    if not only_cases:
        work = [(_scan_bundled, env_id) for env_id in VARIANTS] + work
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(fn, arg) for fn, arg in work]
        for future in futures:
            name, data = future.result()
            (out / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True, default=str))
            print(name, file=sys.stderr)


def _first_difference(a, b, path: str = "") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}/{key} (only in {'after' if key not in a else 'before'})"
            found = _first_difference(a[key], b[key], f"{path}/{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path} (length {len(a)} vs {len(b)})"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return None  # NaN is one value in a report, though not equal to itself
    return None if a == b else f"{path}: {a!r:.80} vs {b!r:.80}"


def compare(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.glob("*.json")} | {p.name for p in after.glob("*.json")})
    differ = 0
    for name in names:
        if not (before / name).exists() or not (after / name).exists():
            print(f"{name}: only in {'after' if not (before / name).exists() else 'before'}")
            differ += 1
            continue
        found = _first_difference(json.loads((before / name).read_text()), json.loads((after / name).read_text()))
        if found:
            print(f"{name}: {found}")
            differ += 1
    print(f"{len(names) - differ} of {len(names)} reports identical (timings aside)")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="scan and write normalised report.json files into OUT")
    w.add_argument("out", type=Path)
    w.add_argument("--n-clean", type=int, default=20, help="generated clean cases (default 20)")
    w.add_argument("--n-flawed", type=int, default=20, help="generated flawed cases (default 20)")
    w.add_argument("--jobs", type=int, default=2, help="scans run in this many processes")
    w.add_argument("--only-cases", action="store_true", help="skip the bundled envs")
    c = sub.add_parser("compare", help="compare two folders that `write` made")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "write":
        write(args.out, args.n_clean, args.n_flawed, args.jobs, args.only_cases)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
