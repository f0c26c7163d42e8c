"""Mutation score per module: how many planted bugs do the module's own tests catch?

Runs mutmut (``pip install -e '.[mutation]'``) on one module at a time with a bounded, targeted
test selection (the tests that mirror the module), then prints killed / total and lists every
surviving mutant with its diff. Target (issue 15): at least 85% killed on stats and the probes.

    python benchmarks/mutation.py                         # envaudit/stats.py and envaudit/findings.py
    python benchmarks/mutation.py stats                   # one module
    python benchmarks/mutation.py probes/length.py        # a probe (minutes: its tests scan envs)
    python benchmarks/mutation.py --all-probes            # every probe as well (long: a weekly job)
    python benchmarks/mutation.py stats --tests-ref main  # the tests as they are on a git ref

Why a staging folder: mutmut imports the mutated copy by the module path it derives from the
file path, but the repository installs ``probes/`` as ``envaudit.probes`` (package-dir mapping).
Each run therefore lays the package out as it is imported (``envaudit/``, ``envaudit/probes/``,
``envaudit/envs/``) with ``tests/`` beside it under ``build/mutation/<module>/`` and runs
mutmut there; the working tree is never modified.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGING = ROOT / "build" / "mutation"
CAUGHT = ("killed", "timeout")  # a mutant that hangs the tests is caught by their timeout
PROBE_TESTS = {"pipeline": "tests/probes/test_pipeline_probe.py"}  # names that do not mirror


@dataclass(frozen=True)
class Target:
    source: str        # path in the repository, e.g. probes/length.py
    staged: str        # path in the import layout, e.g. envaudit/probes/length.py
    tests: tuple[str, ...]  # glob patterns, relative to the repository root


def target(name: str) -> Target:
    """A module by short name (``stats``, ``findings``, ``length``) or path."""
    path = name if name.endswith(".py") else None
    if path is None:
        path = f"envaudit/{name}.py" if (ROOT / "envaudit" / f"{name}.py").exists() else f"probes/{name}.py"
    if not (ROOT / path).exists():
        raise SystemExit(f"mutation: no module {name!r} (looked for {path}); expected a short name like "
                         "stats, findings, length or a path like probes/length.py")
    stem = Path(path).stem
    if path.startswith("probes/"):
        return Target(path, f"envaudit/probes/{stem}.py", (PROBE_TESTS.get(stem, f"tests/probes/test_{stem}.py"),))
    if path.startswith("envs/"):
        return Target(path, f"envaudit/envs/{stem}.py", (f"tests/envs/test_{stem}*.py",))
    # envaudit/stats.py is tested by tests/test_stats.py, tests/test_stats_paired.py, ...
    return Target(path, path, (f"tests/test_{stem}.py", f"tests/test_{stem}_*.py"))


def stage(t: Target, folder: Path, tests_ref: str | None) -> list[str]:
    """Lay out the package as it is imported, plus the tests; return the selected test files."""
    if folder.exists():
        shutil.rmtree(folder)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "envaudit", folder / "envaudit", ignore=ignore)
    shutil.copytree(ROOT / "probes", folder / "envaudit" / "probes", ignore=ignore)
    shutil.copytree(ROOT / "envs", folder / "envaudit" / "envs", ignore=ignore)
    if tests_ref is None:
        shutil.copytree(ROOT / "tests", folder / "tests", ignore=ignore)
    else:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", tests_ref, "tests"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    selected = sorted({str(p.relative_to(folder)) for pattern in t.tests for p in folder.glob(pattern)})
    if not selected:
        raise SystemExit(f"mutation: no tests match {', '.join(t.tests)} for {t.source}")
    pytest_ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    lines = ["[tool.pytest.ini_options]"]
    lines += [f"{k} = {_toml(v)}" for k, v in pytest_ini.items() if k != "testpaths"]
    lines += ["", "[tool.mutmut]", 'source_paths = ["envaudit"]', f"only_mutate = {_toml([t.staged])}",
              f"pytest_add_cli_args_test_selection = {_toml(selected)}",
              'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]']
    (folder / "pyproject.toml").write_text("\n".join(lines) + "\n")
    return selected


def _toml(value) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def mutmut(folder: Path, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=folder, capture_output=True,
                          text=True, timeout=timeout)


def score(t: Target, tests_ref: str | None, max_children: int, show_diffs: bool) -> dict:
    folder = STAGING / re.sub(r"[^A-Za-z0-9]+", "-", f"{t.source}-{tests_ref or 'worktree'}").strip("-")
    selected = stage(t, folder, tests_ref)
    run = mutmut(folder, "run", "--max-children", str(max_children))
    results = mutmut(folder, "results", "--all", "true")
    statuses = dict(re.findall(r"^\s+(\S+): (.+)$", results.stdout, flags=re.M))
    if run.returncode != 0 or not statuses:
        raise SystemExit(f"mutation: mutmut failed on {t.source} (exit {run.returncode}):\n"
                         f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    survivors = sorted((k for k, v in statuses.items() if v not in CAUGHT),
                       key=lambda k: (k.rsplit("__mutmut_", 1)[0], int(k.rsplit("_", 1)[1])))
    diffs = {k: mutmut(folder, "show", k).stdout for k in survivors} if show_diffs else {}
    return {"module": t.source, "tests": selected, "total": len(statuses),
            "killed": sum(v in CAUGHT for v in statuses.values()),
            "survivors": {k: statuses[k] for k in survivors}, "diffs": diffs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="short names or paths (default: stats findings)")
    parser.add_argument("--all-probes", action="store_true", help="add every probe in probes/")
    parser.add_argument("--tests-ref", help="take tests/ from this git ref (e.g. main) to score older tests")
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutant runs (default 2)")
    parser.add_argument("--no-diffs", action="store_true", help="list surviving mutants without their diffs")
    args = parser.parse_args()
    names = args.modules or ([] if args.all_probes else ["stats", "findings"])
    if args.all_probes:
        names += [p.stem for p in sorted((ROOT / "probes").glob("*.py")) if p.stem != "__init__"]
    rows = [score(target(n), args.tests_ref, args.max_children, not args.no_diffs) for n in names]
    for r in rows:
        print(f"\n== {r['module']}  (tests: {' '.join(r['tests'])})")
        for name, status in r["survivors"].items():
            print(f"  {status:10} {name}")
            for line in r["diffs"].get(name, "").splitlines():
                if line.startswith(("+ ", "- ", "+\t", "-\t")) or (line[:1] in "+-" and line[:3] not in ("+++", "---")):
                    print(f"      {line}")
    print(f"\n{'module':32} {'killed':>7} {'total':>6} {'score':>7}")
    for r in rows:
        print(f"{r['module']:32} {r['killed']:7d} {r['total']:6d} {r['killed'] / max(r['total'], 1):7.1%}")


if __name__ == "__main__":
    main()
