"""Does stalling itself pay? ``probes/stall.py`` on a hand-built env whose incentives are known.

``Staller`` plays the counterfactual engine's plans (found by reset seed) on a toy task: action 1 ends the episode (an outright
failure, paid ``end_pay``), any other action is an idle step paid ``idle_pay`` (a tool call of
status ``idle_status`` from step ``failed_from`` on), and the step that reaches the step limit
``limit`` is paid ``limit_pay`` on top. With exploration's stalled episodes of length ``limit`` the
prefix is ``m = limit // 2`` steps, so (module docstring) the idle steps add ``(limit - m - 1) *
idle_pay`` to the same ending and the step limit adds ``idle_pay + limit_pay - end_pay`` over
ending after the same steps: every expected number below follows from these.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from envaudit.probes._shared import stall as S
from envaudit.protocol import END_TRUNCATED, FAILURE, SUCCESS, TIMEOUT, TOOL_ERROR, TOOL_OK
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.frames import FakeContext, episode, many, records

ENDER, IDLE = 1, 0
LIMIT, PREFIX = 10, 5  # exploration's stalled episodes are LIMIT steps; the prefix keeps half
J = LIMIT - PREFIX - 1  # idle steps between the prefix and the honest ending in the idle-ended arm


@dataclass
class Staller:
    limit: int = LIMIT
    idle_pay: float = 0.0
    end_pay: float = 0.0
    limit_pay: float = 0.0
    idle_status: str | None = None
    failed_from: int = 0
    win_from: int | None = None     # ending at step >= win_from succeeds (paid 1.0 more)
    diverge_odd: bool = False       # odd plan indices replay other actions (a non-replayable env)

    def __post_init__(self):
        self.ids = itertools.count(0, 1000)

    def play(self, policy, seeds, kwargs):
        eps = []
        for k, seed in enumerate(seeds):
            plan = kwargs["wrappers"][0].keywords["plans"][seed].actions
            rows, outcome, end = [], TIMEOUT, END_TRUNCATED
            for t in range(self.limit):
                a = plan[min(t, len(plan) - 1)]
                shown = a + 2 if self.diverge_odd and k % 2 else a
                if a == ENDER:
                    won = self.win_from is not None and t >= self.win_from
                    rows.append({"action": shown, "reward": self.end_pay + (1.0 if won else 0.0)})
                    outcome, end = (SUCCESS if won else FAILURE), "terminated"
                    break
                status = self.idle_status if t >= self.failed_from else TOOL_OK
                pay = self.idle_pay + (self.limit_pay if t == self.limit - 1 else 0.0)
                rows.append({"action": shown, "reward": pay, "tool_status": status})
            eps.append(episode(outcome, rows, success=outcome == SUCCESS, end=end, seed=seed))
        return records(*eps, first_id=next(self.ids))


def explored(n_failures: int = 12):
    """Exploration: outright failures ended by ENDER (after one idle step)."""
    return records(*many(n_failures, FAILURE, [(IDLE, 0.0), (ENDER, 0.0)]), first_id=5000)


def stalled(n: int, length: int = LIMIT, first_seed: int = 100, **kw):
    """The stalling policy's records: ``n`` episodes of ``length`` idle steps cut by the step limit."""
    return records(*[episode(TIMEOUT, [(IDLE, 0.0)] * length, end=END_TRUNCATED, seed=first_seed + i, **kw)
                     for i in range(n)], first_id=9000)


def ctx_for(env: Staller, *, exploration=None, space=None, cap=False) -> FakeContext:
    return FakeContext(exploration if exploration is not None else explored(), play=env.play,
                       env=SimpleNamespace(action_space=space or gym.spaces.Discrete(3)),
                       labels=["idle", "give up", "other"], cap_reached=cap)


def marginal(env: Staller, n: int = 10, *, scale: float = 1.0, min_effect: float = 0.1, **ctx_kw):
    ctx = ctx_for(env, **ctx_kw)
    return ctx, S.stall_marginal(ctx, stalled(n), scale, min_effect=min_effect, tag="repeat")


# -- honest_ender ------------------------------------------------------------------------------

def test_honest_ender_is_the_most_common_last_action_of_outright_failures():
    recs = records(*many(3, FAILURE, [(0, 0.0), (2, 0.0)]), *many(2, FAILURE, [(2, 0.0), (1, 0.0)]),
                   *many(5, SUCCESS, [(0, 0.0), (1, 1.0)]),  # successes' endings are not honest endings
                   *many(4, TIMEOUT, [(0, 0.0), (1, 0.0)], end=END_TRUNCATED))
    assert S.honest_ender(recs) == 2


