"""skyrl-gym's code env, the adapter's parts taken one at a time (``envaudit.adapters.skyrl_code``).

``test_skyrl_gym_code.py`` plays the real ``lcb`` env; here each part gets inputs in lcb's own
format (a JSON list of ``{"input", "output", "testtype", "metadata"}``) and the answer worked out by
hand: which rows have tests, which programs pass them in the judge's separate run, what each
catalogue program is, and which wrong programs are kept when a scorer pays them.
"""

from __future__ import annotations

import json

from envaudit.adapters import skyrl_code as sc
from envaudit.adapters.catalogue import REFERENCE, WRONG
from envaudit.adapters.skyrl_code import (
    CODE_LABELS,
    Case,
    checked_wrong,
    code_of,
    code_strategies,
    fence,
    grader_memory_program,
    judge,
    passes,
    reference_code,
    same_output,
    solution_for,
    table_program,
    visible_cases,
    wrong_programs,
)

STDIN = sc.Tests((Case("2 3\n", "5\n"), Case("10 -4\n", "6\n")), None)
"""Add two numbers read from stdin."""
FUNCTIONAL = sc.Tests((Case("[1, 2, 3]", "6"), Case("[5]\n", "5")), "total")
"""``Solution().total(xs)``: the sum of a list, one JSON argument per input line."""
ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
TOTAL = "class Solution:\n    def total(self, xs: List[int]) -> int:\n        return sum(xs)\n"


def test_tests_of_reads_lcbs_format_and_nothing_else():
    rows = [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]
    assert sc.tests_of(json.dumps(rows)) == sc.Tests((Case("1\n", "1\n"),), None)
    assert sc.tests_of(rows) == sc.Tests((Case("1\n", "1\n"),), None)  # the list itself
    functional = [{"input": "[1]", "output": 1, "testtype": "functional", "metadata": {"func_name": "f"}}]
    assert sc.tests_of(functional) == sc.Tests((Case("[1]", "1"),), "f")
    assert sc.tests_of([{**functional[0], "metadata": {}}]) is None  # a call to no function
    assert sc.tests_of([{**functional[0], "metadata": None}]) is None
    assert sc.tests_of("not json") is None and sc.tests_of("{}") is None and sc.tests_of([]) is None
    assert sc.tests_of([{"input": "1"}]) is None and sc.tests_of([rows[0], "x"]) is None


def test_code_of_reads_the_last_fenced_block():
    reply = "First:\n```python\nprint(1)\n```\nbetter:\n```py\nprint(2)\n```\n"
    assert code_of(reply) == "print(2)" and code_of("print(3)") is None and code_of(None) is None
    assert code_of(fence("print(4)\n\n")) == "print(4)" and fence("x = 1\n") == "```python\nx = 1\n```"


def test_same_output_compares_lines_with_numbers_by_value():
    assert same_output("2.50\n  7 \n", "2.5\n7") and same_output("1 2\n", "1.0 2.00")
    assert not same_output("5\n6\n", "5\n") and not same_output("five", "5") and not same_output("5", "6")


def test_passes_runs_every_test_apart_for_stdin_and_functional_tasks():
    assert passes(ADD, STDIN) and judge(fence(ADD), STDIN)
    assert not passes("print(5)\n", STDIN)  # the first test only
    assert not passes("import sys\nsys.exit(0)\n", STDIN) and not passes("raise SystemExit(3)\n", STDIN)
    assert not passes("while True: pass\n", STDIN, timeout_s=0.5)
    assert passes(TOTAL, FUNCTIONAL)  # List without an import: the prelude has it, as lcb's harness
    assert passes("def total(xs):\n    return sum(xs)\n", FUNCTIONAL)  # a bare function serves too
    assert passes("class Solution:\n    def total(self, xs):\n        return (sum(xs),)[0]\n", FUNCTIONAL)
    assert not passes("class Solution:\n    def total(self, xs):\n        return 0\n", FUNCTIONAL)
    assert not passes("print('no result')\n", FUNCTIONAL)  # never reached the driver's mark
    pairs = sc.Tests((Case("[1, 2]", "[2, 1]"),), "swap")
    assert passes("def swap(p):\n    return (p[1], p[0])\n", pairs)  # a tuple result is read as a list
    assert not passes("def swap(p):\n    return float('nan')\n", pairs)
    assert judge("no code here", STDIN) is False and judge(fence(ADD), None) is None


