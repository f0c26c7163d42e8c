"""The verifiers bridge's parts: tool calls read from a reply, the config every seat is played
under, the harness's status for each kind of tool call, and the safety caps on a hung rollout --
against verifiers 0.4 itself (its configs, its MCP client, its ``Env.run``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1")

from envaudit.adapters.verifiers import VerifiersEnv, import_target  # noqa: E402
from envaudit.adapters.verifiers_bridge import (  # noqa: E402
    BRIDGE_KEY,
    CLIENT,
    HARNESS_ID,
    MODEL,
    NO_TIMEOUT,
    patched_config,
    split_tool_calls,
)

DATA = Path(__file__).parent / "data"
GUESS = str(DATA / "vf_guess.py")
LOOKUP = str(DATA / "vf_lookup.py")
SLOW = str(DATA / "vf_slow_tool.py")


def _call(i, name, arguments):
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_tool_calls_are_read_from_the_reply_text():
    reply = 'hi <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call> there <tool_call>oops</tool_call>'
    # The prose without the blocks; a block that is no named JSON object is still a call, named "?".
    assert split_tool_calls(reply) == ("hi  there", [_call(0, "a", '{"x": 1}'), _call(1, "?", "oops")])
    assert split_tool_calls('<tool_call>{"name": "a", "arguments": "raw"}</tool_call>') == ("", [_call(0, "a", "raw")])
    assert split_tool_calls('<tool_call>{"name": 3}</tool_call>') == ("", [_call(0, "?", '{"name": 3}')])
    assert split_tool_calls('<tool_call>{"name": "b"}</tool_call>') == ("", [_call(0, "b", "{}")])
    assert split_tool_calls("no calls  ") == ("no calls  ", [])  # a reply without calls is left as it is


def test_every_seat_is_played_through_the_bridge_without_deadlines():
    config = import_target(GUESS).load_environment(max_number=3, turns=2).config
    patched = patched_config(config, "bridge-x", 7)
    seat = patched.player
    assert (seat.harness.id, seat.harness.env) == (HARNESS_ID, {BRIDGE_KEY: "bridge-x"})
    assert type(seat.runtime).__name__ == "SubprocessConfig" and seat.model == MODEL and seat.client == CLIENT
    assert (seat.timeout.setup, seat.timeout.rollout, seat.timeout.finalize, seat.timeout.scoring) == (NO_TIMEOUT,) * 4
    assert seat.max_turns == 7
    assert (patched.timeout.episode, patched.timeout.finalize) == (None, None)
    assert patched.retries.max_retries == 0
    # Without a cap of the adapter's, the seat keeps the env's own turn limit; the env's config is untouched.
    assert patched_config(config, "b", None).player.max_turns == 2
    assert config.player.max_turns == 2 and config.player.timeout.rollout is None


def test_each_seat_keeps_its_own_tool_deadline():
    """A tool deadline is the env's behaviour: vf_slow_tool's harness gives a tool call 0.5 s, and
    the bridge's harness keeps it; a seat without a harness of its own keeps verifiers' default."""
    import verifiers.v1 as vf

    timed = patched_config(import_target(SLOW).load_environment(tool_timeout=0.5), "b", None).agent.harness
    assert (timed.id, timed.tool_timeout) == (HARNESS_ID, 0.5)
    plain = import_target(GUESS).load_environment(max_number=3, turns=2).config
    assert plain.player.harness is None
    assert patched_config(plain, "b", None).player.harness.tool_timeout == vf.HarnessConfig().tool_timeout == 600.0


def test_a_tool_call_past_the_envs_deadline_is_a_tool_timeout(tmp_path):
    url = import_target(SLOW).serve_in_thread(tmp_path)
    env = VerifiersEnv(SLOW, tools_url=url, tool_timeout=0.5)
    try:
        env.reset(seed=0)

        def wait(seconds: float):
            obs, reward, terminated, truncated, info = env.step(
                '<tool_call>{"name": "wait_tools_wait", "arguments": {"seconds": ' + str(seconds) + "}}</tool_call>")
            assert (reward, terminated, truncated) == (0.0, False, False)
            return obs, info["tool"]

        assert wait(0.05) == ("waited 0.05 s", {"name": "wait_tools_wait", "status": "ok"})
        assert wait(3) == ("error: tool 'wait_tools_wait' timed out",
                           {"name": "wait_tools_wait", "status": "timeout", "error": "tool call timed out"})
    finally:
        env.close()


@pytest.fixture(scope="module")
def lookup_url(tmp_path_factory):
    return import_target(LOOKUP).serve_in_thread(tmp_path_factory.mktemp("mcp"))


def test_the_harness_reports_each_kind_of_tool_call(lookup_url):
    """vf_lookup's tool ``lookup(key)`` answers "v71" for k1 and raises on an empty key (an MCP
    error result); each malformed call is answered in the conversation with what is wrong."""
    env = VerifiersEnv(LOOKUP, tools_url=lookup_url, size=10)
    try:
        env.reset(seed=0)
        name = env.candidates()["tool_valid"].split('"name": "')[1].split('"')[0]

        def step(arguments: str, tool: str = name):
            obs, _, terminated, truncated, info = env.step(
                '<tool_call>{"name": "' + tool + '", "arguments": ' + arguments + "}</tool_call>")
            assert not (terminated or truncated)
            return obs, info["tool"]

        assert step('"raw"') == ("error: invalid JSON in tool arguments (Expecting value: line 1 column 1 (char 0))",
                                 {"name": name, "status": "error", "error": "malformed arguments"})
        assert step("[1]") == ("error: tool arguments must be a JSON object",
                               {"name": name, "status": "error", "error": "arguments not an object"})
        assert step("{}", "nope") == ("error: unknown tool 'nope'", {"name": "nope", "status": "error", "error": "unknown tool"})
        assert step('{"key": ""}') == ("Error executing tool lookup: key must not be empty", {
            "name": name, "status": "error", "error": "Error executing tool lookup: key must not be empty"})
        assert step('{"key": "k1"}') == ("v71", {"name": name, "status": "ok"})
        # Two calls in one reply: the step reports the worst of them, the conversation has both answers.
        obs, _, _, _, info = env.step('<tool_call>{"name": "' + name + '", "arguments": {"key": "k1"}}</tool_call>'
                                      '<tool_call>{"name": "nope", "arguments": {}}</tool_call>')
        assert obs == "v71\n\nerror: unknown tool 'nope'"
        assert info["tool"] == {"name": "nope", "status": "error", "error": "unknown tool"}
    finally:
        env.close()


def test_the_catalogue_check_counts_tool_calls_that_ran_as_taken(lookup_url):
    """By hand, vf_lookup's first 2 tasks: the reference, hedge_last (its last box is the answer) and
    reference_trailing earn 1 and end the episode; tool_valid and tool_repeat (the valid call: no
    call has run yet) run the tool, status ok, reward 0, the episode going on: 5 of 14 per task.
    Outcomes (return, success, ended): (1, True, True), (0, False, True), (0, None, False)."""
    env = VerifiersEnv(LOOKUP, tools_url=lookup_url, size=10)
    try:
        check = env.catalogue_check(tasks=2)
    finally:
        env.close()
    assert check == {
        "entries": 2, "strategies": 14, "played": 28, "well_formed_share": 10 / 28, "distinct_outcomes": 3,
        "success_defined": True, "playable": True, "reference_success_share": 1.0, "reference_return": 1.0,
        "full_marks_without_success": {}, "scorer_errors": {"count": 0, "examples": []},
    }


TASK = """
import asyncio
import verifiers.v1 as vf