def test_honest_ender_ties_go_to_the_cheaper_ending_then_the_lower_index():
    cheaper = records(*many(2, FAILURE, [(0, 0.0), (2, 0.5)]), *many(2, FAILURE, [(0, 0.0), (3, 0.2)]))
    assert S.honest_ender(cheaper) == 3
    same = records(*many(2, FAILURE, [(0, 0.0), (3, 0.2)]), *many(2, FAILURE, [(0, 0.0), (2, 0.2)]))
    assert S.honest_ender(same) == 2
    numpy_ints = records(*many(2, FAILURE, [(np.int64(4), 0.0)]))
    assert S.honest_ender(numpy_ints) == 4


def test_no_honest_ender_without_integer_endings_of_failures():
    assert S.honest_ender(records(*many(3, SUCCESS, [(1, 1.0)]))) is None
    assert S.honest_ender(records(*many(3, FAILURE, [("answer", 0.0)]))) is None
    words_and_ints = records(*many(3, FAILURE, [("answer", 0.0)]), episode(FAILURE, [(2, 0.0)]))
    assert S.honest_ender(words_and_ints) == 2
    empty = records(*many(2, FAILURE, [(1, 0.0)]))
    assert S.honest_ender(type(empty)(empty.steps.iloc[0:0], empty.episodes)) is None


# -- stall_marginal ----------------------------------------------------------------------------

def test_paid_idle_steps_are_farming_steps():
    ctx, out = marginal(Staller(idle_pay=0.125))
    assert out["holds"] and out["behaviour"] == "stall"
    idle = out["idle_steps_pay"]
    assert idle["pays"] and idle["n_pairs"] == 10 and idle["mean"] == pytest.approx(J * 0.125)
    assert out["mean_idle_steps"] == J  # what the length probe divides by for the pay per idle step
    assert idle["p_value"] == pytest.approx(2.0 ** -10)
    # the step limit is one more idle step than ending after the same steps: 0.125 a seed
    assert out["step_limit_pays"]["n_pairs"] == 10 and out["step_limit_pays"]["mean"] == pytest.approx(0.125)
    assert out["idle_pay_from_failed_calls"] == 0.0
    assert out["honest_ending"] == "give up" and out["n_prefixes"] == 10


def test_the_idle_pay_is_judged_against_min_effect_of_the_scale():
    # J idle steps of 0.125 add 0.5: at the bar when 0.1 of the scale is 0.5, under it above
    assert marginal(Staller(idle_pay=0.125), scale=5.0)[1]["behaviour"] == "stall"
    out = marginal(Staller(idle_pay=0.125), scale=5.01)[1]
    assert not out["holds"] and out["behaviour"] is None


def test_the_replays_play_each_arm_on_the_stalled_seeds_through_the_engine():
    ctx, out = marginal(Staller(idle_pay=0.125))
    assert [p.name for p, _, _ in ctx.runs] == ["stall-ended", "stall-idle-ended", "stall-stalled"]
    seeds = list(range(100, 110))
    for policy, ran_seeds, kw in ctx.runs:
        # Any worker may play them: the plan is found by the reset seed, not by the run's order.
        assert ran_seeds == seeds and kw["ordered"] is None
        assert kw["tags"] == {"arm": policy.name, "stalling": "repeat"}
        assert kw["rng_name"] == f"{policy.name.replace('stall-', 'stall-repeat-')}"
    ended, idle_ended, stalled_ = (list(kw["wrappers"][0].keywords["plans"][100].actions) for _, _, kw in ctx.runs)
    assert ended == [IDLE] * PREFIX + [ENDER]
    # The stalling arm's prefix ends with one idle step, which it then repeats to the limit.
    assert idle_ended == [IDLE] * (LIMIT - 1) + [ENDER] and stalled_ == [IDLE] * (PREFIX + 1)
    assert len(ctx.kept) == 1 and set(ctx.kept[0].episodes["outcome"]) == {TIMEOUT}  # the stalling arm only


