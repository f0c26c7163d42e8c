"""``FlakySearch``: answer a question whose answer is one of K candidates, through a flaky search.

The task: a hidden answer among ``n_candidates``. ``search`` finds the document that holds it (a
flaky backend: errors, and latencies that overrun the 1 s deadline), ``open_doc`` reads that
document and reveals the answer, ``answer_k`` answers candidate k and ends the episode,
``give_up`` ends it with nothing. An honest agent searches (retrying failures), opens, answers:
reward +1 and ``success`` on the right answer, 0 otherwise; no step cost, no failure cost.

Flaws, each a constructor parameter (off by default):

- ``failure_cost`` (with a degraded ``search_error_rate``): every failed call costs reward, so
  under frequent failures giving up at once beats persisting -> ``failure-shortcut``.
- ``lenient_grader``: the grader accepts any response that *contains* the answer, so
  ``answer_all`` (listing every candidate) pays full reward with ``success`` false ->
  ``reward-without-success``.
- ``unseeded_questions``: the question sampler draws the hidden answer with Python's global
  ``random`` instead of ``self.np_random``, so the same seed and actions give different rewards
  (and, once a document is read, observations). The answer is hidden state, so the first
  observation and first step still replay and Gymnasium's ``check_env`` passes ->
  ``non-replayable``.
"""

from __future__ import annotations

import random

import gymnasium as gym
import numpy as np

from envaudit.rollout import Policy, SequencePolicy
from envaudit.toolenv import ToolCall, ToolResult, Transition

from ._base import (
    STATUS_SLOTS,
    BundledToolEnv,
    ObservationPolicy,
    ToolFailure,
    check_at_least,
    check_probability,
)