class D(vf.TaskData):
    answer: str


class T(vf.Task[D, vf.State, vf.TaskConfig]):
    pass
"""
"""The task classes of the verifiers modules the tests below write: an answer, no rubric."""

HUNG = TASK + """

class Tasks(vf.Taskset[T, vf.TasksetConfig]):
    def load(self):
        yield T(D(prompt="Say 1.", answer="1"), self.config.task)


class HungConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class HungEnv(vf.Env[HungConfig]):
    async def run(self, task, agents):
        if {silent}:
            return
        await asyncio.sleep(3600)


def load_environment():
    return HungEnv(HungConfig(taskset=vf.TasksetConfig(id=__name__)))


__all__ = ["D", "T", "Tasks", "HungConfig", "HungEnv", "load_environment"]
"""


@pytest.mark.parametrize("silent", [False, True])
def test_a_rollout_that_never_asks_for_a_completion_is_an_error_not_a_hang(tmp_path, silent):
    path = tmp_path / ("vf_silent.py" if silent else "vf_hung.py")
    path.write_text(textwrap.dedent(HUNG.replace("{silent}", str(silent))))
    env = VerifiersEnv(str(path), event_cap_s=0.5)
    try:
        if silent:  # the rollout ends without a model call: nothing to play
            with pytest.raises(RuntimeError) as caught:
                env.reset(seed=0)
            # verifiers' own reason follows (its episode's last error).
            assert str(caught.value) == ("the verifiers episode of task 0 ended before its first model call: "
                                         "HungEnv.run(): ValueError: HungEnv.run() ran no agent — every episode "
                                         "must carry at least one run")
        else:
            with pytest.raises(TimeoutError) as caught:
                env.reset(seed=0)
            assert str(caught.value) == ("the verifiers rollout neither asked for a completion nor finished within "
                                         "0.5s (the adapter's safety cap, --env-arg event_cap_s)")
            # The catalogue check records each rollout that raised, and plays on.
            check = env.catalogue_check(tasks=1)
            assert check["scorer_errors"]["count"] == len(env.action_labels) and check["played"] == 0
            assert check["scorer_errors"]["examples"][0] == {
                "label": "reference", "index": 0, "error": f"TimeoutError: {caught.value}"[:300]}
            assert check["playable"] is False
    finally:
        env.close()


class _Asked:
    """The bridge's side of one model call: records the request, answers with ``text``."""

    def __init__(self, text: str) -> None:
        self.text, self.requests = text, []

    async def ask(self, request):
        self.requests.append(request)
        return self.text

    def take_tool_statuses(self):
        return [{"name": "lookup", "status": "ok"}]


