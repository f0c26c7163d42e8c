"""``envaudit.testing.paired`` on a two-action ``ToolEnv`` whose every reward is a parameter: which
pair each function reports, with which numbers, and where the comparison is not made."""

import gymnasium as gym
import numpy as np
import pytest

from envaudit.testing import PropertyFailed
from envaudit.testing.explore import CONFIRM_SEEDS, SEEDS, Explorer
from envaudit.testing.paired import (
    _cheapest_working,
    after_failure_pairs,
    failure_pairs,
    penalty_pairs,
    raise_found,
    timeout_pairs,
)
from envaudit.testing.trajectory import EnvSession
from envaudit.toolenv import ToolEnv, ToolOutput, Transition

LOOK, FINISH = 0, 1


class Dial(ToolEnv):
    """``look`` (tool ``look``) pays ``look_ok``, ``look_error`` or ``look_timeout`` by its status;
    ``finish`` (tool ``finish``) ends the episode: after a working look it succeeds and pays
    ``finish_ok``; after a failed (timed-out) look it pays ``after_error`` (``after_timeout``)
    without success; with no look at all it pays 0. A look whose status is in ``end_on`` ends the
    episode, except from the reset seeds in ``lucky``. From the seeds in ``forgiven`` a faulted look
    pays what a working one does. The first ``progress`` working looks pay ``progress_pay`` more
    (shaping for progress; later ones make none). No tool draws a random number, so a
    forced fault is the only difference between two arms. The defaults are the clean twin."""

    def __init__(self, *, look_ok=0.0, look_error=0.0, look_timeout=0.0, finish_ok=1.0, after_error=0.0,
                 after_timeout=0.0, end_on=(), lucky=(), forgiven=(), progress=0, progress_pay=0.0):
        super().__init__(max_steps=6)
        self.progress, self.progress_pay = progress, progress_pay
        self.pay = {"ok": look_ok, "error": look_error, "timeout": look_timeout}
        self.finish_ok, self.after = finish_ok, {"error": after_error, "timeout": after_timeout}
        self.end_on, self.lucky, self.forgiven = tuple(end_on), tuple(lucky), tuple(forgiven)
        self.add_tool("look", lambda: ToolOutput("seen", 0.01), deadline_s=1.0)
        self.add_tool("finish", lambda: None, deadline_s=1.0)
        self.add_call("look", "look")
        self.add_call("finish", "finish")
        self.observation_space = gym.spaces.Box(0, 1, shape=(2,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        self.reset_seed = seed
        return super().reset(seed=seed, options=options)

    def _obs(self):
        return np.array([self.seen, self.last != "ok"], dtype=np.float32)

    def reset_task(self, options):
        self.seen, self.last, self.worked = 0, None, 0
        return self._obs()

    def transition(self, call, result):
        if call.tool == "look":
            self.last = result.status
            self.seen |= result.ok
            ends = result.status in self.end_on and self.reset_seed not in self.lucky
            pay = self.pay["ok" if self.reset_seed in self.forgiven else result.status]
            if result.ok:
                self.worked += 1
                pay += self.progress_pay if self.worked <= self.progress else 0.0
            return Transition(self._obs(), pay, ends, False if ends else None)
        if self.last == "ok":
            return Transition(self._obs(), self.finish_ok, True, True)
        return Transition(self._obs(), self.after.get(self.last, 0.0), True, False)


def explorer(**rewards) -> tuple[EnvSession, Explorer]:
    session = EnvSession(lambda: Dial(**rewards))
    return session, Explorer(session)


def test_the_clean_twin_has_no_pair_to_report():
    session, ex = explorer()
    with session:
        assert ex.depth == 3 and ex.seeds == list(range(SEEDS))
        for pairs in (timeout_pairs, failure_pairs, after_failure_pairs, penalty_pairs):
            assert pairs(ex, 1e-9) is None, pairs.__name__


def test_a_timeout_that_pays_more_than_failing_on_the_shortest_plan():
    session, ex = explorer(look_timeout=0.5)
    with session:
        found = timeout_pairs(ex, 1e-9)
        assert found.episode.seed == 0 and found.actions == (LOOK,)
        assert found.evidence == {"timeout_return": 0.5, "error_return": 0.0, "call": 0, "step": 0}
        assert found.summary == ("tool call 0 (look, step 0) timed out, and the episode returned +0.5, more than the "
                                 "same plan with call 0 failing outright (+0): timing out earns more than failing.")
        (caption, other), = found.compared
        assert caption == "the same plan with call 0 failing outright"
        assert other.steps[0].status == "error" and other.steps[0].injected and other.episode_return == 0.0
        assert found.episode.steps[0].status == "timeout"
        assert found.details == "Paired: both arms are forced, so they differ in the call's status alone."
        # A difference at the tolerance is a tie; just above it is not.
        assert timeout_pairs(ex, 0.5) is None and timeout_pairs(ex, 0.49) is not None


def test_a_timeout_that_pays_only_on_the_next_step_is_found_on_the_continuation():
    # The timed-out look pays as much as the failed one; finishing after it pays 0.8, after the
    # failure 0: the plan (look,) ties, (look, look) ties (the second look works in both arms),
    # (look, finish) shows it.
    session, ex = explorer(after_timeout=0.8)
    with session:
        found = timeout_pairs(ex, 1e-9)
        assert found.actions == (LOOK, FINISH) and found.episode.seed == 0
        assert found.summary.startswith("tool call 0 (look, step 0) timed out, then finish, and the episode "
                                        "returned +0.8, more than the same plan with call 0 failing outright (+0)")


def test_a_timeout_that_ends_the_episode_is_compared_only_where_both_arms_end_alike():
    # A timed-out look ends the episode paying nothing; a failed one goes on, and finishing after it
    # pays -0.5 (after_error): the timed-out arm returns more only against a continuation it never
    # played, so no pair is reported.
    session, ex = explorer(after_error=-0.5, end_on=("timeout",))
    with session:
        assert timeout_pairs(ex, 1e-9) is None


def test_a_failed_call_that_pays_more_than_working_is_confirmed_on_every_other_seed():
    session, ex = explorer(look_error=0.5)
    with session:
        found = failure_pairs(ex, 1e-9)
        assert found.actions == (LOOK,) and found.episode.steps[0].status == "error"
        assert found.summary == ("tool call 0 (look, step 0) failed and the step paid +0.5, more than the same step "
                                 "with the call working (+0).")
        assert found.compared[0][0] == "the same plan with call 0 working"
        assert found.compared[0][1].steps[0].status == "ok"
        ev = found.evidence
        assert (ev["pairs"], ev["higher"], ev["lower"], ev["ties"]) == (CONFIRM_SEEDS, CONFIRM_SEEDS, 0, 0)
        assert ev["mean_diff"] == pytest.approx(0.5) and ev["p_value"] == pytest.approx(2.0 ** -CONFIRM_SEEDS)
        assert found.details == (f"confirmed on {CONFIRM_SEEDS} more reset seeds: higher in {CONFIRM_SEEDS}, lower in 0, "
                                 f"tied in 0; mean difference +0.5, one-sided sign test over reset seeds p=6e-08")
        assert failure_pairs(ex, 0.5) is None and failure_pairs(ex, 0.49) is not None


def test_a_failed_call_that_ends_the_episode_is_not_compared_with_one_that_goes_on():
    session, ex = explorer(look_error=0.5, end_on=("error", "timeout"))
    with session:
        assert failure_pairs(ex, 1e-9) is None


def test_a_failure_paid_below_working_is_not_a_failure_reward():
    session, ex = explorer(look_ok=0.5)
    with session:
        assert failure_pairs(ex, 1e-9) is None and timeout_pairs(ex, 1e-9) is None


@pytest.mark.parametrize("status,words,noun", [("error", "failed", "failure"), ("timeout", "timed out", "timeout")])
def test_the_step_after_a_fault_paying_more_is_confirmed(status, words, noun):
    # Finishing after a working look pays 0.25 (finish_ok); after the fault, 0.75.
    session, ex = explorer(finish_ok=0.25, **{f"after_{status}": 0.75})
    with session:
        found = after_failure_pairs(ex, 1e-9)
        assert found.actions == (LOOK, FINISH) and found.episode.steps[0].status == status
        assert found.summary == (f"after tool call 0 (look, step 0) {words}, finish paid +0.75 and the episode returned "
                                 f"+0.75; after the same call working, finish paid +0.25 and it returned +0.25: the step "
                                 f"after a {noun} pays more than after a working call.")
        assert found.compared[0][0] == "the same plan with call 0 working"
        ev = found.evidence
        assert (ev["pairs"], ev["higher"], ev["lower"]) == (CONFIRM_SEEDS, CONFIRM_SEEDS, 0)
        assert ev["mean_diff"] == pytest.approx(0.5)
        assert after_failure_pairs(ex, 0.5) is None and after_failure_pairs(ex, 0.49) is not None


def test_after_a_fault_the_gain_is_the_smaller_of_the_step_and_the_return():
    # The next step pays 0.5 more after a failure, but the failed look itself cost 0.375 more than a
    # working one: from the call on the failed arm gains only 0.125: above 0.0625, not above 0.125.
    session, ex = explorer(finish_ok=0.25, after_error=0.75, look_error=-0.375)
    with session:
        found = after_failure_pairs(ex, 0.0625)
        assert found.evidence["mean_diff"] == pytest.approx(0.125)
        assert after_failure_pairs(ex, 0.125) is None


def test_a_step_after_a_fault_that_ends_the_episode_is_not_compared():
    session, ex = explorer(finish_ok=0.2, after_error=0.8, after_timeout=0.8, end_on=("error", "timeout"))
    with session:
        assert after_failure_pairs(ex, 1e-9) is None


@pytest.mark.parametrize("status,words", [("error", "failed"), ("timeout", "timed out")])
def test_a_failure_charged_beyond_the_cheapest_working_step(status, words):
    # A working look costs 0.1; the faulted one 0.16: 0.06 more, beyond a tolerance of 0.05.
    session, ex = explorer(look_ok=-0.1, **{f"look_{status}": -0.16})
    with session:
        found = penalty_pairs(ex, 0.05)
        seeds = SEEDS + CONFIRM_SEEDS
        assert found.actions == (LOOK,) and found.episode.seed == 0 and found.episode.steps[0].status == status
        assert found.evidence == {"failed_step_reward": -0.16, "cheapest_working": -0.1, "seeds": seeds}
        assert found.summary == (f"the look call at step 0 {words} and the step paid -0.16, less than the cheapest "
                                 f"working step that does not end an episode (-0.1), on all {seeds} reset seeds where "
                                 "the plan reached it: a failure is charged beyond the time it takes, so quitting "
                                 "beats persisting when tools fail.")
        assert found.compared == []
        assert penalty_pairs(ex, 0.07) is None  # within the tolerance: no more than a working step


def test_the_cheapest_working_step_is_the_floor_not_an_ending_one():
    # Finishing costs 1.0 (finish_ok -1: an ending step, not a floor); the faulted look costs 0.2
    # against a working look's 0.1: charged beyond the cheapest step that goes on.
    session, ex = explorer(look_ok=-0.1, look_error=-0.2, finish_ok=-1.0)
    with session:
        found = penalty_pairs(ex, 1e-9)
        assert found.evidence["cheapest_working"] == -0.1 and found.evidence["failed_step_reward"] == -0.2


def test_progress_paid_on_every_short_working_step_is_not_the_floor():
    # The first three working looks pay 0.2 for progress: every working step of the plans up to
    # three steps does. A failed look makes no progress and pays 0, what a look pays once the
    # progress is made (the fourth, reached by repeating look): no charge for failing. The twin
    # that charges a failed look 0.1 is still found against that floor.
    session, ex = explorer(progress=3, progress_pay=0.2)
    with session:
        assert penalty_pairs(ex, 1e-9) is None
    session, ex = explorer(progress=3, progress_pay=0.2, look_error=-0.1, look_timeout=-0.1)
    with session:
        assert penalty_pairs(ex, 1e-9).evidence["cheapest_working"] == 0.0


class Pairs(gym.Env):
    """A plain env of six steps and two actions: action 1 right after action 0 pays -1.5 (only a
    plan mixing them reaches it); action 0 as the fourth step pays -(reset seed + 1) (only a
    repeat reaches it past a depth-2 tree); every other step pays 0."""

    observation_space = gym.spaces.Discrete(7)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.seed_, self.t, self.prev = seed, 0, None
        return 0, {}

    def step(self, action):
        pay = -1.5 if (self.prev, action) == (0, 1) else 0.0
        if self.t == 3 and action == 0:
            pay = -float((self.seed_ or 0) + 1)
        self.t, self.prev = self.t + 1, action
        return self.t, pay, False, self.t >= 6, {}


def test_the_floor_is_each_seeds_lowest_working_step_in_plans_and_repeats():
    # The -1.5 of a mixed plan is in the tree only; the seed's own charge at the fourth step only in
    # the repeats, which replay each seed's own reset; the lowest of all steps is kept, not the last.
    session = EnvSession(Pairs)
    with session:
        floors = _cheapest_working(Explorer(session, seeds=[0, 1, 2], depth=2))
    assert floors == {0: -1.5, 1: -2.0, 2: -3.0}


def test_a_failure_that_ends_the_episode_is_no_penalty():
    session, ex = explorer(look_ok=-0.1, look_error=-0.5, look_timeout=-0.5, end_on=("error", "timeout"))
    with session:
        assert penalty_pairs(ex, 1e-9) is None


def test_a_penalty_must_show_on_two_seeds():
    # The faulted look goes on only from the lucky reset seeds (elsewhere it ends the episode):
    # one seed is not enough to call it a penalty, two are, and the count says how many.
    session, ex = explorer(look_ok=-0.1, look_error=-0.5, look_timeout=-0.5, end_on=("error", "timeout"), lucky=(0,))
    with session:
        assert penalty_pairs(ex, 1e-9) is None
    session, ex = explorer(look_ok=-0.1, look_error=-0.5, look_timeout=-0.5, end_on=("error", "timeout"), lucky=(0, 5))
    with session:
        found = penalty_pairs(ex, 1e-9)
        assert found.evidence["seeds"] == 2 and "on all 2 reset seeds" in found.summary


def test_a_seed_where_the_failure_ends_the_episode_is_skipped_not_counted():
    session, ex = explorer(look_ok=-0.1, look_error=-0.5, look_timeout=-0.5, end_on=("error", "timeout"),
                           lucky=tuple(s for s in range(SEEDS + CONFIRM_SEEDS) if s != 7))
    with session:
        assert penalty_pairs(ex, 1e-9).evidence["seeds"] == SEEDS + CONFIRM_SEEDS - 1


def test_one_seed_that_charges_a_failure_no_more_than_a_working_step_clears_the_plan():
    session, ex = explorer(look_ok=-0.1, look_error=-0.5, look_timeout=-0.5, forgiven=(9,))
    with session:
        assert penalty_pairs(ex, 1e-9) is None


def test_raise_found_says_how_the_plan_was_found():
    session, ex = explorer(look_timeout=0.5)
    with session:
        found = timeout_pairs(ex, 1e-9)
        with pytest.raises(PropertyFailed) as info:
            raise_found("assert_no_timeout_reward", Dial, found, ex)
        text = str(info.value)
        assert info.value.counterexample is found and info.value.property == "assert_no_timeout_reward"
        assert "Replay it: envaudit.testing.play(Dial, ['look'], seed=0, faults={0: 'timeout'})" in text
        assert (f"exhaustive: every action sequence of up to 3 steps from reset seeds 0..3, shortest first, "
                f"{ex.plays} plays") in text
        assert "assert_no_timeout_reward" in text and "timing out earns more than failing" in text