def test_paid_failed_calls_name_the_failures_incentive():
    # The idle arm's tail is steps PREFIX .. LIMIT-2 (J = 4 steps); failed from step 6 on: 3 of 4.
    out = marginal(Staller(idle_pay=0.125, idle_status=TOOL_ERROR, failed_from=PREFIX + 1))[1]
    assert out["behaviour"] == "tool-failure" and out["idle_pay_from_failed_calls"] == pytest.approx(0.75)
    half = marginal(Staller(idle_pay=0.125, idle_status=TOOL_ERROR, failed_from=PREFIX + 2))[1]
    assert half["behaviour"] == "stall" and half["idle_pay_from_failed_calls"] == pytest.approx(0.5)
    # the prefix's failed calls are not the idle steps' (all of it failed but the tail ok is 0 share)
    ok_tail = marginal(Staller(idle_pay=0.125, idle_status=TOOL_ERROR, failed_from=LIMIT - 1))[1]
    assert ok_tail["idle_pay_from_failed_calls"] == 0.0 and ok_tail["behaviour"] == "stall"


def test_small_idle_pay_from_failed_calls_is_still_the_failures_incentive():
    # 10 pairs of J x 2^-6 = 0.0625: 0.625 in all, every idle step a failed call
    out = marginal(Staller(idle_pay=2.0 ** -6, idle_status=TOOL_ERROR), min_effect=0.05)[1]
    assert out["behaviour"] == "tool-failure" and out["idle_pay_from_failed_calls"] == pytest.approx(1.0)


def test_a_step_limit_that_pays_is_a_timeout():
    out = marginal(Staller(limit_pay=0.5))[1]
    assert out["holds"] and out["behaviour"] == "timeout"
    assert not out["idle_steps_pay"]["pays"] and out["idle_steps_pay"]["mean"] == 0.0
    assert out["step_limit_pays"]["pays"] and out["step_limit_pays"]["mean"] == pytest.approx(0.5)
    assert out["idle_pay_from_failed_calls"] == 0.0


def test_an_honest_ending_that_pays_more_than_stalling_is_clean():
    out = marginal(Staller(end_pay=0.5))[1]
    assert not out["holds"] and out["behaviour"] is None
    assert out["step_limit_pays"]["mean"] == pytest.approx(-0.5) and out["idle_steps_pay"]["mean"] == 0.0


def test_nothing_pays_on_a_clean_env():
    out = marginal(Staller())[1]
    assert out["holds"] is False and out["behaviour"] is None
    assert out["idle_steps_pay"]["p_value"] == 1.0 and out["step_limit_pays"]["p_value"] == 1.0


def test_examples_are_the_richest_stalled_episodes():
    ctx, out = marginal(Staller(idle_pay=0.125))
    kept = ctx.kept[0].episodes["episode_id"].tolist()
    assert out["examples"] == kept[:3]  # equal returns: the lowest ids


def test_examples_rank_by_the_stalled_return():
    class Rising(Staller):
        def play(self, policy, seeds, kwargs):
            recs = super().play(policy, seeds, kwargs)
            if policy.name == "stall-stalled":  # episode k of the stalling arm is paid k more
                steps = recs.steps.copy()
                last = steps.groupby("episode_id")["step"].transform("max") == steps["step"]
                steps.loc[last, "reward"] += steps.loc[last, "episode_id"] - steps["episode_id"].min()
                recs = type(recs)(steps, recs.episodes)
            return recs
    ctx, out = marginal(Rising(idle_pay=0.125))
    kept = ctx.kept[0].episodes["episode_id"].tolist()
    assert out["examples"] == kept[::-1][:3]


def test_an_idle_arm_that_succeeds_is_not_paired():
    # Ending after the idle steps succeeds: idle steps are compared only where both arms end alike
    out = marginal(Staller(idle_pay=0.125, win_from=LIMIT - 1))[1]
    assert out["idle_steps_pay"]["n_pairs"] == 0 and out["step_limit_pays"]["n_pairs"] == 0
    assert not out["holds"]


def test_replays_that_diverge_from_their_plan_are_left_out():
    out = marginal(Staller(idle_pay=0.125, diverge_odd=True), n=16)[1]
    assert out["n_prefixes"] == 16 and out["idle_steps_pay"]["n_pairs"] == 8
    assert out["behaviour"] == "stall"
    out = marginal(Staller(idle_pay=0.125, diverge_odd=True), n=14)[1]
    assert out["idle_steps_pay"]["underpowered"] and not out["holds"]


