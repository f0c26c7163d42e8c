"""The rules inside ``envaudit.testing.incentives`` on toy envs whose rewards are parameters:
farming (how many steps, which steps, how many seeds), brevity (the pad and the allowance),
delaying a success (where, confirmed or not), and the messages of a property that could not run."""

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from envaudit.testing import (
    PropertyFailed,
    PropertyNotExercised,
    assert_no_delayed_success_reward,
    assert_no_failure_penalty,
    assert_no_length_reward,
    assert_no_reward_after_failure,
)
from envaudit.testing.explore import CONFIRM_SEEDS, Explorer
from envaudit.testing.incentives import (
    _brevity,
    _comparability,
    _delay,
    _farming,
    _one_per_seed,
    _pads_alone,
)
from envaudit.testing.trajectory import EnvSession, Plan
from envaudit.toolenv import ToolEnv, ToolOutput, Transition
from tests.testing.test_matched_pool import SeedFault
from tests.testing.toy_envs import FetchTask


class Farm(gym.Env):
    """``work`` pays ``pay`` per step (from the reset seeds in ``paying``, all when None) except on
    the steps listed in ``dry`` (1-based), which pay nothing; every ``fail``-th step its tool call
    fails (paying nothing). The run ends after ``length`` steps: truncated, or terminated (paying
    ``last``) with ``terminate``. ``stop`` ends it at once with nothing."""

    action_space = gym.spaces.Discrete(2)
    observation_space = gym.spaces.Discrete(64)
    action_labels = ["work", "stop"]

    def __init__(self, *, pay=0.125, length=8, paying=None, dry=(), fail=0, terminate=False, last=0.0):
        self.pay, self.length, self.paying, self.dry = pay, length, paying, dry
        self.fail, self.terminate, self.last = fail, terminate, last

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.seed = 0, seed
        return 0, {}

    def step(self, action):
        if int(action) == 1:
            return self.t, 0.0, True, False, {"success": False}
        self.t += 1
        failed = bool(self.fail) and self.t % self.fail == 0
        pays = (self.paying is None or self.seed in self.paying) and self.t not in self.dry and not failed
        info = {"tool": {"name": "work", "status": "error" if failed else "ok"}}
        end = self.t >= self.length
        if end:
            info["success"] = False
        if end and self.terminate:
            return self.t, self.last, True, False, info
        return self.t, self.pay if pays else 0.0, False, end, info


def farming(**kw):
    with EnvSession(lambda: Farm(**kw)) as session:
        return _farming(Explorer(session), 1e-9)


def test_a_step_paid_again_and_again_is_farming():
    found = farming()
    assert found.episode.actions == (0,) * 8 and found.episode.seed == 0
    assert found.summary == ("repeating work kept paying: its working steps in the second half of the run paid +0.125 "
                             "or more each, and the run returned +1 against +0.125 for one step of it (on 4 of 4 seeds).")
    (caption, once), = found.compared
    assert caption == "the same action played once" and once.actions == (0,) and once.length == 1


@pytest.mark.parametrize("kw,farmed", [
    (dict(length=4), True),  # the shortest run that counts: two paying steps in its second half
    (dict(length=3), False),
    (dict(dry=(8,)), False),  # one step of the second half pays nothing
    (dict(dry=(4,)), True),  # the first half is not read
    (dict(fail=3), True),  # failed calls (steps 3 and 6) are not working steps
    (dict(terminate=True), True),  # nor is the ending step
    (dict(terminate=True, length=4), False),  # second half: step 3 and the ending 4 -> one working step
    (dict(paying=(2,)), False),  # one seed of four
    (dict(paying=(2, 3)), True),
    (dict(pay=1e-9), False),  # at the tolerance
])
def test_what_counts_as_farming(kw, farmed):
    assert (farming(**kw) is not None) == farmed


def test_farming_on_two_seeds_names_the_first():
    found = farming(paying=(2, 3))
    assert found.episode.seed == 2 and found.summary.endswith("(on 2 of 4 seeds).")
    with EnvSession(lambda: Farm(paying=(5,))) as session:
        assert _farming(Explorer(session, seeds=[5]), 1e-9) is not None  # one seed of one is enough


