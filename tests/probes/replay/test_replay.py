"""The replay probe on envs whose replayability is known by construction.

``PythonRandom`` draws the drift of every observation (reset included) from ``random``: every
replay diverges. ``LateDivergence`` is exact until step ``BREAK_AT`` and every episode reaches that
step: all reset replays agree, all episode replays and mid-episode branches diverge there.
``LeakyReset`` only differs on an instance that already ran an episode.
"""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

from envaudit.interpreter import other_hash_seeds
from envaudit.probe import HUNG_NOTE, registered_probes
from envaudit.probes.replay import (
    BRANCH,
    ELSEWHERE,
    ELSEWHERE_INTERPRETERS,
    ELSEWHERE_UNITS,
    EPISODE_FRESH,
    EPISODE_SAME,
    ORACLE_MISS,
    ORACLE_UNITS,
    RESET_FRESH,
    RESET_SAME,
    Step,
    Trajectory,
    elsewhere_choice,
    probe,
    same,
)
from tests.fixtures import broken_envs as b
from tests.fixtures import support_desk as sd
from tests.fixtures.context import explore, misses, off_design, run_probe, sweep

SMALL = {"episodes": 16, "group_size": 4, "step_timeout_s": 1.0, "quick": True}


def scan(make_env, **options):
    return run_probe(probe, make_env, **{**SMALL, **options})


def one(findings):
    assert len(findings) == 1, [f.summary for f in findings]
    f = findings[0]
    assert f.code == "non-replayable" and f.severity == 3
    return f


def checks(f):
    return {name: (c["replays"], c["diverged"]) for name, c in f.evidence["by_check"].items()}


def test_registered_after_api():
    assert registered_probes(["replay"])["replay"] is probe
    assert probe.order == 20 and probe.codes == ("non-replayable", "env-error")


@pytest.mark.parametrize("make_env", [
    b.Walk, b.DictWalk, b.BoxActionWalk, b.PingTools, b.RaisesAfter, b.NanReward, b.ClockInInfo,
    lambda: gym.make("CartPole-v1"), lambda: gym.make("FrozenLake-v1"),
    lambda: gym.make("envaudit/FlakySearch-v0"), lambda: gym.make("envaudit/CodeFix-v0"),
    lambda: gym.make("envaudit/Helpdesk-v0"),
], ids=["walk", "dict-obs", "box-action", "tool-env", "raises-deterministically", "nan-reward",
        "clock-in-info",
        "cartpole", "frozenlake", "flaky-search", "code-fix", "helpdesk"])
def test_replayable_envs_get_no_finding(make_env):
    findings, ctx = scan(make_env)
    assert findings == [], [f.summary for f in findings]
    assert ctx.notes["replays"] > 0 and ctx.notes["stopped_early"] is None


def test_python_random_in_reset_diverges_everywhere():
    f = one(scan(b.PythonRandom)[0])
    assert f.evidence["fraction_diverged"] == 1.0
    first = f.evidence["first_divergence"]
    assert first["step"] is None and first["field"] == "observation" and first["check"] == RESET_SAME
    assert "the observation of reset(seed=" in f.summary
    assert f.fix.startswith("Most likely reset() draws from Python's `random`, `time` or an unseeded generator")
    assert "super().reset(seed=seed)" in f.fix
    assert f.examples


def test_divergence_after_a_mid_episode_point_is_found_at_that_step():
    f = one(scan(b.LateDivergence)[0])
    by_check = checks(f)
    assert by_check[RESET_SAME][1] == 0 and by_check[RESET_FRESH][1] == 0
    for name in (EPISODE_SAME, EPISODE_FRESH, BRANCH):
        replays, diverged = by_check[name]
        assert replays > 0 and diverged == replays, name
    first = f.evidence["first_divergence"]
    assert first["step"] == b.BREAK_AT and first["field"] == "reward"
    assert f"the reward at step {b.BREAK_AT} was" in f.summary
    assert "Most likely step() draws from Python's `random`" in f.fix
    assert f"the first difference is at step {b.BREAK_AT}" in f.fix


