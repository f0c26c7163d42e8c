"""``ProbeContext.run_all``: independent runs played as one over the workers, each episode as its own
``run`` would play it (policy, tags, policy randomness, episode ids), and ``rollout.Segments``."""

from __future__ import annotations

import pytest

from envaudit.execution import ThreadExecutor
from envaudit.policies import BySeed
from envaudit.rollout import RandomPolicy, Run, Segments, SequencePolicy
from tests.fixtures.context import explore
from tests.fixtures.crash_envs import CleanWalk


def _runs():
    return [Run(RandomPolicy(), [3, 4, 5, 3]),
            Run(SequencePolicy([2, 2, 0], name="push"), [4, 6], tags={"arm": "push"}),
            Run(BySeed({7: SequencePolicy([0], name="back"), 8: SequencePolicy([1], name="back")}), [8, 7]),
            Run(RandomPolicy(), [], tags={"arm": "none"}),
            Run(RandomPolicy(), [3, 9], rng_name="other", tags={"arm": "other"})]


def _apart(ctx):
    return [ctx.run(r.policy, r.seeds, tags=r.tags, rng_name=r.rng_name).records for r in _runs() if r.seeds]


@pytest.mark.parametrize("workers", [None, 3])
def test_runs_played_as_one_give_each_run_the_records_it_gets_alone(workers):
    apart_ctx = explore(CleanWalk, probe="t", episodes=8, group_size=4)
    together_ctx = explore(CleanWalk, probe="t", episodes=8, group_size=4)
    if workers:
        together_ctx.shared.executor = ThreadExecutor(workers)
    try:
        together = together_ctx.run_all(_runs())
    finally:
        if workers:
            together_ctx.shared.executor.close()
    apart = _apart(apart_ctx)
    assert len(together) == len(apart) == 4
    for mine, alone in zip(together, apart, strict=True):
        columns = [c for c in alone.episodes.columns]
        assert mine.episodes[columns].reset_index(drop=True).equals(alone.episodes.reset_index(drop=True))
        assert mine.steps.reset_index(drop=True).equals(alone.steps.reset_index(drop=True))
    assert together[1].episodes["policy"].tolist() == ["push", "push"] and set(together[0].episodes["policy"]) == {"random"}
    assert together_ctx.run_all([]) == [] and together_ctx.run_all([Run(RandomPolicy(), [])]) == []


def test_segments_hands_each_episode_its_part_s_own_policy():
    a, b = SequencePolicy([1], name="a"), BySeed({5: SequencePolicy([2], name="five")})
    seg = Segments([(a, 2), (b, 1), (a, 1)])
    assert [seg.for_episode(i, 5) for i in (0, 1, 3)] == [a, a, a] and seg.for_episode(2, 5).name == "five"
    assert seg.name == "a" and seg.describe() == "a; five; a"
    for bad in (-1, 4):
        with pytest.raises(IndexError, match=f"no policy for episode {bad} \\(it has 4\\)"):
            seg.for_episode(bad, 5)
    with pytest.raises(RuntimeError, match="for_episode"):
        seg.act(None, {})
    # A part whose policy picks by index gets the episode's place within its part.
    from envaudit.policies import ByIndex

    x, y = SequencePolicy([0], name="x"), SequencePolicy([1], name="y")
    by_place = Segments([(a, 3), (ByIndex([x, y]), 2)])
    assert [by_place.for_episode(i, 0).name for i in range(5)] == ["a", "a", "a", "x", "y"]
    with pytest.raises(AssertionError):
        Segments([(a, 0)])
