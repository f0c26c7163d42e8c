"""GEM's games as their source defines them, checked through GEM's own API (gem.make, reset, step).

Each expected outcome was read in gem-llm 0.1.0's source and played by hand:

- FifteenPuzzle (``fifteen_puzzle.py``) reads only ``\\boxed{up|down|left|right}``; its own
  ``sample_random_action`` returns the bare direction, a format error (-0.1, game over). From seed
  0 the board is ``[[3, 1], [2, None]]``: the blank is bottom right, so only ``down`` and ``right``
  slide a tile ("up: move the tile below the empty space up" has no tile below).
- TowerofHanoi (``tower_of_hanoi.py``) has no ``sample_random_action`` (GEM's base raises
  ``NotImplementedError``); its prompt shows ``\\boxed{A C}``. From the start only tower A's top
  disk moves: ``A B`` and ``A C``.
- Sudoku (``sudoku.py``) accepts a placement only when it matches its solution grid
  (``full_grid``); rows and columns count from 1; each correct one pays ``1 / init_num_empty``.
- Crosswords (``crosswords.py``) reads ``\\boxed{row col letter}``; its ``sample_random_action``
  writes ``\\boxed{[row col letter]}``, which that regex does not read.
- Sokoban (``sokoban.py``) answers a move into a wall with "you would collide with wall or other
  boxes!" at ``invalid_action_reward`` (0) and goes on.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("gem")

import gem  # noqa: E402

from envaudit.adapters.gem_moves import (  # noqa: E402
    FORMAT_ERROR,
    GAMES,
    INVALID,
    boxed,
    fallback_moves,
    try_move,
)

RNG = np.random.default_rng(0)


def _made(env_id: str, seed: int = 0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gem.make(env_id)
    obs, _ = env.reset(seed=seed)
    return env, obs


def test_fifteen_puzzle_moves_are_boxed_as_its_own_parser_reads_them():
    env, _ = _made("game:FifteenPuzzle-v0-easy")
    assert env.board == [[3, 1], [2, None]]
    legal = GAMES["FifteenPuzzleEnv"].legal(env, RNG)
    assert sorted(legal) == ["\\boxed{down}", "\\boxed{right}"]
    for move in legal:
        t = try_move(env, move)
        assert (t.reward, t.terminated, t.accepted) == (0.0, False, True) and "valid move" in t.obs
    # GEM's own random action is a format error: the game ends at -0.1.
    own = try_move(env, env.sample_random_action())
    assert (own.reward, own.terminated, own.format_error) == (-0.1, True, True)
    assert env.board == [[3, 1], [2, None]]  # every try was on a copy


def test_tower_of_hanoi_has_no_random_action_and_gets_moves_from_its_state_and_its_prompt():
    env, prompt = _made("game:TowerofHanoi-v0-easy")
    with pytest.raises(NotImplementedError):
        env.sample_random_action()
    assert sorted(GAMES["TowerofHanoiEnv"].legal(env, RNG)) == ["\\boxed{A B}", "\\boxed{A C}"]
    moves, source = fallback_moves(env, prompt)  # what a game unknown to the table would get
    assert moves == ["\\boxed{A C}"] and "prompt" in source
    illegal = try_move(env, GAMES["TowerofHanoiEnv"].illegal(env))
    assert illegal.invalid and not illegal.terminated and "which is empty" in illegal.obs


def test_sudoku_accepts_the_solution_grid_placements_and_rejects_the_rest():
    env, _ = _made("game:Sudoku-v0-easy")
    legal = GAMES["SudokuEnv"].legal(env, RNG)
    empty = sum(cell == 0 for row in env.board for cell in row)
    assert len(legal) == empty == env.init_num_empty
    for move in legal:
        t = try_move(env, move)
        assert t.accepted and t.reward == pytest.approx(1 / env.init_num_empty) and "which is correct" in t.obs
    wrong = try_move(env, GAMES["SudokuEnv"].illegal(env))
    assert wrong.invalid and "already filled" in wrong.obs


def test_crosswords_own_random_moves_are_format_errors_and_the_fallback_says_none_was_accepted():
    env, prompt = _made("game:Crosswords-v0-easy")
    sampled = try_move(env, env.sample_random_action())
    assert sampled.format_error and sampled.reward == -0.1
    _, source = fallback_moves(env, prompt)
    assert "none accepted" in source
    for move in GAMES["CrosswordsEnv"].legal(env, RNG)[:5]:
        assert try_move(env, move).accepted  # a wrong letter is "incorrect", not a rejected move
    reference = GAMES["CrosswordsEnv"].reference(env)
    assert try_move(env, reference).reward > 0
    env.step(reference)  # the cell is filled now: no legal move may name it ("already filled")
    row_col = reference[len("\\boxed{"):].rsplit(" ", 1)[0]
    legal = GAMES["CrosswordsEnv"].legal(env, RNG)
    assert legal and not any(m.startswith("\\boxed{" + row_col + " ") for m in legal)
    assert all(try_move(env, m).accepted for m in legal)


def test_a_wall_collision_is_one_of_the_games_rejections_and_a_lost_mine_is_not():
    env, _ = _made("game:Sokoban-v0-easy")
    walls = [d for d in ("up", "down", "left", "right") if env._would_collide_with_wall(d)]
    assert walls  # seed 0: the player stands in a corner
    bump = try_move(env, boxed(walls[0]))
    assert bump.invalid and "collide with wall" in bump.obs and not bump.terminated
    free = [d for d in ("up", "down", "left", "right") if d not in walls]
    assert not try_move(env, boxed(free[0])).invalid
    # Minesweeper: hitting a mine is a legal move that loses, not a rejected one.
    assert not INVALID.search("Game over! You hit a mine at (1, 2)")
    assert not INVALID.search("At turn 3, you tried to place A at (2, 4), but it is incorrect.")
    assert FORMAT_ERROR.search("At turn 1, your submitted action is not valid.")
