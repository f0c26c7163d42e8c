"""``CatalogueEnv``, the face every adapter env shows: catalogue indices, texts and their labels.

On real shipped envs: reasoning-gym's leg_counting (16 strategies, one turn) and TextArena's
TowerOfHanoi-v0, whose first state has two legal moves (the smallest disk from A to B or to C), so
``game_strategies`` repeats them (``legal_3`` is ``legal_1`` again) and ``repeat_last`` stands in
with ``legal_1`` before any move was played. Every adapter with a catalogue check (skyrl-gym's
gsm8k and a verifiers taskset from ``data/`` beside those two) is made and played without paying it.
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


def _adapter_envs():
    from pathlib import Path

    data = Path(__file__).parent / "data"
    yield "reasoning_gym", lambda: ReasoningGymEnv("leg_counting", size=8)
    yield "textarena", lambda: TextArenaEnv("TowerOfHanoi-v0")
    from envaudit.adapters.skyrl_gym import SkyRLGymEnv
    yield "skyrl_gym", lambda: SkyRLGymEnv("gsm8k", tasks=str(data / "skyrl_gsm8k.jsonl"))
    from envaudit.adapters.verifiers import VerifiersEnv
    yield "verifiers", lambda: VerifiersEnv(str(data / "vf_sums.py"), size=4)


@pytest.mark.parametrize("name,make", list(_adapter_envs()), ids=lambda x: x if isinstance(x, str) else "")
def test_making_and_playing_an_env_never_measures_its_catalogue_check(name, make, monkeypatch):
    # The check plays the whole catalogue (seconds); the workers make an env per episode batch and
    # their make deadline is 5 s, so only reading adapter_info (the scan's fingerprint) may pay it.
    cls = type(make())
    played = []
    monkeypatch.setattr(cls, "measure_check", lambda self: played.append(1) or {"measured": True})
    env = make()
    env.reset(seed=0)
    env.step(0)
    assert not played
    if cls.measured_check is not None:
        assert env.adapter_info[cls.measured_check] == {"measured": True} and played == [1]
    env.close()


def test_reading_the_check_mid_episode_replays_the_episode_where_it_was():
    # verifiers' guessing game (multi-turn, run by verifiers itself): a seedless episode (its task
    # drawn from the reset generator), one wrong guess, then the check, which plays episodes of its
    # own; the episode goes on at the same task and turn.
    from pathlib import Path

    from envaudit.adapters.verifiers import VerifiersEnv

    env = VerifiersEnv(str(Path(__file__).parent / "data" / "vf_guess.py"), size=16)
    try:
        env.reset(seed=12)  # then a seedless reset draws task 9, the next one task 4
        env.reset()
        env.step(env.action_labels.index("wrong_1"))
        index, candidates = env.index, env.candidates()
        assert env.adapter_info["catalogue_check"]["played"] > 0
        assert (env.index, env.candidates()) == (index, candidates)
        wrong = env.action_labels.index("wrong_1")
        # The seat's max_turns is 4: the replayed guess counts, so the fourth wrong guess is the last.
        assert [env.step(wrong)[2:4] for _ in range(3)] == [(False, False)] * 2 + [(False, True)]
    finally:
        env.close()
