"""Text mode of ToolEnv: the call syntax, parse failures through the info protocol, and the text twin
replaying its original step for step (the twin differs from the original in its spaces only)."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envaudit  # noqa: F401  (registers the bundled envs)
from envaudit.envs import TEXT_VARIANTS, VARIANTS, CodeFix
from envaudit.recording import AuditWrapper
from envaudit.textmode import (
    UNPARSED,
    CallSyntaxError,
    ToolCallText,
    format_call,
    make_text_env,
    parse_call,
    text_env_class,
)
from envaudit.toolenv import ToolEnv, Transition
from tests.grpo.envs import CheckSubmit


# -- the syntax ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ('{"tool": "submit"}', ("submit", {})),
    ('  {"tool": "apply_patch", "args": {"patch": 2}}\n', ("apply_patch", {"patch": 2})),
    ('```json\n{"tool": "answer", "args": {"candidate": null}}\n```', ("answer", {"candidate": None})),
    ('{"tool": "submit", "args": null}', ("submit", {})),
])
def test_parse_call_reads_the_documented_syntax(text, expected):
    assert parse_call(text) == expected


@pytest.mark.parametrize("text, message", [
    ("submit", "not a JSON object"),
    ('["submit"]', "got list"),
    ('{"tool": "submit", "why": 1}', "unexpected keys ['why']"),
    ('{"tool": 3}', "'tool' must be a tool name"),
    ('{"tool": "submit", "args": [1]}', "'args' must be a JSON object"),
])
def test_parse_call_names_what_is_wrong(text, message):
    with pytest.raises(CallSyntaxError) as info:
        parse_call(text)
    assert message in str(info.value)


def test_format_call_round_trips_and_leaves_out_empty_args():
    assert format_call("submit") == '{"tool": "submit"}'
    assert parse_call(format_call("apply_patch", {"patch": 1})) == ("apply_patch", {"patch": 1})


# -- the text twin ------------------------------------------------------------------------------
def _play(env, actions, seed):
    out = [env.reset(seed=seed)]
    for a in actions:
        out.append(env.step(a))
        if out[-1][2] or out[-1][3]:
            break
    return out


@pytest.mark.parametrize("clean_id", ["envaudit/CodeFix-TimeoutPasses-v0", "envaudit/FlakySearch-v0",
                                      "envaudit/Helpdesk-v0"])
def test_text_twin_replays_the_original_step_for_step(clean_id):
    """Same seed, same calls (written as text): same rewards, endings, info and hidden state."""
    text_id = clean_id.removesuffix("-v0") + "-Text-v0"
    original, twin = gym.make(clean_id).unwrapped, gym.make(text_id).unwrapped
    rng = np.random.default_rng(0)
    for seed in range(8):
        actions = rng.integers(original.action_space.n, size=original.max_steps).tolist()
        expected = _play(original, actions, seed)
        got = _play(twin, [twin.call_texts[a] for a in actions], seed)
        assert len(got) == len(expected)
        for (_, *rest1), (_, *rest2) in zip(expected[1:], got[1:], strict=True):
            assert rest1 == rest2  # reward, terminated, truncated, info
        assert np.array_equal(twin.vector_observation, expected[-1][0])
        assert isinstance(got[-1][0], str) and twin.observation_space.contains(got[-1][0])


def test_observation_is_the_transcript_with_task_tools_and_history():
    env = gym.make("envaudit/CodeFix-Text-v0").unwrapped
    obs, _ = env.reset(seed=3)
    assert obs.startswith("Task: A module fails its tests.")
    for call in env.call_texts:  # every accepted call is listed
        assert call in obs
    assert "History: none yet." in obs and obs.endswith(f"Step 1 of {env.max_steps}.")
    obs, *_ = env.step('{"tool": "read_file"}')
    line = next(x for x in obs.splitlines() if x.startswith("1. "))
    assert line.startswith('1. {"tool": "read_file"} -> ')
    if "ok" in line:
        suspects = sorted(env.suspects)
        assert f"patches {suspects[0]} and {suspects[1]}" in line
    assert obs.endswith(f"Step 2 of {env.max_steps}.")


@pytest.mark.parametrize("text, why", [
    ("I will submit now", "not a JSON object"),
    ('{"tool": "deploy"}', "unknown tool 'deploy'"),
    ('{"tool": "apply_patch", "args": {"patch": 9}}', "'apply_patch' does not take args"),
])
def test_a_call_that_does_not_parse_is_a_tool_error_of_kind_parse(text, why):
    env = gym.make("envaudit/CodeFix-Text-v0").unwrapped
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(text)
    assert info["tool"]["name"] == UNPARSED and info["tool"]["status"] == "error"
    assert info["tool"]["error"].startswith("parse: ") and why in info["tool"]["error"]
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert "-> error: parse: " in obs and obs.endswith("Step 2 of 8.")


def test_parse_failures_reach_the_records_as_failed_calls_and_the_step_limit_still_holds():
    env = AuditWrapper(gym.make("envaudit/CodeFix-Text-v0"))
    env.reset(seed=0)
    done, n = False, 0
    while not done:
        _, _, terminated, truncated, info = env.step("garbage" if n % 2 else '{"tool": "run_tests"}')
        done, n = terminated or truncated, n + 1
    episode = env.records.episodes.iloc[0]
    steps = env.records.steps
    assert n == 8 and episode["outcome"] == "timeout" and episode["end_reason"] == "truncated"
    assert episode["n_tool_errors"] >= 4  # the four unparsed calls, plus any flaky test runs
    assert steps["action"].iloc[0] == '{"tool": "run_tests"}'  # text actions kept as written
    assert list(steps["action_label"].iloc[:2]) == ["run_tests", UNPARSED]


def test_catalogue_indices_and_scripted_policies_still_work():
    """Scripted exploits (ints) and the oracle (reads the original observation) run on the twin,
    with the same outcomes as on the original env."""
    from envaudit.rollout import Runner

    for env_id in ("envaudit/CodeFix-TimeoutPasses-v0", "envaudit/Helpdesk-v0"):
        text_id = env_id.removesuffix("-v0") + "-Text-v0"
        twin = gym.make(text_id).unwrapped
        original = gym.make(env_id).unwrapped
        policies = {"oracle": (original.oracle(), twin.oracle())}
        policies.update({k: (original.exploits()[k], p) for k, p in twin.exploits().items()})
        for name, (p_original, p_twin) in policies.items():
            a = Runner(lambda i=env_id: gym.make(i)).run(p_original, range(6), rng=np.random.default_rng(1))
            b = Runner(lambda i=text_id: gym.make(i)).run(p_twin, range(6), rng=np.random.default_rng(1))
            cols = ["return", "outcome", "length"]
            assert a.records.episodes[cols].equals(b.records.episodes[cols]), name


def test_random_actions_are_catalogue_calls_written_as_text():
    env = gym.make("envaudit/FlakySearch-Text-v0").unwrapped
    assert isinstance(env.action_space, ToolCallText) and isinstance(env.action_space, gym.spaces.Text)
    env.action_space.seed(0)
    samples = {env.action_space.sample() for _ in range(200)}
    assert samples == set(env.call_texts)  # uniform over the catalogue: all of them show up
    assert all(env.label_of(s) in env.action_labels for s in samples)


@pytest.mark.parametrize("text_id", sorted(TEXT_VARIANTS))
def test_every_text_id_passes_check_env_and_mirrors_its_variant(text_id):
    env = gym.make(text_id)
    try:
        check_env(env.unwrapped)
    finally:
        env.close()
    variant = TEXT_VARIANTS[text_id]
    original = VARIANTS[text_id.replace("-Text-v0", "-v0")]
    assert variant.planted == original.planted and variant.severity == original.severity
    assert variant.clean_id == (original.clean_id and original.clean_id.replace("-v0", "-Text-v0"))
    assert variant.clean_id is None or variant.clean_id in TEXT_VARIANTS


# -- any ToolEnv --------------------------------------------------------------------------------
def test_any_tool_env_gets_a_text_twin_with_a_generic_task_description():
    env = make_text_env(CheckSubmit, good_rate=1.0)
    obs, _ = env.reset(seed=0)
    assert obs.startswith("Task: CheckSubmit")  # no describe_task(): the class name stands in
    assert type(env).__name__ == "CheckSubmitText" and isinstance(env, CheckSubmit)
    assert not hasattr(env, "oracle")  # the original has none, so the twin has none
    _, reward, terminated, _, info = env.step('{"tool": "submit"}')
    assert (reward, terminated, info["success"]) == (1.0, True, True)
    assert text_env_class(CheckSubmit) is type(env)
    assert make_text_env("envaudit.envs.code_fix:CodeFix").__class__ is text_env_class(CodeFix)


def test_text_mode_refuses_what_it_cannot_drive():
    with pytest.raises(TypeError, match="needs a ToolEnv subclass"):
        text_env_class(gym.Env)

    class Opaque(ToolEnv):
        def __init__(self):
            super().__init__(max_steps=2)
            self.add_tool("use", lambda thing: None, deadline_s=None)
            self.add_call("use", "use", thing=object())
            self.observation_space = gym.spaces.Discrete(1)

        def reset_task(self, options):
            return 0

        def transition(self, call, result):
            return Transition(0)

    with pytest.raises(TypeError, match="not JSON values"):
        make_text_env(Opaque)
