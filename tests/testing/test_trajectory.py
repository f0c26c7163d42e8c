import gymnasium as gym
import pytest

from envaudit.testing import FaultSchedule, play
from envaudit.testing.trajectory import EnvSession, Plan, as_schedule
from tests.testing.toy_envs import FetchTask, OneState, PingTool


def test_fault_schedule_is_a_fault_injector_hook():
    schedule = FaultSchedule({0: "timeout", 2: "error"})
    assert [schedule("search", k) for k in range(4)] == ["timeout", None, "error", None]
    assert schedule.with_fault(0, None) == FaultSchedule({2: "error"})
    assert schedule.with_fault(1, "error")("x", 1) == "error"
    every = FaultSchedule(every="timeout")
    assert every("anything", 99) == "timeout"
    only = FaultSchedule({0: "error"}, tools=["search"])
    assert only("search", 0) == "error" and only("open_doc", 0) is None


def test_fault_schedule_reads_and_rejects():
    assert repr(FaultSchedule({1: "error"})) == "FaultSchedule({1: 'error'})"
    assert str(FaultSchedule({0: "timeout"})) == "call 0 times out"
    assert str(FaultSchedule()) == "no faults"
    assert as_schedule([None, "timeout"]) == FaultSchedule({1: "timeout"})
    with pytest.raises(ValueError, match=r"faults\[0\] must be 'error' or 'timeout', got 'crash'"):
        FaultSchedule({0: "crash"})
    with pytest.raises(ValueError, match="tool-call index"):
        FaultSchedule({-1: "error"})
    with pytest.raises(TypeError, match="faults must be a FaultSchedule"):
        as_schedule(3)


def test_play_records_faults_labels_and_the_end():
    # PingTool: need is 1 or 2; a timed-out ping pays timeout_reward and (here) ends the episode.
    episode = play(lambda: PingTool(timeout_reward=0.5, end_on_timeout=True), ["ping", "ping"],
                   seed=3, faults={1: "timeout"})
    assert [s.label for s in episode.steps] == ["ping", "ping"]
    assert episode.statuses == ["ok", "timeout"]
    assert [s.injected for s in episode.steps] == [False, True]
    assert [s.call for s in episode.steps] == [0, 1]
    assert episode.rewards == [0.0, 0.5]
    assert episode.finished and episode.end_reason == "tool_timeout" and episode.outcome == "timeout"
    assert episode.success is False
    row = episode.records.episodes.iloc[0]  # AuditWrapper's own record of the same episode
    assert row["return"] == episode.episode_return and row["end_reason"] == episode.end_reason
    assert list(episode.records.steps["tool_status"]) == episode.statuses


def test_then_repeat_plays_to_the_step_limit_and_render_folds_it():
    episode = play(lambda: FetchTask(max_steps=6, truncation_reward=0.25), ["fetch_mirror"], then_repeat="wait")
    assert episode.length == 6 and episode.end_reason == "truncated"
    assert episode.episode_return == 0.25
    text = episode.render()
    assert "fetch_mirror" in text and "3 more steps like step 1 (steps 2–4)" in text
    assert "return +0.25 · ended truncated, outcome timeout, success False" in text


def test_unfinished_episodes_say_so():
    episode = play(PingTool, ["ping"], seed=0)
    assert not episode.finished and episode.end_reason is None and episode.outcome is None
    assert "unfinished after 1 step" in str(episode)


def test_plain_envs_refuse_fault_schedules():
    with EnvSession(FetchTask) as session:
        assert not session.injects and session.labels == ["fetch", "fetch_mirror", "submit", "wait", "claim"]
        with pytest.raises(ValueError, match="not an envaudit.ToolEnv.*drop faults="):
            session.play(Plan(0, (0,), None, FaultSchedule({0: "error"})))


def test_bad_targets_and_labels_are_named():
    with pytest.raises(TypeError, match="got an env instance .*pass its class"):
        play(FetchTask(), [0])
    with pytest.raises(TypeError, match="zero-argument factory"):
        play(42, [0])
    with pytest.raises(ValueError, match="no action labelled 'pong'; its labels are \\['ping', 'done'\\]"):
        play(PingTool, ["pong"])
    with pytest.raises(ValueError, match="unknown tool"):
        play(PingTool, ["ping"], faults=FaultSchedule({0: "error"}, tools=["nope"]))


def test_envs_without_a_step_limit_are_cut_at_max_steps():
    class Endless(OneState):
        action_space = gym.spaces.Discrete(2)

        def step(self, action):
            return 0, 1.0, False, False, {}

    episode = play(Endless, [], then_repeat=1, max_steps=7)
    assert episode.length == 7 and episode.end_reason == "truncated" and episode.episode_return == 7.0


def test_play_keeps_the_observations_reset_first_then_one_per_step():
    # FetchTask observes [facts, need, t]: each working fetch adds a fact, every step counts in t.
    episode = play(FetchTask, ["fetch", "fetch", "submit"], seed=0)
    assert episode.observations is not None and len(episode.observations) == episode.length + 1
    facts, need, t = zip(*(obs.tolist() for obs in episode.observations), strict=True)
    assert t == (0, 1, 2, 3) and facts[:3] == (0, 1, 2) and len(set(need)) == 1 and need[0] in (1, 2)
    assert episode.success == (facts[-1] >= need[0])
