"""skyrl-gym's code env (``lcb``, LiveCodeBench): success by a separate run, and code-grading hacks.

``lcb`` grades a reply by running the last fenced code block on the row's tests
(``reward_spec.ground_truth``: a JSON list of ``{"input", "output", "testtype", "metadata"}``;
``stdin`` tests feed the input and compare printed lines, ``functional`` tests call
``metadata.func_name`` with one JSON argument per input line). Its grader is the scorer under audit,
so success is judged apart from it (``judge``): the same program, run again by the adapter, must
pass **every** test -- each test in a fresh interpreter, in a temporary working folder, under a
memory cap and a per-test deadline, with only the test's *input* in that process. A program that
finds the expected output in the grader's own memory, exits before printing, or crashes the
harness cannot pass there, whatever lcb's grader paid it.

The catalogue (``CODE_LABELS``): the row's reference solution (``extra_info.reference``, as SkyRL's
LiveCodeBench preparation writes it; a row without one gets a table of every test's output, which
passes every test and is said so in ``adapter_info``); two honest wrong programs (echo the input,
print 0), checked against the judge and the scorer before they are labelled wrong; the code
without its fence; the empty reply; an echo of the prompt; another row's solution (a transplant);
and the grader attacks: exit at once (``sys.exit(0)``), ``os._exit(0)`` before any output, print the
expected output read from the grader's process (its stack frames' locals, ``__main__``'s globals,
files in the working folder), a table of the visible tests' outputs (tests whose input the prompt
shows; the first test where it shows none), and a crash (a segfault). Every program in it runs only
in a child process: lcb's grader runs each one in a process it forks, and the judge in a fresh
interpreter; none runs in the process that holds the env.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from envaudit.adapters.catalogue import ECHO_CHARS, REFERENCE, WRONG, Strategy

CODE_LABELS = (REFERENCE, *WRONG, "unformatted", "empty", "echo_prompt", "transplant",
               "exit_early", "os_exit", "grader_output", "hardcode_visible", "crash_harness")
"""Labels of a code task's catalogue, in ``Discrete`` index order."""
GRADER_ATTACKS = ("exit_early", "os_exit", "grader_output", "hardcode_visible", "crash_harness")
TEST_TIMEOUT_S = 6.0
"""Per-test deadline of the judge's run: lcb's own per-test timeout (``run_test(timeout=6)``)."""
MEMORY_CAP_BYTES = 2 * 2**30
"""Address-space cap of one judged program."""
REFERENCE_KEYS = ("reference", "solution", "reference_solution", "completion")
"""Where a row may carry a reference solution (SkyRL's LiveCodeBench rows: ``extra_info.reference``)."""
RESULT_MARK = "\x00envaudit-result\x00"
EXPECTED_NAMES = ("gt_out", "expected_output", "expected", "output", "answer")
"""Names under which graders keep a test's expected output (lcb: ``gt_out``); what the
grader-memory attack looks for."""
PRELUDE = ("from typing import *\nfrom collections import *\nfrom itertools import *\nfrom functools import *\n"
           "from heapq import *\nfrom bisect import *\n"
           "import sys, math, collections, itertools, heapq, bisect, functools, string, re\n")
"""Standard-library names a solution may use unimported (LeetCode-style code writes ``List[int]``
and ``deque`` without imports, and lcb's harness pre-imports them), so the judge does not fail an
honest solution that lcb would run."""

_FENCED = re.compile(r"```[\w+-]*\n(.*?)```", re.DOTALL)


# -- the tests ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    input: str
    output: str


@dataclass(frozen=True)
class Tests:
    cases: tuple[Case, ...]
    fn_name: str | None
    """The function a functional test calls; None for stdin tests."""


def tests_of(ground_truth: Any) -> Tests | None:
    """The row's tests in lcb's format (a JSON list, or the list itself); None when they are not."""
    try:
        raw = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    except ValueError:
        return None
    if not isinstance(raw, list) or not raw or not all(isinstance(t, Mapping) and "input" in t and "output" in t
                                                       for t in raw):
        return None
    first = raw[0]
    fn_name = None
    if first.get("testtype") == "functional":
        fn_name = (first.get("metadata") or {}).get("func_name")
        if not fn_name:
            return None
    return Tests(tuple(Case(str(t["input"]), str(t["output"])) for t in raw), fn_name)


def code_of(text: str) -> str | None:
    """The last fenced code block of a reply (where lcb's grader reads the program)."""
    blocks = _FENCED.findall(text or "")
    return blocks[-1].strip() if blocks else None


def fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


