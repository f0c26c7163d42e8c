"""Mutation score per module: how many planted bugs do the module's own tests catch?

Runs mutmut (``pip install -e '.[mutation]'``) on one module at a time with a bounded, targeted
test selection (the tests that mirror the module), then prints killed / total and lists every
surviving mutant with its diff. Target (issue 15): at least 85% killed on stats and the probes.

    python benchmarks/mutation.py                         # envaudit/stats.py and envaudit/findings.py
    python benchmarks/mutation.py stats                   # one module
    python benchmarks/mutation.py probes/length/bias.py   # a probe's module (minutes: its tests scan envs)
    python benchmarks/mutation.py failures                # every module of a probe
    python benchmarks/mutation.py adapters logs           # every module of envaudit/adapters, envaudit/logs
    python benchmarks/mutation.py --all-probes            # every probe as well (long: a weekly job)
    python benchmarks/mutation.py stats --tests-ref main  # the tests as they are on a git ref
    python benchmarks/mutation.py length --only _farming  # only the mutants of some functions
    python benchmarks/mutation.py timeouts --tests 'tests/probes/timeouts/test_timeouts_decisions.py'
                                   # only these tests: minutes instead of hours, a lower bound
    python benchmarks/mutation.py timeouts --two-stage    # decision tests, then every test on survivors
    python benchmarks/mutation.py length --report-only --show-text  # the last run again, text survivors listed

Two scores per module: killed / total, and killed / (total - text survivors), "decisions (text
mutants left out)". A *text* survivor differs from the original function only inside message
strings (a finding's title, summary or fix; the literal parts of an f-string): both functions are
parsed and compared with that text replaced by a placeholder. A string a program reads is never
text: a dict key, a subscript, a keyword argument's value, a comparison's operand, or a one-token
string (a column, a stream, a contract value such as ``"stall"``) wherever it stands. Every other
survivor is a decision no selected test pins, listed with its diff; text survivors are counted
(``--show-text`` lists them).

A probe's tests are ``tests/probes/<probe>/test_*.py``: the scans of planted envs and the
``test_*decisions*.py`` files, the direct tests of the probe's decision functions on hand-built
tables; a core module's are ``tests/<folder>/test_<stem>.py`` and ``test_<stem>_*.py``. A mutant the decision tests kill costs milliseconds; one they miss is run
through every scan test that reaches its function, so a whole probe with every test takes an hour
or more on two shared cores. ``--tests`` scores a probe against a chosen subset (its decision
tests): every mutant those miss is counted a survivor, so the score is a lower bound of the
suite's, and its survivor list is the one to read.

Why a staging folder: mutmut imports the mutated copy by the module path it derives from the
file path, but the repository installs ``probes/`` as ``envaudit.probes`` (package-dir mapping).
Each run therefore lays the package out as it is imported (``envaudit/``, ``envaudit/probes/``,
``envaudit/envs/``) with ``tests/`` beside it under ``build/mutation/<module>/`` and runs
mutmut there; the working tree is never modified.
"""

from __future__ import annotations

import argparse
import ast
import copy
import fnmatch
import json
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGING = ROOT / "build" / "mutation"
CAUGHT = ("killed", "timeout")  # a mutant that hangs the tests is caught by their timeout
PROBE_TESTS = {  # shared modules whose tests are those of the probes that use them
    "_shared": ("tests/probes/_shared/test_stall_decisions.py", "tests/probes/timeouts/test_*.py",
                "tests/probes/length/test_*.py", "tests/probes/intent/test_*.py"),
}


@dataclass(frozen=True)
class Target:
    source: str        # path in the repository, e.g. probes/length/bias.py
    staged: str        # path in the import layout, e.g. envaudit/probes/length/bias.py
    tests: tuple[str, ...]  # glob patterns, relative to the repository root
    keyword: str | None = None  # pytest -k expression: leave a test file's scans out of a decision run