def test_the_client_answers_in_the_chat_completions_wire_format():
    """What verifiers' interception server gets from the bridge's client, through verifiers' own chat
    dialect: the reply as an OpenAI chat completion (its raw form is what verifiers records on the
    trace), tool calls with ``finish_reason`` "tool_calls", numbered ids, the request's model."""
    import asyncio

    from verifiers.v1.dialects.chat import ChatDialect

    from envaudit.adapters.verifiers_bridge import BridgeClient

    asked = _Asked('calling <tool_call>{"name": "lookup", "arguments": {"key": "k1"}}</tool_call>')
    client = BridgeClient(asked)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    body = {"model": "m1", "messages": [{"role": "user", "content": "find k1"}], "tools": tools}
    first = asyncio.run(client.get_response(ChatDialect(), body, None))
    message = {"role": "assistant", "content": "calling", "tool_calls": [_call(0, "lookup", '{"key": "k1"}')]}
    assert first.raw == {"id": "envaudit-0", "object": "chat.completion", "created": 0, "model": "m1",
                         "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                         "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}
    assert first.finish_reason == "tool_calls" and first.message.content == "calling"
    (request,) = asked.requests
    assert [m.content for m in request.messages] == ["find k1"] and request.tools == tools
    assert request.tool_statuses == [{"name": "lookup", "status": "ok"}]

    asked.text = "\\boxed{v71}"
    second = asyncio.run(client.get_response(ChatDialect(), {"messages": body["messages"]}, None))
    assert second.raw["id"] == "envaudit-1" and second.raw["model"] == MODEL and second.finish_reason == "stop"
    assert second.raw["choices"][0]["message"] == {"role": "assistant", "content": "\\boxed{v71}"}
    assert asked.requests[1].tools == []

    del asked  # the bridge is gone (its episode closed): the rollout's next call fails, saying so
    with pytest.raises(RuntimeError, match="^the envaudit bridge of this rollout is gone$"):
        asyncio.run(client.get_response(ChatDialect(), body, None))


LISTED = TASK + '''

class Tasks(vf.Taskset[T, vf.TasksetConfig]):
    def load(self):
        prompt = [{"role": "user", "content": "Say 1."}, {"role": "assistant", "content": "2?"},
                  {"role": "user", "content": "No: 1."}]
        yield T(D(prompt=prompt, answer="1"), self.config.task)


__all__ = ["D", "T", "Tasks"]
'''


def test_the_harness_asks_with_the_system_prompt_then_the_tasks_messages(tmp_path):
    """What the bridge's harness sends as the first request: vf_sums' system prompt, then its prompt
    as one user message (task 0: 3 + 5); a prompt that is a list of messages goes as those messages
    (verifiers' ``message_to_wire``), with no system message when the task has none."""
    env = VerifiersEnv(str(DATA / "vf_sums.py"), size=2)
    try:
        env.bridge.begin(env.tasks[0])
        request = env.bridge.next_event()
        assert [(m.role, m.content) for m in request.messages] == [
            ("system", import_target(str(DATA / "vf_sums.py")).SYSTEM_PROMPT), ("user", "What is 3 + 5?")]
        assert request.tools == [] and request.tool_statuses == []
    finally:
        env.close()
    path = tmp_path / "vf_listed.py"
    path.write_text(LISTED)
    listed = VerifiersEnv(str(path), size=1)
    try:
        listed.bridge.begin(listed.tasks[0])
        request = listed.bridge.next_event()
        assert [(m.role, m.content) for m in request.messages] == [
            ("user", "Say 1."), ("assistant", "2?"), ("user", "No: 1.")]
    finally:
        listed.close()
