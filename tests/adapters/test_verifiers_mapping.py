"""verifiers: the adapter's own parts -- options, fingerprint, turns, the catalogue check and the
mapping of a finished ``Episode`` -- pinned against verifiers 0.4 itself.

The envs are the test modules of ``tests/adapters/data/`` (see ``test_verifiers.py``) and small
modules written here with verifiers' public classes; the traces and episodes are verifiers' own
``Trace``/``Episode`` objects with their own ``record_*`` methods. Each expected value follows from
the module's rubric, worked out by hand as the test says, so that a wrong key, a swapped branch or
an off-by-one in the adapter fails a test.
"""

from __future__ import annotations

import importlib.metadata
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1")

import verifiers.v1 as vf  # noqa: E402
from verifiers.v1.trace import Error  # noqa: E402

from envaudit.adapters.verifiers import (  # noqa: E402
    CORRECTNESS,
    VerifiersEnv,
    check,
    correctness_key,
    map_episode,
)
from envaudit.errors import UsageError  # noqa: E402

DATA = Path(__file__).parent / "data"
SUMS = str(DATA / "vf_sums.py")
GUESS = str(DATA / "vf_guess.py")
VERSION = importlib.metadata.version("verifiers")
ANY_SIGNAL = ("a correctness reward or metric (correct, correctness, accuracy, exact_match, is_correct, solved, "
              "passed, success) equals 1; none: no success flag")


# -- options and resolution ---------------------------------------------------------------------
@pytest.mark.parametrize(("options", "message"), [
    ({"size": 0}, "--env-arg size=0: expected a positive integer"),
    ({"size": True}, "--env-arg size=True: expected a positive integer"),
    ({"turn_cap": "2"}, "--env-arg turn_cap='2': expected a positive integer"),
    ({"max_turns": 0}, "--env-arg max_turns=0: expected a positive integer (verifiers' turn limit)"),
    ({"max_turns": False}, "--env-arg max_turns=False: expected a positive integer (verifiers' turn limit)"),
    ({"event_cap_s": 0}, "--env-arg event_cap_s=0: expected a positive number of seconds"),
    ({"event_cap_s": True}, "--env-arg event_cap_s=True: expected a positive number of seconds"),
    ({"event_cap_s": "9"}, "--env-arg event_cap_s='9': expected a positive number of seconds"),
    ({"max_turns": "3"}, "--env-arg max_turns='3': expected a positive integer (verifiers' turn limit)"),
])
def test_each_bad_adapter_option_is_named(options, message):
    with pytest.raises(UsageError) as caught:
        check(SUMS, **options)
    assert str(caught.value) == message


def test_the_smallest_options_are_allowed():
    assert check(SUMS, size=1, turn_cap=1, max_turns=1, event_cap_s=0.5) is None