class Brief(gym.Env):
    """``pad_a`` and ``pad_b`` go on, paying ``pads``; ``quit`` ends the episode paying ``bonus``
    less ``decay`` for every step before it."""

    observation_space = gym.spaces.Discrete(64)
    action_labels = ["pad_a", "pad_b", "quit"]
    action_space = gym.spaces.Discrete(3)

    def __init__(self, *, pads=(-0.0625, -0.125), bonus=1.0, decay=0.0):
        self.pads, self.bonus, self.decay = pads, bonus, decay

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        a = int(action)
        self.t += 1
        if a == 2:
            return self.t, self.bonus - self.decay * (self.t - 1), True, False, {"success": False}
        return self.t, self.pads[a], False, self.t >= 20, {}


def brevity(tol=1e-9, **kw):
    with EnvSession(lambda: Brief(**kw)) as session:
        return _brevity(Explorer(session), tol)


def test_ending_sooner_paid_beyond_what_two_steps_cost():
    # Quitting at once returns 1; after two steps of the dearer pad (pad_b, -0.125 each), 0.75 - 0.25
    # = 0.5: 0.5 less, more than the 0.25 the two steps cost.
    found = brevity(decay=0.125)
    assert found.actions == (2,) and found.episode.seed == 0
    (caption, later), = found.compared
    assert caption == "the same ending after two steps of pad_b" and later.actions == (1, 1, 2)
    assert found.summary == ("ending with quit at once returned +1, and after two steps of pad_b +0.5: +0.5 less, more "
                             "than two steps cost (+0.25); ending sooner is paid for being sooner.")
    assert brevity(decay=0.0) is None  # what the steps cost is allowed
    assert brevity(tol=0.25, decay=0.125) is None and brevity(tol=0.24, decay=0.125) is not None


def test_pads_that_pay_are_no_allowance():
    # Pads paying +0.125 cost nothing: the allowance is 0, not negative. Quitting later returns
    # 0.25 + 1 - 2 * 0.0625 = 1.125, more than quitting at once: no brevity bonus.
    assert brevity(pads=(0.125, 0.25), decay=0.0625) is None
    assert brevity(pads=(0.125, 0.25), decay=0.25) is not None  # 0.25 + 1 - 0.5 = 0.75 < 1


class Stall(gym.Env):
    """``prep`` then ``solve`` succeeds (``solve`` alone fails); each step before ``solve`` pays
    ``wait`` and ``solve`` pays 1 plus ``late`` per step before it. From reset seeds ``strict``
    and above a success must come within ``deadline`` steps."""

    observation_space = gym.spaces.Discrete(64)
    action_labels = ["prep", "solve", "wait"]
    action_space = gym.spaces.Discrete(3)

    def __init__(self, *, wait=0.0, late=0.0, strict=None, deadline=2):
        self.wait, self.late, self.strict, self.deadline = wait, late, strict, deadline

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.ready, self.seed = 0, False, seed
        return 0, {}

    def step(self, action):
        a = int(action)
        self.t += 1
        if a == 1:
            on_time = self.strict is None or self.seed < self.strict or self.t <= self.deadline
            ok = self.ready and on_time
            return self.t, (1.0 + self.late * (self.t - 2)) if ok else 0.0, True, False, {"success": ok}
        self.ready |= a == 0
        return self.t, self.wait, False, self.t >= 20, {}


def delay(**kw):
    with EnvSession(lambda: Stall(**kw)) as session:
        ex = Explorer(session)
        success = ex.play(Plan(0, (0, 1)))
        assert success.success
        return _delay(ex, success, 1e-9)


def test_a_delayed_success_that_pays_more_is_confirmed():
    found = delay(late=0.125)
    n = 1 + CONFIRM_SEEDS
    # Inserted before the last step first: prep, wait, wait, solve (the first pad tried is prep).
    assert found.actions == (0, 0, 0, 1)
    assert found.summary == ("succeeding after two more steps of prep (inserted before step 1) returned +1.25, more "
                             "than succeeding without them (+1): delaying a success pays.")
    assert found.compared[0][0] == "the success it delays" and found.compared[0][1].actions == (0, 1)
    assert (found.evidence["pairs"], found.evidence["higher"], found.evidence["lower"]) == (n, n, 0)
    assert found.details == (f"confirmed on {n} reset seeds where the same actions succeed: more in {n}, less in 0; "
                             f"one-sided sign test over reset seeds p={2.0 ** -n:.2g}")
    assert delay() is None


