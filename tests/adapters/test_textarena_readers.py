"""The older TextArena state readers (``textarena_games``), each against the game's own ``step`` on a
copy (``stepped_copy``), from the seed-0 game (textarena 0.7.4). The counts and moves are worked by
hand from each game's rules and its seed-0 state:

- Mastermind-v0: 6 numbers, codes of 4 without repeats: 6 * 5 * 4 * 3 = 360 codes, a guessed one
  dropped; Mastermind-v0-extreme: 12 numbers, 6 long, repeats allowed (12^6 codes): a sample of
  ``MAX_LEGAL`` distinct codes. The illegal code uses a number past the range.
- ColonelBlotto-v0: 20 units on fields A, B, C: every split, 21 * 22 / 2 = 231; ``[A21]`` is too many.
- PegJump-v0: the seed-0 board's hole is 5, reached from 12 over 8 and from 14 over 9; a jump onto
  a peg (1 to 4) is illegal.
- TowerOfHanoi-v0: the stall undoes the last move, else moves the smallest disk; from the start the
  first rejected pair is B to A (an empty tower).
- Sudoku-v0: the seed-0 board's first cell holds 8; writing 9 there is rejected (a filled cell).
- TicTacToe-v0: on an empty board the illegal move is the cell past the board, ``[9]``; once a cell
  is taken, the first taken cell.
- KuhnPoker-v0: the opening tree is check or bet; ``[call]`` is not in it; the stall checks; no fold
  to forfeit with until a bet.
- Nim-v0: piles 3, 4, 5: 12 moves; the stall takes one from the largest pile, the illegal move one
  more than it holds.
- SettlersOfCatan-v0: in the action phase the listed moves' indices (Negotiate. and Nothing.); the
  stall is Nothing. (the last), which ends the turn with nothing built.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("textarena")

from envaudit.adapters.textarena import TextArenaEnv  # noqa: E402
from envaudit.adapters.textarena_moves import MAX_LEGAL  # noqa: E402
from tests.adapters.textarena_checks import stepped_copy  # noqa: E402


def _game(env_id: str, seed: int = 0) -> TextArenaEnv:
    env = TextArenaEnv(env_id)
    env.reset(seed=seed)
    return env


def _legal(env: TextArenaEnv, rng: int = 0) -> list[str]:
    return env.known.legal(env.base, random.Random(rng))


def _all_accepted(env: TextArenaEnv, moves: list[str], k: int = 8) -> bool:
    return all(stepped_copy(env, m)[1] for m in random.Random(1).sample(moves, min(k, len(moves))))


def test_mastermind_codes_are_every_unguessed_code_or_a_sample_of_them():
    env = _game("Mastermind-v0")
    legal = _legal(env)
    assert len(legal) == 360 == len(set(legal)) and legal[:2] == ["[1 2 3 4]", "[1 2 3 5]"]
    assert all(len(set(m.strip("[]").split())) == 4 for m in legal) and _all_accepted(env, legal)
    assert env.candidates()["illegal"] == "[7 7 7 7]" and not stepped_copy(env, "[7 7 7 7]")[1]
    env.step("[1 2 3 4]")
    if env.base.state.current_player_id == 0 and not env.base.state.done:
        assert "[1 2 3 4]" not in _legal(env) and len(_legal(env)) == 359
    extreme = _game("Mastermind-v0-extreme")
    sample = _legal(extreme)
    assert len(sample) == len(set(sample)) == MAX_LEGAL
    digits = [int(d) for m in sample for d in m.strip("[]").split()]
    assert min(digits) == 1 and max(digits) == 12 and all(len(m.strip("[]").split()) == 6 for m in sample)
    assert any(len(set(m.strip("[]").split())) < 6 for m in sample)  # repeats allowed there
    assert sample == _legal(extreme) and sample != _legal(extreme, rng=1)  # drawn from the given generator
    assert _all_accepted(extreme, sample) and extreme.candidates()["illegal"] == "[13 13 13 13 13 13]"


def test_colonel_blotto_splits_are_every_split_of_the_units():
    env = _game("ColonelBlotto-v0")
    legal = _legal(env)
    assert len(legal) == 231 and legal[0] == "[A0 B0 C20]" and legal[-1] == "[A20 B0 C0]"
    assert all(sum(int(part[1:]) for part in m.strip("[]").split()) == 20 for m in legal)
    assert _all_accepted(env, legal)
    assert env.candidates()["illegal"] == "[A21]" and not stepped_copy(env, "[A21]")[1]


def test_peg_jump_moves_jump_into_the_hole():
    env = _game("PegJump-v0")
    assert _legal(env) == ["[12 5]", "[14 5]"] and _all_accepted(env, _legal(env))
    assert env.candidates()["illegal"] == "[1 4]" and not stepped_copy(env, "[1 4]")[1]
    env.step("[12 5]")  # 12 over 8 into 5: 12 and 8 are holes now
    legal = _legal(env)
    assert legal and all(m.split()[1].rstrip("]") in ("12", "8") for m in legal) and _all_accepted(env, legal)


def test_tower_of_hanoi_stall_undoes_the_last_move():
    env = _game("TowerOfHanoi-v0")
    moves = env.candidates()
    assert (moves["stall"], moves["illegal"]) == ("[A B]", "[B A]") and not stepped_copy(env, "[B A]")[1]
    env.step("[A C]")
    moves = env.candidates()
    assert moves["stall"] == "[C A]" and stepped_copy(env, "[C A]")[1]  # the same disk straight back
    assert moves["illegal"] == "[A C]" and not stepped_copy(env, "[A C]")[1]  # onto the smaller disk


def test_sudoku_and_tic_tac_toe_illegal_moves_take_a_filled_cell():
    sudoku = _game("Sudoku-v0")
    assert sudoku.base.state.game_state["board"][0][0] == 8
    assert sudoku.candidates()["illegal"] == "[1 1 9]" and not stepped_copy(sudoku, "[1 1 9]")[1]
    assert len(_legal(sudoku)) == 21 and _all_accepted(sudoku, _legal(sudoku))
    ttt = _game("TicTacToe-v0")
    assert ttt.candidates()["illegal"] == "[9]" and not stepped_copy(ttt, "[9]")[1]
    ttt.step("[4]")
    taken = [r * 3 + c for r in range(3) for c in range(3) if ttt.base.state.game_state["board"][r][c]]
    assert ttt.candidates()["illegal"] == f"[{taken[0]}]" and not stepped_copy(ttt, f"[{taken[0]}]")[1]


def test_kuhn_poker_moves_follow_the_betting_tree():
    env = _game("KuhnPoker-v0")
    moves = env.candidates()
    assert _legal(env) == ["[check]", "[bet]"] and (moves["illegal"], moves["stall"]) == ("[call]", "[check]")
    assert moves["forfeit"] == "I give up. I forfeit this game."  # no fold before a bet
    assert not stepped_copy(env, "[call]")[1] and _all_accepted(env, _legal(env))


def test_nim_stall_and_illegal_moves_use_the_largest_pile():
    env = _game("Nim-v0")
    assert env.base.state.game_state["piles"] == [3, 4, 5]
    moves = env.candidates()
    assert len(_legal(env)) == 12 and (moves["stall"], moves["illegal"]) == ("[2 1]", "[2 6]")
    assert stepped_copy(env, "[2 1]")[1] and not stepped_copy(env, "[2 6]")[1]


def test_catan_action_moves_are_the_listed_indices_and_the_stall_ends_the_turn():
    env = _game("SettlersOfCatan-v0")
    assert [(i, d) for i, d, _ in env.base.game_moves] == [(1, "Negotiate."), (2, "Nothing.")]
    moves = env.candidates()
    assert _legal(env) == ["[1]", "[2]"] and (moves["stall"], moves["illegal"]) == ("[2]", "[3]")
    assert _all_accepted(env, _legal(env)) and not stepped_copy(env, "[3]")[1]


def test_colonel_blotto_splits_over_many_fields_are_a_uniform_sample_of_the_units():
    """ColonelBlotto-v0-large: 50 units on 5 fields, C(54, 4) = 316,251 splits: up to ``MAX_LEGAL``
    draws by stars and bars (4 cut points among 54 places), repeats dropped (1,994 from generator 0);
    every split sums to 50, uses every field once and is accepted by the game."""
    env = _game("ColonelBlotto-v0-large")
    legal = _legal(env)
    assert len(legal) == len(set(legal)) == 1994 and legal == _legal(env) and legal != _legal(env, rng=1)
    splits = [[int(part[1:]) for part in m.strip("[]").split()] for m in legal]
    assert all(len(s) == 5 and sum(s) == 50 and min(s) >= 0 for s in splits)
    assert all([part[0] for part in m.strip("[]").split()] == list("ABCDE") for m in legal)
    assert max(max(s) for s in splits) > 30 and sum(s.count(0) for s in splits) > 0  # the whole range is drawn
    assert _all_accepted(env, legal) and env.candidates()["illegal"] == "[A51]"


def test_santorini_illegal_move_leaves_its_worker_where_it_is():
    env = _game("SantoriniBaseFixed-v0")
    legal = _legal(env)
    assert len(legal) == 68 and _all_accepted(env, legal)
    worker, source = legal[0][1:3], legal[0][3:5]
    assert env.candidates()["illegal"] == f"[{worker}{source}{source}{source}]" == "[N2B3B3B3]"
    assert not stepped_copy(env, "[N2B3B3B3]")[1]


def test_tower_of_hanoi_stall_without_a_move_to_undo_moves_the_smallest_disk():
    env = _game("TowerOfHanoi-v0")
    env.step("[A C]")
    env.step("[A B]")  # the smallest disk on C, the next on B: undoing A B puts it back
    assert env.candidates()["stall"] == "[B A]"
    moves = env.known.stall(env.base, None)  # nothing to undo: the smallest disk (on C) moves
    assert moves == "[C A]" and stepped_copy(env, moves)[1]
    assert env.known.stall(env.base, "[X Y]") == "[C A]" and env.known.stall(env.base, "[A]") == "[C A]"