def _module(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_modules_that_are_not_envs_are_usage_errors_naming_what_is_expected(tmp_path):
    missing = str(tmp_path / "nowhere" / "env.py")
    with pytest.raises(UsageError) as caught:
        check(missing)
    assert str(caught.value) == (f"verifiers:{missing}: no such file; expected a .py file exposing "
                                 "load_environment(**kwargs) or an importable module name")
    number = _module(tmp_path, "vf_number", "def load_environment(**kwargs):\n    return 42\n")
    check(number)  # importing it is fine; what it builds is checked when the env is made
    with pytest.raises(UsageError) as caught:
        VerifiersEnv(number)
    assert str(caught.value) == (f"verifiers:{number}: load_environment returned a int; expected a verifiers Env "
                                 "(vf.Env) or EnvConfig")
    strict = _module(tmp_path, "vf_strict", "def load_environment(turns: int = 1):\n    return None\n")
    with pytest.raises(UsageError, match=r"load_environment rejected the options \{'colour': 'red'\}: .*colour"):
        VerifiersEnv(strict, colour="red")
    # A module that fails on a missing dependency of its own is the module's error, not a typo.
    broken = _module(tmp_path, "vf_broken", "import envaudit_no_such_dependency\n")
    with pytest.raises(ModuleNotFoundError):
        check(broken)
    with pytest.raises(UsageError) as caught:
        check("envaudit_no_such_module.sub")
    assert str(caught.value) == ("verifiers:envaudit_no_such_module.sub: no module named 'envaudit_no_such_module'; "
                                 "expected an importable module or a path to a .py file exposing "
                                 "load_environment(**kwargs)")


EMPTY = """
import verifiers.v1 as vf

class EmptyTaskset(vf.Taskset[vf.Task, vf.TasksetConfig]):
    def load(self):
        return iter(())

__all__ = ["EmptyTaskset"]
"""


def test_a_taskset_without_tasks_or_with_unknown_options_is_a_usage_error(tmp_path):
    empty = _module(tmp_path, "vf_empty", EMPTY)
    with pytest.raises(UsageError) as caught:
        VerifiersEnv(empty)
    assert str(caught.value) == f"verifiers:{empty}: the env's taskset yielded no tasks"
    with pytest.raises(UsageError, match=r"the taskset config rejected the options \{'colour': 'red'\}"):
        check(SUMS, colour="red")


# -- the fingerprint and the turns ----------------------------------------------------------------
def test_the_fingerprint_of_a_taskset_plugin():
    env = VerifiersEnv(SUMS, size=8)
    try:
        info = {k: v for k, v in env.adapter_info.items() if k not in ("catalogue_check", "grading")}
        assert info == {
            "ecosystem": "verifiers", "package": "verifiers", "version": VERSION, "target": SUMS,
            "module": "envaudit_vf_vf_sums", "env_class": "verifiers.v1.envs.single_agent.env.SingleAgentEnv",
            "taskset": "SumsTaskset", "tasks": 8, "tool_env": False, "options": {}, "success": ANY_SIGNAL,
            "reference": "the task data's answer/reference/target/solution/ground_truth field",
            "turn_limit": None, "turn_cap": 20,
            "deadlines": "verifiers' wall-clock deadlines are lifted: an audited episode waits on the auditor",
            "replay": "the reset seed picks the task (seed mod tasks)",
        }
        assert env.max_steps == 20 and env.has_reference and not env.tool_env
        assert "signal.alarm" in env.adapter_info["grading"]
        # Task 2 of vf_sums adds 7*2+3 and 11*2+5; its system prompt asks for \boxed{N}.
        obs, info = env.reset(seed=10)
        assert (obs, info) == ("What is 17 + 27?", {"index": 2, "system_prompt": "Add the numbers. Give the result as \\boxed{N}."})
        texts = env.candidates()
        assert (texts["reference"], texts["unformatted"], texts["wrong_1"]) == ("\\boxed{44}", "44", "\\boxed{45}")
        assert env.step(0) == ("", 1.25, True, False, {"rewards": {"boxed": 1.0, "correct": 1.0},
                                                       "stop_condition": "agent_completed", "success": True, "index": 2})
    finally:
        env.close()


def test_the_turn_limit_the_named_signal_and_the_answer_field():
    """By hand: vf_guess with max_number 3 makes task 1's number (5*1+3) % 3 + 1 = 3; the seat's
    max_turns is 4, so the adapter's cap defaults to 5 (one past it). A guess of 4 is answered
    "lower", of 2 "higher"; the fourth wrong guess is verifiers' max_turns stop."""
    env = VerifiersEnv(GUESS, size=4, max_number=3)
    try:
        assert (env.turn_limit, env.turn_cap, env.max_steps) == (4, 5, 5)
        obs, info = env.reset(seed=1)
        assert (obs, info) == ("Guess my number between 1 and 3. Answer as \\boxed{N}.", {"index": 1, "system_prompt": ""})
        wrong_1, wrong_2 = env.action_labels.index("wrong_1"), env.action_labels.index("wrong_2")
        assert env.step(wrong_1) == ("Wrong: lower.", 0.0, False, False, {"index": 1})
        assert env.step(wrong_2) == ("Wrong: higher.", 0.0, False, False, {"index": 1})
        env.step(wrong_1)
        assert env.step(wrong_2) == ("", 0.0, False, True, {"rewards": {"correct": 0.0}, "stop_condition": "max_turns",
                                                            "success": False, "index": 1})
    finally:
        env.close()
    capped = VerifiersEnv(GUESS, size=4, max_number=3, turn_cap=2, success="correct", answer_field="answer")
    try:
        assert capped.adapter_info["success"] == "the reward or metric 'correct' equals 1"
        assert capped.adapter_info["reference"] == "the task data's 'answer' field"
        assert capped.adapter_info["options"] == {"max_number": "3"} and capped.max_steps == 2
        capped.reset(seed=1)
        capped.step(wrong_1)
        assert capped.step(wrong_1) == ("", 0.0, False, True, {"index": 1, "success": False, "end": "turn_cap"})
        # The cut episode is abandoned: the next one starts clean, and the reference ends it with success.
        capped.reset(seed=1)
        assert capped.step(capped.action_labels.index("reference"))[1:] == (
            1.0, True, False, {"rewards": {"correct": 1.0}, "stop_condition": "user_closed", "success": True, "index": 1})
    finally:
        capped.close()


# -- the catalogue check --------------------------------------------------------------------------
def test_the_catalogue_check_counts_what_the_rubric_pays():
    """By hand, vf_sums' rubric on its first 3 tasks: the 7 strategies that carry a \\boxed{}
    (reference, the two wrong answers, the hedges, the trailing reference, the partial answer) earn
    at least the 0.25 format reward; unformatted, empty and echo earn 0: 21 of 30. Outcomes (return,
    success, ended): (1.25, True), (0.25, False), (0, False), all ended."""
    env = VerifiersEnv(SUMS, size=8)
    try:
        assert env.catalogue_check(tasks=3) == {
            "entries": 3, "strategies": 10, "played": 30, "well_formed_share": 0.7, "distinct_outcomes": 3,
            "success_defined": True, "playable": True, "reference_success_share": 1.0, "reference_return": 1.25,
            "full_marks_without_success": {}, "scorer_errors": {"count": 0, "examples": []},
        }
        none = env.catalogue_check(tasks=0)
        assert (none["played"], none["well_formed_share"], none["playable"], none["reference_success_share"],
                none["reference_return"]) == (0, 0.0, False, 0.0, None)
        # The check leaves the reset generator where it was: a seedless reset draws as it would have.
        env.reset(seed=3)
        env.catalogue_check(tasks=1)
        env.reset()
        after_check = env.index
        env.reset(seed=3)
        env.reset()
        assert env.index == after_check
    finally:
        env.close()


def _addition_taskset(rewards: str, tasks: int) -> str:
    """A taskset plugin of ``tasks`` additions ("What is i + 1?"), its task scored by ``rewards``
    (the reward methods' source, indented as methods of the task class)."""
    return textwrap.dedent("""
        import verifiers.v1 as vf
        from verifiers.v1.utils.score import extract_boxed_answer


        class D(vf.TaskData):
            answer: str


        class T(vf.Task[D, vf.State, vf.TaskConfig]):
        {rewards}


        class Additions(vf.Taskset[T, vf.TasksetConfig]):
            def load(self):
                for i in range({tasks}):
                    yield T(D(prompt=f"What is {{i}} + 1? Answer as \\\\boxed{{{{N}}}}.", answer=str(i + 1)),
                            self.config.task)


        __all__ = ["D", "T", "Additions"]
    """).format(rewards=textwrap.indent(textwrap.dedent(rewards).strip(), "    "), tasks=tasks)


LENIENT = _addition_taskset("""
    @vf.reward(weight=0.0)
    async def correct(self, task, trace) -> float:
        return 1.0 if extract_boxed_answer(trace.last_reply, strict=True).strip() == task.answer else 0.0

    @vf.reward(weight=1.0)
    async def boxed(self, task, trace) -> float:
        return 1.0 if "\\\\boxed{" in trace.last_reply else 0.0
""", tasks=4)


def test_the_catalogue_check_names_strategies_paid_like_the_reference_without_success(tmp_path):
    """By hand: this rubric pays any \\boxed{} reply 1 and weighs correctness 0, so the reference
    earns 1 with success, and so does every boxed reply whose last box is the answer (hedge_last,
    reference_trailing); the two wrong answers, hedge_all and the partial answer (an empty box: a
    one-digit answer has no shorter part) earn the same 1 without success on both tasks, and so does
    the echo of the prompt, which carries the prompt's own "\\boxed{N}"."""
    env = VerifiersEnv(_module(tmp_path, "vf_lenient", LENIENT), size=4)
    try:
        check_ = env.catalogue_check(tasks=2)
    finally:
        env.close()
    assert check_["full_marks_without_success"] == {
        "wrong_1": 1.0, "wrong_2": 1.0, "echo_prompt": 1.0, "hedge_all": 1.0, "partial": 1.0}
    assert (check_["reference_return"], check_["distinct_outcomes"]) == (1.0, 3)


# -- mapping a finished episode -------------------------------------------------------------------
def _trace(**rewards):
    trace = vf.Trace(task=vf.TraceTask(type="T", data=vf.TaskData()), agent=vf.AgentInfo(config=vf.AgentConfig()))
    for name, value in rewards.items():
        trace.record_reward(name, *value) if isinstance(value, tuple) else trace.record_reward(name, value)
    return trace


def _episode(*traces, **fields):
    return vf.Episode(env=vf.EnvInfo(id="t"), task=traces[0].task, traces=list(traces), **fields)


def test_the_reward_is_the_weighted_sum_and_success_the_correctness_score():
    both = _trace(correct=(1.0, 1.0), boxed=(1.0, 0.25))
    assert map_episode(_episode(both), None) == (1.25, True, False, {
        "rewards": {"correct": 1.0, "boxed": 1.0}, "stop_condition": None, "success": True})
    assert map_episode(_episode(_trace()), None) == (0, True, False, {
        "rewards": {}, "stop_condition": None, "reward_note": "the env recorded no reward; counted as 0"})
    # Every trace must be correct (a multi-agent episode); a metric counts like a reward.
    assert map_episode(_episode(_trace(correct=1.0), _trace(correct=0.0)), None)[3]["success"] is False
    assert map_episode(_episode(_trace(correct=1.0), _trace(correct=1.0)), None)[3]["success"] is True
    measured = _trace()
    measured.record_metric("accuracy", 1.0)
    assert map_episode(_episode(measured), None)[3]["success"] is True
    halfway = _trace()
    halfway.record_metric("accuracy", 0.5)
    assert map_episode(_episode(halfway), None)[3]["success"] is False


def test_the_correctness_signal_is_the_first_named_one_or_the_one_asked_for():
    trace = _trace(passed=1.0, accuracy=0.0, style=1.0)
    assert CORRECTNESS.index("accuracy") < CORRECTNESS.index("passed")
    assert correctness_key([trace], None) == "accuracy"
    assert correctness_key([trace], "passed") == "passed" and correctness_key([trace], "nope") is None
    assert map_episode(_episode(trace), None)[3]["success"] is False
    assert map_episode(_episode(trace), "passed")[3]["success"] is True
    assert "success" not in map_episode(_episode(trace), "nope")[3]
    assert correctness_key([_trace(style=1.0)], None) is None


def test_endings_in_order_timeout_then_errors_then_truncation():
    stopped = _trace(correct=1.0)
    stopped.stop("max_turns")
    first = _trace(correct=1.0)
    reward, terminated, truncated, info = map_episode(_episode(first, stopped), None)
    assert (reward, terminated, truncated, info["stop_condition"], info["success"]) == (2.0, False, True, "max_turns", False)
    # An error outranks the truncation; the last error recorded is the one reported, cut to 300 characters.
    stopped.record_error(TimeoutError("tool deadline"))
    stopped.record_error(RuntimeError("x" * 400))
    _, terminated, truncated, info = map_episode(_episode(stopped), None)
    assert (terminated, truncated, info["success"]) == (True, False, False)
    assert info["tool"] == {"name": "RuntimeError", "status": "error", "error": "x" * 300}
    # The episode's own errors come before its traces'.
    late = _trace()
    late.record_error(TimeoutError("late"))
    episode = _episode(late, errors=[Error(type="RuntimeError", message="early")])
    assert map_episode(episode, None)[3]["tool"] == {"name": "TimeoutError", "status": "timeout", "error": "late"}
    alone = _episode(_trace(), errors=[Error(type="ValueError", message="bad task")])
    assert map_episode(alone, None)[3]["tool"] == {"name": "ValueError", "status": "error", "error": "bad task"}
    # A deadline on the episode outranks everything.
    expired = _episode(_trace(correct=1.0), is_timeout=True, errors=[Error(type="RuntimeError", message="boom")])
    assert map_episode(expired, None) == (1.0, False, True, {
        "rewards": {"correct": 1.0}, "stop_condition": None, "end": "timeout", "success": False})


# -- reading tasks and messages -------------------------------------------------------------------
def test_message_text_and_what_the_env_said_since_the_model_last_spoke():
    from types import SimpleNamespace as NS

    from envaudit.adapters.verifiers import content_text, new_text

    assert (content_text(None), content_text("abc")) == ("", "abc")
    assert content_text([NS(text="a"), NS(), NS(text=None), NS(text="b")]) == "a\n\n\nb"  # an image part: no text

    def message(role, content):
        return NS(role=role, content=content)

    first = [message("system", "rules"), message("user", "q1")]
    assert new_text(first) == "q1"  # the whole prompt, without the system message
    later = [*first, message("assistant", "a1"), message("user", "hint"), message("tool", "result"),
             message("assistant", "a2"), message("tool", "r2"), message("user", "next")]
    assert new_text(later) == "r2\n\nnext"


def test_the_reference_is_the_first_answer_field_with_a_single_value():
    from types import SimpleNamespace as NS

    from envaudit.adapters.verifiers import reference_of

    assert reference_of(NS(answer=12), None) == "12"
    assert reference_of(NS(answer=None, info={"answer": 5}), None) == "5"
    assert reference_of(NS(answer={"a": 1}, reference=[1], target="t"), None) == "t"  # dicts and lists skipped
    assert reference_of(NS(answer="a", solution="s"), "solution") == "s"
    assert reference_of(NS(answer="a"), "solution") is None
    assert reference_of(NS(info="not a mapping"), None) is None


def test_the_answer_format_is_read_from_the_prompt():
    from envaudit.adapters.verifiers import answer_format

    assert answer_format("Put it in \\boxed{} or <answer>")("7") == "\\boxed{7}"  # boxed first
    assert answer_format("Reply <answer>N</answer>.")("7") == "<answer>7</answer>"
    assert answer_format("Just say it.")("7") == "7"


def test_example_arguments_fill_each_required_property_by_its_type():
    from envaudit.adapters.verifiers import example_args

    props = {"s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
             "a": {"type": "array"}, "o": {"type": "object"}, "u": {}, "w": {"type": "weird"}}
    assert example_args({"properties": props}) == {"s": "test", "i": 1, "n": 1, "b": True, "a": [], "o": {},
                                                   "u": "test", "w": "test"}
    assert example_args({"properties": props, "required": ["i", "b"]}) == {"i": 1, "b": True}
    assert example_args({"required": ["x"]}) == {"x": "test"}  # a required name the schema does not describe
    assert example_args({}) == {} and example_args("not a schema") == {}


def test_a_taskset_plugin_gets_the_id_verifiers_loader_resolves():
    import sys
    import types

    from envaudit.adapters.verifiers import taskset_id

    class Mine(vf.Taskset):
        pass

    def plugin(name, exported):
        module = types.ModuleType(name)
        module.Mine, module.__all__ = exported, ["Mine"]
        return module

    assert taskset_id(plugin("verifiers.v1.tasksets.sums", Mine)) == "sums"
    nested = plugin("verifiers.v1.tasksets.sums.extra", Mine)
    try:
        assert taskset_id(nested) == "verifiers_v1_tasksets_sums_extra"
        assert sys.modules["verifiers_v1_tasksets_sums_extra"] is nested
    finally:
        sys.modules.pop("verifiers_v1_tasksets_sums_extra", None)
    # verifiers' loader imports the id lower-cased: the alias is registered so.
    upper = plugin("My.Tasks", Mine)
    try:
        assert taskset_id(upper) == "my_tasks" and sys.modules["my_tasks"] is upper
    finally:
        sys.modules.pop("my_tasks", None)
    assert taskset_id(plugin("mine", vf.Taskset)) is None  # the base class is no plugin's taskset
    assert taskset_id(plugin("mine", 3)) is None
    unexported = plugin("mine", Mine)
    unexported.__all__ = []
    assert taskset_id(unexported) is None


# -- resolving MODULE ---------------------------------------------------------------------------------
def test_a_file_is_imported_once_under_a_name_made_from_its_stem(tmp_path):
    import sys

    from envaudit.adapters.verifiers import import_target

    path = tmp_path / "my-guess.py"
    path.write_text(Path(GUESS).read_text())
    env = VerifiersEnv(str(path), size=2)
    try:
        assert env.adapter_info["module"] == "envaudit_vf_my_guess"  # the stem's non-word characters as _
        assert import_target(str(path)) is sys.modules["envaudit_vf_my_guess"]  # the same module again, not a re-import
    finally:
        env.close()
    # A taskset plugin file whose name has capitals: verifiers' loader imports its id lower-cased.
    capitals = tmp_path / "MySums.py"
    capitals.write_text(Path(SUMS).read_text())
    plugin = VerifiersEnv(str(capitals), size=2)
    try:
        assert plugin.adapter_info["module"] == "envaudit_vf_mysums" and plugin.adapter_info["taskset"] == "SumsTaskset"
    finally:
        plugin.close()
    # Another file with the same stem is imported afresh under that name.
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "my_guess.py").write_text("VALUE = 2\n")
    assert import_target(str(other / "my_guess.py")).VALUE == 2
    # A file that fails to import leaves no half-made module behind.
    broken = _module(tmp_path, "vf_fails", "raise RuntimeError('at import')\n")
    with pytest.raises(RuntimeError, match="at import"):
        check(broken)
    assert "envaudit_vf_vf_fails" not in sys.modules
    # A path without .py is still a path.
    with pytest.raises(UsageError, match="no such file"):
        check(str(tmp_path / "some" / "module"))