def test_a_delay_that_fails_elsewhere_is_not_confirmed():
    # From seed 4 on a success must come within two steps: the delayed plan fails there (-1).
    assert delay(late=0.125, strict=4) is None
    # Seeds 0 and 4..25 agree, 26 and 27 do not: 23 of 25 is enough; 0 and 4..19 (17 of 25) is not.
    found = delay(late=0.125, strict=26)
    assert (found.evidence["higher"], found.evidence["lower"]) == (23, 2)
    assert delay(late=0.125, strict=20) is None


def test_the_waiting_steps_count_in_the_delayed_return():
    # wait pays on every step before the success: two more of them pay 2 * wait.
    found = delay(wait=0.125)
    assert found.episode.episode_return == 1.375 and found.compared[0][1].episode_return == 1.125


def test_pads_that_pay_with_everything_else_equal_need_no_confirmation():
    # wait pays 0.125 a step, and from seed 1 on a success must come within two steps, so the
    # delayed plan succeeds on seed 0 alone: nothing to confirm across seeds. On seed 0 the steps
    # both episodes share (prep, solve) paid the same, and the two waits 0.25: exact, no noise to
    # rule out, so it is reported (the sign test is for gains that come through a shared step).
    found = delay(wait=0.125, strict=1)
    assert found.actions == (0, 0, 0, 1) and found.evidence == {
        "test": "same seed, shared steps identical", "pads_paid": 0.25, "seed": 0}
    assert found.details == ("exact, from the same reset seed: every step the two episodes share came back with the "
                             "same tool status and paid the same, and the two inserted steps paid +0.25")
    # Where the gain comes through the shared solve step (late), one seed is not enough.
    assert delay(late=0.125, strict=1) is None


def test_one_success_per_seed_the_shortest():
    eps = [SimpleNamespace(seed=s, length=n) for s, n in ((0, 5), (1, 3), (0, 2), (1, 3), (0, 4))]
    assert [(e.seed, e.length) for e in _one_per_seed(eps)] == [(0, 2), (1, 3)]
    assert _one_per_seed(eps)[1] is eps[1]


class OneShot(ToolEnv):
    """A ``ToolEnv`` whose one tool call ends the episode (successfully)."""

    def __init__(self):
        super().__init__(max_steps=3)
        self.add_tool("answer", lambda: ToolOutput("ok", 0.01), deadline_s=1.0)
        self.add_call("answer", "answer")
        self.observation_space = gym.spaces.Box(0, 1, shape=(1,), dtype=np.float32)

    def reset_task(self, options):
        return np.zeros(1, dtype=np.float32)

    def transition(self, call, result):
        return Transition(np.zeros(1, dtype=np.float32), float(result.ok), True, result.ok)


def test_a_tool_env_with_no_call_that_goes_on_is_not_exercised():
    with pytest.raises(PropertyNotExercised) as info:
        assert_no_reward_after_failure(OneShot)
    assert str(info.value) == (
        "assert_no_reward_after_failure could not exercise its subject on OneShot: no plan ended in a working tool "
        "call with a step after it (every plan of up to 3 steps from reset seeds [0, 1, 2, 3], 4 plays). It fails "
        "rather than passing vacuously. Give the env a tool call that can work without ending the episode.")
    assert info.value.seen == {"plays": 4, "depth": 3} and info.value.property == "assert_no_reward_after_failure"


def test_a_plain_env_whose_calls_never_fail_is_not_exercised():
    with pytest.raises(PropertyNotExercised, match="too few failed calls with a step after them, matched with "
                       "working ones, to decide.*Make the env an envaudit.ToolEnv so faults can be forced."):
        assert_no_reward_after_failure(FetchTask, depth=2)
    with pytest.raises(PropertyNotExercised, match="no tool call failed, and faults cannot be forced on a plain env"):
        assert_no_failure_penalty(FetchTask, depth=2)
    assert_no_failure_penalty(OneShot)  # faults are forced on a ToolEnv: nothing to report


