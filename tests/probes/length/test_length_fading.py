"""``probes/length/fading.py``: an ending whose pay fades with the step it is taken at, from
exploration or, where exploration cannot tell, from paired replays of the same starts.

``Quit`` (below): ``work`` (a non-ending action; its first call earns partial credit, paid on the
ending step) and ``give_up`` (ends the episode, paying ``bonus * (1 - t / 10)`` plus the partial
credit); ``submit`` after working succeeds and pays 1. Random play ends most episodes at once, and
the later quits it sees carry the credit, so exploration's own regression says nothing; the
replays hold the credit fixed (one ``work``, then more ``work`` that earns nothing) and see the
bonus fade. Its twin (``fade=False``) pays the bonus whenever it quits.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from envaudit.probes.length.fading import (
    FADE_AFTER,
    _ending_pay,
    _paying_at_once,
    fades_when_delayed,
    fading_enders,
)
from envaudit.protocol import FAILURE, SUCCESS
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.context import explore
from tests.fixtures.frames import FakeContext, episode, records

WORK, GIVE_UP, SUBMIT = 0, 1, 2


class Quit(gym.Env):
    observation_space = gym.spaces.Box(0.0, 10.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(3)
    action_labels = ["work", "give_up", "submit"]

    def __init__(self, bonus: float = 1.2, fade: bool = True, credit: float = 0.3) -> None:
        self.bonus, self.fade, self.credit = bonus, fade, credit

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.worked = 0, False
        return np.array([0.0, 0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.array([float(self.worked), float(self.t)], np.float32)
        if action == WORK:
            self.worked = True
            return obs, 0.0, False, self.t >= 10, {}
        if action == GIVE_UP:
            pay = self.bonus * ((1 - self.t / 10) if self.fade else 1.0) + (self.credit if self.worked else 0.0)
            return obs, pay, True, False, {"success": False}
        return obs, 1.0 if self.worked else 0.0, True, False, {"success": self.worked}


def test_replays_from_the_same_starts_see_a_bonus_fade_that_progress_hides():
    ctx = explore(Quit, probe="length", episodes=64, quick=True)
    result = fades_when_delayed(ctx, GIVE_UP, [WORK])
    # One work then quitting at step 2 against four more works then quitting at step 6: the same
    # credit, the bonus 1.2 x (0.8 - 0.4) lower.
    pairs = result["idlers"]["work"]
    assert result["fades"] and result["after"] == FADE_AFTER and pairs["holds"]
    assert pairs["pairs"] == max(MIN_SAMPLES, ctx.config.scaled(16))
    assert pairs["mean_difference"] == pytest.approx(-1.2 * FADE_AFTER / 10)
    steady = explore(lambda: Quit(fade=False), probe="length", episodes=64, quick=True)
    flat = fades_when_delayed(steady, GIVE_UP, [WORK])
    assert not flat["fades"] and flat["idlers"]["work"]["mean_difference"] == 0.0


def test_only_an_ending_that_pays_near_success_at_once_is_replayed():
    ctx = explore(Quit, probe="length", episodes=64, quick=True)
    success = np.ones(MIN_SAMPLES)
    assert fading_enders(ctx, np.random.default_rng(0), success, np.zeros(MIN_SAMPLES), margin_share=0.1) == [GIVE_UP]
    assert ctx.notes["fading"]["give_up"]["fades"]
    # Success paying far more than quitting at once: no ending can be a brevity fail, nothing replayed.
    rich = explore(Quit, probe="length", episodes=64, quick=True)
    assert fading_enders(rich, np.random.default_rng(0), np.full(MIN_SAMPLES, 5.0), np.zeros(MIN_SAMPLES),
                         margin_share=0.1) == []
    assert "fading" not in rich.notes
    # No success seen: no rung to reach.
    assert _paying_at_once(ctx, np.zeros(0), np.zeros(MIN_SAMPLES), 0.1) == []


def test_paying_at_once_reads_the_first_step_endings_of_each_action():
    eps = [episode(FAILURE, [(GIVE_UP, 0.95)], success=False), episode(FAILURE, [(SUBMIT, 0.0)], success=False),
           episode(FAILURE, [(WORK, 0.0), (GIVE_UP, 2.0)], success=False),
           episode(SUCCESS, [(WORK, 0.0), (SUBMIT, 1.0)], success=True)]
    ctx = FakeContext(records(*eps))
    ones = np.ones(4)
    # 0.95 is within 0.1 x the scale (1.0) of success's 1.0; the 2.0 at step 2 is not "at once".
    assert _paying_at_once(ctx, ones, np.zeros(4), 0.1) == [GIVE_UP]
    assert _paying_at_once(ctx, ones, np.zeros(4), 0.01) == []
    assert _paying_at_once(ctx, np.array([1.0, np.nan, 1.0, 1.0]), np.zeros(4), 0.1) == [GIVE_UP]
    assert _paying_at_once(ctx, ones, np.zeros(4), 0.05) == [GIVE_UP]  # at the bar exactly: 1 - 0.05
    # The margin is a share of the reward scale (success 1.0 above failing at -1.0: a scale of 2).
    assert _paying_at_once(ctx, ones, np.full(4, -1.0), 0.03) == [GIVE_UP]
    assert _paying_at_once(ctx, ones, np.full(4, -1.0), 0.02) == []


def test_ending_pay_keeps_only_whole_terminated_episodes_of_the_length():
    recs = records(episode(FAILURE, [(WORK, 0.0), (GIVE_UP, 0.7)], success=False, seed=3),
                   episode(FAILURE, [(WORK, 0.0), (WORK, 0.0), (GIVE_UP, 0.5)], success=False, seed=4),
                   episode(FAILURE, [(WORK, 0.0), (WORK, 0.1)], success=False, seed=5, end="truncated"))
    assert _ending_pay(recs, 2) == {3: 0.7}
    assert _ending_pay(recs, 3) == {4: 0.5}


def test_no_room_or_no_running_action_is_said_so():
    class Short(Quit):
        spec = gym.envs.registration.EnvSpec("Short-v0", max_episode_steps=3)

    tight = explore(Short, probe="length", episodes=16, quick=True)
    assert fades_when_delayed(tight, GIVE_UP, [WORK]) == {"fades": False, "after": 0, "idlers": {},
                                                          "reason": "no room for a later ending"}
    ctx = explore(Quit, probe="length", episodes=16, quick=True)
    assert fades_when_delayed(ctx, GIVE_UP, [])["reason"] == "no action that leaves episodes running"

    class Four(Quit):  # room for one more step: the late ending at step 3, the early one at step 2
        spec = gym.envs.registration.EnvSpec("Four-v0", max_episode_steps=4)

    one_more = fades_when_delayed(explore(Four, probe="length", episodes=16, quick=True), GIVE_UP, [WORK])
    assert one_more["after"] == 1 and one_more["fades"]
    assert one_more["idlers"]["work"]["mean_difference"] == pytest.approx(-0.12)