def test_an_importable_module_missing_a_dependency_of_its_own_is_its_error(tmp_path, monkeypatch):
    (tmp_path / "envaudit_vf_needs_dep.py").write_text("import envaudit_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="envaudit_no_such_dependency"):
        check("envaudit_vf_needs_dep")


def test_a_plugin_that_imports_verifiers_load_environment_is_still_a_taskset_plugin(tmp_path):
    # verifiers' own load_environment, imported into the plugin, is not the module's builder.
    path = _module(tmp_path, "vf_sums_import", Path(SUMS).read_text() + "\nfrom verifiers.v1 import load_environment\n")
    env = VerifiersEnv(path, size=2)
    try:
        assert env.adapter_info["taskset"] == "SumsTaskset" and env.adapter_info["tasks"] == 2
    finally:
        env.close()


def test_load_environment_may_return_an_env_config(tmp_path):
    body = Path(SUMS).read_text() + textwrap.dedent("""

        def load_environment(**kwargs):
            return vf.resolve_env_config({"taskset": {"id": __name__}})
    """)
    env = VerifiersEnv(_module(tmp_path, "vf_sums_config", body), size=3)
    try:
        assert env.adapter_info["taskset"] == "SumsTaskset" and env.adapter_info["tasks"] == 3
        env.reset(seed=1)
        assert env.step(0)[1] == 1.25
    finally:
        env.close()


# -- the env's own state ------------------------------------------------------------------------------
def test_an_adapter_turn_limit_and_a_missing_answer_field():
    env = VerifiersEnv(GUESS, size=4, max_number=3, max_turns=2)
    try:
        # The bridge plays every seat at most max_turns: the env's own limit of 4 becomes 2.
        assert (env.turn_limit, env.turn_cap, env.task, env.index, env.system_prompt) == (2, 3, None, 0, "")
        env.reset(seed=1)
        wrong = env.action_labels.index("wrong_1")
        env.step(wrong)
        assert env.step(wrong)[2:4] == (False, True)
    finally:
        env.close()
    blind = VerifiersEnv(SUMS, size=2, answer_field="nope")
    try:
        assert blind.system_prompt == "Add the numbers. Give the result as \\boxed{N}."  # read before any reset
        assert not blind.has_reference and blind.oracle is None
        assert blind.adapter_info["reference"] == "the task data's 'nope' field (missing on some tasks: no oracle)"
        blind.reset(seed=0)
        assert blind.candidates()["reference"] == "\\boxed{I don't know.}"
        blind.catalogue_check(tasks=1)
        assert blind.prompt == ""  # the check leaves no episode behind
    finally:
        blind.close()


STINGY = _addition_taskset("""
    @vf.reward(weight=1.0)
    async def correct(self, task, trace) -> float:
        return 0.0
""", tasks=2)


def test_a_rubric_that_pays_nothing_is_not_playable_though_success_is_defined(tmp_path):
    env = VerifiersEnv(_module(tmp_path, "vf_stingy", STINGY), size=2)
    try:
        check_ = env.catalogue_check(tasks=1)
    finally:
        env.close()
    assert (check_["well_formed_share"], check_["success_defined"], check_["playable"]) == (0.0, True, False)