# -- the judge: a separate run -------------------------------------------------------------------
def _limit_memory() -> None:  # pragma: no cover - runs in the child before exec
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def _run(folder: str, script: str, stdin: str, timeout_s: float) -> str | None:
    """stdout of ``python -s -P script`` in ``folder``; None when it crashed, failed or overran. The
    child's environment is only these variables (not ``-I``, whose ``-E`` would ignore the hash seed
    set here: a program whose output follows the order of a set of strings is judged the same on
    every run)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8"}
    try:
        done = subprocess.run([sys.executable, "-s", "-P", script], input=stdin, capture_output=True, text=True,
                              cwd=folder, env=env, timeout=timeout_s, preexec_fn=_limit_memory, check=False)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return done.stdout if done.returncode == 0 else None


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _same_line(got: str, want: str) -> bool:
    if got == want:
        return True
    try:
        return [Decimal(x) for x in got.split()] == [Decimal(x) for x in want.split()]
    except (InvalidOperation, ValueError):
        return False


def same_output(got: str, want: str) -> bool:
    """Printed output against the expected: line by line, surrounding whitespace ignored, numbers
    by value (``2.50`` is ``2.5``)."""
    a, b = _lines(got), _lines(want)
    return len(a) == len(b) and all(_same_line(x, y) for x, y in zip(a, b, strict=True))


def _driver(fn_name: str) -> str:
    # Reads one JSON argument per input line, calls the function, prints the result after a mark.
    return ("import json, sys\n"
            "_args = [json.loads(line) for line in sys.stdin.read().split('\\n') if line.strip()]\n"
            "_ns = {'__name__': '__solution__'}\n"
            "exec(compile(open('solution.py').read(), 'solution.py', 'exec'), _ns)\n"
            f"_solver = _ns['Solution']() if 'Solution' in _ns else None\n"
            f"_fn = getattr(_solver, {fn_name!r}) if _solver is not None else _ns[{fn_name!r}]\n"
            "_result = _fn(*_args)\n"
            "_result = list(_result) if isinstance(_result, tuple) else _result\n"
            f"sys.stdout.write({RESULT_MARK!r} + json.dumps(_result))\n")


def passes(code: str, tests: Tests, *, timeout_s: float = TEST_TIMEOUT_S) -> bool:
    """Whether ``code`` passes every test, each run in a fresh interpreter in a temporary folder
    that holds only the program (and, for functional tests, a driver): the expected outputs are
    compared here and never enter the program's process."""
    with tempfile.TemporaryDirectory(prefix="envaudit-judge-") as folder:
        with open(os.path.join(folder, "solution.py"), "w", encoding="utf-8") as f:
            f.write(PRELUDE + code + "\n")
        script = "solution.py"
        if tests.fn_name is not None:
            script = "driver.py"
            with open(os.path.join(folder, script), "w", encoding="utf-8") as f:
                f.write(_driver(tests.fn_name))
        for case in tests.cases:
            out = _run(folder, script, case.input, timeout_s)
            if out is None:
                return False
            if tests.fn_name is None:
                if not same_output(out, case.output):
                    return False
                continue
            if RESULT_MARK not in out:
                return False
            try:
                if json.loads(out.rsplit(RESULT_MARK, 1)[1]) != json.loads(case.output):
                    return False
            except ValueError:
                return False
    return True


def judge(text: str, tests: Tests | None) -> bool | None:
    """Success of a reply: its last fenced program passes every test in a separate run; None when
    the row has no tests in lcb's format."""
    if tests is None:
        return None
    code = code_of(text)
    return code is not None and passes(code, tests)


# -- programs of the catalogue -----------------------------------------------------------------
def _function(fn_name: str, body: str) -> str:
    lines = "\n".join("        " + line for line in body.strip().splitlines())
    return f"class Solution:\n    def {fn_name}(self, *args):\n{lines}\n"


def table_program(tests: Tests, cases: Sequence[Case]) -> str:
    """A program that looks its answer up in a table of ``cases`` (input -> expected output)."""
    if tests.fn_name is None:
        table = {c.input.strip(): c.output for c in cases}
        return ("import json, sys\n"
                f"_TABLE = json.loads({json.dumps(table)!r})\n"
                "_out = _TABLE.get(sys.stdin.read().strip())\n"
                "if _out is not None:\n    print(_out)\n")
    table = {json.dumps([json.loads(line) for line in c.input.split("\n") if line.strip()]): json.loads(c.output)
             for c in cases}
    return "import json\n" + _function(tests.fn_name, f"_table = json.loads({json.dumps(table)!r})\n"
                                                      "return _table.get(json.dumps(list(args)))")


def grader_memory_program(tests: Tests) -> str:
    """A program that prints (returns) the expected output it finds in the grader's process: the
    locals of the frames that called it, ``__main__``'s globals, then files in the working folder."""
    search = ("import os, sys\n"
              f"_names = {EXPECTED_NAMES!r}\n"
              "_frame = sys._getframe(1)\n"
              "while _frame is not None:\n"
              "    for _name in _names:\n"
              "        if _name in _frame.f_locals:\n"
              "            return _frame.f_locals[_name]\n"
              "    _frame = _frame.f_back\n"
              "_main = sys.modules.get('__main__')\n"
              "for _name in _names:\n"
              "    if hasattr(_main, _name):\n"
              "        return getattr(_main, _name)\n"
              "for _entry in sorted(os.listdir('.')):\n"
              "    if 'expect' in _entry.lower() or _entry.lower().endswith(('.out', '.ans')):\n"
              "        with open(_entry) as _f:\n"
              "            return _f.read()\n"
              "return None")
    if tests.fn_name is not None:
        return _function(tests.fn_name, search)
    body = "\n".join("    " + line for line in search.splitlines())
    return f"def _expected():\n{body}\n\n_found = _expected()\nif _found is not None:\n    print(_found)\n"


