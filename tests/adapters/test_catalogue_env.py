"""``CatalogueEnv``'s own mechanics on a stand-in ecosystem whose rules the test states
(``Counting``), beside ``test_base.py``'s checks on shipped envs: the catalogue per state, the text
and label of every kind of action, the episode replayed after a check measured mid-episode, the
oracle, and the text view the language-model engine drives.

``Counting``: the prompt is ``"count from N"`` (N drawn from the reset's generator); the catalogue
is ``reference`` = the next number, ``wrong_1`` = the same number again, ``wrong_2`` = ``"0"``; a
right number moves the count on (+1), anything else costs -1; four right numbers end the episode.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from envaudit.adapters.base import (
    TEXT_LABEL,
    AnyText,
    CatalogueEnv,
    CatalogueText,
    TextView,
    text_factory,
    text_view,
)
from envaudit.adapters.catalogue import Strategy

LABELS = ("reference", "wrong_1", "wrong_2")


class Counting(CatalogueEnv):
    ecosystem = "counting"
    has_reference = True
    measured_check = "catalogue_check"

    def __init__(self, labels=LABELS) -> None:
        super().__init__(labels, max_steps=8)
        self.checks = 0

    def _reset(self, seed, options):
        self.seed_seen = seed
        self.at = int(self.np_random.integers(100)) + int((options or {}).get("offset", 0))
        self.right = 0
        return f"count from {self.at}", {}

    def _step_text(self, text):
        if text == str(self.at + 1):
            self.at += 1
            self.right += 1
            return f"now {self.at}", 1.0, self.right == 4, False, {}
        return f"still {self.at}", -1.0, False, False, {}

    def _strategies(self):
        return [Strategy("reference", str(self.at + 1)), Strategy("wrong_1", str(self.at)),
                Strategy("wrong_2", "0")]

    def measure_check(self):
        self.checks += 1
        self.reset(seed=12345)  # a check plays episodes of its own
        self.step(0)
        return {"accepted": 1.0}


def test_the_catalogue_is_made_per_state_and_named_by_its_labels():
    env = Counting()
    obs, _ = env.reset(seed=3)
    at = env.at
    assert obs == f"count from {at}" and env.prompt == obs
    assert env.candidates() == {"reference": str(at + 1), "wrong_1": str(at), "wrong_2": "0"}
    assert env.action_space == gym.spaces.Discrete(3) and env.action_labels == LABELS
    assert env.step(0)[:4] == (f"now {at + 1}", 1.0, False, False)
    assert env.candidates()["reference"] == str(at + 2)  # refreshed after the step
    obs, reward, terminated, truncated, _ = env.step(np.int64(2))
    assert (reward, terminated) == (-1.0, False) and isinstance(reward, float)
    with pytest.raises(RuntimeError, match=r"gave catalogue labels \('reference', 'wrong_1', 'wrong_2'\); "
                                           r"expected \('reference', 'wrong_2', 'wrong_1'\)"):
        Counting(labels=("reference", "wrong_2", "wrong_1")).reset(seed=0)


def test_every_kind_of_action_has_its_text_and_label():
    env = Counting()
    env.reset(seed=0)
    at = env.at
    assert env.text_of(1) == env.text_of(np.array(1)) == env.text_of(np.int32(1)) == str(at)
    assert env.text_of("any words") == "any words" and env.text_of(np.str_("x")) == "x"
    assert env.text_of(b"caf\xc3\xa9") == "café" and env.text_of(b"\xff") == "\ufffd"
    assert env.label_of(0) == "reference" and env.label_of(np.int64(2)) == "wrong_2"
    assert env.label_of(str(at)) == "wrong_1" and env.label_of(str(at).encode()) == "wrong_1"
    assert env.label_of("a model's own words") == TEXT_LABEL and env.label_of(np.str_("0")) == "wrong_2"
    assert env.label_of(7) is None and env.label_of(None) is None and env.label_of("x" * 3) == TEXT_LABEL
    env.step(0)  # a text offered earlier in the episode keeps its first label
    assert env.label_of(str(at + 1)) == "reference" and env.label_of(str(at)) == "wrong_1"
    env.reset(seed=0)  # a new episode forgets the last one's texts
    env.step(2)
    assert env.label_of(str(at + 5)) == TEXT_LABEL


def test_a_check_measured_mid_episode_leaves_the_episode_where_it_was():
    env = Counting()
    env.reset(seed=7, options={"offset": 1000})
    env.step(0)
    env.step("99999")  # a model's own (wrong) text, replayed as text
    before = (env.at, env.right, env.candidates())
    assert env.adapter_info == {"ecosystem": "counting", "catalogue_check": {"accepted": 1.0}}
    assert (env.at, env.right, env.candidates()) == before and env.checks == 1
    assert env.adapter_info["catalogue_check"] and env.checks == 1  # measured once
    seedless = Counting()
    seedless.reset()  # drawn from the env's own generator, which the replay restores
    seedless.step(0)
    before = (seedless.at, seedless.right)
    seedless.adapter_info  # noqa: B018 - reading the info runs the catalogue check
    assert (seedless.at, seedless.right) == before
    ended = Counting()
    ended.reset(seed=1)
    for _ in range(4):
        ended.step(0)
    ended.adapter_info  # noqa: B018 - after the episode ended there is nothing to replay
    assert ended.right == 1 and ended.checks == 1  # the check's own episode is where it stopped


def test_the_oracle_plays_the_reference():
    env = Counting()
    policy = env.oracle()
    env.reset(seed=2)
    policy.reset(env, np.random.default_rng(0))
    assert policy.act(env.prompt, {}) == 0 and env.action_labels[0] == "reference"
    assert type("NoReference", (Counting,), {"has_reference": False})().oracle is None


def test_the_text_view_samples_the_states_catalogue_and_leaves_other_envs_alone():
    env = Counting()
    view = text_view(env)
    assert isinstance(view, TextView) and isinstance(view.action_space, CatalogueText)
    with pytest.raises(RuntimeError, match="before reset"):
        view.action_space.sample()
    view.reset(seed=4)
    view.action_space.seed(0)
    drawn = {view.action_space.sample() for _ in range(50)}
    assert drawn == set(env.candidates().values())
    assert view.step(env.candidates()["reference"])[1] == 1.0
    assert text_view(view) is view  # already text
    plain = gym.make("CartPole-v1")
    assert text_view(plain) is plain and text_factory(lambda: plain, sample=plain)() is plain
    made = text_factory(Counting)
    assert isinstance(made(), TextView) and text_factory(Counting, sample=Counting()) is not Counting
    text = AnyText(max_length=5)
    assert text.contains("ünï") and not text.contains("toolong") and not text.contains(5)
    assert repr(text) == "AnyText(max_length=5)"


def test_reset_passes_its_seed_and_options_on_and_seeds_the_generator():
    env = Counting()
    assert env.prompt == "" and env.max_steps == 8
    firsts = {seed: (env.reset(seed=seed)[0], env.seed_seen) for seed in (5, 5, 6, 7)}
    assert firsts[5] == (Counting().reset(seed=5)[0], 5) and len({p for p, _ in firsts.values()}) == 3
    env.reset(seed=5, options={"offset": 1000})
    assert env.at >= 1000
    assert env.label_of(b"\xff") == TEXT_LABEL  # undecodable bytes are a model's own text
    assert AnyText(max_length=5).contains("12345") and AnyText(seed=3).sample() == AnyText(seed=3).sample()


def test_text_factory_looks_at_the_env_it_is_handed_instead_of_making_one():
    class Closing(Counting):
        closed = False

        def close(self) -> None:
            self.closed = True

    made: list[Closing] = []

    def make() -> Closing:
        made.append(Closing())
        return made[-1]

    handed = Closing()
    factory = text_factory(make, sample=handed)
    assert made == [] and not handed.closed  # the caller's env: looked at, left open
    assert isinstance(factory(), TextView) and len(made) == 1
    text_factory(make)  # without one it makes an env to look at, and closes it
    assert len(made) == 2 and made[1].closed and not made[0].closed