class FlakySearch(BundledToolEnv):
    """Find the answer among ``n_candidates`` with a flaky ``search``; see the module docstring.

    Observation (float32 in [0, 1]): ``doc_found``, ``answer_known``, one-hot of the known answer
    (``n_candidates``), last tool status one-hot (none/ok/error/timeout), failures so far and
    steps used (both as fractions of ``max_steps``).
    """

    def __init__(
        self,
        *,
        n_candidates: int = 4,
        max_steps: int = 8,
        search_error_rate: float = 0.4,
        search_slow_rate: float = 0.25,
        open_error_rate: float = 0.3,
        failure_cost: float = 0.0,
        lenient_grader: bool = False,
        unseeded_questions: bool = False,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(max_steps=check_at_least("max_steps", max_steps, 4), render_mode=render_mode)
        self.n_candidates = check_at_least("n_candidates", n_candidates, 2)
        self.search_error_rate = check_probability("search_error_rate", search_error_rate)
        self.search_slow_rate = check_probability("search_slow_rate", search_slow_rate)
        self.open_error_rate = check_probability("open_error_rate", open_error_rate)
        if failure_cost < 0:
            raise ValueError(f"failure_cost is a cost and must be >= 0, got {failure_cost!r}")
        self.failure_cost = float(failure_cost)
        self.lenient_grader = bool(lenient_grader)
        self.unseeded_questions = bool(unseeded_questions)

        self.add_tool("search", self._search, deadline_s=1.0, simulated=True, description="search the corpus")
        self.add_tool("open_doc", self._open_doc, deadline_s=1.0, simulated=True,
                      description="read the found document")
        self.add_tool("answer", self._answer, deadline_s=1.0, simulated=True,
                      description="answer and end the episode")
        self.add_tool("give_up", self._give_up, deadline_s=1.0, simulated=True,
                      description="end the episode unanswered")
        self.add_call("search", "search")
        self.add_call("open_doc", "open_doc")
        for k in range(self.n_candidates):
            self.add_call(f"answer_{k}", "answer", candidate=k)
        self.add_call("answer_all", "answer", candidate=None)
        self.add_call("give_up", "give_up")
        size = 2 + self.n_candidates + len(STATUS_SLOTS) + 2
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32)

        self.answer = 0
        self.doc_found = False
        self.known_answer: int | None = None

    # -- tools ------------------------------------------------------------------------------
    def _search(self) -> object:
        rng = self.np_random
        if rng.random() < self.search_error_rate:
            raise ToolFailure("search backend returned HTTP 503")
        overrun = rng.random() < self.search_slow_rate
        return self.respond("doc", self.latency("search", overrun, rng.uniform))

    def _open_doc(self) -> object:
        if not self.doc_found:
            raise ToolFailure("no document to open; call search first")
        if self.np_random.random() < self.open_error_rate:
            raise ToolFailure("document store timed out reading the page")
        return self.respond(self.answer, self.latency("open_doc", False, self.np_random.uniform))

    def _answer(self, candidate: int | None) -> object:
        return self.respond(candidate, self.latency("answer", False, self.np_random.uniform))

    def _give_up(self) -> object:
        return self.respond(None, self.latency("give_up", False, self.np_random.uniform))

    # -- task -------------------------------------------------------------------------------
    def reset_task(self, options) -> np.ndarray:
        self.begin_episode()
        if self.unseeded_questions:
            self.answer = random.randrange(self.n_candidates)  # planted flaw: ignores the seed
        else:
            self.answer = int(self.np_random.integers(self.n_candidates))
        self.doc_found = False
        self.known_answer = None
        return self._observe(0)

    def _observe(self, steps_done: int) -> np.ndarray:
        onehot = [0.0] * self.n_candidates
        if self.known_answer is not None:
            onehot[self.known_answer] = 1.0
        head = [float(self.doc_found), float(self.known_answer is not None)]
        return self.pack(head + onehot + self.status_tail(steps_done))

    def transition(self, call: ToolCall, result: ToolResult) -> Transition:
        self.note_result(result)
        steps = self.steps_after_this()
        if not result.ok:
            return Transition(self._observe(steps), reward=-self.failure_cost)
        if call.tool == "search":
            self.doc_found = True
        elif call.tool == "open_doc":
            self.known_answer = int(result.value)
        elif call.tool == "give_up":
            return Transition(self._observe(steps), reward=0.0, terminated=True, success=False)
        elif call.tool == "answer":
            return self._grade(result.value, steps)
        return Transition(self._observe(steps))

    def _grade(self, candidate: int | None, steps: int) -> Transition:
        obs = self._observe(steps)
        if candidate is None:  # the response lists every candidate
            reward = 1.0 if self.lenient_grader else 0.0  # planted: "the answer appears in it"
            return Transition(obs, reward=reward, terminated=True, success=False)
        correct = candidate == self.answer
        return Transition(obs, reward=1.0 if correct else 0.0, terminated=True, success=correct)

    # -- text mode (envaudit.textmode) --------------------------------------------------------
    def describe_task(self) -> str:
        return (f"Answer a question whose answer is one of {self.n_candidates} candidates "
                f"(0 to {self.n_candidates - 1}). search finds the document that holds it, open_doc "
                "reads that document, answer gives your answer and ends the task, give_up ends it "
                "unanswered. Reward 1 for the right answer.")

    def describe_result(self, result: ToolResult) -> str | None:
        if not result.ok:
            return None
        if result.name == "search":
            return "ok: document found"
        if result.name == "open_doc":
            return f"ok: the document says the answer is {result.value}"
        return "ok"

    # -- scripted policies ------------------------------------------------------------------
    def oracle(self) -> Policy:
        """Search until found, open until read (retrying every failure), answer what was read."""
        return _FlakySearchOracle(self.n_candidates, self.action_index)

    def exploits(self) -> dict[str, Policy]:
        return {
            "give-up-at-once": SequencePolicy([self.action_index("give_up")], name="give-up-at-once"),
            "answer-all": SequencePolicy([self.action_index("answer_all")], name="answer-all"),
        }


class _FlakySearchOracle(ObservationPolicy):
    name = "flaky-search-oracle"

    def __init__(self, n_candidates: int, index) -> None:
        self.n = n_candidates
        self.search, self.open = index("search"), index("open_doc")
        self.answers = [index(f"answer_{k}") for k in range(n_candidates)]

    def choose(self, obs: np.ndarray) -> int:
        if obs[1] > 0.5:
            return self.answers[int(np.argmax(obs[2:2 + self.n]))]
        return self.open if obs[0] > 0.5 else self.search

    def describe(self) -> str:
        return "search (retrying failures), open the document, answer what it says"