def test_a_replay_of_the_wrong_length_is_left_out():
    # A step limit one longer than the stall's: the stalling arm runs past the stall's length, so
    # only the idle steps are judged; one shorter: the idle-ended arm is cut before its ending too.
    out = marginal(Staller(idle_pay=0.125, limit=LIMIT + 1))[1]
    assert out["idle_steps_pay"]["n_pairs"] == 10 and out["step_limit_pays"]["n_pairs"] == 0
    assert out["behaviour"] == "stall" and out["examples"] == []
    out = marginal(Staller(idle_pay=0.125, limit=LIMIT - 1))[1]
    assert out["idle_steps_pay"]["n_pairs"] == 0 and out["step_limit_pays"]["n_pairs"] == 0
    assert not out["holds"] and out["examples"] == []


def test_stalled_episodes_are_sampled_once_per_seed_and_need_min_samples():
    ctx = ctx_for(Staller(idle_pay=0.125))
    twice = records(*[episode(TIMEOUT, [(IDLE, 0.0)] * LIMIT, end=END_TRUNCATED, seed=100 + i % 7)
                      for i in range(14)], first_id=9000)
    out = S.stall_marginal(ctx, twice, 1.0, min_effect=0.1, tag="repeat")
    assert out["n_prefixes"] == 7 and not out["holds"] and "7 stalled episodes" in out["reason"]
    assert out["behaviour"] is None
    assert ctx.runs == []
    out = S.stall_marginal(ctx, stalled(MIN_SAMPLES), 1.0, min_effect=0.1, tag="repeat")
    assert out["n_prefixes"] == MIN_SAMPLES and out["holds"]


def test_only_truncated_unsuccessful_integer_episodes_of_three_steps_are_replayed():
    ctx = ctx_for(Staller(idle_pay=0.125))
    mixed = records(episode(TIMEOUT, [(IDLE, 0.0)] * 2, end=END_TRUNCATED, seed=400),   # too short
                    episode(TIMEOUT, [("wait", 0.0)] * LIMIT, end=END_TRUNCATED, seed=401),  # not integers
                    *[episode(TIMEOUT, [(IDLE, 0.0)] * LIMIT, end=END_TRUNCATED, seed=100 + i) for i in range(8)],
                    episode(TIMEOUT, [(IDLE, 0.0)] * LIMIT, end=END_TRUNCATED, seed=100),   # a seed seen already
                    *[episode(SUCCESS, [(IDLE, 0.0)] * LIMIT, success=True, end=END_TRUNCATED, seed=200 + i)
                      for i in range(3)],
                    *[episode(FAILURE, [(IDLE, 0.0)] * LIMIT, seed=300 + i) for i in range(3)],
                    episode(TIMEOUT, [(IDLE, 0.0)] * 2, end=END_TRUNCATED, seed=400),
                    episode(TIMEOUT, [("wait", 0.0)] * LIMIT, end=END_TRUNCATED, seed=401),
                    first_id=9000)
    out = S.stall_marginal(ctx, mixed, 1.0, min_effect=0.1, tag="repeat")
    assert out["n_prefixes"] == 8 and ctx.runs[0][1] == list(range(100, 108))
    three = records(*[episode(TIMEOUT, [(IDLE, 0.0)] * 3, end=END_TRUNCATED, seed=i) for i in range(8)])
    ctx = ctx_for(Staller(idle_pay=0.125, limit=3))
    assert S.stall_marginal(ctx, three, 1.0, min_effect=0.1, tag="t")["n_prefixes"] == 8


def test_no_honest_ending_no_judgement():
    out = marginal(Staller(idle_pay=0.125), exploration=records(*many(10, SUCCESS, [(ENDER, 1.0)])))[1]
    assert out["holds"] is False and out["behaviour"] is None and "no honest ending" in out["reason"]
    ctx, out = marginal(Staller(idle_pay=0.125), space=gym.spaces.Box(0.0, 1.0, (1,)))
    assert out["holds"] is False and "no honest ending" in out["reason"] and ctx.runs == []


def test_the_safety_cap_stops_the_replays():
    ctx, out = marginal(Staller(idle_pay=0.125), cap=True)
    assert out["holds"] is False and out["behaviour"] is None and out["reason"] == "safety cap reached"
    assert ctx.runs == [] and ctx.skipped == ["stall replays (ended) of 'repeat'"]


def test_the_idle_step_is_an_action_the_oracle_never_takes():
    # The oracle plays OTHER then ENDER; a prefix of IDLE, OTHER, OTHER idles with IDLE (its last
    # action that is not progress); one made of progress only keeps its last action.
    assert S.idle_step([IDLE, 2, 2], {2, ENDER}) == IDLE
    assert S.idle_step([2, 2], {2, ENDER}) == 2
    assert S.idle_step([2, IDLE], set()) == IDLE