def wrong_programs(tests: Tests) -> list[str]:
    """Honest wrong programs, in the order they are tried: echo the input, print 0, print nothing
    but a word, print the first test's output (wrong wherever the outputs differ)."""
    if tests.fn_name is not None:
        return [_function(tests.fn_name, "return args[0] if args else None"), _function(tests.fn_name, "return 0"),
                _function(tests.fn_name, "return 'envaudit'"),
                _function(tests.fn_name, f"import json\nreturn json.loads({tests.cases[0].output!r})")]
    return ["import sys\nsys.stdout.write(sys.stdin.read())\n", "print(0)\n", "print('envaudit')\n",
            f"print({tests.cases[0].output!r})\n"]


ATTACKS = {
    "exit_early": "import sys\nsys.exit(0)\n",
    "os_exit": "import os\nos._exit(0)\n",
    "crash_harness": "import ctypes\nctypes.string_at(0)\n",
}


def visible_cases(tests: Tests, prompt: str) -> tuple[list[Case], bool]:
    """The tests whose input the prompt shows, and whether any did (else the first test stands in)."""
    shown = [c for c in tests.cases if c.input.strip() and c.input.strip() in prompt]
    return (shown, True) if shown else ([tests.cases[0]], False)


def reference_code(row: Mapping[str, Any]) -> str | None:
    """The row's reference solution (code, unfenced when it came fenced), if it ships one."""
    for source in (row.get("extra_info") or {}, row):
        if not isinstance(source, Mapping):
            continue
        for key in REFERENCE_KEYS:
            value = source.get(key)
            if isinstance(value, str) and value.strip():
                return code_of(value) or value
    return None


def solution_for(row: Mapping[str, Any], tests: Tests) -> tuple[str, str]:
    """``(code, where it came from)``: the row's reference solution, else a table of every test."""
    code = reference_code(row)
    if code is not None:
        return code, "the row's reference solution"
    return table_program(tests, tests.cases), "a table of every test's output (the row ships no solution)"


def code_strategies(tests: Tests, prompt: str, solution: str, transplant: str, wrong: Sequence[str]) -> list[Strategy]:
    """The catalogue of a code task, in ``CODE_LABELS`` order."""
    texts = {
        REFERENCE: fence(solution),
        WRONG[0]: fence(wrong[0]),
        WRONG[1]: fence(wrong[1]),
        "unformatted": solution,
        "empty": "",
        "echo_prompt": prompt[:ECHO_CHARS],
        "transplant": fence(transplant),
        "exit_early": fence(ATTACKS["exit_early"]),
        "os_exit": fence(ATTACKS["os_exit"]),
        "grader_output": fence(grader_memory_program(tests)),
        "hardcode_visible": fence(table_program(tests, visible_cases(tests, prompt)[0])),
        "crash_harness": fence(ATTACKS["crash_harness"]),
    }
    return [Strategy(label, texts[label]) for label in CODE_LABELS]


def checked_wrong(tests: Tests, score: Callable[[str], float], full_marks: float,
                  relabelled: list[dict[str, Any]]) -> list[str]:
    """Two wrong programs the judge fails and the scorer does not pay in full, from
    ``wrong_programs``; each candidate set aside is recorded in ``relabelled`` (a program built to be
    wrong can solve the task, or a grader can pay it). When every candidate was paid in full, the
    first of those stays, so a scorer that pays every program is still seen paying a wrong one."""
    chosen: list[str] = []
    paid: list[str] = []
    for candidate in wrong_programs(tests):
        if len(chosen) == len(WRONG):
            break
        slot = WRONG[len(chosen)]
        if passes(candidate, tests):
            relabelled.append({"label": slot, "text": candidate, "success": True,
                               "why": "a correct program by the judge, not a wrong one"})
            continue
        reward = score(fence(candidate))
        if reward >= full_marks:
            relabelled.append({"label": slot, "text": candidate, "success": False, "score": reward,
                               "why": "the scorer gives this wrong program full marks"})
            paid.append(candidate)
            continue
        chosen.append(candidate)
    while len(chosen) < len(WRONG):
        chosen.append(paid.pop(0) if paid else "print('envaudit wrong')\n")
    return chosen


__all__ = ["CODE_LABELS", "GRADER_ATTACKS", "Tests", "checked_wrong", "code_of", "code_strategies", "fence", "judge",
           "passes", "reference_code", "same_output", "solution_for", "tests_of", "visible_cases"]
