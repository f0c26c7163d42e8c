"""How well does envaudit detect incentives on envs nobody tuned it for? Recall and false alarms.

Scans procedurally generated tool tasks (``envaudit.families``): clean bases (step costs, quit
actions, shaping, rare success, flaky tools, noisy graders, ToolEnv and plain Gymnasium envs) and
the same kind of bases with one planted flaw per catalogue code. Prints recall per code (the
planted incentive named at warn or fail), the false-alarm rate (a clean env with any warn or fail
finding), the list of false alarms with the env's features, and the same table for Gymnasium's
``check_env`` as the baseline (a raise or a warning counts as a detection). "filed code" counts
the code each flaw is filed under; "headline" counts a warn/fail finding group headed by an
expected code (what a user reads first), where reports group findings. Targets (issue 10):
recall >= 95% per code, false alarms <= 2%.

    python benchmarks/detection.py                                  # 100 clean + 100 flawed
    python benchmarks/detection.py --quick --n-clean 40 --n-flawed 40 --jobs 2 --out det.csv

Every case and every scan derives from ``--seed``; the same seed gives the same table (scan
timings aside) with any ``--jobs``.
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from envaudit.families import make_cases
from envaudit.families.evaluate import CaseResult, Summary, evaluate_case, summarise
from envaudit.families.generate import KINDS_BY_CODE

TARGET_RECALL, TARGET_FALSE_ALARMS = 0.95, 0.02


def _evaluate(args: tuple) -> CaseResult:
    case, seed, quick, budget, probes = args
    return evaluate_case(case, seed=seed, quick=quick, budget_s=budget, probes=probes)


def run(args: argparse.Namespace) -> list[CaseResult]:
    cases = make_cases(args.n_clean, args.n_flawed, seed=args.seed)
    work = [(c, args.seed, args.quick, args.budget, args.probes) for c in cases]
    results: list[CaseResult] = []
    started = time.perf_counter()
    if args.jobs <= 1:
        iterator = map(_evaluate, work)
        pool = None
    else:
        # spawn: the scan runs threads and torch; forking a process that holds them is unsafe.
        pool = ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"))
        iterator = pool.map(_evaluate, work)
    try:
        for i, result in enumerate(iterator, 1):
            results.append(result)
            if args.progress:
                mark = ("FALSE ALARM" if result.false_alarm else "hit" if result.hit
                        else "miss" if not result.clean else "inconclusive" if result.inconclusive else "quiet")
                print(f"[{i}/{len(work)} {time.perf_counter() - started:.0f}s] {result.name}: {mark} "
                      f"({result.scan_seconds:.1f}s)", file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.shutdown()
    return results


def print_table(results: list[CaseResult], summary: Summary, args: argparse.Namespace, seconds: float) -> None:
    n_clean = sum(r.clean for r in results)
    grouped = any(r.headlines for r in results)  # reports made before grouping have no groups
    print(f"Detection on {len(results)} generated envs ({n_clean} clean, {len(results) - n_clean} flawed), "
          f"seed {args.seed}, {'--quick' if args.quick else 'default'} scans"
          + (f", probes {','.join(args.probes)}" if args.probes else "") + f"; {seconds:.0f} s wall")
    print()
    print(f"{'code':24} {'kind':26} {'envaudit recall':>24} {'filed code':>12} {'headline':>10} {'check_env':>12}")
    for code, kinds in KINDS_BY_CODE.items():
        rate = summary.recall_by_code[code]
        if not rate.n:
            continue
        print(f"{code:24} {'(all)':26} {str(rate):>24} {_short(summary.primary_by_code[code]):>12} "
              f"{_short(summary.headline_by_code[code]) if grouped else '-':>10} "
              f"{_short(summary.check_env_by_code[code]):>12}")
        for kind in kinds:
            if len(kinds) > 1 and summary.recall_by_kind[kind].n:
                print(f"{'':24} {kind:26} {_short(summary.recall_by_kind[kind]):>24} "
                      f"{_short(summary.primary_by_kind[kind]):>12} {'':>10} "
                      f"{_short(summary.check_env_by_kind[kind]):>12}")
    print()
    codes_met = sum(r.n and r.value >= TARGET_RECALL for r in summary.recall_by_code.values())
    codes_seen = sum(bool(r.n) for r in summary.recall_by_code.values())
    print(f"overall recall: envaudit {summary.overall_recall}, check_env {summary.check_env_overall_recall}; "
          f"codes at >= {TARGET_RECALL:.0%}: {codes_met}/{codes_seen}")
    if grouped:
        print(f"headline recall (a warn/fail group headed by an expected code): {summary.overall_headline_recall}")
    print(f"false alarms (clean env with a warn/fail incentive): envaudit {summary.false_alarms}, "
          f"check_env {summary.check_env_false_alarms}; target <= {TARGET_FALSE_ALARMS:.0%}")
    print(f"inconclusive (clean env whose scan said it could tell nothing apart, at warn): {summary.inconclusive}")
    alarms = [r for r in results if r.false_alarm]
    if alarms:
        print()
        print("false alarms by finding (code / probe):")
        for (code, probe), n in Counter((f.code, f.probe) for r in alarms for f in r.flags).most_common():
            print(f"  {n:3}  {code} / {probe}")
        print()
        print("false alarms:")
        for r in alarms:
            print(f"  {r.name}: {_features(r)}")
            for f in r.flags:
                print(f"      {f.code} {f.severity} [{f.probe}] {f.summary[:220]}")
    misses = [r for r in results if not r.clean and not r.hit]
    if misses:
        print()
        print("misses (flawed env, planted code not reported at warn/fail):")
        for r in misses:
            said = ", ".join(sorted({f"{f.code}:{f.severity}" for f in r.flags})) or "nothing at warn/fail"
            print(f"  {r.name}: {_features(r)} -> {said}")
    stray = [(r, f) for r in results if not r.clean for f in r.unexplained]
    if stray:
        print()
        print("findings on flawed envs that name neither the flaw nor a side effect of it:")
        for (code, probe), n in Counter((f.code, f.probe) for _, f in stray).most_common():
            print(f"  {n:3}  {code} / {probe}")
    broken = [r for r in results if r.error or r.incomplete or r.probe_problems]
    if broken:
        print()
        print("scans that did not run all their work:")
        for r in broken:
            print(f"  {r.name}: {r.error or ''} {'; '.join(r.incomplete + r.probe_problems)}")
    times = sorted(r.scan_seconds for r in results)
    print()
    print(f"scan time per env: median {times[len(times) // 2]:.1f} s, max {times[-1]:.1f} s")


def _short(rate) -> str:
    return f"{rate.k}/{rate.n}" if rate.n else "-"


def _features(r: CaseResult) -> str:
    f = r.features
    return (f"{f['base']}, {f['regime']} success, path {f['path_len']}, {f['n_actions']} actions, "
            f"step cost {f['step_cost']}, shaping {f['shaping']}, quit {f['quit']}, "
            f"max fail rate {f['max_failure_rate']}, grader noise {f['grader_noise']}, "
            f"wrong answer ends {f['wrong_answer_ends']}, oracle {f['oracle']}")


def write_results(results: list[CaseResult], path: Path) -> None:
    rows = [r.to_row() for r in results]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        payload = [{**row, "flags": [vars(f) for f in r.flags]} for row, r in zip(rows, results, strict=True)]
        path.write_text(json.dumps(payload, indent=1, default=str))
        return
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-clean", type=int, default=100, help="clean generated envs (default 100)")
    parser.add_argument("--n-flawed", type=int, default=100,
                        help="flawed generated envs, codes in equal shares (default 100: 10 per code)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the cases and of every scan")
    parser.add_argument("--quick", action="store_true", help="scan with quick=True (about a quarter of the work)")
    parser.add_argument("--jobs", type=int, default=1, help="scans run in this many processes")
    parser.add_argument("--budget", type=float, default=900.0,
                        help="wall-clock safety cap of each scan in seconds (default 900: never the limit)")
    parser.add_argument("--probes", type=lambda s: [p for p in s.split(",") if p], default=None,
                        help="only these probes (comma-separated; default all)")
    parser.add_argument("--out", type=Path, default=None, help="per-env results, CSV (or JSON when it ends in .json)")
    parser.add_argument("--progress", action="store_true", help="one line per scanned env on stderr")
    args = parser.parse_args()
    if args.n_clean < 0 or args.n_flawed < 0 or args.jobs < 1:
        parser.error(f"--n-clean and --n-flawed must be >= 0 and --jobs >= 1, got {args.n_clean}, "
                     f"{args.n_flawed}, {args.jobs}")
    started = time.perf_counter()
    results = run(args)
    summary = summarise(results)
    print_table(results, summary, args, time.perf_counter() - started)
    if args.out is not None:
        write_results(results, args.out)
        print(f"per-env results written to {args.out}")


if __name__ == "__main__":
    main()
