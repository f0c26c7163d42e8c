"""The length probe's marginal-value checks (``probes/length_delay.py``) on hand-built tables and a
toy task whose pay is known.

``Task``: action 2 is work (paid ``WORK``), action 3 answers (success paid 1.0 once the work was
done twice, else an outright failure), action 0 is a "chat" turn paid ``chat_pay`` (a format score
per wrong attempt when positive), action 1 idles (paid 0; a failed tool call when ``idle_fails``).
The oracle plays ``[2, 2, 3]``. A success delayed by ``k`` chats at either end is then worth
``k * chat_pay`` more than the success at once, on the same seed: every expected number below
follows from these.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.probes.length import delay as D
from envaudit.protocol import FAILURE, SUCCESS, TIMEOUT, TOOL_ERROR, TOOL_OK
from envaudit.rollout import SequencePolicy
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.frames import FakeContext, episode, many, records

CHAT, IDLE, WORK_ACTION, ANSWER = 0, 1, 2, 3
WORK = 0.25
ORACLE = [WORK_ACTION, WORK_ACTION, ANSWER]
LABELS = ["chat", "idle", "work", "answer"]


@dataclass
class Task:
    chat_pay: float = 0.0
    idle_fails: bool = False
    limit: int = 20
    oracle: bool = True

    def __post_init__(self):
        self.ids = itertools.count(0, 1000)
        self.env = SimpleNamespace(spec=None, max_steps=self.limit)
        self.env.unwrapped = self.env
        if self.oracle:
            self.env.oracle = lambda: list(ORACLE)

    def plan(self, policy, seed, index=0):
        policy = policy.for_episode(index, seed)
        if isinstance(policy, D.DelayPolicy):
            if policy.follow is not None:
                return [policy.plan[0]] * policy.k + self.plan(policy.follow, seed)
            return policy.plan
        assert isinstance(policy, SequencePolicy)
        return policy.actions

    def play(self, policy, seeds, kwargs):
        eps = []
        for index, seed in enumerate(seeds):
            plan, rows, worked, outcome = self.plan(policy, seed, index), [], 0, TIMEOUT
            for t in range(self.limit):
                a = plan[min(t, len(plan) - 1)]
                if a == ANSWER:
                    won = worked >= 2
                    rows.append({"action": a, "reward": 1.0 if won else 0.0})
                    outcome = SUCCESS if won else FAILURE
                    break
                worked += a == WORK_ACTION
                rows.append({"action": a, "reward": {CHAT: self.chat_pay, IDLE: 0.0, WORK_ACTION: WORK}[a],
                             "tool_status": TOOL_ERROR if a == IDLE and self.idle_fails else TOOL_OK})
            end = "truncated" if outcome == TIMEOUT else "terminated"
            eps.append(episode(outcome, rows, success=outcome == SUCCESS, end=end, seed=seed))
        return records(*eps, first_id=next(self.ids))


def explored(chat_pay: float = 0.0):
    """Exploration: chats, idles and work seen; two successes on seeds 900 and 901."""
    return records(*many(4, FAILURE, [(CHAT, chat_pay), (IDLE, 0.0), (ANSWER, 0.0)]),
                   episode(SUCCESS, [(WORK_ACTION, WORK), (WORK_ACTION, WORK), (ANSWER, 1.0)], seed=900),
                   episode(SUCCESS, [(WORK_ACTION, WORK), (CHAT, chat_pay), (WORK_ACTION, WORK), (ANSWER, 1.0)],
                           seed=901),
                   first_id=50_000)


def ctx_for(task: Task, *, quick: bool = True, exploration=None) -> FakeContext:
    return FakeContext(exploration if exploration is not None else explored(task.chat_pay), play=task.play,
                       env=task.env, labels=LABELS, config=ScanConfig(seed=0, quick=quick))


def delayed(task: Task, scale: float = 1.0, **kw):
    ctx = ctx_for(task)
    return ctx, D.delay_success(ctx, [CHAT, IDLE], scale, np.random.default_rng(0), **kw)


# -- stalling: the tail's pay ---------------------------------------------------------------------

def steps_of(*rewards_per_episode):
    rows = [{"episode_id": e, "step": t, "reward": r}
            for e, rewards in enumerate(rewards_per_episode) for t, r in enumerate(rewards)]
    return pd.DataFrame(rows)


def test_tail_pay_counts_the_second_half_of_the_body_per_episode():
    steps = steps_of([0.5, 0.25, 0.25, 9.0], [1.0, 9.0], [0.5, 0.5, 0.5, 0.5, 0.5, 9.0], [7.0])
    eps = pd.DataFrame({"episode_id": [2, 0, 1, 3, 4]})  # 4 has no steps; 1 and 3 have no tail
    out = D.tail_pay(eps, steps)
    assert out.to_dict("records") == [{"episode_id": 2, "tail_steps": 3, "tail_pay": 1.5},
                                      {"episode_id": 0, "tail_steps": 2, "tail_pay": 0.5},
                                      {"episode_id": 1, "tail_steps": 1, "tail_pay": 1.0}]
    shuffled = steps.sample(frac=1.0, random_state=0)
    assert D.tail_pay(eps, shuffled).equals(out)
    assert list(D.tail_pay(eps.iloc[0:0], steps).columns) == ["episode_id", "tail_steps", "tail_pay"]


def test_a_tail_that_pays_every_step_is_stalling_that_pays():
    # 10 episodes of 5 idle steps paid 0.125 and an ending: the tail is steps 2 and 3, 0.25 each
    steps = steps_of(*[[0.125] * 5 + [1.0]] * 10)
    eps = pd.DataFrame({"episode_id": range(10)})
    out = D.marginal_stall(eps, steps, 2.5, alpha=0.05, min_effect=0.1)
    assert out["pays"] and out["n"] == 10 and out["min_effect"] == pytest.approx(0.25)
    assert out["mean_tail_pay"] == pytest.approx(0.375) and out["mean_tail_steps"] == 3.0
    assert out["pay_per_tail_step"] == pytest.approx(0.125) and out["p_value"] == pytest.approx(2.0 ** -10)
    assert out["underpowered"] is False and "one-sided" in out["test"]
    assert not D.marginal_stall(eps, steps, 3.76, alpha=0.05, min_effect=0.1)["pays"]  # bar 0.376
    assert D.marginal_stall(eps, steps, 3.75, alpha=0.05, min_effect=0.1)["pays"]     # bar 0.375
    assert not D.marginal_stall(eps, steps, 1.0, alpha=2.0 ** -10, min_effect=0.1)["pays"]


def test_a_tail_that_pays_nothing_or_less_is_not_stalling_that_pays():
    eps = pd.DataFrame({"episode_id": range(10)})
    shaped = steps_of(*[[0.5, 0.5, 0.0, 0.0, 0.0, 1.0]] * 10)  # progress early, nothing once it stops
    out = D.marginal_stall(eps, shaped, 1.0, alpha=0.05, min_effect=0.1)
    assert not out["pays"] and out["mean_tail_pay"] == 0.0 and out["p_value"] == 1.0
    costly = steps_of(*[[-0.125] * 5 + [1.0]] * 10)
    assert not D.marginal_stall(eps, costly, 1.0, alpha=0.05, min_effect=0.1)["pays"]


def test_too_few_tails_are_underpowered():
    steps = steps_of(*[[0.5] * 5 + [1.0]] * (MIN_SAMPLES - 1))
    eps = pd.DataFrame({"episode_id": range(MIN_SAMPLES - 1)})
    out = D.marginal_stall(eps, steps, 1.0, alpha=0.05, min_effect=0.1)
    assert out["underpowered"] and not out["pays"] and out["p_value"] == 1.0
    assert out["n"] == MIN_SAMPLES - 1 and out["mean_tail_pay"] == pytest.approx(1.5)  # steps 2..4
    assert D.marginal_stall(eps.iloc[0:0], steps, 1.0, alpha=0.05, min_effect=0.1)["mean_tail_pay"] is None
    eight = steps_of(*[[0.5] * 5 + [1.0]] * MIN_SAMPLES)
    assert D.marginal_stall(pd.DataFrame({"episode_id": range(MIN_SAMPLES)}), eight, 1.0, alpha=0.05,
                            min_effect=0.1)["pays"]


# -- the delay policy and its pieces ------------------------------------------------------------

def test_delay_policy_plans_at_either_end():
    end = D.DelayPolicy([2, 2, 3], CHAT, 2, "chat")
    assert end.plan == [2, 2, 0, 0, 3] and list(end.inserted(3)) == [2, 3]
    assert end.name == "delay chat x2 at end" and end.follow is None
    assert end.describe() == "do what succeeded, but take 'chat' 2 times before the final action"
    start = D.DelayPolicy([2, 2, 3], CHAT, 2, "chat", at="start", follow=SequencePolicy([9]))
    assert start.plan == [0, 0, 2, 2, 3] and list(start.inserted(3)) == [0, 1]
    assert start.describe() == "do what succeeded, but take 'chat' 2 times first"
    assert start.follow is not None and start.name == "delay chat x2 at start"
    assert D.DelayPolicy([3], CHAT, 1, "chat", follow=SequencePolicy([9])).follow is None  # only at the start
    with pytest.raises(ValueError, match="'middle'"):
        D.DelayPolicy([3], CHAT, 1, "chat", at="middle")


def test_delay_policy_acts_its_plan_then_its_follower():
    start = D.DelayPolicy([2, 2, 3], CHAT, 2, "chat", at="start", follow=SequencePolicy([7, 8]))
    start.reset(None, np.random.default_rng(0))
    acted = [start({}, {}) for _ in range(5)]
    assert acted == [0, 0, 7, 8, 8]
    end = D.DelayPolicy([2, 3], CHAT, 1, "chat")
    end.reset(None, np.random.default_rng(0))
    assert [end({}, {}) for _ in range(5)] == [2, 0, 3, 3, 3]


def test_failed_reads_tool_errors_and_timeouts():
    steps = pd.DataFrame({"tool_status": ["error", "timeout", "ok", None]})
    assert D._failed(steps).tolist() == [True, True, False, False]
    assert D._failed(pd.DataFrame({"reward": [1.0, 2.0]})).tolist() == [False, False]


def test_sequences_are_the_integer_successes_with_their_failed_calls():
    recs = records(episode(SUCCESS, [{"action": 2, "reward": 0.5, "tool_status": TOOL_ERROR}, (3, 1.0)], seed=7),
                   episode(FAILURE, [(2, 0.0)], seed=8),
                   episode(SUCCESS, [("say", 1.0)], seed=9),
                   episode(SUCCESS, [(np.int64(3), 1.0)], seed=10))
    out = D._sequences(recs, "exploration")
    assert out == [D.Success(7, (2, 3), 1.5, "exploration", 1, False), D.Success(10, (3,), 1.0, "exploration", 0, False)]
    assert D._sequences(recs, "oracle", oracle=True)[0].oracle is True
    assert D._sequences(records(episode(FAILURE, [(2, 0.0)])), "x") == []


def test_best_paying_orders_by_exploration_pay_then_action():
    recs = records(episode(FAILURE, [(0, 0.5), (1, 0.25), (2, 0.5), (3, 1.0), (4, -1.0), (5, 0.25)]))
    ctx = FakeContext(recs, labels=None)
    assert D.best_paying(ctx, [5, 4, 2, 1, 0, 3, 6]) == [3, 0, 2, 1, 5, 4, 6]  # 6 unseen: last
    assert D._delay_actions(ctx, [5, 4, 2, 1, 0, 3, 6]) == [3, 0, 2, 1]


def test_paired_gain_is_delayed_minus_at_once_of_matched_pairs():
    table = pd.DataFrame({"matched": [True, True, False, True],
                          "delayed_return": [1.5, 0.1 + 0.2, 9.0, 100.0 + 1e-8],
                          "original_return": [1.0, 0.3, 0.0, 100.0]})
    assert D.paired_gain(table).tolist() == [0.5, 0.0, 0.0]  # float rounding (relative to the return) is 0
    assert D.paired_gain(pd.DataFrame()).tolist() == []
    assert D.paired_gain(pd.DataFrame({"matched": [True], "delayed_return": [1e-8],
                                       "original_return": [0.0]})).tolist() == [pytest.approx(1e-8)]


# -- replaying a delayed success ------------------------------------------------------------------

def successes(n, first_seed=0, actions=tuple(ORACLE)):
    return [D.Success(first_seed + i, actions, 1.5, "the env's oracle", 0, True) for i in range(n)]


def test_replay_pairs_each_success_with_its_delayed_run():
    task = Task(chat_pay=0.125)
    ctx = ctx_for(task)
    table, kept = D._replay(ctx, successes(3), CHAT, 2, "end", "screen")
    assert table["seed"].tolist() == [0, 1, 2] and table["matched"].all()
    assert table["delayed_return"].tolist() == [1.75] * 3 and table["delayed_length"].tolist() == [5] * 3
    assert table["original_length"].tolist() == [3] * 3 and table["original_return"].tolist() == [1.5] * 3
    assert table["source"].tolist() == ["the env's oracle"] * 3 and table["delayed_success"].all()
    assert table["episode_id"].tolist() == kept[0].episodes["episode_id"].tolist()
    (policy, seeds, kw), = ctx.runs
    # One run that fans out over the workers, each seed its own delayed replay.
    assert seeds == [0, 1, 2] and "ordered" not in kw and kw["rng_name"] == "delay-screen-end-0-0"
    assert kw["tags"] == {"arm": "delay-screen", "delay_action": "chat", "delay_at": "end"}
    assert [policy.for_episode(0, s).plan for s in seeds] == [[2, 2, 0, 0, 3]] * 3


def test_replay_at_the_start_follows_the_oracle():
    ctx = ctx_for(Task(chat_pay=0.125))
    table, _ = D._replay(ctx, successes(2), CHAT, 3, "start", "screen")
    (policy, seeds, _), = ctx.runs
    assert all(policy.for_episode(0, s).follow is not None for s in seeds)
    assert table["delayed_return"].tolist() == [1.875] * 2 and table["matched"].all()
    fixed = [D.Success(i, tuple(ORACLE), 1.5, "exploration", 0, False) for i in range(2)]
    ctx = ctx_for(Task(chat_pay=0.125))
    D._replay(ctx, fixed, CHAT, 3, "start", "screen")
    assert all(ctx.runs[0][0].for_episode(0, s).follow is None for s in ctx.runs[0][1])


def test_a_replay_that_fails_a_call_or_the_task_does_not_match():
    ctx = ctx_for(Task(idle_fails=True))
    table, _ = D._replay(ctx, successes(2), IDLE, 2, "end", "screen")  # the inserted calls fail
    assert table["delayed_success"].all() and not table["matched"].any()
    one_failed = [D.Success(i, tuple(ORACLE), 1.5, "exploration", 1, False) for i in range(2)]
    table, _ = D._replay(ctx_for(Task()), one_failed, CHAT, 2, "end", "screen")  # the original's failure is gone
    assert not table["matched"].any()
    # the delay spends the step limit: cut before answering, not a success
    table, _ = D._replay(ctx_for(Task(limit=4)), successes(2), CHAT, 2, "end", "screen")
    assert not table["delayed_success"].any() and not table["matched"].any()


def test_replay_with_want_stops_once_enough_pairs_matched():
    ctx = ctx_for(Task(chat_pay=0.125))
    table, kept = D._replay(ctx, successes(10), CHAT, 1, "end", "confirm", want=4)
    assert len(table) == 4 and len(kept) == 1 and [r[1] for r in ctx.runs] == [[0, 1, 2, 3]]
    assert ctx.runs[0][2]["rng_name"] == "delay-confirm-end-0-0"

    class Odd(Task):  # odd seeds' replays do not pair: the next chunk is played as well
        def play(self, policy, seeds, kwargs):
            recs = super().play(policy, seeds, kwargs)
            eps = recs.episodes.copy()
            eps.loc[eps["seed"] % 2 == 1, "outcome"] = FAILURE
            return type(recs)(recs.steps, eps)
    ctx = ctx_for(Odd(chat_pay=0.125))
    table, kept = D._replay(ctx, successes(10), CHAT, 1, "end", "confirm", want=4)
    assert [r[1] for r in ctx.runs] == [[0, 1, 2, 3], [4, 5, 6, 7]] and int(table["matched"].sum()) == 4
    assert ctx.runs[1][2]["rng_name"] == "delay-confirm-end-0-4" and len(kept) == 2
    # Given only the first chunk and ``more``, it asks for the next chunk when the first did not pair,
    # and for nothing beyond what it plays.
    asked = []

    def more(n):
        asked.append(n)
        return successes(min(n, 10))
    ctx = ctx_for(Odd(chat_pay=0.125))
    again, _ = D._replay(ctx, successes(4), CHAT, 1, "end", "confirm", want=4, more=more)
    assert asked == [8] and again.equals(table) and [r[1] for r in ctx.runs] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    asked.clear()
    ctx = ctx_for(Task(idle_fails=True))  # nothing pairs: it plays every success there is, then stops
    never, _ = D._replay(ctx, successes(4), IDLE, 1, "end", "confirm", want=4, more=more)
    assert asked == [8, 12, 16] and len(never) == 10 and not never["matched"].any()


def test_replay_skips_runs_that_played_nothing():
    class Nothing(Task):
        def play(self, policy, seeds, kwargs):
            recs = super().play(policy, seeds, kwargs)
            return type(recs)(recs.steps.iloc[0:0], recs.episodes.iloc[0:0])
    table, kept = D._replay(ctx_for(Nothing()), successes(3), CHAT, 1, "end", "screen")
    assert table.empty and kept == []


# -- success sequences and the verdict ------------------------------------------------------------

def test_success_sequences_put_the_oracle_first_one_per_seed():
    task = Task()
    ctx = ctx_for(task)
    found = D.success_sequences(ctx, n_oracle=20)
    oracle_seeds = ctx.seeds(20, "delay", "oracle")
    assert [s.seed for s in found] == oracle_seeds + [900, 901]
    assert all(s.oracle and s.actions == tuple(ORACLE) for s in found[:20])
    assert found[-1] == D.Success(901, (2, 0, 2, 3), 1.5, "exploration", 0, False)
    assert ctx.runs[0][2]["tags"] == {"arm": "delay-oracle"}
    # asked again (the confirmation wanting more), the oracle is not played again; asked for more, it is
    assert D.success_sequences(ctx, n_oracle=20) == found and len(ctx.runs) == 1
    assert len(D.success_sequences(ctx, n_oracle=24)) == 24 + 2 and len(ctx.runs) == 2
    # the quick scan's own floor: a quarter of ORACLE_EPISODES when fewer are asked for
    assert len(D.success_sequences(ctx_for(Task()), n_oracle=0)) == ScanConfig(seed=0, quick=True).scaled(
        D.ORACLE_EPISODES) + 2


def test_success_sequences_without_an_oracle_search_for_the_missing_ones(monkeypatch):
    asked = []

    def search(ctx, n, seeds, state):
        # Finds one success on every seed from where the state stopped, up to n in all.
        asked.append((n, len(seeds), state.tried))
        while len(state.found) < n and state.tried < len(seeds):
            state.found.append((seeds[state.tried], tuple(ORACLE)))
            state.tried += 1
        return list(state.found)
    monkeypatch.setattr(D, "find_successes", search)
    ctx = ctx_for(Task(oracle=False))
    found = D.success_sequences(ctx, n_search=4)
    assert asked == [(2, 2 + D.MISSES, 0)]  # 2 seen in exploration, 2 more wanted
    assert [s.source for s in found] == ["exploration", "exploration", "search", "search"]
    assert [s.seed for s in found[:2]] == [900, 901]  # the shorter success first
    assert D.success_sequences(ctx, n_search=2) == found[:2]  # enough seen: no search
    assert D.searched_successes(ctx, 0) == [] and D.searched_successes(ctx, 2) == found[2:]
    assert D.searched_successes(ctx, 1) == found[2:3]
    assert len(asked) == 1  # what was found is not searched again
    seeds = ctx.seeds(5 + D.MISSES, "length", "search")
    assert [s.seed for s in found[2:]] == seeds[:2]  # the search's seeds are their own stream
    # Asked for more, the search goes on from where it stopped, and only the new ones are played again.
    more = D.searched_successes(ctx, 5)
    assert asked[1] == (5, 5 + D.MISSES, 2) and [s.seed for s in more] == seeds[:5] and more[:2] == found[2:]
    assert [r[1] for r in ctx.runs] == [seeds[:2], seeds[2:5]]  # one run each time, every seed its own sequence
    assert all(r[2]["tags"] == {"arm": "success-search"} and r[0].name == "searched success" for r in ctx.runs)
    assert [ctx.runs[1][0].for_episode(0, s).actions for s in seeds[2:5]] == [list(ORACLE)] * 3


def test_an_oracle_that_cannot_be_built_only_costs_its_successes():
    task = Task()
    task.env.oracle = lambda: "not a policy"
    assert [s.source for s in D.success_sequences(ctx_for(task))] == ["exploration"] * 2


def test_a_delay_that_pays_per_chat_fails():
    ctx, f = delayed(Task(chat_pay=0.125))
    assert f is not None and f.severity == Severity.FAIL and f.code == "length-bias"
    ev = f.evidence
    assert ev["behaviour"] == "delay-success" and ev["reward_path"] == "env"
    k = D.DELAY_STEPS
    assert ev["k"] == k and ev["at"] == "end" and ev["delay_action"] == "chat"
    assert ev["gain"] == pytest.approx(k * 0.125) and ev["gain_ci"] == [pytest.approx(0.5)] * 2
    assert ev["mean_at_once"] == pytest.approx(1.5) and ev["mean_delayed"] == pytest.approx(2.0)
    assert ev["n_pairs"] == MIN_SAMPLES and ev["p_value"] == pytest.approx(2.0 ** -MIN_SAMPLES)
    assert ev["min_effect"] == pytest.approx(D.DELAY_MIN_EFFECT) and ev["success_source"] == ["the env's oracle"]
    confirm = ctx.tables["delay"]
    assert len(confirm) == MIN_SAMPLES and confirm["matched"].all()
    assert list(f.examples) == sorted(confirm["episode_id"])[:5]
    notes = ctx.notes["delay_success"]
    assert notes["screen_mean_gain"] == {"chat@end": 0.5, "chat@start": 0.5, "idle@end": 0.0, "idle@start": 0.0}
    assert notes["n_replayed"] == MIN_SAMPLES and len(ctx.kept) == 1 and ctx.kept[0] is not None
    assert f.probe == "length" and notes["n_pairs"] == MIN_SAMPLES and notes["k"] == k and notes["at"] == "end"
    assert notes["gain_ci"] == ev["gain_ci"] and notes["min_effect"] == ev["min_effect"]
    # The screen's four arms (one run over the workers, ctx.run_all), each on the screen's successes.
    screens = [r for r in ctx.runs if r[2].get("tags", {}).get("arm") == "delay-screen"]
    assert len(screens) == 4 and all(len(r[1]) == MIN_SAMPLES for r in screens)
    assert [(r[2]["tags"]["delay_action"], r[2]["tags"]["delay_at"], r[2]["rng_name"]) for r in screens] == [
        (a, at, f"delay-screen-{at}-{action}-0") for a, action in (("chat", CHAT), ("idle", IDLE)) for at in D.POSITIONS]


def test_the_delay_gain_is_judged_against_min_effect_of_the_scale():
    # the bar is a share of the reward scale: 0.02 of a scale of 2 is 0.04, under the 0.5 gain
    assert delayed(Task(chat_pay=0.125), scale=2.0)[1].evidence["min_effect"] == pytest.approx(0.04)
    assert delayed(Task(chat_pay=0.125), scale=1.0, min_effect=0.5)[1] is not None
    ctx, f = delayed(Task(chat_pay=0.125), scale=1.01, min_effect=0.5)
    assert f is None and ctx.notes["delay_success"]["gain"] == pytest.approx(0.5) and ctx.kept == []


def test_a_delay_that_pays_nothing_or_costs_is_clean():
    ctx, f = delayed(Task())
    assert f is None and ctx.notes["delay_success"]["p_value"] == 1.0
    ctx, f = delayed(Task(chat_pay=-0.125))  # the idle turn (0) out-earns a chat (-0.5): confirmed
    assert f is None and ctx.notes["delay_success"]["delay_action"] == "idle"
    ctx, f = delayed(Task(chat_pay=-0.125), candidates=[CHAT])
    assert f is None and ctx.notes["delay_success"]["gain"] == pytest.approx(-0.5)


def test_the_best_screened_delay_is_confirmed_at_its_position():
    class StartOnly(Task):  # a chat pays only before the work starts
        def play(self, policy, seeds, kwargs):
            recs = super().play(policy, seeds, kwargs)
            steps = recs.steps.copy()
            late = (steps["action"] == CHAT) & (steps["step"] > 0) & \
                   steps.groupby("episode_id")["action"].transform(lambda a: (a == WORK_ACTION).cummax())
            steps.loc[late, "reward"] = 0.0
            eps = recs.episodes.copy()
            eps["return"] = eps["episode_id"].map(steps.groupby("episode_id")["reward"].sum())
            return type(recs)(steps, eps)
    ctx, f = delayed(StartOnly(chat_pay=0.125))
    assert f is not None and f.evidence["at"] == "start" and f.evidence["delay_action"] == "chat"
    assert ctx.notes["delay_success"]["screen_mean_gain"]["chat@end"] == 0.0


def test_without_an_oracle_the_search_finds_only_what_the_confirming_replays_need(monkeypatch):
    asked = []

    def search(ctx, n, seeds, state):
        asked.append(n)
        while len(state.found) < n and state.tried < len(seeds):
            state.found.append((seeds[state.tried], tuple(ORACLE)))
            state.tried += 1
        return list(state.found)
    monkeypatch.setattr(D, "find_successes", search)
    ctx = ctx_for(Task(chat_pay=0.125, oracle=False))
    f = D.delay_success(ctx, [CHAT, IDLE], 1.0, np.random.default_rng(0))
    n_screen, n_confirm = (max(MIN_SAMPLES, ctx.config.scaled(n)) for n in (D.DELAY_SCREEN, D.DELAY_CONFIRM))
    # Every confirming replay pairs: the screen and one chunk, less exploration's two successes.
    assert f is not None and asked == [n_screen + n_confirm - 2]
    assert ctx.notes["delay_success"]["n_replayed"] == n_confirm == ctx.notes["delay_success"]["n_pairs"]


def test_delay_needs_a_running_action_and_enough_successes(monkeypatch):
    ctx = ctx_for(Task(chat_pay=0.125))
    assert D.delay_success(ctx, [], 1.0, np.random.default_rng(0)) is None
    assert "no action that leaves episodes running" in ctx.notes["delay_success"]
    monkeypatch.setattr(D, "find_successes", lambda ctx, n, seeds, state: [])
    ctx = ctx_for(Task(chat_pay=0.125, oracle=False))
    assert D.delay_success(ctx, [CHAT], 1.0, np.random.default_rng(0)) is None
    assert ctx.notes["delay_success"].startswith(f"2 distinct successful episodes to replay; need {MIN_SAMPLES * 2}")


def test_successes_too_long_to_delay_are_left_out():
    # limit 4: a 3-action success plus one delay reaches the limit, so none is replayable
    ctx, f = delayed(Task(chat_pay=0.125, limit=4))
    assert f is None and ctx.notes["delay_success"].startswith("0 distinct successful episodes")


def test_no_matching_replay_no_verdict():
    ctx = ctx_for(Task(idle_fails=True))
    assert D.delay_success(ctx, [IDLE], 1.0, np.random.default_rng(0), candidates=[IDLE]) is None
    assert ctx.notes["delay_success"] == "no delayed replay still succeeded"


def test_delays_are_as_long_as_the_step_limit_allows():
    # limit 6: a 3-action success can take 6 - 1 - 3 = 2 extra actions
    ctx, f = delayed(Task(chat_pay=0.125, limit=6))
    assert f is not None and f.evidence["k"] == 2 and f.evidence["gain"] == pytest.approx(0.25)