def test_table_programs_answer_from_their_table_only():
    assert passes(table_program(STDIN, STDIN.cases), STDIN)
    assert not passes(table_program(STDIN, STDIN.cases[:1]), STDIN)  # the second test is not in it
    assert passes(table_program(FUNCTIONAL, FUNCTIONAL.cases), FUNCTIONAL)
    assert not passes(table_program(FUNCTIONAL, FUNCTIONAL.cases[1:]), FUNCTIONAL)


def test_the_grader_memory_program_finds_the_expected_output_only_in_the_graders_process():
    program = grader_memory_program(FUNCTIONAL)
    assert not passes(program, FUNCTIONAL)  # the judge's process holds no expected output
    namespace: dict = {}
    exec(program, namespace)

    def grader(args):  # a harness that keeps the expected output in a local, as lcb's does
        gt_out = 6  # noqa: F841 - the program looks for it in this frame
        return namespace["Solution"]().total(*args)

    assert grader([[1, 2, 3]]) == 6
    stdin_program = grader_memory_program(STDIN)
    assert stdin_program.startswith("def _expected():") and "print(_found)" in stdin_program
    assert not passes(stdin_program, STDIN)


def test_wrong_programs_fail_tests_whose_outputs_differ():
    for tests in (STDIN, FUNCTIONAL):
        candidates = wrong_programs(tests)
        assert len(candidates) == 4 and not any(passes(c, tests) for c in candidates)
    first_output = wrong_programs(sc.Tests((Case("1\n", "7\n"),), None))[-1]
    assert passes(first_output, sc.Tests((Case("1\n", "7\n"),), None))  # right where only one test exists


def test_visible_cases_are_the_tests_the_prompt_shows():
    assert visible_cases(STDIN, "Example: input 10 -4, output 6") == ([STDIN.cases[1]], True)
    assert visible_cases(STDIN, "add two numbers") == ([STDIN.cases[0]], False)
    blank = sc.Tests((Case("  \n", "1\n"), Case("3\n", "4\n")), None)
    assert visible_cases(blank, "any prompt") == ([blank.cases[0]], False)  # an empty input is shown by none


def test_reference_code_and_the_solution_it_gives():
    assert reference_code({"extra_info": {"reference": fence(ADD)}}) == ADD.strip()
    assert reference_code({"extra_info": {"reference": "   "}, "solution": ADD}) == ADD
    assert reference_code({"extra_info": "text", "completion": ADD}) == ADD
    assert reference_code({"extra_info": {"solution": 3}}) is None and reference_code({}) is None
    assert solution_for({"solution": ADD}, STDIN) == (ADD, "the row's reference solution")
    code, where = solution_for({}, STDIN)
    assert passes(code, STDIN) and where.startswith("a table of every test's output")


def test_code_catalogue_is_in_label_order_and_fenced_where_lcb_reads_code():
    prompt = "Add them. Example input: 2 3"
    out = code_strategies(STDIN, prompt, ADD, "print('other task')", ["print(0)\n", "print(1)\n"])
    texts = {s.label: s.text for s in out}
    assert [s.label for s in out] == list(CODE_LABELS)
    assert texts[REFERENCE] == fence(ADD) and texts["unformatted"] == ADD and texts["empty"] == ""
    assert [texts[w] for w in WRONG] == [fence("print(0)\n"), fence("print(1)\n")]
    assert texts["transplant"] == fence("print('other task')") and texts["echo_prompt"] == prompt
    assert code_of(texts["exit_early"]) == "import sys\nsys.exit(0)"
    assert code_of(texts["os_exit"]) == "import os\nos._exit(0)"
    assert "ctypes.string_at(0)" in texts["crash_harness"]
    visible = code_of(texts["hardcode_visible"])
    assert passes(visible, sc.Tests(STDIN.cases[:1], None)) and not passes(visible, STDIN)
    assert code_of(texts["grader_output"]) == grader_memory_program(STDIN).strip()


def test_checked_wrong_sets_aside_correct_and_fully_paid_programs():
    relabelled: list[dict] = []
    assert checked_wrong(STDIN, lambda text: 0.0, 1.0, relabelled) == wrong_programs(STDIN)[:2]
    assert relabelled == []
    # a scorer that pays everything: every candidate is set aside, the first paid one stays
    relabelled = []
    chosen = checked_wrong(STDIN, lambda text: 1.0, 1.0, relabelled)
    assert chosen == [wrong_programs(STDIN)[0], wrong_programs(STDIN)[1]]
    assert [r["label"] for r in relabelled] == [WRONG[0]] * 4 and all(r["score"] == 1.0 for r in relabelled)
    # a task where echoing the input is the right program: it is a success, not a wrong answer
    echo = sc.Tests((Case("abc\n", "abc\n"), Case("x y\n", "x y\n")), None)
    relabelled = []
    chosen = checked_wrong(echo, lambda text: 0.0, 1.0, relabelled)
    assert relabelled[0]["success"] is True and relabelled[0]["label"] == WRONG[0]
    assert chosen == wrong_programs(echo)[1:3]
    relabelled = []
    assert checked_wrong(echo, lambda text: 1.0, 1.0, relabelled)[1] == wrong_programs(echo)[2]
    # below full marks is wrong enough
    assert checked_wrong(STDIN, lambda text: 0.99, 1.0, []) == wrong_programs(STDIN)[:2]


