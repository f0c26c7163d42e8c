"""Scripted policies derived from exploration, on envs whose action effects are known by construction.

``TaskEnv`` (protocol fixtures): ``search`` never ends an episode and fails with
``search_error_rate``; ``submit`` and ``claim`` always end it; ``wait`` does nothing.
``RetryTask`` (exploit fixtures): ``fetch`` is flaky, ``submit``/``give_up`` end the episode.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from envaudit.policies import (
    ChoicePolicy,
    PersistPolicy,
    QuitOnFailurePolicy,
    RepeatPolicy,
    Replay,
    ReplayPlan,
    action_stats,
    derive_policies,
    describe_call,
    oracle_policy,
    persist_policy,
    success_return,
)
from envaudit.rollout import Policy, RandomPolicy, Runner
from envaudit.stats import proportion_ci
from tests.fixtures.context import explore
from tests.fixtures.exploit_envs import RetryTask
from tests.fixtures.protocol_envs import CLAIM, SEARCH, SUBMIT, WAIT, TaskEnv

ERROR = {"tool": {"name": "t", "status": "error"}}
OK = {"tool": {"name": "t", "status": "ok"}}


@pytest.fixture(scope="module")
def claim_ctx():
    ctx = explore(lambda: TaskEnv(claim_reward=0.5, search_error_rate=0.3), episodes=96)
    yield ctx
    ctx.close()


def test_action_stats_match_the_design(claim_ctx):
    stats = action_stats(claim_ctx.exploration, claim_ctx.action_labels).set_index("label")
    assert list(stats.columns[:2]) == ["action", "n"]
    # submit and claim end the episode on every call; search and wait never do.
    assert stats.loc["submit", "terminate_rate"] == 1.0 and stats.loc["claim", "terminate_rate"] == 1.0
    assert stats.loc["search", "terminate_rate"] == 0.0 and stats.loc["wait", "terminate_rate"] == 0.0
    # claim always pays its 0.5; only search calls fail, at the designed rate.
    assert stats.loc["claim", "mean_reward"] == 0.5 and stats.loc["wait", "mean_reward"] == 0.0
    assert stats.loc[["submit", "claim", "wait"], "error_rate"].eq(0).all()
    n = int(stats.loc["search", "n"])
    lo, hi = proportion_ci(round(stats.loc["search", "error_rate"] * n), n, level=0.999)
    assert lo <= 0.3 <= hi
    # claim never ends a successful episode; submit does whenever enough was found.
    assert stats.loc["claim", "success_end_rate"] == 0.0 and stats.loc["submit", "success_end_rate"] > 0


def test_derive_policies_covers_every_role_once(claim_ctx):
    policies = derive_policies(claim_ctx.exploration, claim_ctx.env)
    names = [p.name for p in policies]
    assert names[0] == "random" and isinstance(policies[0], RandomPolicy)
    assert len(set(names)) == len(names)
    by_name = {p.name: p for p in policies}
    # end-early: the best-paying of the actions that always end the episode (claim 0.5 > submit).
    assert by_name["end-early"].action == CLAIM
    assert "`claim`" in by_name["end-early"].describe()
    assert by_name["repeat-error"].action == SEARCH and "`search`" in by_name["repeat-error"].describe()
    # stall: random among the calls that never ended an episode.
    stall = by_name["stall"]
    assert isinstance(stall, ChoicePolicy) and sorted(stall.actions) == [SEARCH, WAIT]
    assert "step limit" in stall.describe()
    # every action is repeated by exactly one policy; no search timeouts in this env.
    repeated = [p.action for p in policies if isinstance(p, RepeatPolicy)]
    assert sorted(repeated) == [SEARCH, SUBMIT, WAIT, CLAIM]
    assert "repeat-timeout" not in by_name
    assert by_name["repeat:submit"].describe() == "always call `submit`"


def test_large_catalogues_keep_the_best_paying_actions():
    class Many(gym.Env):
        observation_space = gym.spaces.Discrete(1)
        action_space = gym.spaces.Discrete(20)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return 0, {}

        def step(self, action):
            return 0, float(action) / 100, False, True, {}

    ctx = explore(Many, episodes=160, group_size=8)
    policies = derive_policies(ctx.exploration, ctx.env, max_repeat=4)
    repeated = sorted(p.action for p in policies if isinstance(p, RepeatPolicy))
    assert repeated == [16, 17, 18, 19]  # reward grows with the action index
    assert {p.describe() for p in policies if isinstance(p, RepeatPolicy)} == {
        f"always take action {a}" for a in (16, 17, 18, 19)}
    # Nothing here ever terminates (every step is truncated), so no end-early and no stall policy.
    assert [p.name for p in policies if not isinstance(p, RepeatPolicy)] == ["random"]
    with pytest.raises(ValueError, match="max_repeat must be at least 0, got -1"):
        derive_policies(ctx.exploration, ctx.env, max_repeat=-1)


def test_non_discrete_spaces_get_only_the_baseline():
    ctx = explore(lambda: gym.make("MountainCarContinuous-v0", max_episode_steps=20), episodes=16)
    assert [p.name for p in derive_policies(ctx.exploration, ctx.env)] == ["random"]
    assert persist_policy(ctx.exploration, ctx.env) is None


def test_persist_policy_retries_the_needed_calls_then_finishes():
    ctx = explore(lambda: RetryTask(need=2, error_rate=0.3, max_steps=12), episodes=128)
    persist = persist_policy(ctx.exploration, ctx.env)
    fetch, submit = ctx.env.unwrapped.action_index("fetch"), ctx.env.unwrapped.action_index("submit")
    assert persist.finish == submit
    # need=2: at least two fetches (harmless calls that every success happened to make may join).
    assert persist.plan.count(fetch) >= 2 and ctx.env.unwrapped.action_index("give_up") not in persist.plan
    assert "`fetch`" in persist.describe() and "`submit`" in persist.describe()
    # Run it: with retries it fetches what is needed, so it succeeds far more often than random.
    runner = Runner(lambda: RetryTask(need=2, error_rate=0.3, max_steps=12))
    eps = runner.run(persist, range(40), rng=np.random.default_rng(0)).records.episodes
    assert (eps["outcome"] == "success").mean() >= 0.9


def test_persist_and_quit_policies_read_the_tool_status():
    p = PersistPolicy([7, 8], finish=9, retries=3)
    p.reset(None, np.random.default_rng(0))
    got = [p(None, {}), p(None, ERROR), p(None, ERROR), p(None, ERROR), p(None, OK), p(None, OK), p(None, OK)]
    # 7 is tried three times (the retry cap), then 8 works at once, then finish forever.
    assert got == [7, 7, 7, 8, 9, 9, 9]
    q = QuitOnFailurePolicy(RepeatPolicy(1, name="one", description="always one"), quit_action=5)
    q.reset(None, np.random.default_rng(0))
    assert [q(None, {}), q(None, OK), q(None, ERROR), q(None, OK)] == [1, 1, 5, 5]
    assert q.describe() == "always one, but give up at the first failed call"
    # No plan and no finish is not a policy.
    with pytest.raises(AssertionError):
        PersistPolicy([], None)


def test_oracle_policy():
    env = RetryTask()
    oracle = oracle_policy(env)
    assert isinstance(oracle, Policy) and oracle.name == "oracle"
    assert oracle_policy(TaskEnv()) is None

    class BadOracle(RetryTask):
        def oracle(self):
            return "fetch then submit"

    with pytest.raises(TypeError, match=r"BadOracle.oracle\(\) returned str; expected an envaudit.Policy"):
        oracle_policy(BadOracle())


def test_describe_call_and_success_return(claim_ctx):
    assert describe_call(1, ["a", "b"]) == "call `b`"
    assert describe_call(3, None) == "take action 3"
    assert describe_call(5, ["a"]) == "take action 5"
    eps = claim_ctx.exploration.episodes
    mean, n = success_return(eps)
    # In TaskEnv a success pays exactly success_reward (1) and nothing else pays on the way.
    assert n == int((eps["outcome"] == "success").sum()) > 0 and mean == 1.0
    assert success_return(eps.iloc[0:0]) == (None, 0)


class _Runs:
    """What ``ReplayPlan.run`` asks of a ``ProbeContext``: its runner, on one executor."""

    def __init__(self, make, executor=None):
        self.runner = Runner(make, executor=executor)

    def run(self, policy, seeds, *, wrappers, tags, episode_tags):
        return self.runner.run(policy, seeds, rng=np.random.default_rng(0), wrappers=wrappers, tags=tags,
                               episode_tags=episode_tags)


def test_replay_plan_forces_a_fault_on_the_last_call_only():
    fetch, submit, status = 0, 1, 3  # RetryTask's catalogue order
    replays = [Replay(5, (fetch, fetch, submit)), Replay(6, (status,)), Replay(7, (fetch, status))]
    make = lambda: RetryTask(need=2, error_credit=0.3)  # noqa: E731 - every failed call pays 0.3
    results = {}
    for fault in (None, "error", "timeout"):
        plan = ReplayPlan(replays, fault)
        records = plan.run(_Runs(make), tags={"fault": fault or "none"}).records
        assert list(records.episodes["length"]) == [3, 1, 2]  # each cut right after its last action
        assert plan.episode_replay == dict(zip(records.episodes["episode_id"], range(3), strict=True))
        results[fault] = plan.last_steps(records)
    # Without a fault: two fetches then a successful submit pays 1; check_status pays 0.
    assert results[None] == {0: (1.0, "ok", False), 1: (0.0, "ok", False), 2: (0.0, "ok", False)}
    for fault in ("error", "timeout"):
        # The forced fault hits the last call only, and the env pays its error credit for it.
        assert results[fault] == {k: (0.3, fault, True) for k in range(3)}


def test_a_replay_plan_fans_out_over_the_workers_and_reads_the_same():
    from envaudit.execution import ProcessExecutor, ThreadExecutor

    fetch, submit, status = 0, 1, 3
    # The same seed in several replays, each its own actions: only the episode's index tells them apart.
    replays = [Replay(5, (fetch, fetch, submit)), Replay(5, (status,)), Replay(5, (fetch, status)),
               Replay(6, (fetch, submit)), Replay(6, (fetch, fetch, fetch, submit))] * 2
    seen = []
    for executor in (None, ThreadExecutor(3), ProcessExecutor(2)):
        plan = ReplayPlan(replays, "error")
        try:
            records = plan.run(_Runs(lambda: RetryTask(need=2, error_credit=0.3), executor), tags={}).records
        finally:
            if executor is not None:
                executor.close()
        assert list(records.episodes["length"]) == [len(r.actions) for r in replays]
        seen.append((plan.last_steps(records), plan.tail_steps(records)))
    assert seen[0][0] == {k: (0.3, "error", True) for k in range(len(replays))}
    assert all(other == seen[0] for other in seen[1:])


def test_replay_plan_leaves_out_replays_that_diverge():
    submit = 1
    plan = ReplayPlan([Replay(1, (submit, submit))])  # submit ends the episode: the replay cannot hold
    records = plan.run(_Runs(lambda: RetryTask()), tags={}).records
    assert len(records.episodes) == 1 and plan.last_steps(records) == {}
    assert "replay 1 recorded action sequences" == plan.policy().describe()
    with pytest.raises(RuntimeError, match="for_episode"):
        plan.policy().act(None, {})
    # Its policy without its wrapper (or the wrapper without the policy) cannot play a replay.
    with pytest.raises(RuntimeError, match="plan.run"):
        Runner(lambda: RetryTask()).run(plan.policy(), plan.seeds, rng=np.random.default_rng(0))
    cut = plan.wrappers()[0](RetryTask())
    cut.reset(seed=1)
    with pytest.raises(RuntimeError, match="plan.run"):
        cut.step(submit)


def test_an_oracle_may_be_a_function_or_a_list_of_actions():
    import gymnasium as gym

    from envaudit.policies import oracle_policy
    from tests.fixtures.ladder_envs import StepCostQuit

    class FunctionOracle(StepCostQuit):
        def oracle(self):
            def solve(obs, info):
                """call a, b, c in order, then submit"""
                return int(obs[0]) if obs[0] < 3 else 3
            return solve

    class ListOracle(StepCostQuit):
        def oracle(self):
            return [0, 1, 2, 3]

    for env_cls in (FunctionOracle, ListOracle):
        env = env_cls()
        policy = oracle_policy(env)
        assert policy.name == "oracle"
        obs, info = env.reset(seed=0)
        policy.reset(env, np.random.default_rng(0))
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, info = env.step(policy(obs, info))
            total, done = total + r, term or trunc
        assert info["success"] and total == pytest.approx(1.0 + 4 * env.step_cost)
    assert oracle_policy(FunctionOracle()).describe() == "call a, b, c in order, then submit"

    class BadOracle(StepCostQuit):
        def oracle(self):
            return 42

    with pytest.raises(TypeError, match="expected an envaudit.Policy, a function"):
        oracle_policy(BadOracle())
    assert oracle_policy(gym.make("CartPole-v1")) is None


def test_by_seed_hands_each_seed_its_policy_and_names_a_missing_one():
    from envaudit.policies import BySeed
    from envaudit.rollout import SequencePolicy

    a, b = SequencePolicy([1], name="a"), SequencePolicy([2], name="b")
    by = BySeed({3: a, np.int64(4): b})
    assert by.for_episode(0, 3) is a and by.for_episode(0, np.int64(4)) is b and a.for_episode(7, 9) is a
    assert by.name == "a" and by.describe() == a.describe() and BySeed({3: a}, name="x").name == "x"
    with pytest.raises(KeyError, match="no policy for reset seed 5 \\(it has 2 seeds\\)"):
        by.for_episode(1, 5)
    with pytest.raises(RuntimeError, match="for_episode"):
        by.act(None, {})
    with pytest.raises(ValueError, match="at least one"):
        BySeed({})


def test_by_index_hands_each_episode_its_policy_whatever_its_seed():
    from envaudit.policies import ByIndex
    from envaudit.rollout import SequencePolicy

    a, b = SequencePolicy([1], name="a"), SequencePolicy([2], name="b")
    by = ByIndex([a, b, a])
    assert [by.for_episode(i, 3) for i in range(3)] == [a, b, a] and by.for_episode(1, 99) is b
    assert by.name == "a" and by.describe() == a.describe() and ByIndex([b], name="x").name == "x"
    for bad in (-1, 3):
        with pytest.raises(IndexError, match=f"no policy for episode {bad} \\(it has 3\\)"):
            by.for_episode(bad, 3)
    with pytest.raises(RuntimeError, match="for_episode"):
        by.act(None, {})
    with pytest.raises(ValueError, match="at least one"):
        ByIndex([])
