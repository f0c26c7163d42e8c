"""search.py: option parsing, settings, and the parts of a failure message (replay code, table)."""

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, settings

from envaudit.testing import play
from envaudit.testing.search import (
    COMMON_OPTIONS,
    DEFAULT_MAX_EXAMPLES,
    Counterexample,
    Options,
    PropertyFailed,
    PropertyNotExercised,
    _actions_code,
    _Found,
    _found_in,
    open_session,
    parse_options,
    render_failure,
    replay_code,
    search_settings,
    target_text,
)
from envaudit.testing.trajectory import DEFAULT_MAX_STEPS, FaultSchedule
from tests.testing.toy_envs import FetchTask, PingTool


# -- options ------------------------------------------------------------------------------------
def test_options_split_into_common_and_the_property_s_own():
    opts, rest = parse_options("p", {"max_examples": 3, "seed": 2, "depth": 4, "tolerance": 0.5}, ("depth",))
    assert opts == Options(max_examples=3, seed=2, tolerance=0.5) and rest == {"depth": 4}
    assert parse_options("p", {}) == (Options(), {})
    assert Options() == Options(None, DEFAULT_MAX_STEPS, 0, None, None, True, 1e-9)
    opts, _ = parse_options("p", {"max_steps": None, "max_examples": None, "faults": False, "seeds": [1],
                                  "tolerance": 0, "settings": None})
    assert opts.max_steps == DEFAULT_MAX_STEPS and opts.max_examples is None and opts.faults is False
    assert opts.seeds == [1] and opts.tolerance == 0
    assert parse_options("p", {"max_steps": 1})[0].max_steps == 1


def test_unknown_options_are_named_with_the_closest_match_and_the_list():
    with pytest.raises(TypeError) as info:
        parse_options("prop", {"max_exampels": 3, "zzz": 1}, ("depth",))
    assert str(info.value) == ("prop() got an unexpected option 'max_exampels'; did you mean 'max_examples'? "
                               "(options: " + ", ".join([*COMMON_OPTIONS, "depth"]) + ")")
    with pytest.raises(TypeError) as info:
        parse_options("prop", {"zzz": 1})
    assert str(info.value) == "prop() got an unexpected option 'zzz' (options: " + ", ".join(COMMON_OPTIONS) + ")"
    with pytest.raises(TypeError, match="unexpected option 'depth'"):
        parse_options("prop", {"depth": 2})  # another property's option


@pytest.mark.parametrize("name", ["max_examples", "max_steps"])
@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "3"])
def test_counts_must_be_positive_ints(name, bad):
    with pytest.raises(ValueError) as info:
        parse_options("prop", {name: bad})
    assert str(info.value) == f"prop(): {name} must be a positive int, got {bad!r}"


@pytest.mark.parametrize("option,bad,error,text", [
    ("seed", True, ValueError, "prop(): seed must be an int, got True"),
    ("seed", "0", ValueError, "prop(): seed must be an int, got '0'"),
    ("settings", {"max_examples": 3}, TypeError, "prop(): settings must be a hypothesis.settings object, got dict"),
    ("faults", 1, ValueError, "prop(): faults must be True or False, got 1"),
    ("faults", None, ValueError, "prop(): faults must be True or False, got None"),
    ("tolerance", -0.1, ValueError, "prop(): tolerance must be a number >= 0, got -0.1"),
    ("tolerance", "0", ValueError, "prop(): tolerance must be a number >= 0, got '0'"),
])
def test_bad_values_are_named(option, bad, error, text):
    with pytest.raises(error) as info:
        parse_options("prop", {option: bad})
    assert str(info.value) == text


def test_good_values_pass():
    base = settings(max_examples=4)
    opts, _ = parse_options("p", {"seed": -3, "settings": base, "faults": True, "tolerance": 2})
    assert opts.seed == -3 and opts.settings is base and opts.faults is True and opts.tolerance == 2


def test_default_settings_pin_everything_that_could_change_the_cases():
    chosen = search_settings(Options())
    assert chosen.max_examples == DEFAULT_MAX_EXAMPLES == 50
    assert chosen.deadline is None and chosen.derandomize is False and chosen.database is None
    assert tuple(chosen.phases) == (Phase.generate, Phase.shrink)
    assert set(chosen.suppress_health_check) == set(HealthCheck)
    assert chosen.verbosity == Verbosity.quiet and chosen.print_blob is False
    assert chosen.report_multiple_bugs is False
    assert getattr(chosen, "backend", "hypothesis") == "hypothesis"


def test_the_loaded_profile_cannot_print_blobs():
    settings.register_profile("envaudit-test-blob", print_blob=True, max_examples=3)
    before = settings.get_current_profile_name()
    settings.load_profile("envaudit-test-blob")
    try:
        chosen = search_settings(Options())
    finally:
        settings.load_profile(before)
    assert chosen.print_blob is False and chosen.max_examples == DEFAULT_MAX_EXAMPLES


def test_a_user_s_settings_are_the_base():
    mine = settings(max_examples=7, deadline=300, derandomize=True, report_multiple_bugs=True,
                    phases=[Phase.generate])
    chosen = search_settings(Options(settings=mine))
    assert chosen.max_examples == 7 and chosen.deadline.total_seconds() == 0.3 and chosen.derandomize is True
    assert tuple(chosen.phases) == (Phase.generate,)
    assert chosen.database is None and chosen.report_multiple_bugs is False  # always forced
    assert search_settings(Options(settings=mine, max_examples=2)).max_examples == 2


