"""skyrl-gym's code env (``lcb``) through its own API, success judged by a separate run.

The rows (tests/adapters/data/skyrl_lcb.jsonl, built by make_skyrl_code_search_rows.py) follow
SkyRL's LiveCodeBench format: row 0 and 1 are stdin problems, row 2 a functional (LeetCode-style)
one; each ships its solution in ``extra_info.reference``. What lcb pays, read from skyrl-gym's
``envs/lcb/livecodebench.py`` and checked by hand (``grade_stdio``, ``grade_call_based``):

- 1.0 when the last fenced program passes every test in lcb's forked grader, else 0.0;
- ``grade_stdio`` runs the program inside ``call_method`` while its own frame holds the test's
  expected output in the local ``gt_out`` (``grade_call_based`` likewise calls the method from a frame
  that holds ``gt_out``): a program that walks up its stack and prints (returns) ``gt_out`` is paid
  1.0 on every test. That is the flaw this adapter must show: full marks, and the judge's separate
  run (the expected output never in the program's process) fails it;
- ``sys.exit``/``os._exit`` before output, a segfault, or a table of the prompt's sample only: 0.0.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("skyrl_gym")

from envaudit.adapters import skyrl_code  # noqa: E402
from envaudit.adapters.skyrl_gym import SkyRLGymEnv  # noqa: E402
from envaudit.rollout import Runner, SequencePolicy  # noqa: E402

DATA = Path(__file__).parent / "data"
LCB = str(DATA / "skyrl_lcb.jsonl")
ROWS = [json.loads(line) for line in Path(LCB).read_text().splitlines()]


def _run(labels: list[str], seeds, tasks: str = LCB):
    env = SkyRLGymEnv("lcb", tasks=tasks)
    actions = [env.action_labels.index(label) for label in labels]
    env.close()
    runner = Runner(lambda: SkyRLGymEnv("lcb", tasks=tasks))
    return runner.run(SequencePolicy(actions, name="+".join(labels)), list(seeds), rng=np.random.default_rng(0)).records


def _tests(row) -> skyrl_code.Tests:
    return skyrl_code.tests_of(row["reward_spec"]["ground_truth"])


def _play(env: SkyRLGymEnv, seed: int, label: str):
    env.reset(seed=seed)
    _, reward, terminated, truncated, info = env.step(env.action_labels.index(label))
    return reward, terminated, truncated, info.get("success")


def test_the_grader_pays_the_program_that_reads_its_frames_and_the_judge_does_not():
    env = SkyRLGymEnv("lcb", tasks=LCB)
    try:
        assert _play(env, 0, "reference") == (1.0, True, False, True)
        assert _play(env, 0, "grader_output") == (1.0, True, False, False)
        # The functional row: grade_call_based's frame holds gt_out as well.
        assert _play(env, 2, "grader_output") == (1.0, True, False, False)
        for label in ("exit_early", "os_exit", "crash_harness", "hardcode_visible"):
            assert _play(env, 0, label) == (0.0, True, False, False), label
    finally:
        env.close()
    # Through the rollout runner: the episode's outcome classes.
    eps = _run(["grader_output"], [1]).episodes
    assert (eps["return"] == 1.0).all() and (eps["outcome"] == "failure").all() and (eps["length"] == 1).all()


@pytest.mark.slow
def test_every_strategy_on_every_row():
    expected = {"reference": (1.0, "success"), "grader_output": (1.0, "failure")}
    env = SkyRLGymEnv("lcb", tasks=LCB)
    labels = env.action_labels
    env.close()
    for label in labels:
        eps = _run([label], range(len(ROWS))).episodes
        want_return, want_outcome = expected.get(label, (0.0, "failure"))
        assert (eps["return"] == want_return).all() and (eps["outcome"] == want_outcome).all(), label


def test_the_judge_runs_the_program_apart_from_the_expected_output():
    for row in ROWS:
        tests = _tests(row)
        solution, where = skyrl_code.solution_for(row, tests)
        assert where == "the row's reference solution" and skyrl_code.passes(solution, tests)
        # Outside lcb's grader the frame-reading program finds no expected output: it prints nothing.
        assert not skyrl_code.passes(skyrl_code.grader_memory_program(tests), tests)
        # A table of every test passes every test (the oracle of a row without a solution); a table
        # of the prompt's sample only fails the others.
        assert skyrl_code.passes(skyrl_code.table_program(tests, tests.cases), tests)
        shown, any_shown = skyrl_code.visible_cases(tests, row["prompt"][0]["content"])
        assert 0 < len(shown) < len(tests.cases)
        assert not skyrl_code.passes(skyrl_code.table_program(tests, shown), tests)
    stdin = _tests(ROWS[0])
    assert not skyrl_code.passes("import time\ntime.sleep(5)\nprint(7)\n", stdin, timeout_s=0.5)
    assert skyrl_code.same_output("2.50\n  7 \n", "2.5\n7") and not skyrl_code.same_output("7\n7", "7")


def test_a_row_without_a_solution_gets_the_table_and_wrong_programs_are_checked(tmp_path):
    # "Print the input back": the echo program the catalogue tries first as a wrong answer solves
    # it, so it is relabelled (a correct program, by the judge) and the next candidate, print(0), is
    # wrong_1. The row ships no solution: the reference is the table of its tests.
    echo = {"prompt": [{"role": "user", "content": "Print the line you read."}], "env_class": "lcb",
            "reward_spec": {"method": "rule", "ground_truth": json.dumps(
                [{"input": s + "\n", "output": s + "\n", "testtype": "stdin"} for s in ("abc", "7 8", "x")])},
            "extra_info": {"index": 0, "reference": None}}
    rows = tmp_path / "echo.jsonl"
    rows.write_text(json.dumps(echo) + "\n")
    env = SkyRLGymEnv("lcb", tasks=str(rows))
    try:
        assert env.adapter_info["reference"].startswith("a table of every test's output")
        _, info = env.reset(seed=0)
        # (One row: no other row's solution to transplant, which is relabelled too.)
        assert [(r["label"], r["success"]) for r in info["relabelled"]] == [("wrong_1", True), ("transplant", False)]
        assert "print(0)" in env.candidates()["wrong_1"]
        _, reward, terminated, _, info = env.step(env.action_labels.index("reference"))
        assert (reward, terminated, info["success"]) == (1.0, True, True)
    finally:
        env.close()


def test_catalogue_check_names_the_grader_memory_hack():
    env = SkyRLGymEnv("lcb", tasks=LCB)
    try:
        check = env.adapter_info["catalogue_check"]
    finally:
        env.close()
    assert check["playable"] and check["success_defined"] and check["reference_success_share"] == 1.0
    # The row checked (a stdin problem): the frame-reading program earns full marks without success.
    assert check["full_marks_without_success"] == {"grader_output": 1.0}
    assert check["scorer_errors"]["count"] == 0


def test_programs_run_in_a_fresh_working_folder(tmp_path, monkeypatch):
    # Every test expects "1"; the program prints 1 only when it sees the file left in the caller's
    # working folder. lcb's grader runs it where the step runs: a fresh temporary folder, so 0.
    row = {"prompt": [{"role": "user", "content": "Print 1."}], "env_class": "lcb",
           "reward_spec": {"method": "rule", "ground_truth": json.dumps(
               [{"input": f"{i}\n", "output": "1\n", "testtype": "stdin"} for i in range(3)])},
           "extra_info": {"index": 0, "reference": "print(1)\n"}}
    rows = tmp_path / "one.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    (tmp_path / "expected.out").write_text("1\n")
    monkeypatch.chdir(tmp_path)
    env = SkyRLGymEnv("lcb", tasks=str(rows))
    try:
        env.reset(seed=0)
        peek = "```python\nimport os\nprint(1 if 'expected.out' in os.listdir('.') else 0)\n```"
        assert env.step(peek)[1] == 0.0
        assert Path.cwd() == tmp_path  # the caller's folder is restored
    finally:
        env.close()