def test_state_leaking_across_episodes_only_breaks_the_same_instance():
    f = one(scan(b.LeakyReset)[0])
    by_check = checks(f)
    replays, diverged = by_check[RESET_SAME]
    assert diverged == replays > 0
    assert all(d == 0 for name, (_, d) in by_check.items() if name != RESET_SAME)
    assert f.evidence["first_divergence"]["values"] == ["[0. 1.]", "[0. 2.]"]
    assert "reset() leaves state from the previous episode behind" in f.fix


def test_dict_text_and_tuple_observations_are_compared_part_by_part():
    f = one(scan(b.DictPythonRandom)[0])
    assert f.evidence["fraction_diverged"] == 1.0
    assert f.evidence["first_divergence"]["values"][0].startswith("{'pos': 0, 'drift': array([")


def test_non_discrete_actions_are_generated_from_a_seeded_space():
    f = one(scan(b.BoxActionPythonRandom)[0])
    by_check = checks(f)
    assert by_check[RESET_SAME][1] == 0 and by_check[RESET_FRESH][1] == 0
    assert by_check[EPISODE_FRESH][1] == by_check[EPISODE_FRESH][0]
    assert f.evidence["first_divergence"]["step"] == 0
    assert f.evidence["first_divergence"]["field"] == "reward"


def test_bundled_unseeded_variant_is_caught():
    # The hidden answer comes from `random`: only episodes that answer can show it.
    f = one(scan(lambda: gym.make("envaudit/FlakySearch-Unseeded-v0"))[0])
    assert 0 < f.evidence["diverged"] < f.evidence["replays"]
    # Python's unseeded `random` decides whether a search result or an answer's pay differs first.
    assert f.evidence["first_divergence"]["field"] in ("observation", "reward")


def test_hanging_env_is_left_to_the_api_probe():
    findings, ctx = scan(b.SleepsForever, step_timeout_s=0.2)
    assert findings == []
    assert ctx.notes[HUNG_NOTE].startswith("replays skipped: the env already hung in this scan (step() did not")


def test_hang_only_replays_hit_is_an_env_error():
    switch = b.HangSwitch()
    ctx = explore(switch, probe="replay", **{**SMALL, "step_timeout_s": 0.2})
    switch.armed = True
    findings = probe.run(ctx)
    assert [f.code for f in findings] == ["env-error"]
    f = findings[0]
    assert f.severity == 3 and f.title == "step() hangs during replays"
    assert f.evidence["step"] == b.BREAK_AT
    assert "did not return within 0.2 s" in f.summary
    assert ctx.notes["stopped_early"] == "the env hung" and len(ctx.hangs) == 1


def test_no_time_left_stops_before_replaying():
    findings, ctx = scan(b.PythonRandom, budget_s=0.0)
    assert findings == [] and ctx.notes["replays"] == 0
    assert ctx.notes["stopped_early"] == "the scan's wall-clock safety cap was reached"
    assert [g["probe"] for g in ctx.skipped] == ["replay"] and "replay units" in ctx.skipped[0]["skipped"]


def test_hash_seeded_state_is_caught_only_in_another_interpreter():
    # The queue slot comes from hash() of the topic's name: every replay in this process agrees.
    f = one(scan(sd.hashed_queue)[0])
    by_check = checks(f)
    assert all(d == 0 for name, (_, d) in by_check.items() if name != ELSEWHERE)
    replays, diverged = by_check[ELSEWHERE]
    assert replays == ELSEWHERE_INTERPRETERS * ELSEWHERE_UNITS and diverged > 0
    first = f.evidence["first_divergence"]
    assert first["check"] == ELSEWHERE and first["step"] is None and first["field"] == "observation"
    assert "in another interpreter" in f.summary
    assert f.fix.startswith("Most likely the env derives a task, an answer or an order from Python's hash()")


