"""``CatalogueEnv``, the face every adapter env shows: catalogue indices, texts and their labels.

On real shipped envs: reasoning-gym's leg_counting (16 strategies, one turn) and TextArena's
TowerOfHanoi-v0, whose first state has two legal moves (the smallest disk from A to B or to C), so
``game_strategies`` repeats them (``legal_3`` is ``legal_1`` again) and ``repeat_last`` stands in
with ``legal_1`` before any move was played.
"""

from __future__ import annotations

import pytest

pytest.importorskip("reasoning_gym")
pytest.importorskip("textarena")

from envaudit.adapters.base import TEXT_LABEL  # noqa: E402
from envaudit.adapters.reasoning_gym import ReasoningGymEnv  # noqa: E402
from envaudit.adapters.textarena import TextArenaEnv  # noqa: E402


def test_an_index_outside_the_catalogue_is_a_clear_error():
    env = ReasoningGymEnv("leg_counting", size=10)
    env.reset(seed=0)
    n = len(env.action_labels)
    assert env.text_of(n - 1) == env.candidates()[env.action_labels[-1]]
    for bad in (n, n + 3, -1):
        with pytest.raises(ValueError, match=f"outside the catalogue of {n} strategies"):
            env.text_of(bad)
    with pytest.raises(ValueError, match="outside the catalogue"):
        env.step(n)


def test_a_text_is_named_by_the_first_label_that_offers_it():
    env = TextArenaEnv("TowerOfHanoi-v0")
    env.reset(seed=0)
    texts = env.candidates()
    assert texts["legal_1"] == texts["legal_3"] == texts["repeat_last"] and texts["legal_1"] != texts["legal_2"]
    assert env.label_of(texts["legal_1"]) == "legal_1" and env.label_of(texts["legal_2"]) == "legal_2"
    assert env.label_of("[C A]") == TEXT_LABEL  # a model's own move, in no label's text
    assert env.label_of(env.action_labels.index("stall")) == "stall" and env.label_of("x" * 3) == TEXT_LABEL


def test_the_catalogue_follows_the_state_and_the_episode_end_keeps_the_last_one():
    env = TextArenaEnv("TowerOfHanoi-v0")
    env.reset(seed=0)
    first = env.candidates()
    played = first["legal_2"]
    env.step(env.action_labels.index("legal_2"))
    assert env.candidates()["repeat_last"] == played and env.candidates() != first
    env2 = ReasoningGymEnv("leg_counting", size=10)
    env2.reset(seed=1)
    before = env2.candidates()
    _, _, terminated, _, _ = env2.step(0)
    assert terminated and env2.candidates() == before  # no catalogue is made after the end
