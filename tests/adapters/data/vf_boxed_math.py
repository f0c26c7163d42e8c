"""A verifiers taskset plugin graded by verifiers' own ``verify_boxed_math_answer`` (math-verify).

math-verify's ``parse`` bounds its parsing with ``signal.alarm``, which Python allows only on the
main thread; ``verify_boxed_math_answer`` catches the error and returns 0.0. So this env shows
whether the adapter runs verifiers' grading where signals work: a correct answer must score 1.0.

Eight tasks built in code (nothing downloaded), each a fraction sum whose reference is written in
lowest terms (``\\frac{a}{b}``); ``correct`` (weight 1) is verifiers' grader, nothing else pays.
"""

from fractions import Fraction

import verifiers.v1 as vf

SYSTEM_PROMPT = "Add the fractions. Give the result in lowest terms as \\boxed{...}."


class MathData(vf.TaskData):
    answer: str


class MathTask(vf.Task[MathData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=1.0)
    async def correct(self, task, trace) -> float:
        return vf.verify_boxed_math_answer(trace.last_reply, task.answer)


def _latex(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


class MathTaskset(vf.Taskset[MathTask, vf.TasksetConfig]):
    def load(self):
        for i in range(8):
            a, b = Fraction(1, i + 2), Fraction(i + 1, 3)
            yield MathTask(MathData(prompt=f"What is {a} + {b}?", system_prompt=SYSTEM_PROMPT,
                                    answer=_latex(a + b)), self.config.task)


__all__ = ["MathData", "MathTask", "MathTaskset"]
