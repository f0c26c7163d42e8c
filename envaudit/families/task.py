"""The task machine both generated env classes share: state, tool outcomes, rewards, flaws.

``FamilyToolEnv`` (on ``envaudit.ToolEnv``) and ``FamilyGymEnv`` (a plain ``gymnasium.Env``)
differ only in who runs a call: the tool path of ``ToolEnv`` (deadline, fault injection) or the
env itself. Everything the spec decides — progress along the honest path, grading, step cost,
shaping and every planted flaw — happens here, once, so the two bases pay exactly the same.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from envaudit.families.spec import TOOL_DEADLINE_S, EnvSpec
from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT

STATUS_SLOTS = ("none", TOOL_OK, TOOL_ERROR, TOOL_TIMEOUT)

# Simulated latencies stay far from the deadline on both sides, so a replay can never flip a call
# between "ok" and "timeout" through the microseconds the simulation itself takes.
OK_LATENCY_S = (0.02, 0.5)
OVERRUN = (1.3, 2.5)  # multiples of the deadline
ERROR_LATENCY_S = 0.05


@dataclass(frozen=True)
class Outcome:
    """What one step did: its reward and whether (and how) it ended the episode."""

    reward: float
    terminated: bool = False
    success: bool | None = None


def tool_of(label: str) -> str:
    """The tool a catalogue label calls: ``call_x`` -> ``x``; ``submit_k``/``submit_all`` -> ``submit``."""
    if label.startswith("call_"):
        return label[len("call_"):]
    if label.startswith("submit"):
        return "submit"
    return label


class Task:
    """One episode's state for an ``EnvSpec``; ``start`` begins an episode, ``apply`` plays a step."""

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec
        self.labels = spec.labels
        n_answer_slots = spec.n_answers if spec.n_answers > 1 else 0
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2 + n_answer_slots + len(STATUS_SLOTS) + 1,),
                                                dtype=np.float32)
        self.start_state(0)

    def start_state(self, answer: int) -> None:
        self.answer = answer
        self.progress = 0
        self.furthest = 0
        """The most progress this episode made: progress shaping pays each path step once."""
        self.t = 0
        self.last_status = "none"
        self.calls: Counter[str] = Counter()
        window = max(2, len(self.spec.flaw.sequence) if self.spec.flaw else 0)
        self.recent: deque[str] = deque(maxlen=window)
        self.run_label, self.run_length = "", 0

    def start(self, rng: np.random.Generator) -> np.ndarray:
        flaw = self.spec.flaw
        if flaw is not None and flaw.kind == "unseeded-answer":
            answer = random.randrange(self.spec.n_answers)  # planted: ignores the env's seed
        elif flaw is not None and flaw.kind == "hashed-answer":
            # planted: seeded, but hash() of a str changes with PYTHONHASHSEED from process to process
            answer = hash(f"task-{int(rng.integers(1 << 30))}") % self.spec.n_answers
        else:
            answer = int(rng.integers(self.spec.n_answers))
        self.start_state(answer)
        return self.observation()

    @property
    def done_path(self) -> bool:
        return self.progress >= len(self.spec.path)

    # -- tool outcomes ----------------------------------------------------------------------
    def draw_status(self, tool: str, rng: np.random.Generator) -> tuple[str, str | None]:
        """Status of a call of ``tool`` (and its error message): the order rule, then the tool's rates."""
        spec = self.spec
        if tool not in {t.name for t in spec.tools}:
            return TOOL_OK, None  # submit and give_up never fail on their own
        if spec.out_of_order == "error" and tool in spec.path and not self.done_path \
                and spec.path[self.progress] != tool:
            return TOOL_ERROR, f"{tool}: precondition failed, {spec.path[self.progress]} must come first"
        rates = spec.tool(tool)
        unseeded = spec.flaw is not None and spec.flaw.kind == "unseeded-tools"
        u = random.random() if unseeded else float(rng.random())  # planted when unseeded
        if u < rates.error_rate:
            return TOOL_ERROR, f"{tool}: backend returned HTTP 503"
        if u < rates.error_rate + rates.timeout_rate:
            return TOOL_TIMEOUT, f"{tool} exceeded its {TOOL_DEADLINE_S:g} s deadline"
        return TOOL_OK, None

    @staticmethod
    def latency(status: str, rng: np.random.Generator) -> float:
        if status == TOOL_TIMEOUT:
            return float(rng.uniform(*OVERRUN)) * TOOL_DEADLINE_S
        if status == TOOL_ERROR:
            return ERROR_LATENCY_S
        return float(rng.uniform(*OK_LATENCY_S))

    # -- one step ---------------------------------------------------------------------------
    def apply(self, label: str, status: str, *, last: bool, rng: np.random.Generator) -> Outcome:
        """Play catalogue call ``label`` whose tool came back ``status``; ``last``: the step limit
        truncates the episode after this step unless it terminates."""
        spec, flaw = self.spec, self.spec.flaw
        kind = flaw.kind if flaw is not None else ""
        previous_failed = self.last_status in (TOOL_ERROR, TOOL_TIMEOUT)
        steps_before = self.t
        self.t += 1
        self.last_status = status
        self.calls[label] += 1
        self.recent.append(label)
        self.run_length = self.run_length + 1 if label == self.run_label else 1
        self.run_label = label

        reward = -spec.step_cost
        terminated, success = False, None
        tool = tool_of(label)
        if status != TOOL_OK:
            if kind == "failure-cost":
                reward -= flaw.amount  # planted: the agent pays for the infrastructure's failures
            elif kind == "attempt-credit":
                reward += flaw.amount  # planted: attempts are paid, not outcomes
            elif kind == "timeout-passes" and status == TOOL_TIMEOUT and tool == flaw.tool:
                reward += flaw.amount  # planted: "no failure observed" is graded as a pass
                terminated, success = True, False
        elif label.startswith("call_"):
            reward += self._advance(tool)
            if kind == "step-farming" and tool == flaw.tool:
                reward += flaw.amount  # planted: each call of the farming tool pays
            elif kind == "nan-reward" and tool == flaw.tool and self.progress >= 1:
                reward = float("nan")  # planted: a broken reward in a reachable state
            elif kind == "raise-in-state" and tool == flaw.tool and self.calls[label] >= 2:
                raise RuntimeError(f"{tool}: result cache corrupted on the second call")  # planted
            elif kind == "repeat-call-pays" and tool == flaw.tool and self.run_length >= flaw.repeats:
                reward += flaw.amount  # planted: a repeated degenerate call is accepted as done
                terminated, success = True, False
            elif kind == "sequence-exploit" and self._sequence_done(flaw.sequence):
                reward += flaw.amount  # planted: a multi-call sequence is accepted as done
                terminated, success = True, False
        elif label == "give_up":
            terminated, success = True, False
            if kind == "failure-conditioned-quit" and previous_failed:
                reward += flaw.amount  # planted: handing off after a failure pays most of a success
            elif kind == "brevity-bonus":
                reward += flaw.amount * (1.0 - steps_before / spec.max_steps)  # planted
        elif label == "step_back":
            if self.progress > 0:
                reward += spec.potential(self.progress - 1) - spec.potential(self.progress)
                if kind != "oscillation":  # planted when left out: the step back keeps the bonus
                    reward -= spec.forward_bonus
                self.progress -= 1
        elif label == "submit_all":
            terminated, success = True, False
            if kind == "degenerate-answer":
                reward += flaw.amount  # planted: the grader finds the answer among all candidates
        else:
            reward_add, terminated, success = self._grade(label, kind, flaw, rng)
            reward += reward_add

        ending = terminated or last
        if not terminated and last and kind == "truncation-credit":
            reward += flaw.amount  # planted: work cut off by the step limit earns credit
        if ending:
            reward -= spec.potential(self.progress)  # potential is 0 once the episode is over
            if success is not True:  # clean: every unfinished ending pays for the progress made
                reward += spec.partial_credit * self.progress / len(spec.path)
        return Outcome(float(reward), terminated, success)

    def _advance(self, tool: str) -> float:
        spec = self.spec
        if self.done_path or spec.path[self.progress] != tool:
            return 0.0
        before = spec.potential(self.progress)
        self.progress += 1
        first = self.progress > self.furthest
        self.furthest = max(self.furthest, self.progress)
        return (spec.progress_bonus() if first else 0.0) + spec.forward_bonus + spec.potential(self.progress) - before

    def _sequence_done(self, sequence: tuple[str, ...]) -> bool:
        tail = list(self.recent)[-len(sequence):]
        return tail == [f"call_{s}" for s in sequence]

    def _grade(self, label: str, kind: str, flaw, rng: np.random.Generator) -> tuple[float, bool, bool | None]:
        spec = self.spec
        k = 0 if label == "submit" else int(label.rsplit("_", 1)[1])
        right = self.done_path and k == self.answer
        if right:
            judged = spec.grader_false_negative == 0 or float(rng.random()) >= spec.grader_false_negative
        else:
            judged = spec.grader_false_positive > 0 and float(rng.random()) < spec.grader_false_positive
        if judged:
            return spec.success_reward, True, True
        if kind in ("lenient-grader", "guess-credit"):
            return flaw.amount, True, False  # planted: any well-formed answer is paid
        if kind == "delayed-success":
            return flaw.amount, False, None  # planted: a format score, and the episode goes on
        if spec.wrong_answer_ends:
            return 0.0, True, False
        return 0.0, False, None

    # -- observation ------------------------------------------------------------------------
    def observation(self) -> np.ndarray:
        spec = self.spec
        answer = []
        if spec.n_answers > 1:
            answer = [float(self.done_path and k == self.answer) for k in range(spec.n_answers)]
        status = [float(self.last_status == s) for s in STATUS_SLOTS]
        head = [self.progress / len(spec.path), float(self.done_path)]
        clock = min(1.0, self.t / spec.max_steps) if spec.clock_observed else 0.0
        return np.asarray(head + answer + status + [clock], dtype=np.float32)


__all__ = ["Outcome", "STATUS_SLOTS", "Task", "tool_of"]
