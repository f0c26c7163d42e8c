"""verifiers graders that need the main thread, and the adapter's playability check.

``vf_boxed_math.py`` grades with verifiers' own ``verify_boxed_math_answer``, whose math-verify
``parse`` arms ``signal.alarm``; Python refuses that off the main thread, and the grader then
catches the error and scores 0.0 (checked by hand: under the bridge that ran rollouts on a thread
of its own, the reference ``\\boxed{\\frac{5}{6}}`` of task 0 scored 0.0). The bridge now runs the
rollout on the thread that steps the env, so a correct answer must score 1.0 with success, and a
wrong one 0.0. Where the scan steps envs -- the main thread of a worker process under the process
executor (its default) -- and where a user steps the env on their main thread. (In-process
executors step envs on a deadline thread of their own, where Python refuses signals whatever the
bridge does; adapter_info["grading"] says so.)
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verifiers.v1")

from envaudit.adapters.verifiers import VerifiersEnv  # noqa: E402
from envaudit.execution import ProcessExecutor  # noqa: E402
from envaudit.rollout import Runner, SequencePolicy  # noqa: E402

DATA = Path(__file__).parent / "data"
MATH = str(DATA / "vf_boxed_math.py")
SUMS = str(DATA / "vf_sums.py")


@pytest.mark.slow  # a worker process imports verifiers and math-verify: tens of seconds on 2 cores
def test_a_signal_based_grader_scores_the_correct_answer_in_a_worker_process():
    env = VerifiersEnv(MATH, size=8)
    labels = env.action_labels
    env.close()
    executor = ProcessExecutor(1)
    try:
        runner = Runner(lambda: VerifiersEnv(MATH, size=8), executor=executor)
        out = {label: runner.run(SequencePolicy([labels.index(label)], name=label), [0, 1, 2],
                                 rng=np.random.default_rng(0)).records.episodes
               for label in ("reference", "wrong_1")}
    finally:
        executor.close()
    assert (out["reference"]["return"] == 1.0).all() and (out["reference"]["outcome"] == "success").all()
    assert (out["wrong_1"]["return"] == 0.0).all() and (out["wrong_1"]["outcome"] == "failure").all()


def test_the_grader_runs_on_the_thread_that_steps_the_env():
    assert threading.current_thread() is threading.main_thread()
    env = VerifiersEnv(MATH, size=8)
    try:
        assert "signal.alarm" in env.adapter_info["grading"]
        env.reset(seed=0)
        assert env.candidates()["reference"] == "\\boxed{\\frac{5}{6}}"  # 1/2 + 1/3
        # math-verify accepts an equal value written another way: 10/12 is 5/6.
        _, reward, terminated, _, info = env.step("\\boxed{\\frac{10}{12}}")
        assert (reward, terminated, info["success"]) == (1.0, True, True)
    finally:
        env.close()


def test_catalogue_check_reports_playability():
    env = VerifiersEnv(SUMS, size=8)
    try:
        check = env.adapter_info["catalogue_check"]
        # Played off the main thread, the check says that signal-based graders cannot work there.
        box = {}
        worker = threading.Thread(target=lambda: box.update(check=env.catalogue_check(tasks=1)))
        worker.start()
        worker.join()
        assert "signal.alarm" in box["check"]["note"]
        # The check leaves no episode behind: the next reset plays as usual.
        env.reset(seed=0)
        _, reward, *_ = env.step(env.action_labels.index("reference"))
    finally:
        env.close()
    assert reward == 1.25
    # vf_sums' rubric: the reference 1.25 with success, a boxed wrong answer 0.25, a bare number 0.
    assert check["playable"] and check["success_defined"] and check["distinct_outcomes"] == 3
    assert check["reference_success_share"] == 1.0 and check["reference_return"] == 1.25
    assert check["full_marks_without_success"] == {} and check["scorer_errors"]["count"] == 0
    assert "note" not in check  # played on the main thread