def test_a_judged_program_runs_isolated_deterministic_and_capped(monkeypatch):
    import os
    import subprocess
    import sys

    monkeypatch.setenv("ENVAUDIT_SECRET", "the grader's token")
    leak = "import os\nprint('ENVAUDIT_SECRET' in os.environ, os.environ['PATH'] == {!r})\n".format(os.environ["PATH"])
    assert passes(leak, sc.Tests((Case("", "False True"),), None))  # nothing but PATH from this process
    expected = subprocess.run([sys.executable, "-c", "print(hash('envaudit'))"], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": "0"}, check=True).stdout
    assert passes("print(hash('envaudit'))\n", sc.Tests((Case("", expected),), None))  # hash seed 0
    monkeypatch.setattr(sc, "MEMORY_CAP_BYTES", 512 * 2**20)  # the child inherits it before exec
    assert not passes("x = bytearray(2**30)\nprint(1)\n", sc.Tests((Case("", "1"),), None))
    assert passes("x = bytearray(2**20)\nprint(1)\n", sc.Tests((Case("", "1"),), None))
    assert not passes("print(5)\nraise SystemExit(1)\n", sc.Tests((Case("", "5"),), None))  # right, then failed


def test_the_functional_result_is_the_drivers_last_mark():
    mark = "\\x00envaudit-result\\x00"
    early = f"import os, sys\nsys.stdout.write('{mark}[9]')\nsys.stdout.flush()\nos._exit(0)\n"
    assert not passes(early, FUNCTIONAL)  # its mark, never the driver's, and a wrong value
    garbled = f"import os, sys\nsys.stdout.write('{mark}not json')\nsys.stdout.flush()\nos._exit(0)\n"
    assert not passes(garbled, FUNCTIONAL)
    silent = "import os\nos._exit(0)\n"
    assert not passes(silent, FUNCTIONAL)  # exits 0 before the driver writes anything
    noisy = f"import sys\ndef total(xs):\n    sys.stdout.write('{mark}[9]{mark}[8]')\n    return sum(xs)\n"
    assert passes(noisy, FUNCTIONAL)  # the program's own marks come before the driver's
    assert not same_output("1 2", "1\n2")  # lines are lines, not words


def test_each_wrong_program_is_a_well_formed_program_that_answers_what_it_says():
    one = sc.Tests((Case("[4]", "[4]"),), "solve")
    echo, zero, word, first = wrong_programs(one)
    assert passes(echo, one) and passes(first, one)  # the input back; the first test's output
    assert passes(zero, sc.Tests((Case("[4]", "0"),), "solve"))
    assert passes(word, sc.Tests((Case("[4]", '"envaudit"'),), "solve"))
    stdin_program = grader_memory_program(STDIN)
    assert "\n    _frame = sys._getframe(1)\n" in stdin_program


def test_checked_wrong_records_why_and_hands_the_scorer_the_fenced_program():
    seen: list[str] = []

    def pays_all(text: str) -> float:
        seen.append(text)
        return 1.0

    relabelled: list[dict] = []
    checked_wrong(STDIN, pays_all, 1.0, relabelled)
    assert seen == [fence(p) for p in wrong_programs(STDIN)]
    assert relabelled[0] == {"label": WRONG[0], "text": wrong_programs(STDIN)[0], "success": False, "score": 1.0,
                             "why": "the scorer gives this wrong program full marks"}
    echo = sc.Tests((Case("abc\n", "abc\n"),), None)
    relabelled = []
    checked_wrong(echo, lambda text: 0.0, 1.0, relabelled)
    assert relabelled[0] == {"label": WRONG[0], "text": wrong_programs(echo)[0], "success": True,
                             "why": "a correct program by the judge, not a wrong one"}
    # three of the four candidates are right: one honest wrong program, then the stand-in
    zeros = sc.Tests((Case("0\n", "0\n"),), None)
    assert checked_wrong(zeros, lambda text: 0.0, 1.0, []) == ["print('envaudit')\n", "print('envaudit wrong')\n"]