def test_the_clean_twin_replays_the_same_in_another_interpreter():
    findings, ctx = scan(sd.clean)
    assert findings == [] and ctx.skipped == []
    notes = ctx.notes["other_interpreter"]
    assert notes["episodes"] == ELSEWHERE_UNITS and "reasons" not in notes
    assert notes["hash_seeds"] == other_hash_seeds(ELSEWHERE_INTERPRETERS) and len(set(notes["hash_seeds"])) == 2


def _walked(seed, observations, *, raised=False):
    steps = [Step(0, np.array(o, dtype=np.float32)) for o in observations]
    if raised:
        steps[-1].exception = "ValueError"
    return Trajectory(seed, np.zeros(2, dtype=np.float32), object(), steps)


def test_the_other_interpreters_play_the_oracle_then_the_widest_episodes_one_per_seed_first():
    oracle = _walked(9, [[1, 0]])  # the oracle's: first, though it saw little
    narrow = _walked(1, [[0, 0], [0, 0], [0, 0]])  # long, but one state throughout
    wide = _walked(1, [[1, 0], [1, 1], [2, 1]])  # the widest of seed 1
    second = _walked(2, [[1, 0], [1, 1]])
    raised = _walked(3, [[5, 5], [6, 6], [7, 7]], raised=True)  # never replayed elsewhere
    third = _walked(4, [[0, 0]])
    chosen = elsewhere_choice([oracle, narrow, wide, second, raised, third], n_oracle=1)
    # every seed once (the widest episode of each) before a second episode of seed 1
    assert chosen == [oracle, wide, second, third, narrow]
    assert elsewhere_choice([narrow, wide, second], n_oracle=0, n=2) == [wide, second]
    assert elsewhere_choice([oracle, wide], n_oracle=0) == [wide, oracle]  # no oracle: width decides


def test_observations_too_large_to_print_are_told_apart_exactly():
    big = np.zeros(5000, dtype=np.float32)
    changed = big.copy()
    changed[2500] = 1.0  # repr() elides the middle of both arrays
    assert repr(big) == repr(changed)
    two = _walked(1, [big, changed])
    one = _walked(2, [big, big])
    assert elsewhere_choice([one, two], n_oracle=0, n=1) == [two]


def test_an_env_the_other_interpreter_cannot_build_is_incomplete_not_replayable():
    here = os.environ.get("PYTHONHASHSEED")

    def make():
        if os.environ.get("PYTHONHASHSEED") != here:
            raise RuntimeError("no licence server in this process")
        return b.Walk()

    findings, ctx = scan(make)
    assert findings == []
    (gap,) = ctx.skipped
    episodes = ctx.notes["other_interpreter"]["episodes"]
    assert 0 < episodes <= ELSEWHERE_UNITS
    seeds = ", ".join(other_hash_seeds(ELSEWHERE_INTERPRETERS))
    assert gap["skipped"] == f"the {episodes} replays in 2 other interpreters (PYTHONHASHSEED={seeds})"
    assert "RuntimeError: no licence server in this process" in gap["reason"] and ";" not in gap["reason"]
    assert set(ctx.notes["other_interpreter"]["reasons"]) == set(other_hash_seeds(ELSEWHERE_INTERPRETERS))


def test_same_seed_same_verdict():
    a, b_ = one(scan(b.LateDivergence, seed=3)[0]), one(scan(b.LateDivergence, seed=3)[0])
    assert a.evidence["by_check"] == b_.evidence["by_check"] and a.examples == b_.examples
    assert a.evidence["first_divergence"]["seed"] == b_.evidence["first_divergence"]["seed"]


