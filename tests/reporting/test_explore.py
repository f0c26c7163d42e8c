"""The notebook's helpers on the synthetic report, whose episodes are known by construction."""

from envaudit.grouping import make_group
from envaudit.reporting import explore
from envaudit.reporting.load import load_report
from tests.reporting import synthetic


def test_episodes_carry_their_behaviour_and_filter_by_it():
    view = load_report(synthetic.full_report([]))
    eps = explore.episodes(view)
    # success; a failure with 1 of 3 calls failed (ended without success); a tool timeout; 1 of 1 call failed.
    assert eps.set_index("episode_id")["behaviour"].to_dict() == {0: "success", 1: "quit", 2: "timeout",
                                                                   3: "tool-failure"}
    assert explore.episodes(view, outcome="timeout")["episode_id"].tolist() == [2]
    assert explore.episodes(view, behaviour="tool-failure")["episode_id"].tolist() == [3]
    assert explore.episodes(view, probe="nobody").empty


def test_exploit_episode_is_an_example_of_the_groups_behaviour():
    view = load_report(synthetic.full_report([]))
    f = synthetic._finding("timeout-rewarded", examples=[0, 1, 2])  # 0 succeeded, 2 timed out
    assert explore.exploit_episode(view, make_group(f, [f], "timeout", "env")) == 2
    none = synthetic._finding("timeout-rewarded", examples=[])
    assert explore.exploit_episode(view, make_group(none, [none], "timeout", "env")) is None


def test_playback_reads_step_by_step_with_the_return_so_far():
    view = load_report(synthetic.full_report([]))
    lines = explore.playback(view, 2)
    assert lines[0] == "step 0: wait → tool wait ok; reward +0.1, return so far 0.1"
    assert lines[3] == "step 3: wait → tool wait timeout; reward +0.5, return so far 0.8"
    assert lines[-1] == "ended: tool_timeout, outcome timeout, return 0.8 in 4 steps (timeout)"
    assert explore.playback(view, 99) == ["episode 99 has no recorded steps in this report"]


def test_two_pipelines_side_by_side():
    view = load_report(synthetic.full_report([synthetic._finding("timeout-drop-incentive")]))
    table = explore.advantages_side_by_side({"rllm": view, "empty": load_report(synthetic.empty_report())})
    assert list(table.columns) == ["rllm"]  # a report without the pipeline table has no column
    assert table.loc["failure", "rllm"] == -0.7 and table.loc["success", "rllm"] == 0.9  # the configured rows
    groups = explore.groups_side_by_side({"a": view, "b": load_report(synthetic.empty_report())})
    assert groups.loc["timeout / pipeline: timeout-drop-incentive"].tolist() == ["warn", "—"]
