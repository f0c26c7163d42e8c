"""FaultInjector: rates hold statistically, faults replay from seeds, bad input names the argument."""

from __future__ import annotations

import math
import time

import gymnasium as gym
import pytest

from envaudit import FaultInjector, ToolEnv, Transition, inject_faults, wrap


class TwoTools(ToolEnv):
    """Action 0 calls tool ``a``, action 1 calls ``b``; episodes end only at ``max_steps``.

    Every call earns +1 when it succeeds and -1 when it fails, so the env's own handling of an
    injected fault shows in the reward.
    """

    def __init__(self, max_steps: int = 100, deadline_s: float | None = None) -> None:
        super().__init__(max_steps=max_steps)
        self.observation_space = gym.spaces.Discrete(2)
        self.add_tool("a", lambda: "A", deadline_s=deadline_s)
        self.add_tool("b", lambda: "B", deadline_s=deadline_s)
        self.add_call("call a", "a")
        self.add_call("call b", "b")

    def reset_task(self, options):
        return 0

    def transition(self, call, result):
        return Transition(0, 1.0 if result.ok else -1.0)


def statuses(env, seeds, actions=lambda t: t % 2):
    """Tool statuses of every step of one episode per seed, grouped by tool name."""
    out = {"a": [], "b": []}
    for seed in seeds:
        env.reset(seed=seed)
        done, t = False, 0
        while not done:
            _, reward, terminated, truncated, info = env.step(actions(t))
            tool = info["tool"]
            assert (reward == 1.0) == (tool["status"] == "ok")  # the env saw the fault itself
            assert tool.get("injected", False) == (tool["status"] != "ok")
            out[tool["name"]].append(tool["status"])
            done, t = terminated or truncated, t + 1
    return out