def test_open_session_applies_max_steps_and_faults():
    with open_session(PingTool, Options(max_steps=7, faults=False)) as session:
        assert session.max_steps == 7 and not session.injects
    with open_session(PingTool, Options()) as session:
        assert session.max_steps == DEFAULT_MAX_STEPS and session.injects


# -- counterexamples and messages ---------------------------------------------------------------
def test_counterexamples_and_errors_carry_what_was_found():
    episode = play(FetchTask, ["wait", "submit"])
    found = Counterexample("it pays", episode)
    assert found.actions == (3, 2) and found.compared == [] and found.details == "" and found.evidence == {}
    failed = PropertyFailed("message", found, "prop")
    assert isinstance(failed, AssertionError) and str(failed) == "message"
    assert failed.counterexample is found and failed.property == "prop"
    seen = {"finished": 3}
    idle = PropertyNotExercised("why", "prop", seen)
    assert isinstance(idle, AssertionError) and str(idle) == "why" and idle.property == "prop"
    assert idle.seen == seen and idle.seen is not seen
    assert PropertyNotExercised("why", "prop").seen == {}


def actions_code(labels_or_actions, *, env=FetchTask):
    return _actions_code(play(env, labels_or_actions))


def test_actions_code_folds_runs_of_three_or_more():
    assert actions_code([]) == "[]"
    assert actions_code(["wait"]) == "['wait']"
    assert actions_code(["wait", "wait"]) == "['wait', 'wait']"
    assert actions_code(["wait"] * 3) == "['wait'] * 3"
    assert actions_code(["fetch_mirror", "wait", "wait", "wait", "wait", "submit"]) == (
        "['fetch_mirror'] + ['wait'] * 4 + ['submit']")
    assert actions_code(["wait"] * 3 + ["fetch_mirror", "fetch_mirror"]) == (
        "['wait'] * 3 + ['fetch_mirror', 'fetch_mirror']")
    assert actions_code(["fetch_mirror", "wait", "fetch_mirror"]) == "['fetch_mirror', 'wait', 'fetch_mirror']"


def test_actions_code_writes_actions_without_labels_as_values():
    import gymnasium as gym

    episode = play(lambda: gym.make("CartPole-v1"), [0, 1, 1, 1])
    assert _actions_code(episode) == "[0] + [1] * 3"


def test_replay_code_is_a_play_call_with_the_seed_and_faults():
    assert replay_code("make_env", play(FetchTask, ["submit"], seed=4)) == (
        "envaudit.testing.play(make_env, ['submit'], seed=4)")
    faulted = play(PingTool, ["ping", "done"], seed=2, faults={1: "error", 0: "timeout"})
    assert replay_code("PingTool", faulted) == (
        "envaudit.testing.play(PingTool, ['ping', 'done'], seed=2, faults={0: 'timeout', 1: 'error'})")
    every = play(PingTool, ["ping"], faults=FaultSchedule(every="timeout"))
    assert replay_code("'x'", every) == (
        "envaudit.testing.play('x', ['ping'], seed=0, faults=envaudit.testing.FaultSchedule(every='timeout'))")
    tools = play(PingTool, ["ping"], faults=FaultSchedule({0: "error"}, tools=["ping"]))
    assert replay_code("t", tools).endswith(", faults=envaudit.testing.FaultSchedule({0: 'error'}, tools=['ping']))")


def test_target_text_names_what_the_user_passed():
    def make_env_v2():
        return FetchTask()

    assert target_text("envaudit/FlakySearch-v0") == "'envaudit/FlakySearch-v0'"
    assert target_text(make_env_v2) == "make_env_v2" and target_text(FetchTask) == "FetchTask"
    assert target_text(lambda: FetchTask()) == "make_env"
    assert target_text(object()) == "make_env"


def test_render_failure_lays_out_summary_trajectory_comparisons_and_replay():
    bad = play(FetchTask, ["claim"], seed=1)
    good = play(FetchTask, ["fetch_mirror", "fetch_mirror", "submit"], seed=1)
    found = Counterexample("it pays.", bad, [("the success", good)], details="More detail.")
    text = render_failure("prop", "make_env", found, 12)
    assert text == "\n".join([
        "prop failed on FetchTask: it pays.", "",
        "Counterexample (shrunk, after 12 generated cases):", bad.render(), "",
        "Compared with the success:", good.render(), "",
        "More detail.", "",
        "Replay it: envaudit.testing.play(make_env, ['claim'], seed=1)",
    ])
    plain = render_failure("prop", "m", Counterexample("s", bad), 3, flaky=True)
    assert plain.split("\n")[2] == ("Counterexample (not shrunk: it did not fail again when replayed, so the env is "
                                    "nondeterministic; found after 3 generated cases):")
    assert "Compared with" not in plain and plain.count("\n\n") == 2
    assert render_failure("p", "m", Counterexample("s", bad), 3, flaky=True, how="by hand").split("\n")[2] == (
        "Counterexample (by hand):")


def test_found_in_looks_through_nested_groups():
    found = _Found(Counterexample("s", play(FetchTask, ["claim"])))
    assert _found_in(found) is found
    assert _found_in(ValueError("x")) is None
    group = ExceptionGroup("outer", [ValueError("a"), ExceptionGroup("inner", [KeyError("b"), found])])
    assert _found_in(group) is found
    assert _found_in(ExceptionGroup("none", [ValueError("a")])) is None
    assert str(found) == "s"
