"""The TextArena adapter's move readers taken one at a time (``envaudit.adapters.textarena_moves``).

``test_textarena_moves.py`` plays shipped games; here each reader gets a text or a state whose
answer is worked out by hand: which parts of a move are varied, in what order the variations come,
how a state flags an invalid move or an eliminated player, and what a move tried on a copy of a
game reports. The games are a small stand-in whose rules the test states (``Counter``) and
TextArena's own ``ActionWrapper`` around it.
"""

from __future__ import annotations

import pickle
import random

import pytest

pytest.importorskip("textarena")

from textarena.core import ActionWrapper  # noqa: E402

from envaudit.adapters.textarena_moves import (  # noqa: E402
    MAX_TRIALS,
    MIN_TRIALS,
    TRIAL_BYTES,
    TRIAL_OBJECTS,
    Trial,
    Trials,
    _slots,
    _variations,
    action_text,
    invalid_flag,
    layers,
    player_out,
    text_moves,
    trial_budget,
    try_move,
    unwrap,
)


def _parts(move: str) -> list[str]:
    return [move[a:b] for a, b in _slots(move)]


def test_slots_are_the_value_parts_else_the_words_and_at_most_three():
    assert _parts("[play X]") == ["X"]  # the word stays, the one-letter value varies
    assert _parts("[pile quantity]") == ["pile", "quantity"]  # words only: the words are the slots
    assert _parts("[attack 12 O 3 4]") == ["12", "O", "3"]
    assert _parts("[<card> 7]") == ["<card>", "7"]


def test_variations_rank_one_slot_before_two_and_small_values_first():
    digits = _variations("[attack 12 3]", letters=False)
    assert len(digits) == 10 + 10 + 100
    assert digits[:2] == [(100, "[attack 0 3]"), (101, "[attack 1 3]")]
    two = [v for v in digits if v[0] >= 200]
    # both slots replaced right to left, so the two-digit span's replacement does not shift the other
    assert two[:2] == [(200, "[attack 0 0]"), (201, "[attack 0 1]")] and (218, "[attack 9 9]") in two
    assert _variations("[pile quantity]", letters=True) == []  # words are no letter slots


def test_letter_variations_keep_the_case_and_skip_number_slots():
    assert _variations("[a 5]", letters=True)[:2] == [(100, "[a 5]"), (101, "[b 5]")]
    assert _variations("[A 5]", letters=True)[1] == (101, "[B 5]")
    assert len(_variations("[5 a]", letters=True)) == 26  # a number slot first is skipped, not the end
    mixed = _variations("[A b]", letters=True)
    assert (102, "[A c]") in mixed and (204, "[C c]") in mixed and len(mixed) == 26 + 26 + 26 * 26


def test_text_moves_put_the_listing_first_then_take_turns_between_the_queues():
    messages = ["Board\nAvailable Moves: [x1], [x2]\n", "press the red button\n[go 3]\n"]
    moves = text_moves(messages, "Say [help] or [move N]", random.Random(0))
    assert moves[:3] == ["[x1]", "[x2]", "[go 3]"]
    assert len(moves) == len(set(moves))  # a move read twice is offered once
    assert {"[red]", "[button]", "[press]", "[move 0]", "[go 0]", "[move B]", "[help]"} <= set(moves)
    # ties among equally ranked variations come in an order drawn from the rng
    assert moves != text_moves(messages, "Say [help] or [move N]", random.Random(1))
    assert moves == text_moves(messages, "Say [help] or [move N]", random.Random(0))


def test_text_moves_interleave_literal_one_slot_two_slot_letters_and_words():
    moves = text_moves(["[attack 1 2]"], "", random.Random(0))
    # literal, then the one-slot queue, then the two-slot queue's first ([attack 0 0], rank 200), then a word
    assert moves[0] == "[attack 1 2]" and moves[1].startswith("[attack ") and moves[2] == "[attack 0 0]"
    assert moves[3] == "[attack]"
    letters = text_moves(["[A 5]"], "", random.Random(0))
    assert "[B 5]" in letters and "[0 5]" in letters


class _State:
    def __init__(self, **facts):
        self.__dict__.update(facts)


def test_invalid_flag_reads_game_info_of_that_player_only():
    assert invalid_flag(_State(game_info={0: {"invalid_move": True}}), 0)
    assert not invalid_flag(_State(game_info={0: {"invalid_move": True}}), 1)  # no entry for player 1
    assert not invalid_flag(_State(game_info=[{"invalid_move": True}]), 0)  # not a mapping
    assert not invalid_flag(_State(), 0)


