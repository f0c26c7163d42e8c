"""``--engine vllm`` on ecosystem adapter envs: the text view the language model drives.

An adapter env's actions are catalogue indices (what exploration and the torch engine drive);
the language model writes text. The text view gives the same env ``Text`` actions whose random
draw is a catalogue text, so the tiny model's warm-up corpus is the catalogue, and the engine's
system prompt is the ecosystem's own. The run on a real vLLM engine happens in a child process
(``tests/grpo/lm_checks.py adapter``), beside the other vLLM checks in ``tests/grpo/test_lm_engine.py``.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

pytest.importorskip("reasoning_gym")

from envaudit.adapters import resolve_adapter  # noqa: E402
from envaudit.adapters.base import TextView, text_factory, text_view  # noqa: E402
from envaudit.cli import main  # noqa: E402
from envaudit.config import ScanConfig  # noqa: E402
from envaudit.grpo.lm_model import SYSTEM_PROMPT, collect_turns, env_system_prompt, prompt_ids  # noqa: E402
from envaudit.seeding import child_rng  # noqa: E402

TARGET = "reasoning-gym:leg_counting"


def test_the_text_view_samples_the_states_catalogue_and_keeps_the_envs_signals():
    _, make = resolve_adapter(TARGET)
    env = text_factory(make)()
    assert isinstance(env, TextView) and isinstance(env.action_space, gym.spaces.Text)
    env.reset(seed=3)
    env.action_space.seed(0)
    catalogue = env.unwrapped.candidates()
    draws = [env.action_space.sample() for _ in range(200)]
    assert set(draws) == set(catalogue.values())  # every strategy drawn, nothing else
    reference = catalogue["reference"]
    _, reward, terminated, truncated, info = env.step(reference)
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    assert env.unwrapped.label_of(reference) == "reference"


def test_envs_that_already_write_text_are_left_as_they_are():
    import envaudit  # noqa: F401  (registers the bundled envs)

    def make():
        return gym.make("envaudit/CodeFix-Text-v0")

    assert text_factory(make) is make
    env = make()
    assert text_view(env) is env


def test_the_warm_up_corpus_is_the_catalogue_under_the_ecosystems_system_prompt():
    _, make = resolve_adapter(TARGET)
    view = text_factory(make)
    turns = collect_turns(view, episodes=6, seed=0)
    assert len(turns) == 6  # leg_counting is single-turn: one answer per episode
    # collect_turns draws (action-space seed, reset seed) per episode from this stream.
    rng = child_rng(0, "lm", "corpus")
    env = make()
    for obs, call in turns:
        rng.integers(2**31)
        prompt, _ = env.reset(seed=int(rng.integers(2**31)))
        assert obs == prompt and call in env.unwrapped.candidates().values()
    system = env_system_prompt(view)
    assert system == env.unwrapped.system_prompt and system != SYSTEM_PROMPT


def test_the_prompt_carries_the_system_prompt_it_is_given():
    class Chars:  # a character tokenizer: the prompt's text is readable back from its ids
        chat_template = None

        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": [ord(c) for c in text]}

    text = "".join(map(chr, prompt_ids(Chars(), "How many legs?", system="Answer in <answer> tags.")))
    assert text.startswith("Answer in <answer> tags.") and "How many legs?" in text


def test_lm_lengths_are_for_the_vllm_engine_and_positive(capsys):
    with pytest.raises(ValueError, match="max_new_tokens is for the vllm engine"):
        ScanConfig(max_new_tokens=32)
    with pytest.raises(ValueError, match="max_model_len must be at least 1"):
        ScanConfig(engine="vllm", max_model_len=0)
    assert main(["scan", TARGET, "--max-new-tokens", "32"]) == 2
    assert "add --engine vllm" in capsys.readouterr().err
