import gymnasium as gym
import numpy as np

from envaudit import ToolEnv, ToolOutput, Transition


class Lookup(ToolEnv):
    def __init__(self):
        super().__init__(max_steps=8)
        self.add_tool("search", self._search, deadline_s=0.5)   # a real per-call deadline
        self.add_tool("answer", lambda: None)
        self.add_call("search the index", "search")             # the Discrete catalogue
        self.add_call("answer", "answer")
        self.observation_space = gym.spaces.Box(0, 1, (2,), np.float32)

    def _search(self):
        # a slow backend modelled without sleeping: past the deadline it is a "timeout"
        return ToolOutput(value=self.np_random.random(), latency_s=self.np_random.exponential(0.2))

    def reset_task(self, options):
        self.found = False
        return np.zeros(2, np.float32)

    def transition(self, call, result):
        if call.tool == "search":
            self.found |= result.ok
            return Transition(np.array([self.found, result.ok], np.float32), reward=-0.01)
        return Transition(np.array([self.found, 1], np.float32), reward=float(self.found),
                          terminated=True, success=self.found)