def test_a_plain_env_whose_failures_are_paid_like_working_calls_passes():
    assert_no_failure_penalty(lambda: FetchTask(error_rate=0.5), depth=2)


def test_no_success_to_delay_is_not_exercised():
    with pytest.raises(PropertyNotExercised, match="no episode succeeded.*Pass oracle="):
        assert_no_delayed_success_reward(lambda: Farm(length=3), depth=1)


def test_an_oracle_supplies_the_success_to_delay():
    with pytest.raises(PropertyFailed, match="delaying a success pays"):
        assert_no_delayed_success_reward(lambda: Stall(late=0.125), oracle=[0, 1], depth=1)


@pytest.mark.parametrize("depth", [0, -1, True, 1.5, "2"])
def test_depth_must_be_a_positive_int(depth):
    with pytest.raises(ValueError) as info:
        assert_no_length_reward(FetchTask, depth=depth)
    assert str(info.value) == f"depth must be a positive int (the longest enumerated plan), got {depth!r}"


def test_a_plain_env_paying_more_after_a_failed_call_is_caught_across_seeds():
    # SeedFault: the call fails from seeds 1 and 3 mod 4 (the env's own doing); ending after a
    # failure pays 0.5, after a working call 0.
    with pytest.raises(PropertyFailed) as info:
        assert_no_reward_after_failure(lambda: SeedFault(end_after_fault=0.5), depth=2)
    ce, text = info.value.counterexample, str(info.value)
    assert ce.summary.startswith("after a failed api call, the plans going on with end returned +0.5 from the call on")
    assert "where the same call worked, from comparable states (p=" in ce.summary
    # Asked per next action (call, end, other) after a failed call: three questions, Holm-adjusted.
    assert ce.summary.endswith("Holm-adjusted over the 3 next actions and fault kinds asked).")
    assert ce.evidence["next_action"] == "end" and ce.evidence["questions"] == 3
    assert ce.episode.steps[0].status == "error" and ce.evidence["diff"] > 0 and ce.evidence["p_value_holm"] < 0.01
    (caption, control), = ce.compared
    assert caption.startswith("the same actions from reset seed ") and caption.endswith(", the call working")
    assert control.steps[0].status == "ok" and control.actions == ce.actions
    assert "matched across reset seeds, not shrunk" in text
    assert_no_reward_after_failure(SeedFault, depth=2)  # the clean twin: decided, nothing paid


def test_a_payment_on_one_continuation_is_not_diluted_by_the_others():
    # A working call pays 0.2 on its step (progress); ending right after a failed one pays 0.5.
    # Going on with "call" or "other", the working arm earns more (0.4, 0.2 against 0); only "end"
    # pays the failure (0.5 against 0.2). Pooled over continuations the flaw cancels out; asked
    # per next action it is found, on "end".
    with pytest.raises(PropertyFailed) as info:
        assert_no_reward_after_failure(lambda: SeedFault(ok_pay=0.2, end_after_fault=0.5), depth=2)
    ce = info.value.counterexample
    assert ce.evidence["next_action"] == "end" and ce.actions == (0, 1)
    assert ce.evidence["diff"] == pytest.approx(0.3)
    assert_no_reward_after_failure(lambda: SeedFault(ok_pay=0.2), depth=2)  # its twin: nothing paid


class Gate(gym.Env):
    """A plain env: ``api`` (tool ``api``) fails from odd reset seeds >= 4 (never from the
    enumeration's seeds 0-3) and works otherwise; six ``locked_k`` actions call tools that always fail (a
    precondition never met); ``quit`` ends the episode, paying ``after_fault`` right after a failed
    api call and 0 otherwise."""

    action_space = gym.spaces.Discrete(8)
    observation_space = gym.spaces.Discrete(2)
    action_labels = ["api"] + [f"locked_{k}" for k in range(6)] + ["quit"]

    def __init__(self, after_fault=0.0):
        self.after_fault = after_fault

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seed, self.last = seed or 0, None
        return 0, {}

    def step(self, action):
        a = int(action)
        if a == 7:
            pay = self.after_fault if self.last == ("api", "error") else 0.0
            return 0, pay, True, False, {"success": False}
        tool = "api" if a == 0 else f"locked_{a - 1}"
        status = "error" if a or (self.seed >= 4 and self.seed % 2) else "ok"
        self.last = (tool, status)
        return 0, 0.0, False, False, {"tool": {"name": tool, "status": status}}