def within_4_sigma(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= 4 * math.sqrt(n * p * (1 - p))


def test_rates_hold_over_4000_calls():
    env = FaultInjector(TwoTools(), error_rate=0.3, timeout_rate=0.1, seed=11)
    seen = statuses(env, range(40))
    calls = seen["a"] + seen["b"]
    assert len(calls) == 4000
    assert within_4_sigma(calls.count("error"), 4000, 0.3)
    assert within_4_sigma(calls.count("timeout"), 4000, 0.1)
    assert env.injected == {"error": calls.count("error"), "timeout": calls.count("timeout")}
    for name in ("a", "b"):  # both tools get faults at the shared rate
        assert within_4_sigma(seen[name].count("error"), 2000, 0.3)


def test_per_tool_rates_and_tool_restriction():
    env = FaultInjector(TwoTools(), rates={"a": {"error": 0.5}, "b": {"timeout": 0.2}}, seed=1)
    seen = statuses(env, range(20))
    assert within_4_sigma(seen["a"].count("error"), 1000, 0.5) and "timeout" not in seen["a"]
    assert within_4_sigma(seen["b"].count("timeout"), 1000, 0.2) and "error" not in seen["b"]

    only_a = FaultInjector(TwoTools(), error_rate=0.4, tools=["a"], seed=1)
    seen = statuses(only_a, range(20))
    assert within_4_sigma(seen["a"].count("error"), 1000, 0.4)
    assert set(seen["b"]) == {"ok"}
    assert only_a.rates == {"a": (0.4, 0.0), "b": (0.0, 0.0)}


def test_schedule_sequence_restarts_each_episode_and_callable():
    env = FaultInjector(TwoTools(max_steps=5), schedule=["error", None, "timeout"])
    for seed in (0, 1):
        seen = statuses(env, [seed], actions=lambda t: 0)
        assert seen["a"] == ["error", "ok", "timeout", "ok", "ok"]
    by_tool = FaultInjector(TwoTools(max_steps=6), schedule=lambda name, k: "error" if name == "b" and k >= 2 else None)
    seen = statuses(by_tool, [0])
    assert seen == {"a": ["ok", "ok", "ok"], "b": ["ok", "error", "error"]}
    bad = FaultInjector(TwoTools(), schedule=["crash"])
    bad.reset(seed=0)
    with pytest.raises(ValueError, match="'error', 'timeout' or None, got 'crash'"):
        bad.step(0)


def test_same_seeds_same_faults_other_seed_other_faults():
    def run(injector_seed, reset_seeds):
        env = FaultInjector(TwoTools(max_steps=50), error_rate=0.3, timeout_rate=0.2, seed=injector_seed)
        return statuses(env, reset_seeds)

    assert run(5, [1, 2, 3]) == run(5, [1, 2, 3])
    assert run(5, [1, 2, 3]) != run(6, [1, 2, 3])
    assert run(5, [1]) != run(5, [2])
    assert run(5, [1, 2])["a"][25:] == run(5, [2])["a"]  # an episode's faults depend on its own seed only


def test_real_mode_overruns_the_deadline_for_real():
    sim = FaultInjector(TwoTools(deadline_s=0.5), timeout_rate=1.0)
    sim.reset(seed=0)
    start = time.perf_counter()
    info = sim.step(0)[4]
    assert time.perf_counter() - start < 0.25  # simulated: no waiting
    assert info["tool"]["status"] == "timeout" and info["tool"]["latency_s"] == 0.5

    real = FaultInjector(TwoTools(deadline_s=0.1), timeout_rate=1.0, mode="real")
    real.reset(seed=0)
    start = time.perf_counter()
    info = real.step(0)[4]
    elapsed = time.perf_counter() - start
    assert 0.1 <= elapsed < 1.0
    assert info["tool"]["status"] == "timeout" and info["tool"].get("injected") is True
    assert "exceeded its 0.1 s deadline" in info["tool"]["error"]
    real.close()


def test_records_count_injected_faults():
    env = wrap(FaultInjector(TwoTools(max_steps=4), schedule=["error", "timeout", None, "error"]))
    env.reset(seed=0)
    for t in range(4):
        env.step(t % 2)
    ep = env.records.episodes.iloc[0]
    assert (ep["n_injected"], ep["n_tool_errors"], ep["n_tool_timeouts"], ep["return"]) == (3, 2, 1, -2.0)
    assert env.records.steps["injected"].tolist() == [True, True, False, True]


def test_close_removes_the_hook_and_works_through_wrappers():
    base = TwoTools(max_steps=3)
    env = inject_faults(gym.wrappers.TimeLimit(base, max_episode_steps=3), error_rate=1.0)
    env.reset(seed=0)
    assert env.step(0)[4]["tool"]["status"] == "error"
    env.close()
    assert base.fault_hook is None


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        ({"error_rate": 1.5}, r"error_rate must be a probability in \[0, 1\], got 1.5"),
        ({"timeout_rate": -0.1}, r"timeout_rate must be a probability"),
        ({"error_rate": 0.6, "timeout_rate": 0.6}, r"add up to 1.2 > 1"),
        ({"rates": {"a": {"eror": 0.1}}}, r"rates\['a'\] has keys \['eror'\]; use 'error' and 'timeout'"),
        ({"rates": {"a": {"error": 2}}}, r"rates\['a'\]\['error'\] must be a probability"),
        ({"rates": {"c": {"error": 0.1}}}, r"rates= names unknown tool\(s\) \['c'\]; this env's tools are \['a', 'b'\]"),
        ({"tools": ["a", "z"]}, r"tools= names unknown tool\(s\) \['z'\]"),
        ({"mode": "fake"}, r"mode must be 'simulated' or 'real', got 'fake'"),
    ],
)
def test_bad_arguments_are_named(options, pattern):
    with pytest.raises(ValueError, match=pattern):
        FaultInjector(TwoTools(), **options)


def test_plain_env_is_a_type_error_naming_the_fix():
    with pytest.raises(TypeError, match=r"needs an envaudit\.ToolEnv, got CartPoleEnv.*build the env on envaudit\.ToolEnv"):
        FaultInjector(gym.make("CartPole-v1"), error_rate=0.1)


def test_no_fault_without_rates():
    seen = statuses(FaultInjector(TwoTools(max_steps=10)), range(3))
    assert set(seen["a"]) | set(seen["b"]) == {"ok"}