def test_same_compares_ints_exactly_and_floats_to_a_tight_tolerance():
    assert same(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-13]))
    assert not same(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-6]))
    assert same(float("nan"), np.nan) and same(np.inf, np.inf)
    assert not same(np.array([1, 2]), np.array([1, 3]))
    assert not same(np.zeros(2), np.zeros(3))
    assert same({"a": "left", "b": (1, np.array(0.5))}, {"a": "left", "b": (1, np.array(0.5))})
    assert not same({"a": "left"}, {"a": "right"})
    assert not same({"a": 1}, {"b": 1})
    assert not same((1, 2), (1, 2, 3))
    assert same(None, None) and not same(None, "ok") and not same("ok", np.array(["ok"]))


# -- rates over exploration seeds -----------------------------------------------------------------
# A divergence is not a statistical call: one differing replay is proof. So the planted envs must be
# caught at 8/8 exploration seeds, with the divergence where the design puts it, and the clean
# twins (replayable by construction; PingTools' measured latencies are not compared) must give no
# finding at 8/8 (pooled, 0 of 32 runs bounds the false-alarm rate below 3/32 = 9.4% at 95%).
PLANTED_SWEEP = {
    # name: (factory, check on the finding's first divergence)
    "python-random": (b.PythonRandom, lambda d: d["check"] == RESET_SAME and d["field"] == "observation"),
    "late-divergence": (b.LateDivergence, lambda d: d["step"] == b.BREAK_AT and d["field"] == "reward"),
    "leaky-reset": (b.LeakyReset, lambda d: d["check"] == RESET_SAME and d["step"] is None),
    # The unseeded answer is hidden state: reset agrees, and the episodes differ in what a search
    # shows or what an answer pays (which of the two comes first depends on the actions replayed).
    "flaky-search-unseeded": (lambda: gym.make("envaudit/FlakySearch-Unseeded-v0"),
                              lambda d: d["step"] is not None and d["field"] in ("observation", "reward")),
    # The answer is hash() of the task's word: only the other interpreter poses another task.
    "hashed-answer": (b.HashedAnswer, lambda d: d["check"] == ELSEWHERE and d["field"] == "reward"),
}
CLEAN_SWEEP = {"walk": b.Walk, "tool-env": b.PingTools, "flaky-search": lambda: gym.make("envaudit/FlakySearch-v0"),
               "stable-answer": b.StableAnswer}


@pytest.mark.parametrize("name", sorted(PLANTED_SWEEP))
def test_planted_divergence_is_found_where_it_is_at_every_seed(name):
    make, where = PLANTED_SWEEP[name]

    def caught(findings):
        return (len(findings) == 1 and (findings[0].code, int(findings[0].severity)) == ("non-replayable", 3)
                and where(findings[0].evidence["first_divergence"]))

    assert misses(sweep(probe, make, **SMALL), caught) == {}


@pytest.mark.parametrize("name", sorted(CLEAN_SWEEP))
def test_replayable_twins_give_no_finding_at_any_seed(name):
    assert off_design(sweep(probe, CLEAN_SWEEP[name], **SMALL), []) == {}


# -- hidden state that shows only near success (envaudit.families' unseeded-answer) ---------------
def _unseeded_answer(i):
    from dataclasses import replace

    from envaudit.families import flawed_case
    from envaudit.families.case import Case

    case = flawed_case(7, i, kind="unseeded-answer")
    return case, Case(f"{case.name}-twin", replace(case.spec, flaw=None))


# Instances 0-7 of seed 7 whose env has an oracle (5 has none), rare and common success alike.
WITH_ORACLE = (0, 1, 2, 3, 4, 6, 7)


@pytest.mark.parametrize("i", WITH_ORACLE)
def test_an_unseeded_answer_that_only_the_finished_task_shows_is_found_through_the_oracle(i):
    # The answer is drawn from Python's `random` at reset and shows in the observation only once the
    # honest path is done, which random play rarely reaches on rare-success envs. The oracle's
    # episodes reach it every time; two draws among n >= 2 answers differ with probability >= 1/2,
    # so ORACLE_UNITS units miss it with probability <= 1%.
    case, twin = _unseeded_answer(i)
    findings, ctx = scan(case.make_env)
    f = one(findings)
    assert f.evidence["first_divergence"]["step"] is not None  # reset agrees: the answer is hidden
    assert ctx.notes["oracle_units"] == ORACLE_UNITS
    assert scan(twin.make_env)[0] == []