def _probe_tests(path: Path) -> tuple[str, ...]:
    """A probe module's tests: every test of its probe (``tests/probes/<probe>/``, the scans of
    planted envs and the direct tests of its decision functions), or of a single-module probe
    whose tests have not moved into a folder yet, ``tests/probes/test_<stem>*.py``."""
    probe = path.parts[1] if len(path.parts) > 2 else path.stem
    if probe in PROBE_TESTS:
        return PROBE_TESTS[probe]
    if (ROOT / "tests" / "probes" / probe).is_dir():
        return (f"tests/probes/{probe}/test_*.py",)
    return (f"tests/probes/test_{probe}.py", f"tests/probes/test_{probe}_*.py")


def targets(name: str) -> list[Target]:
    """Modules by short name (``stats``, ``findings``, a probe: ``timeouts``, ``failures``, an
    envaudit package: ``adapters``, ``logs``) or path (``probes/length/bias.py``,
    ``envaudit/adapters/textarena.py``); a folder is every module in it."""
    path = Path(name)
    if not name.endswith(".py"):
        found = [p for p in (Path(f"envaudit/{name}.py"), Path(f"probes/{name}.py"), Path(f"envaudit/{name}"),
                             Path(f"probes/{name}"), path) if (ROOT / p).exists()]
        if not found:
            raise SystemExit(f"mutation: no module {name!r}; expected a short name like stats, findings, "
                             "timeouts, failures, adapters or a path like probes/length/bias.py")
        path = found[0]
    if (ROOT / path).is_dir():
        return [target(str(p.relative_to(ROOT))) for p in sorted((ROOT / path).rglob("*.py"))
                if p.name != "__init__.py" or p.stat().st_size > 2000]
    return [target(str(path))]


def target(path: str) -> Target:
    """One module by its path in the repository, with the tests that mirror it."""
    if not (ROOT / path).exists():
        raise SystemExit(f"mutation: no module {path}")
    source = Path(path)
    stem = source.stem
    if source.parts[0] == "probes":
        return Target(path, f"envaudit/{path}", _probe_tests(source))
    if source.parts[0] == "envs":
        return Target(path, f"envaudit/{path}", (f"tests/envs/test_{stem}*.py",))
    # envaudit/stats.py is tested by tests/test_stats.py, tests/test_stats_paired.py, ...;
    # envaudit/adapters/textarena.py by tests/adapters/test_textarena.py, test_textarena_*.py
    folder = "/".join(("tests", *source.parts[1:-1]))
    mirrored = (f"{folder}/test_{stem}.py", f"{folder}/test_{stem}_*.py")
    if not any(next(ROOT.glob(p), None) for p in mirrored):  # a helper module (adapters/base.py): its folder's tests
        mirrored = (f"{folder}/test_*.py",)
    return Target(path, path, mirrored)


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
              f"pytest_add_cli_args = {_toml(['-p', 'no:cacheprovider', '-q'] + (['-k', t.keyword] if t.keyword else []))}"]
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


DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
path, names = sys.argv[1], json.loads(sys.stdin.read())
print(json.dumps({n: get_diff_for_mutant(n, path=path) for n in names}))
"""


def diffs(folder: Path, staged: str, names: list[str]) -> dict[str, str]:
    """Each mutant's diff, from one process (``mutmut show`` per mutant costs a start-up each)."""
    if not names:
        return {}
    done = subprocess.run([sys.executable, "-c", DIFFS, staged], cwd=folder, input=json.dumps(names),
                          capture_output=True, text=True)
    if done.returncode == 0:
        return json.loads(done.stdout)
    return {n: mutmut(folder, "show", n).stdout for n in names}  # mutmut's internals moved


