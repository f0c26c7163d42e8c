"""FaultSchedule, as_schedule, Plan and how an episode renders: every case the docstrings name."""

import numpy as np
import pytest

from envaudit.testing.trajectory import (
    Episode,
    FaultSchedule,
    Plan,
    Step,
    as_schedule,
    render_episode,
    short_text,
)


# -- FaultSchedule ------------------------------------------------------------------------------
def test_faults_are_sorted_int_keyed_pairs_from_a_mapping_or_pairs():
    schedule = FaultSchedule([(np.int64(3), "error"), (1, "timeout")])
    assert schedule.faults == ((1, "timeout"), (3, "error"))
    assert all(type(k) is int for k, _ in schedule.faults)
    assert schedule == FaultSchedule({3: "error", 1: "timeout"})
    assert schedule.every is None and schedule.tools is None
    assert FaultSchedule(tools=("b", "a", "b")).tools == frozenset({"a", "b"})
    assert FaultSchedule({0: "error"}, tools=[]).tools == frozenset()  # no tools: not "every tool"
    assert FaultSchedule({0: "error"}, tools=[])("x", 0) is None


@pytest.mark.parametrize("key", [True, False, -1, "0", 1.0])
def test_keys_must_be_non_negative_ints(key):
    with pytest.raises(ValueError) as info:
        FaultSchedule({key: "error"})
    assert str(info.value) == f"a fault schedule is keyed by tool-call index (an int >= 0), got {key!r}"


def test_index_zero_is_a_valid_key():
    assert FaultSchedule({0: "timeout"})("t", 0) == "timeout"


def test_statuses_must_be_error_or_timeout():
    with pytest.raises(ValueError) as info:
        FaultSchedule(every="crash")
    assert str(info.value) == "every must be 'error' or 'timeout', got 'crash'"
    with pytest.raises(ValueError, match=r"^faults\[2\] must be 'error' or 'timeout', got None$"):
        FaultSchedule({2: None})
    assert FaultSchedule(every="error").every == "error"


def test_every_applies_to_unlisted_calls_and_tools_restrict_both():
    schedule = FaultSchedule({1: "error"}, every="timeout", tools=["search"])
    assert [schedule("search", k) for k in range(3)] == ["timeout", "error", "timeout"]
    assert [schedule("open", k) for k in range(3)] == [None, None, None]


def test_with_fault_keeps_every_and_tools():
    schedule = FaultSchedule({0: "error"}, every="timeout", tools=["search"])
    added = schedule.with_fault(2, "error")
    assert added == FaultSchedule({0: "error", 2: "error"}, every="timeout", tools=["search"])
    removed = schedule.with_fault(0, None)
    assert removed == FaultSchedule(every="timeout", tools=["search"])
    assert schedule.with_fault(5, None) == schedule  # removing an absent fault changes nothing
    assert schedule.faults == ((0, "error"),)  # the original is untouched


def test_empty_means_no_fault_at_all():
    assert FaultSchedule().empty and FaultSchedule(tools=["a"]).empty
    assert not FaultSchedule({0: "error"}).empty
    assert not FaultSchedule(every="timeout").empty


@pytest.mark.parametrize("schedule,text", [
    (FaultSchedule(), "FaultSchedule({})"),
    (FaultSchedule(tools=["b", "a"]), "FaultSchedule({}, tools=['a', 'b'])"),
    (FaultSchedule(every="timeout"), "FaultSchedule(every='timeout')"),
    (FaultSchedule({2: "error", 0: "timeout"}, every="error", tools=["x"]),
     "FaultSchedule({0: 'timeout', 2: 'error'}, every='error', tools=['x'])"),
])
def test_repr_is_the_call_that_builds_it(schedule, text):
    assert repr(schedule) == text
    assert eval(text) == schedule


@pytest.mark.parametrize("schedule,text", [
    (FaultSchedule({1: "error"}), "call 1 fails"),
    (FaultSchedule({0: "timeout", 3: "error"}), "call 0 times out, call 3 fails"),
    (FaultSchedule(every="timeout"), "every call times out"),
    (FaultSchedule(every="error"), "every call fails"),
    (FaultSchedule({0: "error"}, every="timeout"), "call 0 fails, every other call times out"),
    (FaultSchedule({0: "timeout"}, every="error"), "call 0 times out, every other call fails"),
    (FaultSchedule({0: "error"}, tools=["b", "a"]), "call 0 fails (tools a, b)"),
    (FaultSchedule(tools=["a"]), "no faults"),
])
def test_str_reads_as_a_sentence(schedule, text):
    assert str(schedule) == text


def test_as_schedule_takes_every_form():
    schedule = FaultSchedule({0: "error"})
    assert as_schedule(None) is None
    assert as_schedule(schedule) is schedule
    assert as_schedule({2: "timeout"}) == FaultSchedule({2: "timeout"})
    assert as_schedule(("error", None, "timeout")) == FaultSchedule({0: "error", 2: "timeout"})
    assert as_schedule([]) == FaultSchedule()
    with pytest.raises(TypeError) as info:
        as_schedule("error")
    assert str(info.value) == ("faults must be a FaultSchedule, a {call_index: 'error'|'timeout'} mapping or a "
                               "list of statuses, got str")


def test_plan_with_fault_starts_from_no_faults_or_adds_to_them():
    plan = Plan(4, (1, 2), then_repeat=3)
    assert plan.faults is None and plan.actions == (1, 2)
    first = plan.with_fault(1, "timeout")
    assert first == Plan(4, (1, 2), 3, FaultSchedule({1: "timeout"}))
    assert first.with_fault(0, "error").faults == FaultSchedule({0: "error", 1: "timeout"})
    assert first.with_fault(1, None).faults == FaultSchedule()
    assert Plan(None) == Plan(None, (), None, None)