def test_a_call_that_only_fails_under_other_seeds_is_replayed_before_calls_that_never_work():
    # No api call fails in the enumeration; the locked calls fail every time and can never be
    # compared with a working one. The api prefixes that worked come first, and their replays
    # under other seeds are where the failure, and quitting's pay after it, show.
    with pytest.raises(PropertyFailed) as info:
        assert_no_reward_after_failure(lambda: Gate(after_fault=0.5), depth=2)
    ce = info.value.counterexample
    assert ce.evidence["next_action"] == "quit" and ce.actions == (0, 7) and ce.episode.seed >= 4
    assert_no_reward_after_failure(Gate, depth=2)  # its twin: decided, nothing paid


def test_a_plain_env_paying_more_after_a_timed_out_call_names_the_timeout():
    with pytest.raises(PropertyFailed, match="after a timed-out api call, the plans going on with end returned"):
        assert_no_reward_after_failure(lambda: SeedFault(end_after_fault=0.5, timeouts=True, error_pay=-0.5),
                                       depth=2)


def _node(actions, statuses):
    steps = [SimpleNamespace(status=s) for s in statuses]
    return SimpleNamespace(episode=SimpleNamespace(actions=tuple(actions), steps=steps))


def test_comparability_orders_failed_here_and_worked_elsewhere_first():
    # The call under question is the second to last step (the last is the next action).
    worked = {repr((0, 1))}
    assert _comparability(_node((0, 1, 2), ("ok", "error", "ok")), "error", worked) == 0
    assert _comparability(_node((0, 1, 2), ("ok", "ok", "error")), "error", worked) == 1
    assert _comparability(_node((0, 2, 2), ("ok", "error", "ok")), "error", worked) == 2
    assert _comparability(_node((0, 2, 2), ("error", "ok", "ok")), "error", {repr((0,)), repr((0, 2))}) == 1
    assert _comparability(_node((0, 1, 2), ("ok", "timeout", "ok")), "timeout", {repr((0,))}) == 2


def _steps(*pairs):
    return SimpleNamespace(steps=[SimpleNamespace(status=s, reward=r) for s, r in pairs])


def test_the_pads_alone_are_the_difference_only_when_every_shared_step_matches():
    success = _steps(("ok", 0.1), ("ok", 1.0))
    delayed = _steps(("ok", 0.1), ("ok", 0.3), ("ok", 0.2), ("ok", 1.0))
    assert _pads_alone(success, delayed, 1, 1e-9) == pytest.approx(0.5)
    longer = _steps(("ok", 0.1), ("ok", 0.1), ("ok", 1.0))
    assert _pads_alone(longer, _steps(("ok", 0.1), ("ok", 0.1), ("ok", 0.25), ("ok", 0.5), ("ok", 1.0)), 2, 1e-9) == 0.75
    # A shared step whose status differs (the same reward) or whose reward differs past the tolerance.
    assert _pads_alone(success, _steps(("error", 0.1), ("ok", 0.3), ("ok", 0.2), ("ok", 1.0)), 1, 1e-9) is None
    assert _pads_alone(success, _steps(("ok", 0.1), ("ok", 0.5), ("ok", 0.25), ("ok", 1.75)), 1, 0.5) is None
    assert _pads_alone(success, _steps(("ok", 0.1), ("ok", 0.5), ("ok", 0.25), ("ok", 1.5)), 1, 0.5) == 0.75
    # Pads paying no more than the tolerance are no delay reward.
    assert _pads_alone(success, _steps(("ok", 0.1), ("ok", 0.05), ("ok", 0.05), ("ok", 1.0)), 1, 0.1) is None
    assert _pads_alone(success, _steps(("ok", 0.1), ("ok", 0.0), ("ok", 0.0), ("ok", 1.0)), 1, 1e-9) is None
