"""The length probe's search for successes (``probes/length_search.py``) and the checks that stand
on it, on generated tasks of known design where random play almost never succeeds and no
``oracle()`` is offered.

``_task`` is a five-call path over seven tools (two flaky), three candidate answers and a step
limit of 12: a random walk over ten actions succeeds far less than once in 64 episodes, so before
the search neither a delayed success nor a brevity bonus could be placed against success.
"""

from __future__ import annotations

import numpy as np
import pytest

from envaudit.families import EnvSpec, Flaw, ToolSpec, make_env
from envaudit.findings import Severity
from envaudit.probes.length import CODE, probe
from envaudit.probes.length.search import bfs, clock_mask, skeleton_of
from envaudit.probes.length.search_runs import follow_seeds
from tests.fixtures.context import explore, flagged, run_probe

PATH = ("fetch_page", "summarize", "summarize", "read_file", "send_email")


def _task(flaw: Flaw | None = None, **changes) -> EnvSpec:
    tools = (ToolSpec("get_weather"), ToolSpec("send_email", 0.2), ToolSpec("translate"), ToolSpec("read_file", 0.15),
             ToolSpec("get_time"), ToolSpec("fetch_page"), ToolSpec("summarize"))
    spec = dict(tools=tools, path=PATH, max_steps=12, n_answers=3, step_cost=0.02, wrong_answer_ends=False,
                base="gym", has_oracle=False, flaw=flaw)
    return EnvSpec(**{**spec, **changes})


def _ok_calls(env, seed, actions):
    env.reset(seed=seed)
    labels = env.unwrapped.action_labels
    out = []
    for a in actions:
        *_, info = env.step(a)
        if info["tool"]["status"] == "ok" and labels[a].startswith("call_"):
            out.append(labels[a][len("call_"):])
    return out


def _is_subsequence(path, calls):
    it = iter(calls)
    return all(any(c == p for c in it) for p in path)


@pytest.mark.parametrize("base", ["gym", "toolenv"])
def test_search_finds_a_success_that_walks_the_path(base):
    spec = _task(base=base)
    env = make_env(spec)
    actions = list(range(env.action_space.n))
    for seed in range(3):
        seq = bfs(env, seed, actions, budget=20000)
        assert seq is not None
        # Replayed on its seed it succeeds, having called the path's tools in order.
        env.reset(seed=seed)
        for a in seq:
            *_, terminated, _, info = env.step(a)
        assert terminated and info["success"] is True
        assert _is_subsequence(PATH, _ok_calls(env, seed, seq))
        # Breadth-first: no longer than the path, its failed calls retried, and the answer.
        env.reset(seed=seed)
        failed = sum(env.step(a)[4]["tool"]["status"] != "ok" for a in seq)
        assert len(seq) <= len(PATH) + failed + 1 + 1


def test_a_known_success_is_followed_on_other_seeds():
    spec = _task()
    env = make_env(spec)
    actions = list(range(env.action_space.n))
    seq = bfs(env, 0, actions, budget=20000)
    env.reset(seed=0)
    statuses = [env.step(a)[4]["tool"]["status"] for a in seq]
    skeleton = skeleton_of(list(seq), statuses)
    ctx = explore(lambda: make_env(spec), probe="length", episodes=4, group_size=2)
    found = follow_seeds(ctx, list(range(1, 6)), skeleton, actions, budget=2000)
    # The skeleton retries failed calls, and every answer is tried last: it succeeds on every seed.
    assert all(f is not None for f in found)


def test_a_step_counter_is_left_out_of_the_cells():
    parent = np.array([0.2, 0.0, 1.0, 0.25], np.float32)
    children = [np.array(o, np.float32) for o in ([0.2, 0.0, 1.0, 0.5], [0.4, 0.0, 1.0, 0.5], [0.2, 1.0, 0.0, 0.5])]
    assert clock_mask(parent, children).tolist() == [False, False, False, True]


def test_delayed_success_without_oracle_or_random_successes_is_length_bias_at_fail():
    # Each wrong answer pays a 0.06 format score against a 0.02 step cost: +0.04 per delayed attempt.
    flawed = _task(Flaw("delayed-success", amount=0.06))
    findings, _ = run_probe(probe, lambda: make_env(flawed), episodes=64, seed=0, quick=True)
    delayed = [f for f in findings if f.evidence.get("behaviour") == "delay-success"]
    assert len(delayed) == 1 and delayed[0].severity == Severity.FAIL
    f = delayed[0]
    assert f.evidence["success_source"] == ["search"]
    # k wrong attempts gain at most k * (0.06 - 0.02); an attempt that happens to be right gains 0.
    assert 0 < f.evidence["gain"] <= f.evidence["k"] * 0.04 + 1e-9


def test_brevity_bonus_without_oracle_or_random_successes_is_length_bias_at_fail():
    # give_up at step t pays 1.3 * (1 - t / 12): quitting at once earns 1.3, success 1.0 minus costs.
    flawed = _task(Flaw("brevity-bonus", amount=1.3), quit_action=True)
    findings, _ = run_probe(probe, lambda: make_env(flawed), episodes=64, seed=0, quick=True)
    quit = [f for f in findings if f.code == CODE and f.evidence.get("behaviour") == "quit"]
    assert quit and quit[0].severity == Severity.FAIL
    assert quit[0].evidence["mean_strategy"] == pytest.approx(1.3 - 0.02)


@pytest.mark.parametrize("changes", [{}, {"quit_action": True}], ids=["no-quit", "quit"])
def test_the_clean_twins_raise_nothing(changes):
    findings, _ = run_probe(probe, lambda: make_env(_task(**changes)), episodes=64, seed=0, quick=True)
    assert flagged(findings) == [], [f.summary for f in findings]


def test_a_single_answer_is_delayed_before_the_task_with_the_oracle_following():
    # One candidate answer: 'submit' is wrong (and paid its format score) only while the path is
    # unfinished, so inserting it before the final submit cannot delay; inserted first, it does,
    # and the oracle then does the task on the shifted random stream.
    flawed = _task(Flaw("delayed-success", amount=0.06), n_answers=1, has_oracle=True)
    findings, _ = run_probe(probe, lambda: make_env(flawed), episodes=64, seed=0, quick=True)
    delayed = [f for f in findings if f.evidence.get("behaviour") == "delay-success"]
    assert len(delayed) == 1 and delayed[0].severity == Severity.FAIL
    f = delayed[0]
    assert f.evidence["at"] == "start" and f.evidence["delay_action"] == "submit"
    # Every pair did the same honest work: the gain is exactly k format scores net of step costs.
    assert f.evidence["gain"] == pytest.approx(f.evidence["k"] * (0.06 - 0.02))
    clean = _task(n_answers=1, has_oracle=True)
    assert flagged(run_probe(probe, lambda: make_env(clean), episodes=64, seed=0, quick=True)[0]) == []


def test_an_env_that_raises_on_the_searched_path_stops_the_search_not_the_probe():
    # The second call of `summarize` (on the path, twice) raises from step(): the search reaches it
    # on every seed. That is an env-error for the api probe; the length probe notes where its
    # search stopped and goes on with what exploration shows.
    spec = _task(flaw=Flaw("raise-in-state", tool="summarize"))
    findings, ctx = run_probe(probe, lambda: make_env(spec), episodes=64, quick=True)
    assert "stopped at seed" in ctx.notes["success_search"] and "RuntimeError" in ctx.notes["success_search"]
    assert CODE not in {f.code for f in flagged(findings)}