# -- survivor kinds ---------------------------------------------------------------------------------
# A survivor that differs from the original only in the wording of a message (a finding's title,
# summary or fix, an assertion's text) says nothing about the module's decisions; every other
# survivor is a decision no selected test pins. The split is made on the two functions' syntax
# trees, never on the diff's text, so a changed dict key, column or stream name is not text.
TEXT = "text"
OTHER = "other"
_PLACEHOLDER = "\0text\0"
_NAME = re.compile(r"[\w.:/\-]*")  # one token: a column, key, stream or option name, not prose


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _name_context(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether the string ``node`` is read as a name: a dict key, a subscript, a keyword argument's
    value, or an operand of a comparison (also as an element of a tuple/list/set there)."""
    child, parent = node, parents.get(node)
    while isinstance(parent, (ast.Tuple, ast.List, ast.Set)):
        child, parent = parent, parents.get(parent)
    if isinstance(parent, ast.Dict):
        return any(k is child for k in parent.keys)
    if isinstance(parent, ast.Subscript):
        return parent.slice is child
    return isinstance(parent, (ast.keyword, ast.Compare))


def _is_text(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """A string constant that is message text: not in a name context, and either a literal part of
    an f-string or prose (a plain string that is one name-like token, ``"stall"``, ``"records"``,
    may be a contract value or a column read elsewhere, so it is not text)."""
    parent = parents.get(node)
    if isinstance(parent, ast.JoinedStr):  # the literal text of an f-string, judged as the whole f-string
        return not _name_context(parent, parents)
    if _name_context(node, parents):
        return False
    return not _NAME.fullmatch(node.value)


def _normalised(source: str | ast.AST) -> str:
    """The function's syntax tree with its name and every message text replaced by placeholders."""
    tree = ast.parse(textwrap.dedent(source)) if isinstance(source, str) else source
    tree = copy.deepcopy(tree)
    parents = _parents(tree)
    texts = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and _is_text(n, parents)]
    for n in texts:
        n.value = _PLACEHOLDER
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n.name = re.sub(r"__mutmut_\w+$", "", n.name)
            break
    return ast.dump(tree, annotate_fields=False)


def kind(original: str | ast.AST, mutant: str | ast.AST) -> str:
    """``text`` when the mutant differs from the original only inside message strings, else
    ``other`` (sources of one function each, or their parsed trees)."""
    return TEXT if _normalised(original) == _normalised(mutant) else OTHER


def mutant_functions(folder: Path, staged: str) -> dict[str, tuple[ast.AST, ast.AST]]:
    """Every mutant's (original, mutant) function trees, from the mutated module mutmut wrote
    (``x_<function>__mutmut_orig`` beside ``x_<function>__mutmut_<n>``), keyed by mutant name."""
    path = folder / "mutants" / staged
    if not path.exists():
        return {}
    tree = ast.parse(path.read_text())
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and "__mutmut_" in n.name}
    module = staged.removesuffix(".py").replace("/", ".")
    out = {}
    for name, node in defs.items():
        base, n = name.rsplit("__mutmut_", 1)
        if n != "orig" and f"{base}__mutmut_orig" in defs:
            out[f"{module}.{name}"] = (defs[f"{base}__mutmut_orig"], node)
    return out


def kinds(folder: Path, staged: str, names: list[str]) -> dict[str, str]:
    """Each named mutant's kind (``other`` where its source cannot be found)."""
    functions = mutant_functions(folder, staged)
    return {n: kind(*functions[n]) if n in functions else OTHER for n in names}


