"""The length probe's search for successes (``probes/length_search.py``) on a toy lock of known design.

``Lock``: actions ``1`` then ``2`` open it (progress 0 -> 1 -> 2), action ``3`` answers (success
when open, else an outright failure), action ``0`` waits. The observation is ``[progress, clock]``
with the clock counting steps, so without the clock mask no cell would ever repeat. On seeds in
``flaky`` the first press of ``1`` fails (tool status ``error``, no progress) and must be retried.
The shortest success is therefore ``(1, 2, 3)`` (``(1, 1, 2, 3)`` on a flaky seed), and every
expected number below follows from that.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from envaudit.probes.length import search as L
from envaudit.probes.length.search_runs import follow_seeds
from tests.fixtures.context import explore

ACTIONS = [0, 1, 2, 3]


class Lock(gym.Env):
    def __init__(self, flaky=(), limit=8, start=0, code=(1, 2), raise_on=None, jammed=()):
        self.action_space = gym.spaces.Discrete(4, start=start)
        self.flaky, self.limit, self.start, self.code, self.raise_on = set(flaky), limit, start, code, raise_on
        self.jammed = set(jammed)  # seeds whose lock never opens
        self.resets = self.steps = 0
        self.closed = False

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        self.seed_, self.progress, self.t, self.failed_once = seed, 0, 0, False
        return self._obs(), {}

    def _obs(self):
        return np.array([self.progress, self.t], np.float32)

    def step(self, action):
        self.steps += 1
        if self.raise_on is not None and self.seed_ == self.raise_on:
            raise RuntimeError("the tool server is down")
        a = int(action) - self.start
        self.t += 1
        status = "ok"
        if a == 3:
            won = self.progress == len(self.code)
            return self._obs(), float(won), True, False, {"success": won}
        if self.progress < len(self.code) and a == self.code[self.progress] and self.seed_ not in self.jammed:
            if a == 1 and self.seed_ in self.flaky and not self.failed_once:
                self.failed_once, status = True, "error"
            else:
                self.progress += 1
        return self._obs(), 0.0, False, self.t >= self.limit, {"tool": {"name": f"t{a}", "status": status}}

    def close(self):
        self.closed = True


def replays(seq, env, seed):
    env.reset(seed=seed)
    for a in seq:
        *_, terminated, _, info = env.step(a)
    return terminated and info["success"] is True


# -- cells ---------------------------------------------------------------------------------------

def test_clock_mask_marks_what_changed_on_every_step():
    parent = np.array([0.0, 1.0, 5.0])
    assert L.clock_mask(parent, [np.array([0.0, 2.0, 6.0]), np.array([1.0, 2.0, 6.0])]).tolist() == [False, True, True]
    assert L.clock_mask(parent, [np.array([0.0, 1.0, 6.0]), np.array([1.0, 2.0, 6.0])]).tolist() == [False, False, True]
    assert L.clock_mask(parent, []) is None
    assert L.clock_mask([0.0, 1.0], [np.array([0.0, 2.0])]) is None  # not an array observation
    assert L.clock_mask(parent, [np.array([0.0, 2.0])]) is None       # shapes differ


def test_key_drops_the_clock_and_rounds():
    clock = np.array([False, True])
    assert L._key(np.array([1.0, 7.0]), clock) == L._key(np.array([1.0, 9.0]), clock)
    assert L._key(np.array([1.0, 7.0]), clock) != L._key(np.array([2.0, 7.0]), clock)
    assert L._key(np.array([1.0, 7.0]), None) != L._key(np.array([1.0, 9.0]), None)
    assert L._key(np.array([1.0, 7.0]), np.array([True])) != L._key(np.array([1.0, 9.0]), np.array([True]))
    assert L._key(np.array([1.0000001]), None) == L._key(np.array([1.0]), None)
    assert L._key(np.array([1.00001]), None) != L._key(np.array([1.0]), None)
    assert L._key({"a": 1}, clock) == repr({"a": 1})


def test_skeleton_keeps_the_working_calls_before_the_final_action():
    assert L.skeleton_of([1, 1, 2, 3], ["error", "ok", "ok", None]) == [1, 2]
    assert L.skeleton_of([1, 0, 2, 3], ["ok", "timeout", None, "error"]) == [1, 2]
    assert L.skeleton_of([3], ["ok"]) == []


# -- breadth-first search ------------------------------------------------------------------------

def test_bfs_finds_the_shortest_success():
    env = Lock()
    assert L.bfs(env, 0, ACTIONS, budget=10_000) == (1, 2, 3)
    assert L.bfs(Lock(flaky={5}), 5, ACTIONS, budget=10_000) == (1, 1, 2, 3)
    assert L.bfs(Lock(code=()), 0, ACTIONS, budget=10_000) == (3,)          # the first layer
    assert L.bfs(Lock(code=(1,)), 0, ACTIONS, budget=10_000) == (1, 3)      # the second


def test_bfs_counts_its_work_in_replayed_steps():
    env = Lock()
    box = L._Env(env, 0)
    assert box.used == 0 and env.resets == 1
    e = box.from_state((1, 2))
    assert box.used == 2 and env.progress == 2
    box.step(e, 0)
    assert box.used == 3
    won, children = L._read((1,), L._EnvExpander(Lock(), 0)([(1,)], ACTIONS)[0], ACTIONS)
    assert won is None and [p for p, _ in children] == [(1, 0), (1, 1), (1, 2)]  # 3 failed the task: no child
    expand = L._EnvExpander(Lock(), 0)
    [tried] = expand([(1, 2)], ACTIONS)
    won, children = L._read((1, 2), tried, ACTIONS)
    assert won == (1, 2, 3) and [p for p, _ in children] == [(1, 2, 0), (1, 2, 1), (1, 2, 2)]
    assert [t[3] for t in tried] == [False, False, False, True] and expand.used == 4 * 3


class Batches(L._EnvExpander):
    """Records the size of each batch of cells it is asked to expand."""

    def __init__(self, env, seed):
        super().__init__(env, seed)
        self.batches = []

    def __call__(self, prefixes, actions):
        self.batches.append(len(prefixes))
        return super().__call__(prefixes, actions)


@pytest.mark.parametrize("lock, seed", [(Lock(), 0), (Lock(flaky={5}), 5), (Lock(code=(1, 2, 1)), 0),
                                        (Lock(code=(9,)), 0), (Lock(code=(2, 2, 1, 2)), 3)])
@pytest.mark.parametrize("budget", [12, 40, 72, 71, 500, 20_000])
def test_a_batch_of_cells_finds_what_one_cell_at_a_time_finds_within_the_same_budget(lock, seed, budget):
    one = L.breadth_first(L._EnvExpander(lock, seed), ACTIONS, budget)
    for batch in (2, 5, 64):
        expand = Batches(lock, seed)
        assert L.breadth_first(expand, ACTIONS, budget, batch=batch) == one
        assert max(expand.batches) <= batch and expand.batches[:2] == [1, 1]  # the root, then its first child
        assert budget < 40 or max(expand.batches) > 1  # past the first layers the cells went in batches


def test_bfs_gives_up_within_its_budget():
    # The lock's first layer and one expansion take 4 + 4 * 2 = 12 steps; the success needs more
    assert L.bfs(Lock(), 0, ACTIONS, budget=12) is None
    env = Lock()
    assert L.bfs(env, 0, ACTIONS, budget=40) is None and env.steps <= 40 + 3 * len(ACTIONS)
    assert L.bfs(Lock(), 0, ACTIONS, budget=200) == (1, 2, 3)


def test_bfs_spends_exactly_its_budget():
    # The winning cell (1, 2) is expanded after 60 steps of work and costs 12 more (72 in all)
    env = Lock()
    assert L.bfs(env, 0, ACTIONS, budget=10_000) == (1, 2, 3) and env.steps == 72
    assert L.bfs(Lock(), 0, ACTIONS, budget=60) is None
    assert L.bfs(Lock(), 0, ACTIONS, budget=61) == (1, 2, 3)


def test_bfs_keeps_a_few_states_per_cell():
    # Unopenable (the code needs an action that does not exist): every state is progress 0, one cell.
    # Without the clock mask every step would be a new cell and the search would run its budget out.
    # Steps: the first layer (4), one cell expanded to read the clock (4 x 2), then the first layer's
    # cells kept beside the reset state (VISITS - 1 = 2 of 3) expanded, 8 steps each: 28 in all.
    env = Lock(code=(9,), limit=50)
    assert L.bfs(env, 0, ACTIONS, budget=100_000) is None
    assert L.VISITS == 3 and env.steps == 4 + 8 + 2 * 8


def test_bfs_stops_when_nothing_runs_on():
    assert L.bfs(Lock(limit=1), 0, ACTIONS, budget=10_000) is None


# -- following a known success -------------------------------------------------------------------

def test_follow_retries_failed_calls_of_the_skeleton():
    ctx = search_ctx(Lock(flaky={4}))
    assert follow_seeds(ctx, [4, 3], [1, 2], ACTIONS, budget=1000) == [(1, 1, 2, 3), (1, 2, 3)]
    assert replays((1, 1, 2, 3), Lock(flaky={4}), 4)
    assert follow_seeds(ctx, [4, 5], [], [0, 3], budget=1000) == [None, None]  # an empty skeleton: the last action alone
    assert follow_seeds(search_ctx(Lock(code=())), [1], [], ACTIONS, budget=1000) == [(3,)]


def test_follow_fails_when_the_skeleton_ends_or_runs_out():
    ctx = search_ctx(Lock())
    assert follow_seeds(ctx, [0], [1, 3, 2], ACTIONS, budget=1000) == [None]   # the skeleton answers early
    assert follow_seeds(search_ctx(Lock(limit=2)), [0], [1, 2, 0], ACTIONS, budget=1000) == [None]  # the step limit
    assert follow_seeds(ctx, [0], [2, 1], ACTIONS, budget=1000) == [None]      # no last action succeeds
    assert follow_seeds(ctx, [0], [1, 2], ACTIONS, budget=1) == [None]          # budget spent mid-skeleton
    assert follow_seeds(ctx, [0, 1], [1, 2], ACTIONS, budget=2) == [(1, 2, 3), (1, 2, 3)]


# -- the search over seeds -----------------------------------------------------------------------

def search_ctx(env, **kw):
    """A real probe context on locks like ``env`` (its runs play through the runner, one env
    instance per run); ``ctx.search_steps()`` counts the steps played after exploration."""
    made = []

    def make_env():
        lock = Lock(flaky=env.flaky, limit=env.limit, start=env.start, code=env.code, raise_on=env.raise_on,
                    jammed=env.jammed)
        made.append(lock)
        return lock
    ctx = explore(make_env, probe="length", episodes=4, group_size=2, step_timeout_s=5.0, **kw)
    explored = sum(lock.steps for lock in made)
    ctx.search_steps = lambda: sum(lock.steps for lock in made) - explored
    return ctx


def test_find_successes_searches_once_then_follows():
    ctx = search_ctx(Lock(flaky={2}))
    found = L.find_successes(ctx, 3, [0, 1, 2, 3])
    assert found == [(0, (1, 2, 3)), (1, (1, 2, 3)), (2, (1, 1, 2, 3))]
    assert all(isinstance(a, int) for _, seq in found for a in seq)


def test_find_successes_follows_the_first_success_instead_of_searching_again():
    # seed 0 searched (72 steps: the root's 4 actions, its first child's 4 x 2, then batches of 3
    # cells, 3 x 4 x 2 and 3 x 4 x 3, the last holding (1, 2) whose action 3 wins), its skeleton
    # replayed (3), then seeds 1 and 2 followed at once: the skeleton (2 steps each) and each action
    # as the last one from it (4 x 3 each): 14 steps a seed
    ctx = search_ctx(Lock())
    assert L.find_successes(ctx, 3, [0, 1, 2]) == [(0, (1, 2, 3)), (1, (1, 2, 3)), (2, (1, 2, 3))]
    assert ctx.search_steps() == 72 + 3 + 2 * 14


def test_a_success_resets_the_count_of_misses():
    # seeds 1 and 2 never open: two misses, then seed 3 succeeds (MISSES = 3 in a row would stop)
    ctx = search_ctx(Lock(jammed={1, 2}))
    assert L.find_successes(ctx, 2, [0, 1, 2, 3]) == [(0, (1, 2, 3)), (3, (1, 2, 3))]


def test_find_successes_learns_the_skeleton_of_a_flaky_first_success():
    ctx = search_ctx(Lock(flaky={0}))
    assert L.find_successes(ctx, 2, [0, 1]) == [(0, (1, 1, 2, 3)), (1, (1, 2, 3))]


def test_find_successes_uses_the_space_start():
    ctx = search_ctx(Lock(start=10))
    assert L.find_successes(ctx, 1, [0]) == [(0, (11, 12, 13))]


def test_find_successes_stops_after_misses_in_a_row():
    tried = []
    ctx = search_ctx(Lock(code=(9,)))
    ctx.shared.executor = None
    original = ctx.run

    def run(policy, seeds, **kw):
        tried.extend(seeds)
        return original(policy, seeds, **kw)
    ctx.run = run
    assert L.find_successes(ctx, 5, list(range(10))) == []
    assert set(tried) == set(range(L.MISSES))  # exactly MISSES seeds are searched


def test_find_successes_on_a_thread_pool_finds_what_it_finds_in_order():
    from envaudit.execution import ThreadExecutor

    alone = search_ctx(Lock(flaky={2}, jammed={4}))
    ctx = search_ctx(Lock(flaky={2}, jammed={4}))
    ctx.shared.executor = ThreadExecutor(4)
    try:
        found = L.find_successes(ctx, 4, list(range(8)))
    finally:
        ctx.shared.executor.close()
    assert found == L.find_successes(alone, 4, list(range(8))) == [
        (0, (1, 2, 3)), (1, (1, 2, 3)), (2, (1, 1, 2, 3)), (3, (1, 2, 3))]
    assert ctx.search_steps() == alone.search_steps()


def test_find_successes_stops_at_the_safety_cap_and_on_hangs():
    ctx = search_ctx(Lock(), budget_s=0.0)
    assert L.find_successes(ctx, 2, [0, 1]) == [] and ctx.search_steps() == 0
    assert any(gap["skipped"] == "the search for successes" for gap in ctx.skipped)
    ctx = search_ctx(Lock())
    ctx.shared.hangs.append(object())
    assert L.find_successes(ctx, 2, [0, 1]) == [] and ctx.search_steps() == 0


def test_find_successes_notes_an_env_that_raises():
    ctx = search_ctx(Lock(raise_on=1))
    assert L.find_successes(ctx, 3, [0, 1, 2]) == [(0, (1, 2, 3))]
    assert ctx.notes["success_search"] == ("stopped at seed 1: the env raised RuntimeError: the tool server is "
                                           "down (1 successes found before)")


def test_find_successes_stops_at_n():
    ctx = search_ctx(Lock())
    assert [s for s, _ in L.find_successes(ctx, 2, [5, 6, 7])] == [5, 6]
    assert L.find_successes(search_ctx(Lock()), 0, [5, 6]) == []


@pytest.mark.parametrize("seed", [0, 3])
def test_every_found_success_replays(seed):
    env = Lock(flaky={3})
    seq = L.bfs(env, seed, ACTIONS, budget=10_000)
    assert replays(seq, Lock(flaky={3}), seed)


def test_a_search_asked_for_more_goes_on_from_where_it_stopped():
    # The same successes as one search for three; the second call searches no seed twice and
    # follows the skeleton the first call learned (14 steps a seed), not searching afresh (72).
    state = L.SearchState()
    ctx = search_ctx(Lock(jammed={1}))
    assert L.find_successes(ctx, 1, [0, 1, 2, 3, 4], state) == [(0, (1, 2, 3))]
    assert (state.tried, state.misses, state.skeleton) == (1, 0, [1, 2])
    first = ctx.search_steps()
    assert first == 72 + 3
    assert L.find_successes(ctx, 3, [0, 1, 2, 3, 4], state) == [(0, (1, 2, 3)), (2, (1, 2, 3)), (3, (1, 2, 3))]
    assert (state.tried, state.misses) == (4, 0)
    alone = search_ctx(Lock(jammed={1}))
    assert L.find_successes(alone, 3, [0, 1, 2, 3, 4]) == state.found
    # Seed 0's search and skeleton are paid once: the two calls together cost what one search does.
    assert ctx.search_steps() == alone.search_steps()
    # Nothing left to do: nothing is played.
    spent = ctx.search_steps()
    assert L.find_successes(ctx, 3, [0, 1, 2, 3, 4], state) == state.found
    done = L.SearchState(tried=5)
    assert L.find_successes(ctx, 9, [0, 1, 2, 3, 4], done) == []
    out = L.SearchState(misses=L.MISSES)
    assert L.find_successes(ctx, 9, [0, 1, 2, 3, 4], out) == [] and ctx.search_steps() == spent


@pytest.mark.parametrize("kind, raised, says", [
    ("exception", True, "the env raised boom"), ("reset_exception", True, "the env raised boom"),
    ("crash", True, "the env's process died: boom"), ("memory", True, "the env's process died: boom"),
    ("hang", False, "the env hung")])
def test_a_search_run_that_cannot_be_read_whole_stops_the_search(kind, raised, says):
    from envaudit.probes.length.search_runs import Stopped, _checked
    from envaudit.recording import Recorder
    from envaudit.rollout import Problem, RunResult

    result = RunResult(Recorder().records(), [Problem(kind, "step", "boom", 3)], episode_ids=[0, 1], finished=1)
    with pytest.raises(Stopped, match=says) as stop:
        _checked(result, 2)
    assert stop.value.raised is raised
    whole = RunResult(Recorder().records(), [], episode_ids=[0, 1], finished=2)
    assert _checked(whole, 2) is whole
    with pytest.raises(Stopped, match="the scan's cap was reached") as stop:
        _checked(RunResult(Recorder().records(), [], finished=1), 2)
    assert not stop.value.raised


def test_the_run_expander_counts_its_steps_and_reads_every_action_of_every_cell():
    from envaudit.probes.length.search_runs import RunExpander

    expand = RunExpander(search_ctx(Lock(limit=3)), 0)
    root, one, two = expand([(), (1,), (1, 2)], ACTIONS)
    assert expand.used == 4 * 1 + 4 * 2 + 4 * 3 and expand.reset_obs.tolist() == [0, 0]
    assert [len(t) for t in (root, one, two)] == [4, 4, 4]
    # action 3 answers: terminated, a success only once the lock is open; the third step hits the limit
    assert [t[1:] for t in root] == [(False, False, False)] * 3 + [(True, False, False)]
    assert two[3][1:] == (True, False, True) and two[0][1:] == (False, True, False)
    assert two[2][0].tolist() == [2, 3]


def test_a_prefix_that_ends_before_its_last_action_is_a_dead_end():
    from envaudit.probes.length.search_runs import RunExpander

    [tried] = RunExpander(search_ctx(Lock()), 0)([(3,)], ACTIONS)  # the answer ends every replay at once
    assert [t[1:] for t in tried] == [(True, False, False)] * 4
    assert all(t[0].tolist() == [0, 1] for t in tried)  # the observation the episode ended on


def test_the_skeleton_wrapper_cuts_where_the_skeleton_ends_and_says_when_the_env_ended_it():
    from envaudit.probes.length.search_runs import _Skeleton

    done = _Skeleton(Lock(flaky={0}), [1, 2], budget=100)
    done.reset(seed=0)
    assert done.next_action() == 1 and done.step(1)[3] is False and done.next_action() == 1  # failed: retried
    assert done.step(1)[3] is False and done.next_action() == 2
    assert done.step(2)[3] is True and done.episode_payload() == (1, 1, 2)  # cut after the skeleton
    ended = _Skeleton(Lock(), [1, 3], budget=100)
    ended.reset(seed=0)
    ended.step(1)
    assert ended.step(3)[2] is True and ended.episode_payload() is None  # the env ended it on its last action
    short = _Skeleton(Lock(), [1, 2], budget=1)
    short.reset(seed=0)
    assert short.step(1)[3] is True and short.episode_payload() is None  # the budget cut it mid-skeleton
