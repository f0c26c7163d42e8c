"""verifiers end to end: envs built with verifiers 0.4's public classes, run by verifiers itself.

verifiers 0.4 ships no env that runs offline (its tasksets need containers, NeMo Gym servers,
OpenEnv or NLTK downloads), so the envs are two small modules in ``tests/adapters/data/`` written
with ``verifiers.v1``'s public classes; everything else -- ``vf.load_environment``, ``Env.run``,
the interception server, the trace, ``max_turns``, ``@vf.reward`` scoring -- is the package's own.

- ``vf_sums.py`` (a taskset plugin, single turn): ``correct`` (weight 1) for the exact sum in the
  last ``\\boxed{}``, ``boxed`` (weight 0.25) for any reply with a ``\\boxed{}``. By the rubric: the
  reference earns 1.25 with success, a boxed wrong answer or hedge earns 0.25 without, a bare
  number 0.
- ``vf_guess.py`` (``load_environment``, multi-turn ``Env.run``): guess 1..8 with higher/lower
  hints; ``correct`` is 1 on the right guess; the seat's ``max_turns`` (4) ends the exchange.
- ``vf_lookup.py`` (a tool env): an MCP ``Toolset`` with ``lookup(key)`` (raises on an empty key),
  served by verifiers' own ``ServerBase._serve`` in a thread (verifiers would build it with uv).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verifiers.v1")

import verifiers.v1 as vf  # noqa: E402

from envaudit.adapters.verifiers import VerifiersEnv, map_episode  # noqa: E402
from envaudit.cli import main  # noqa: E402
from envaudit.errors import UsageError  # noqa: E402
from envaudit.rollout import Runner, SequencePolicy  # noqa: E402
from envaudit.scan import run_scan  # noqa: E402

DATA = Path(__file__).parent / "data"
SUMS = str(DATA / "vf_sums.py")
GUESS = str(DATA / "vf_guess.py")
LOOKUP = str(DATA / "vf_lookup.py")


def _run(path: str, labels: list[str], seeds, **options):
    env = VerifiersEnv(path, size=16, **options)
    actions = [env.action_labels.index(label) for label in labels]
    env.close()
    runner = Runner(lambda: VerifiersEnv(path, size=16, **options))
    return runner.run(SequencePolicy(actions, name="+".join(labels)), list(seeds), rng=np.random.default_rng(0)).records


def test_single_turn_outcomes_follow_the_rubric():
    by_label = {label: _run(SUMS, [label], range(4)).episodes
                for label in ("reference", "wrong_1", "unformatted", "hedge_all")}
    ref = by_label["reference"]
    assert (ref["outcome"] == "success").all() and (ref["return"] == 1.25).all() and (ref["length"] == 1).all()
    for label in ("wrong_1", "hedge_all"):  # boxed but not the sum: the format reward alone
        eps = by_label[label]
        assert (eps["outcome"] == "failure").all() and (eps["return"] == 0.25).all()
    loose = by_label["unformatted"]
    assert (loose["outcome"] == "failure").all() and (loose["return"] == 0.0).all()
    # No MCP tools in this env: no step carries a tool status.
    assert _run(SUMS, ["reference"], [0]).steps["tool_status"].isna().all()


def test_max_turns_is_a_truncation_and_delaying_still_succeeds():
    stalled = _run(GUESS, ["wrong_1"], range(4))
    eps = stalled.episodes
    # Four replies, then verifiers refuses the fifth turn (stop condition max_turns).
    assert (eps["end_reason"] == "truncated").all() and (eps["outcome"] == "timeout").all()
    assert (eps["length"] == 4).all() and (eps["return"] == 0.0).all()
    delayed = _run(GUESS, ["wrong_1", "wrong_2", "reference"], range(4)).episodes
    assert (delayed["outcome"] == "success").all() and (delayed["length"] == 3).all()
    assert (delayed["return"] == 1.0).all()


def test_env_args_reach_load_environment():
    env = VerifiersEnv(GUESS, max_number=3, turns=2)
    try:
        prompt, _ = env.reset(seed=5)
        assert "between 1 and 3" in prompt and 1 <= int(env.task.data.answer) <= 3
        assert env.turn_limit == 2 and env.has_reference
        assert env.adapter_info["env_class"].endswith("GuessEnv")
        wrong = env.action_labels.index("wrong_1")
        assert env.step(wrong)[2:4] == (False, False)
        _, reward, terminated, truncated, info = env.step(wrong)
        assert (reward, terminated, truncated, info["stop_condition"]) == (0.0, False, True, "max_turns")
    finally:
        env.close()


def _trace(**rewards):
    trace = vf.Trace(task=vf.TraceTask(type="T", data=vf.TaskData()), agent=vf.AgentInfo(config=vf.AgentConfig()))
    for name, value in rewards.items():
        if value is None:
            trace.rewards[name] = None  # what verifiers leaves when a reward was never scored
        else:
            trace.record_reward(name, value)
    return trace


def _episode(trace):
    return vf.Episode(env=vf.EnvInfo(id="t"), task=trace.task, traces=[trace])


def test_trace_signals_map_onto_the_protocol():
    # A deadline verifiers recorded is a truncation (a timeout end), whatever was scored.
    timed = _trace(correct=1.0)
    timed.record_timeout("agent")
    reward, terminated, truncated, info = map_episode(_episode(timed), None)
    assert (terminated, truncated, info["end"], info["success"]) == (False, True, "timeout", False)
    # An error ends the episode as a failed call; a TimeoutError as a timed-out one.
    failed = _trace()
    failed.record_error(RuntimeError("scoring crashed"))
    _, terminated, truncated, info = map_episode(_episode(failed), None)
    assert terminated and not truncated and info["tool"]["status"] == "error"
    assert "scoring crashed" in info["tool"]["error"]
    slow = _trace()
    slow.record_error(TimeoutError("tool deadline"))
    assert map_episode(_episode(slow), None)[3]["tool"]["status"] == "timeout"
    # An unscored reward counts 0 with a note; success comes from the correctness reward only.
    partial = _trace(correct=0.0, judge=None, style=1.0)
    reward, terminated, _, info = map_episode(_episode(partial), None)
    assert reward == 1.0 and terminated and info["success"] is False and "['judge']" in info["reward_note"]
    # No correctness signal: no success flag, even at the top of the reward range.
    assert "success" not in map_episode(_episode(_trace(style=1.0)), None)[3]
    assert map_episode(_episode(_trace(style=1.0)), "style")[3]["success"] is True


def test_quick_scan_names_the_format_reward_hedge():
    report = run_scan(f"verifiers:{SUMS}", quick=True, seed=0, probes=["intent", "replay"])
    codes = {f.code for f in report.findings}
    # Checked by hand: '\\boxed{W1 or REF or W2}' has a \\boxed{} (boxed: 1 x 0.25) and is not the sum
    # (correct: 0), so it earns 0.25 with success false, above the mean honest failure.
    hedges = [f for f in report.findings if f.code == "reward-without-success" and "hedge_all" in f.summary]
    assert hedges and "0.25" in hedges[0].summary, [(f.code, f.summary) for f in report.findings]
    # Tasks come from the seed alone and verifiers' scoring is deterministic.
    assert "non-replayable" not in codes
    assert report.fingerprint["adapter"]["taskset"] == "SumsTaskset"
    assert report.incomplete == []


def test_usage_errors_exit_2(tmp_path, capsys, monkeypatch):
    plain = tmp_path / "not_an_env.py"
    plain.write_text("x = 1\n")
    with pytest.raises(UsageError, match="has no load_environment"):
        VerifiersEnv(str(plain))
    assert main(["scan", f"verifiers:{plain}", "--quick", "--no-progress"]) == 2
    assert "load_environment" in capsys.readouterr().err
    assert main(["scan", "verifiers:no_such_module_xyz", "--quick", "--no-progress"]) == 2
    assert "no module named" in capsys.readouterr().err
    # The package missing: import verifiers fails, the error names the extra.
    monkeypatch.setitem(__import__("sys").modules, "verifiers.v1", None)
    assert main(["scan", f"verifiers:{SUMS}", "--quick", "--no-progress"]) == 2
    assert "pip install 'envaudit-rl[verifiers]'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def lookup_url(tmp_path_factory):
    from envaudit.adapters.verifiers import import_target

    return import_target(LOOKUP).serve_in_thread(tmp_path_factory.mktemp("mcp"))


def test_tool_calls_carry_the_status_the_harness_saw(lookup_url):
    labels = ["tool_valid", "tool_failing", "tool_malformed", "tool_repeat", "reference"]
    records = _run(LOOKUP, labels, range(3), tools_url=lookup_url)
    steps = records.steps
    # valid: an existing tool, well-formed arguments ("test" is no key: the tool answers, ok);
    # failing: a tool the env does not have; malformed: arguments that are not JSON; repeat: the
    # last well-formed call again; the reference answer then ends the episode with success.
    for step, status in enumerate(["ok", "error", "error", "ok"]):
        assert set(steps.loc[steps["step"] == step, "tool_status"]) == {status}
    assert steps.loc[steps["step"] == 4, "tool_status"].isna().all()
    assert (records.episodes["outcome"] == "success").all() and (records.episodes["length"] == 5).all()
    env = VerifiersEnv(LOOKUP, tools_url=lookup_url, size=10)
    try:
        env.reset(seed=3)
        assert env.tool_env and env.action_labels[-4:] == ("tool_valid", "tool_failing", "tool_malformed", "tool_repeat")
        name = env.candidates()["tool_valid"].split('"name": "')[1].split('"')[0]
        # A tool that raises is an MCP error result: status error, the episode goes on.
        obs, reward, terminated, truncated, info = env.step(
            '<tool_call>{"name": "' + name + '", "arguments": {"key": ""}}</tool_call>')
        assert info["tool"]["status"] == "error" and "must not be empty" in obs
        assert not (terminated or truncated)
    finally:
        env.close()


def test_tool_strategies_are_built_from_the_envs_own_tool_schema(lookup_url):
    """vf_lookup's one tool is ``lookup(key: str)``: the valid call fills its required string
    argument with "test"; the failing call names a tool the env lacks; the malformed one breaks its
    JSON; the repeat is the valid call until a call has worked, then the last call that worked."""
    env = VerifiersEnv(LOOKUP, tools_url=lookup_url, size=10)
    try:
        env.reset(seed=0)
        name = env.candidates()["tool_valid"].split('"name": "')[1].split('"')[0]
        valid = '<tool_call>{"name": "' + name + '", "arguments": {"key": "test"}}</tool_call>'
        assert {k: env.candidates()[k] for k in ("tool_valid", "tool_failing", "tool_malformed", "tool_repeat")} == {
            "tool_valid": valid,
            "tool_failing": '<tool_call>{"name": "' + name + '_missing", "arguments": {}}</tool_call>',
            "tool_malformed": '<tool_call>{"name": "' + name + '", "arguments": {</tool_call>',
            "tool_repeat": valid,
        }
        worked = '<tool_call>{"name": "' + name + '", "arguments": {"key": "k1"}}</tool_call>'
        assert env.step(worked)[4]["tool"]["status"] == "ok"
        assert env.step(env.action_labels.index("tool_failing"))[4]["tool"]["status"] == "error"
        assert env.candidates()["tool_repeat"] == worked  # the failed call after it is not repeated
    finally:
        env.close()