# -- text ---------------------------------------------------------------------------------------
def test_short_text_is_one_width_limited_line():
    assert short_text(3) == "3" and short_text("go") == "'go'"
    assert short_text(np.array([1.0, 0.5])) == "[1. , 0.5]"
    assert short_text(np.array([[1, 2], [3, 4]])) == "[[1, 2], [3, 4]]"  # newlines folded
    assert short_text(np.arange(20)) == "[ 0, 1, 2, ..., 17, 18, 19]"  # summarised past 8 items
    assert short_text(np.array([1 / 3])) == "[0.333]"  # three digits
    forty = "x" * 38
    assert short_text(forty) == repr(forty)  # exactly the width: kept
    long = "y" * 39
    assert short_text(long) == repr(long)[:39] + "…" and len(short_text(long)) == 40
    assert short_text("abcdef", width=5) == "'abc…"


def step(index, action, reward=0.0, *, label=None, end="", tool=None, status=None, injected=False, call=None):
    return Step(index, action, label, reward, end == "terminated", end == "truncated", tool, status, injected,
                None, call)


def episode(steps, *, seed=0, faults=None, end=None, outcome=None, success=None):
    return Episode("Toy", seed, tuple(s.action for s in steps), faults, tuple(steps), end is not None, end,
                   outcome, success)


def test_step_reads_its_label_or_its_action():
    assert step(0, 2, label="submit").action_text == "submit"
    assert step(0, np.array([0.25, 1.0])).action_text == "[0.25, 1. ]"  # runs of spaces folded
    assert step(0, 7).action_text == "7"


def test_episode_totals():
    ep = episode([step(0, 0, 0.5, status="ok"), step(1, 1, -0.25), step(2, 0, 1.0, status="error")])
    assert ep.episode_return == 1.25 and isinstance(ep.episode_return, float)
    assert ep.rewards == [0.5, -0.25, 1.0] and ep.length == 3 and ep.statuses == ["ok", None, "error"]
    assert episode([]).episode_return == 0.0 and episode([]).length == 0


def test_render_lays_out_a_table_with_faults_tools_and_the_end():
    ep = episode([step(0, 0, label="ping", tool="ping", status="timeout", injected=True, call=0),
                  step(1, 1, 1.0, label="done", tool="done", status="ok", end="terminated", call=1)],
                 seed=3, faults=FaultSchedule({0: "timeout"}), end="terminated", outcome="success", success=True)
    assert render_episode(ep, title="Found") == "\n".join([
        "Found: reset(seed=3), faults FaultSchedule({0: 'timeout'})",
        "  step  action  tool call                  reward",
        "     0  ping    ping → timeout (injected)      +0",
        "     1  done    done → ok                      +1  terminated",
        "  return +1 · ended terminated, outcome success, success True",
    ])
    assert ep.render() == render_episode(ep) == str(ep)
    assert str(ep).startswith("reset(seed=3), faults")


def test_render_leaves_out_empty_faults_and_marks_truncation():
    ep = episode([step(0, 3, 0.125, end="truncated")], seed=None, faults=FaultSchedule(), end="truncated",
                 outcome="timeout", success=False)
    assert str(ep).split("\n") == [
        "reset(seed=None)",
        "  step  action  tool call  reward",
        "     0  3       -          +0.125  truncated",
        "  return +0.125 · ended truncated, outcome timeout, success False",
    ]


def test_render_folds_runs_of_three_or_more_identical_steps_only():
    three = episode([step(i, 1, 0.5) for i in range(3)] + [step(3, 2, end="terminated")], end="terminated",
                    outcome="failure", success=False)
    lines = str(three).split("\n")
    assert lines[2] == "     0  1       -            +0.5"
    assert lines[3] == "     …  2 more steps like step 0 (steps 1–2)"
    assert lines[4].startswith("     3  2") and len(lines) == 6
    two = episode([step(0, 1), step(1, 1)])
    assert str(two).split("\n")[2:4] == ["     0  1       -              +0",
                                          "     1  1       -              +0"]
    differ = episode([step(0, 1), step(1, 1, 1.0), step(2, 1)])  # the reward differs in the middle
    assert "more steps" not in str(differ)


def test_render_does_not_fold_past_an_ending_step():
    ended = episode([step(0, 1, end="terminated"), step(1, 1, end="terminated"), step(2, 1, end="terminated")])
    assert "more steps" not in str(ended) and str(ended).count("terminated") == 3


def test_unfinished_and_empty_episodes_say_how_many_steps():
    assert str(episode([])).split("\n") == ["reset(seed=0)", "  (no steps)", "  return +0 · unfinished after 0 steps"]
    assert str(episode([step(0, 1)])).endswith("unfinished after 1 step")
    assert str(episode([step(0, 1), step(1, 2)])).endswith("unfinished after 2 steps")


def test_a_run_that_ends_the_episode_is_folded_too():
    lines = str(episode([step(i, 1) for i in range(3)])).split("\n")
    assert lines[3] == "     …  2 more steps like step 0 (steps 1–2)" and len(lines) == 5


def test_short_text_summarises_past_eight_items():
    assert short_text(np.arange(8)) == "[0, 1, 2, 3, 4, 5, 6, 7]"
    assert short_text(np.arange(9)) == "[0, 1, 2, ..., 6, 7, 8]"