def _statuses(t: Target, folder: Path, tests_ref: str | None, max_children: int, rerun: bool,
              patterns: list[str]) -> dict[str, str]:
    """Run mutmut on ``t`` in ``folder`` (only the mutants matching ``patterns``, all without) and
    return every matching mutant's status."""
    if rerun or not (folder / "mutants").exists():
        stage(t, folder, tests_ref)
        run = mutmut(folder, "run", "--max-children", str(max_children), *patterns)
        if run.returncode != 0:
            raise SystemExit(f"mutation: mutmut failed on {t.source} (exit {run.returncode}):\n"
                             f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    results = mutmut(folder, "results", "--all", "true")
    statuses = dict(re.findall(r"^\s+(\S+): (.+)$", results.stdout, flags=re.M))
    if patterns:
        statuses = {k: v for k, v in statuses.items() if any(fnmatch.fnmatch(k, p) for p in patterns)}
    if not statuses:
        raise SystemExit(f"mutation: no mutmut results in {folder}:\n{results.stdout[-2000:]}{results.stderr[-2000:]}")
    return statuses


def _saved(folder: Path) -> Path:
    """Every mutant's status after the last run in ``folder`` (beside it: staging empties it)."""
    return folder.with_name(folder.name + ".statuses.json")


def _load_saved(path: Path, patterns: list[str]) -> dict[str, str]:
    saved = json.loads(path.read_text()) if path.exists() else {}
    return {k: v for k, v in saved.items() if not patterns or any(fnmatch.fnmatch(k, p) for p in patterns)}


def _folder(t: Target, tests_ref: str | None, tag: str) -> Path:
    return STAGING / re.sub(r"[^A-Za-z0-9]+", "-", f"{t.source}-{tests_ref or tag}").strip("-")


def score(t: Target, tests_ref: str | None, max_children: int, show_diffs: bool, rerun: bool,
          only: list[str], tests: list[str] | None = None, two_stage: bool = False,
          survivors_only: bool = False, keyword: str | None = None, show_text: bool = False) -> dict:
    """Killed and surviving mutants of one module.

    ``two_stage``: first every mutant against the module's decision tests alone
    (``tests/probes/test_<stem>_decisions.py``: milliseconds a mutant), then only the survivors
    against every selected test (the scans). The result is the same as one run with every test
    (a mutant is killed when any test fails), in a fraction of the time.

    ``survivors_only``: rerun only the mutants that survived the last run in this folder (with the
    tests as they are now); the ones it killed stay killed (tests are only ever added).
    """
    if tests:
        t = Target(t.source, t.staged, tuple(tests))
    if keyword:
        t = replace(t, keyword=keyword)
    # mutmut matches mutant names with fnmatch: <module>.x_<function>__mutmut_<n> for a function
    patterns = [f"*.x_{f}__mutmut_*" for f in only] + [f"*.x\u01c1*\u01c1{f}__mutmut_*" for f in only]
    folder = _folder(t, tests_ref, "subset" if tests or keyword else "worktree")
    if two_stage:
        first = Target(t.source, t.staged, tuple(p.replace("test_*", "test_*decisions*").replace(
            "_*.py", "_*decisions*.py") for p in t.tests), t.keyword)
        statuses = _statuses(first, _folder(t, tests_ref, "decisions"), tests_ref, max_children, rerun, patterns)
        left = [k for k, v in statuses.items() if v not in CAUGHT]
        if left:
            statuses.update(_statuses(t, folder, tests_ref, max_children, rerun, left))
    elif survivors_only and (_saved(folder).exists() or (folder / "mutants").exists()):
        # The last run's statuses: mutmut's own results forget the mutants a rerun did not run
        # ("not checked"), so a second --survivors-only would run every mutant again.
        statuses = (_load_saved(_saved(folder), patterns) if _saved(folder).exists()
                    else _statuses(t, folder, tests_ref, max_children, False, patterns))
        left = [k for k, v in statuses.items() if v not in CAUGHT]
        if left:
            statuses.update(_statuses(t, folder, tests_ref, max_children, True, left))
    elif not rerun and _saved(folder).exists():  # --report-only
        statuses = _load_saved(_saved(folder), patterns)
    else:
        statuses = _statuses(t, folder, tests_ref, max_children, rerun, patterns)
    if rerun or survivors_only:
        _saved(folder).write_text(json.dumps({**_load_saved(_saved(folder), []), **statuses}, indent=0))
    selected = tomllib.loads((folder / "pyproject.toml").read_text())["tool"]["mutmut"]["pytest_add_cli_args_test_selection"] \
        if (folder / "pyproject.toml").exists() else list(t.tests)
    order = lambda k: (k.rsplit("__mutmut_", 1)[0], int(k.rsplit("_", 1)[1]))  # noqa: E731
    survivors = sorted((k for k, v in statuses.items() if v not in CAUGHT), key=order)
    # "no tests": no selected test reaches the function at all; counted per function, not diffed.
    untested = Counter(_function(k) for k in survivors if statuses[k] == "no tests")
    source = folder if (folder / "mutants").exists() else _folder(t, tests_ref, "decisions")
    kind_of = kinds(source, t.staged, survivors)
    text = [k for k in survivors if kind_of[k] == TEXT]
    untested_text = Counter(_function(k) for k in text if statuses[k] == "no tests")
    shown = [k for k in survivors if statuses[k] != "no tests" and kind_of[k] != TEXT]
    text_shown = [k for k in text if statuses[k] != "no tests"]
    module = t.source + (f" ({', '.join(only)})" if only else "") + (" [subset]" if tests or keyword else "")
    wanted = shown + (text_shown if show_text else [])
    return {"module": module, "tests": selected, "total": len(statuses),
            "killed": sum(v in CAUGHT for v in statuses.values()),
            "survivors": {k: statuses[k] for k in shown}, "untested": dict(untested),
            "untested_text": dict(untested_text), "text": {k: statuses[k] for k in text_shown},
            "n_text": len(text), "by_function": dict(Counter(_function(k) for k in shown)),
            "diffs": diffs(folder, t.staged, wanted) if show_diffs and wanted else {}}


def decisions_score(row: dict) -> float:
    """Killed over the mutants that change more than a message's wording."""
    return row["killed"] / max(row["total"] - row["n_text"], 1)


def _function(mutant: str) -> str:
    """envaudit.stats.x_holm__mutmut_3 -> holm; a method's mutant names its class too."""
    name = mutant.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[1]
    if name.startswith("x\u01c1"):  # mutmut writes a method as x<bar>Class<bar>method
        return name[2:].replace("\u01c1", ".")
    return name.removeprefix("x_")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="short names or paths (default: stats findings)")
    parser.add_argument("--all-probes", action="store_true", help="add every probe in probes/")
    parser.add_argument("--tests-ref", help="take tests/ from this git ref (e.g. main) to score older tests")
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutant runs (default 2)")
    parser.add_argument("--no-diffs", action="store_true", help="list surviving mutants without their diffs")
    parser.add_argument("--only", nargs="+", default=[], metavar="FUNCTION",
                        help="only the mutants of these functions (fnmatch patterns), to bound a long run")
    parser.add_argument("--tests", nargs="+", metavar="GLOB",
                        help="score against only these test files (globs from the repository root): a lower bound")
    parser.add_argument("--keyword", metavar="EXPR",
                        help="pytest -k expression on the selected tests (e.g. 'not planted and not clean' to "
                             "leave a file's scans out): a lower bound, like --tests")
    parser.add_argument("--two-stage", action="store_true",
                        help="a probe's decision tests first, then every test on their survivors only (same "
                             "score as one run with every test, far faster)")
    parser.add_argument("--survivors-only", action="store_true",
                        help="rerun only the mutants that survived the last run (after adding tests)")
    parser.add_argument("--show-text", action="store_true",
                        help="list the text survivors (wording of messages only) with their diffs too")
    parser.add_argument("--report-only", action="store_true",
                        help="print the results of the last run in build/mutation/ without running again")
    args = parser.parse_args()
    names = args.modules or ([] if args.all_probes else ["stats", "findings"])
    if args.all_probes:
        names.append("probes")
    rows = [score(t, args.tests_ref, args.max_children, not args.no_diffs, not args.report_only,
                  args.only, args.tests, args.two_stage, args.survivors_only, args.keyword, args.show_text)
            for n in names for t in targets(n)]
    for r in rows:
        print(f"\n== {r['module']}  (tests: {' '.join(r['tests'])})")
        for function, n in r["untested"].items():
            text = r["untested_text"].get(function, 0)
            print(f"  no tests   {function}: {n} mutants (no selected test calls it)" + (f", {text} text" if text else ""))
        _print_survivors(r["survivors"], r["diffs"])
        if r["by_function"]:
            print("  decision survivors by function: "
                  + ", ".join(f"{f} {n}" for f, n in sorted(r["by_function"].items(), key=lambda x: -x[1])))
        print(f"  text       {r['n_text']} survivors differ only in the wording of messages"
              + (":" if args.show_text else " (--show-text lists them)"))
        if args.show_text:
            _print_survivors(r["text"], r["diffs"])
    print(f"\n{'module':32} {'killed':>7} {'total':>6} {'score':>7} {'text':>6}  decisions (text mutants left out)")
    for r in rows:
        print(f"{r['module']:32} {r['killed']:7d} {r['total']:6d} {r['killed'] / max(r['total'], 1):7.1%} "
              f"{r['n_text']:6d}  {r['killed']}/{r['total'] - r['n_text']} = {decisions_score(r):.1%}")


def _print_survivors(survivors: dict[str, str], found: dict[str, str]) -> None:
    for name, status in survivors.items():
        print(f"  {status:10} {name}")
        for line in found.get(name, "").splitlines():
            if line[:1] in "+-" and line[:3] not in ("+++", "---"):
                print(f"      {line}")


if __name__ == "__main__":
    main()
