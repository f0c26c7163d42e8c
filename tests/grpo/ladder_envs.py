"""Tool envs whose place on DESIGN.md's severity ladder is known by construction (grpo probe tests).

``Combination`` (clean; issue 10's false-alarm class 1): a hidden code of ``code_length`` buttons
out of ``buttons``; a press of the right next button advances progress, any other press wastes the
step; ``submit`` ends the episode (+1 and success with the whole code entered, else a failure);
``quit`` ends it as a failure. Presses fail with the env's own ``error_rate`` (no progress). Every
step costs ``step_cost`` and nothing else costs anything: a failed press costs exactly the step it
takes. Random play ends most episodes within a few steps (two of the actions end them), so it
rarely succeeds, and a policy trained briefly may collapse to ending at once (``-step_cost``) even
though success pays far more (about ``1 - step_cost * steps``): an exploration collapse, never a
``warn``.

``DelayedAnswer`` (delaying success): the observation shows the right answer out of ``answers``;
a right answer ends the episode (+1, success); a wrong one pays ``format_score`` and the episode
goes on, until ``max_attempts`` wrong answers end it as a failure. Succeeding after k wrong answers
earns ``1 + k * format_score``: with a positive format score delaying an already reachable success
pays (``length-bias`` at ``fail``); with 0 (the clean twin) every success earns 1.

``Booking`` (a reward conditioned on a preceding tool failure, issue 10's booking case):
``search`` fails with probability ``search_error_rate``; ``book`` after a successful search ends
the episode with +1 and success; ``handoff`` ends it as a failure, paying ``handoff_pay`` right
after a failed search and 0 otherwise. Every step costs ``step_cost``. A trained policy searches,
books when the search worked and hands off right after a failed one: success rises, and the
hand-off is paid only because a tool failed.

``Sequence`` (a multi-call exploit random play never meets): ``press_k`` for ``code_buttons``
code buttons and ``distractors`` buttons no task needs, ``submit`` and ``quit``: eight actions by
default. The observation shows the next code button; pressing the ``code_length`` buttons in order
and submitting pays +1 and success (``oracle()`` does that); every step costs ``step_cost``.
Pressing the distractor buttons ``sequence`` back to back ends the episode paying
``sequence_pay`` with success false. With 1.5 that out-earns success (about 1.5 - 3 * 0.02 against
1 - 4 * 0.02): reward without success at ``fail``. Random play ends a quarter of its steps and
meets one given 3-press sequence once in thousands of episodes. The clean twin
(``sequence_pay=0``) pays nothing for the sequence and does not end on it.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from envaudit import ToolEnv, Transition


class _Flaky:
    """A tool that fails with probability ``rate``, drawn from the env's own generator."""

    def __init__(self, env: ToolEnv, rate: float) -> None:
        self.env, self.rate = env, rate

    def __call__(self, **_: object) -> None:
        if self.env.np_random.random() < self.rate:
            raise RuntimeError("backend unavailable")


class Combination(ToolEnv):
    def __init__(self, *, buttons: int = 3, code_length: int = 2, step_cost: float = 0.02,
                 error_rate: float = 0.2, max_steps: int = 20) -> None:
        super().__init__(max_steps=max_steps)
        self.buttons, self.code_length, self.step_cost = buttons, code_length, step_cost
        self.add_tool("press", _Flaky(self, error_rate), deadline_s=None)
        for k in range(buttons):
            self.add_call(f"press_{k}", "press", button=k)
        for name in ("submit", "quit"):
            self.add_tool(name, lambda: None, deadline_s=None)
            self.add_call(name, name)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)

    def reset_task(self, options):
        self.code = self.np_random.integers(0, self.buttons, size=self.code_length).tolist()
        self.progress = 0
        return self._obs()

    def _obs(self) -> np.ndarray:
        return np.array([self.progress / self.code_length], dtype=np.float32)

    def transition(self, call, result):
        cost = -self.step_cost
        if call.tool == "press":
            if result.ok and self.progress < self.code_length and call.args["button"] == self.code[self.progress]:
                self.progress += 1
            return Transition(self._obs(), cost)
        if call.tool == "submit":
            done = self.progress == self.code_length
            return Transition(self._obs(), cost + float(done), terminated=True, success=done)
        return Transition(self._obs(), cost, terminated=True, success=False)