def test_player_out_reads_the_elimination_order_and_the_games_own_list():
    assert player_out(_State(elimination_order=[1]), 1) and not player_out(_State(elimination_order=[1]), 0)
    assert player_out(_State(game_state={"eliminated_players": [0]}))
    assert not player_out(_State(game_state={"turn": 3})) and not player_out(_State(game_state=None))
    assert not player_out(_State())


class Counter:
    """A one-player stand-in game: ``[ok]`` is accepted, ``[bad]`` raises the error count,
    ``[flag]`` sets the invalid-move flag, ``[end]`` ends the game, ``[boom]`` raises."""

    def __init__(self, *, errors: int | None = 0, flagged: bool = False, payload: int = 0) -> None:
        facts = {"current_player_id": 0, "game_info": {0: {"invalid_move": flagged}}}
        if errors is not None:
            facts["error_count"] = errors
        self.state = _State(**facts)
        self.payload = b"x" * payload
        self.played: list[str] = []

    def step(self, action: str):
        self.played.append(action)
        if action == "[bad]":
            self.state.error_count += 1
        elif action == "[flag]":
            self.state.game_info[0]["invalid_move"] = True
        elif action == "[boom]":
            raise ValueError("no such move")
        elif action not in ("[ok]", "[end]"):
            self.state.error_count += 1
        return action == "[end]", {}


class Bracket(ActionWrapper):
    def action(self, action: str) -> str:
        return f"[{action}]"


def test_try_move_reads_the_games_own_verdict_on_a_copy():
    game = Counter()
    assert try_move(game, "[ok]") == Trial(valid=True, ends=False)
    assert try_move(game, "[bad]") == Trial(valid=False, ends=False)
    assert try_move(game, "[flag]") == Trial(valid=False, ends=False)
    assert try_move(game, "[end]") == Trial(valid=True, ends=True)
    assert try_move(game, "[boom]") == Trial(valid=False, ends=True)
    assert game.played == [] and game.state.error_count == 0  # only copies were played


def test_try_move_compares_with_the_state_before_the_move():
    # errors made earlier and a flag set earlier are not this move's
    assert try_move(Counter(errors=3, flagged=True), "[ok]") == Trial(valid=True, ends=False)
    assert try_move(Counter(errors=3, flagged=True), "[bad]") == Trial(valid=False, ends=False)
    no_count = Counter(errors=None)  # a game without an error count: the flag alone decides
    assert try_move(no_count, "[ok]") == Trial(valid=True, ends=False)
    assert try_move(no_count, "[flag]") == Trial(valid=False, ends=False)


def test_moves_pass_through_the_games_action_wrappers():
    wrapped = Bracket(Counter())
    assert unwrap(wrapped) is wrapped.env and list(layers(wrapped)) == [wrapped]
    assert action_text(wrapped, "ok") == "[ok]"
    assert try_move(wrapped, "ok") == Trial(valid=True, ends=False)  # the base env received [ok]


def test_unwrap_stops_at_a_game_that_keeps_its_own_env_and_at_a_missing_one():
    class Base:
        state = None  # a game class with state ...

        def __init__(self):
            self.env = "its own sandbox"  # ... and an attribute named env: not a wrapper

    class Wrap:
        def __init__(self, env):
            self.env = env

    class Hollow:
        env = None  # the name on the class, nothing inside

    base = Base()
    assert unwrap(Wrap(Wrap(base))) is base
    hollow = Hollow()
    assert unwrap(Wrap(hollow)) is hollow


def test_trial_budget_counts_bytes_of_the_copy_else_its_objects():
    game = Counter(payload=20_000)
    size = len(pickle.dumps(game, protocol=pickle.HIGHEST_PROTOCOL))
    assert trial_budget(game, 10**6) == TRIAL_BYTES // size == 9
    assert trial_budget(Counter(payload=10**6), 0) == MIN_TRIALS
    assert trial_budget(Counter(), 10**6) == MAX_TRIALS
    unpicklable = Counter()
    unpicklable.hook = lambda: None
    assert trial_budget(unpicklable, 100) == TRIAL_OBJECTS // 100 == 20
    assert trial_budget(unpicklable, 0) == MAX_TRIALS and trial_budget(unpicklable, 10**4) == MIN_TRIALS
    assert all(isinstance(trial_budget(g, 100), int) for g in (game, unpicklable))


def test_trials_try_each_move_once_within_the_budget():
    trials = Trials(Counter(), budget=2)
    assert trials("[ok]") == Trial(valid=True, ends=False)
    assert trials("[ok]") == Trial(valid=True, ends=False) and trials.left == 1  # cached: no budget spent
    assert trials("[bad]") == Trial(valid=False, ends=False) and trials.left == 0
    assert trials("[end]") is None  # the budget is spent
    assert trials("[bad]") == Trial(valid=False, ends=False)  # still known
    assert Trials(Counter(), budget=3)("[ok]") is not None
