"""The verifiers bridge's parts: tool calls read from a reply, the config every seat is played
under, the harness's status for each kind of tool call, and the safety caps on a hung rollout --
against verifiers 0.4 itself (its configs, its MCP client, its ``Env.run``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1")

from envaudit.adapters.verifiers import VerifiersEnv, _import  # noqa: E402
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
    config = _import(GUESS).load_environment(max_number=3, turns=2).config
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


@pytest.fixture(scope="module")
def lookup_url(tmp_path_factory):
    return _import(LOOKUP).serve_in_thread(tmp_path_factory.mktemp("mcp"))


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


HUNG = """
import asyncio
import verifiers.v1 as vf


class D(vf.TaskData):
    answer: str


class T(vf.Task[D, vf.State, vf.TaskConfig]):
    pass


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