class DelayedAnswer(ToolEnv):
    def __init__(self, *, answers: int = 4, format_score: float = 0.1, max_attempts: int = 5) -> None:
        super().__init__(max_steps=max_attempts + 1)  # the last wrong answer ends it before truncation
        self.answers, self.format_score, self.max_attempts = answers, format_score, max_attempts
        self.add_tool("answer", lambda **_: None, deadline_s=None)
        for k in range(answers):
            self.add_call(f"answer_{k}", "answer", value=k)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(answers + 1,), dtype=np.float32)

    def reset_task(self, options):
        self.right = int(self.np_random.integers(0, self.answers))
        self.wrong = 0
        return self._obs()

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.answers + 1, dtype=np.float32)
        obs[self.right] = 1.0
        obs[-1] = self.wrong / self.max_attempts
        return obs

    def transition(self, call, result):
        if call.args["value"] == self.right:
            return Transition(self._obs(), 1.0, terminated=True, success=True)
        self.wrong += 1
        return Transition(self._obs(), self.format_score, terminated=self.wrong >= self.max_attempts,
                          success=False if self.wrong >= self.max_attempts else None)


class Booking(ToolEnv):
    def __init__(self, *, search_error_rate: float = 0.3, handoff_pay: float = 0.8, step_cost: float = 0.01,
                 max_steps: int = 10) -> None:
        super().__init__(max_steps=max_steps)
        self.handoff_pay, self.step_cost = handoff_pay, step_cost
        self.add_tool("search", _Flaky(self, search_error_rate), deadline_s=None)
        for name in ("book", "handoff"):
            self.add_tool(name, lambda: None, deadline_s=None)
        for name in ("search", "book", "handoff"):
            self.add_call(name, name)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)

    def reset_task(self, options):
        self.found = self.last_failed = False
        return self._obs()

    def _obs(self) -> np.ndarray:
        return np.array([self.found, self.last_failed], dtype=np.float32)

    def transition(self, call, result):
        cost = -self.step_cost
        after_failure, self.last_failed = self.last_failed, False
        if call.tool == "search":
            self.found = self.found or result.ok
            self.last_failed = not result.ok
            return Transition(self._obs(), cost)
        if call.tool == "book":
            if self.found:
                return Transition(self._obs(), cost + 1.0, terminated=True, success=True)
            return Transition(self._obs(), cost)
        return Transition(self._obs(), cost + (self.handoff_pay if after_failure else 0.0), terminated=True,
                          success=False)


class Sequence(ToolEnv):
    def __init__(self, *, sequence_pay: float = 1.5, code_buttons: int = 3, distractors: int = 3,
                 code_length: int = 3, sequence: tuple[int, ...] = (3, 4, 3), step_cost: float = 0.02,
                 max_steps: int = 16) -> None:
        super().__init__(max_steps=max_steps)
        assert all(code_buttons <= k < code_buttons + distractors for k in sequence), "the sequence uses distractors"
        self.sequence_pay, self.code_buttons, self.code_length = sequence_pay, code_buttons, code_length
        self.sequence, self.step_cost = list(sequence), step_cost
        self.add_tool("press", lambda **_: None, deadline_s=None)
        for k in range(code_buttons + distractors):
            self.add_call(f"press_{k}", "press", button=k)
        for name in ("submit", "quit"):
            self.add_tool(name, lambda: None, deadline_s=None)
            self.add_call(name, name)
        self.submit_action = code_buttons + distractors
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(code_buttons + 1,), dtype=np.float32)

    def reset_task(self, options):
        self.code = self.np_random.integers(0, self.code_buttons, size=self.code_length).tolist()
        self.progress, self.pressed = 0, []
        return self._obs()

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.code_buttons + 1, dtype=np.float32)
        if self.progress < self.code_length:
            obs[self.code[self.progress]] = 1.0
        obs[-1] = self.progress / self.code_length
        return obs

    def oracle(self):
        submit = self.submit_action
        return lambda obs, info: int(np.argmax(obs[:-1])) if obs[:-1].any() else submit

    def transition(self, call, result):
        cost = -self.step_cost
        if call.tool == "press":
            button = call.args["button"]
            self.pressed.append(button)
            if self.progress < self.code_length and button == self.code[self.progress]:
                self.progress += 1
            if self.sequence_pay and self.pressed[-len(self.sequence):] == self.sequence:
                return Transition(self._obs(), cost + self.sequence_pay, terminated=True, success=False)
            return Transition(self._obs(), cost)
        if call.tool == "submit":
            done = self.progress == self.code_length
            return Transition(self._obs(), cost + float(done), terminated=True, success=done)
        return Transition(self._obs(), cost, terminated=True, success=False)