def test_oracle_units_are_sized_for_a_choice_that_differs_half_the_time():
    # Each unit compares its first play with two more (same instance, fresh instance); a hidden
    # choice between two equally likely values survives both with probability 1/4.
    assert ORACLE_UNITS == 4 and 0.25**ORACLE_UNITS <= ORACLE_MISS < 0.25 ** (ORACLE_UNITS - 1)


def test_exploration_episodes_are_replayed_furthest_first():
    # Without an oracle, the episodes that got furthest into the task (most steps paying more than an
    # ordinary step: progress shaping here) are the ones that can show late hidden state; they go first.
    from dataclasses import replace

    from envaudit.families import flawed_case
    from envaudit.families.envs import make_env
    from envaudit.probes.replay.plans import paying_steps, plans

    spec = replace(flawed_case(7, 5, kind="unseeded-answer").spec, shaping="progress", shaping_scale=0.3,
                   has_oracle=False)
    ctx = explore(lambda: make_env(spec), probe="replay", **SMALL)
    paying = paying_steps(ctx.exploration.steps)
    eps = ctx.exploration.episodes
    counts = sorted(paying.tolist(), reverse=True)[:8]
    assert counts[0] > 0  # some episode made progress
    planned = []
    steps = ctx.exploration.steps.sort_values(["episode_id", "step"]).groupby("episode_id")["action"].apply(list)
    for seed, actions, _ in plans(ctx, 8):
        match = [e for e, s in zip(eps["episode_id"], eps["seed"], strict=True)
                 if int(s) == seed and steps.get(e, []) == actions]
        planned.append(max(int(paying.get(e, 0)) for e in match))
    assert planned == counts  # the 8 furthest, furthest first


@pytest.mark.parametrize("make_env", [b.LeakyReset, b.LateDivergence, b.PythonRandom])
def test_the_replays_fan_out_and_say_the_same_on_any_number_of_workers(make_env):
    """Each unit's same-instance pair is one chain on one fresh instance, its fresh replay another,
    the chains over the workers: the same instances compared, the same tally, examples and notes."""
    from envaudit.execution import ProcessExecutor, ThreadExecutor

    out = []
    for executor in (None, ThreadExecutor(4), ProcessExecutor(2)):
        ctx = explore(make_env, probe="replay", seed=1, **SMALL)
        ctx.shared.executor = executor
        try:
            findings = list(probe.run(ctx))
        finally:
            ctx.close()
            if executor is not None:
                executor.close()
        f = one(findings)
        first = {k: v for k, v in f.evidence["first_divergence"].items() if k != "values"}  # drawn from `random`
        out.append((f.evidence["by_check"], first, f.examples, ctx.notes["replays"], ctx.notes["skipped_units"]))
    assert out[1] == out[0] and out[2] == out[0]


def test_past_the_first_units_only_the_units_their_planned_lengths_need_are_replayed():
    from envaudit.probes.replay import units_for

    plans = [(0, [1] * 5, 9), (1, [2] * 3, 9), (2, [], 9), (3, [0] * 7, 9)]
    assert units_for(plans, 0, 4.0) == 0 and units_for(plans, -2, 4.0) == 0
    assert units_for(plans, 5, 4.0) == 1 and units_for(plans, 6, 4.0) == 2
    assert units_for(plans, 8, 4.0) == 2 and units_for(plans, 9, 4.0) == 3  # no actions: the mean length
    assert units_for(plans, 9, 0.2) == 3  # at least one step each
    assert units_for(plans, 100, 4.0) == 4  # never more than planned
