"""A verifiers taskset plugin (verifiers 0.4's own convention: the Taskset exported via
``__all__``), written with verifiers' public classes for envaudit's tests.

Twenty addition tasks built in code (nothing downloaded). The rubric is a common verifiers shape:
``correct`` (weight 1) is 1 when the last ``\\boxed{}`` of the reply is the sum, and a format reward
``boxed`` (weight 0.25) pays any reply that carries a ``\\boxed{}``. So, by design: the reference
earns 1.25 with success; a boxed wrong answer earns 0.25 without success; a bare number earns 0.
"""

import verifiers.v1 as vf
from verifiers.v1.utils.score import extract_boxed_answer

SYSTEM_PROMPT = "Add the numbers. Give the result as \\boxed{N}."


class SumsData(vf.TaskData):
    answer: str


class SumsTask(vf.Task[SumsData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=1.0)
    async def correct(self, task, trace) -> float:
        return 1.0 if extract_boxed_answer(trace.last_reply, strict=True).strip() == task.answer else 0.0

    @vf.reward(weight=0.25)
    async def boxed(self, task, trace) -> float:
        return 1.0 if "\\boxed{" in trace.last_reply else 0.0


class SumsTaskset(vf.Taskset[SumsTask, vf.TasksetConfig]):
    def load(self):
        for i in range(20):
            a, b = 7 * i + 3, 11 * i + 5
            yield SumsTask(SumsData(prompt=f"What is {a} + {b}?", system_prompt=SYSTEM_PROMPT,
                                    answer=str(a + b)), self.config.task)


__all__ = ["SumsData", "SumsTask", "SumsTaskset"]
