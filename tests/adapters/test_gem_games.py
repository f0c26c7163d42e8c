"""Every game ``gem_moves.GAMES`` reads, on its easy variant from seed 0, against GEM's own ``step``
(gem-llm 0.1.0, ``gem/envs/game_env/``): the legal moves are all read and played, the illegal move is
rejected by the game's rules (or, where every direction plays, is a near miss of the format that
ends the game), the game is not won at the start, and the reference, played until the game ends,
wins it with GEM's own "Congratulations".

The counts come from the games' sizes as their easy variants set them, read by hand: Guess the
Number 1..10; Minesweeper 5 x 5, every hidden cell revealed or flagged (25 + 25); Tower of Hanoi
from the start moves only tower A's top disk (``A B``, ``A C``) and the first rejected pair is
``B A`` (an empty tower); Sudoku easy leaves 9 cells of its 4 x 4 empty and its illegal move writes
a filled cell's own digit again ("already filled"); Crosswords' seed-0 grid has 13 open cells and a
black cell at (0, 0); Fifteen Puzzle's blank starts bottom right (``down``, ``right``); Sokoban's
player starts against walls below and to the right (``up``, ``left``); all four 2048 moves change
the seed-0 board, so its illegal move is ``upward``, which GEM cannot parse.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("gem")

import gem  # noqa: E402

from envaudit.adapters.gem_moves import GAMES, boxed, try_move  # noqa: E402

CASES = {
    "game:GuessTheNumber-v0-easy": (10, "\\boxed{11}", "invalid"),
    "game:Mastermind-v0-easy": (8, "\\boxed{1 1 1}", "invalid"),
    "game:Minesweeper-v0-easy": (50, "\\boxed{reveal 5 5}", "invalid"),
    "game:TowerofHanoi-v0-easy": (2, "\\boxed{B A}", "invalid"),
    "game:Sudoku-v0-easy": (9, "\\boxed{2 1 4}", "invalid"),
    "game:Crosswords-v0-easy": (13, "\\boxed{0 0 A}", "invalid"),
    "game:FifteenPuzzle-v0-easy": (2, "\\boxed{up}", "invalid"),
    "game:Game2048-v0-easy": (4, "\\boxed{upward}", "format_error"),
    "game:Sokoban-v0-easy": (2, "\\boxed{down}", "invalid"),
}


def _made(env_id: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gem.make(env_id)
    env.reset(seed=0)
    return env, GAMES[type(env).__name__]


@pytest.mark.parametrize("env_id", sorted(CASES))
def test_legal_moves_play_the_illegal_move_is_rejected_and_nothing_is_won_yet(env_id):
    count, illegal, rejection = CASES[env_id]
    env, game = _made(env_id)
    legal = game.legal(env, np.random.default_rng(0))
    assert len(legal) == len(set(legal)) == count
    assert all(m.startswith("\\boxed{") and m.endswith("}") for m in legal)
    for move in legal[:12]:
        t = try_move(env, move)
        assert t is not None and t.accepted, (move, t and t.obs)
    assert game.illegal(env) == illegal
    t = try_move(env, illegal)
    assert not t.accepted and getattr(t, rejection), t.obs
    assert game.won(env) is False and game.progress


def test_the_legal_moves_of_a_state_follow_it():
    env, game = _made("game:TowerofHanoi-v0-easy")
    assert game.legal(env, None) == ["\\boxed{A B}", "\\boxed{A C}"]
    env.step(boxed("A C"))  # the smallest disk on C: A's next disk may go to B, the small one anywhere
    assert game.legal(env, None) == ["\\boxed{A B}", "\\boxed{C A}", "\\boxed{C B}"]
    assert game.illegal(env) == "\\boxed{A C}"  # onto a smaller disk
    guess, rules = _made("game:GuessTheNumber-v0-easy")
    guess.step(boxed("3"))
    assert "\\boxed{3}" not in rules.legal(guess, None) and len(rules.legal(guess, None)) == 9
    mines, rules = _made("game:Minesweeper-v0-easy")
    mines.step(boxed("flag 0 0"))  # a flagged cell is still hidden: it can be unflagged, not revealed
    legal = rules.legal(mines, None)
    assert "\\boxed{flag 0 0}" in legal and "\\boxed{reveal 0 0}" not in legal and len(legal) == 49


@pytest.mark.parametrize("env_id", ["game:GuessTheNumber-v0-easy", "game:Mastermind-v0-easy",
                                    "game:Sudoku-v0-easy", "game:Crosswords-v0-easy"])
def test_the_reference_played_to_the_end_wins_by_the_games_own_state_and_message(env_id):
    env, game = _made(env_id)
    obs, steps = "", 0
    while (move := game.reference(env)) is not None and steps < 200:
        obs, _, terminated, truncated, _ = env.step(move)
        steps += 1
        if terminated or truncated:
            break
    assert game.won(env) is True and "Congratulations" in obs
    assert steps == {"game:GuessTheNumber-v0-easy": 1, "game:Mastermind-v0-easy": 1,
                     "game:Sudoku-v0-easy": 9, "game:Crosswords-v0-easy": 13}[env_id]  # one per empty cell
    assert game.reference(env) is None or env_id in ("game:GuessTheNumber-v0-easy", "game:Mastermind-v0-easy")


def test_a_game_that_is_not_won_is_not_read_as_won():
    env, game = _made("game:Minesweeper-v0-easy")
    assert game.won(env) is False  # no reveal yet (GEM's first_reveal): never solved
    fifteen, rules = _made("game:FifteenPuzzle-v0-easy")
    assert rules.won(fifteen) is False
    fifteen.board = [[1, 2], [3, None]]  # the tiles in order, the blank last: GEM's own solved board
    assert rules.won(fifteen) is True
    fifteen.board = [[1, 2], [None, 3]]
    assert rules.won(fifteen) is False


def test_minesweepers_win_state_is_gems_own_solved_rule_after_the_first_reveal():
    """GEM places the mines at the first reveal (``first_reveal``): before it nothing is solved. After
    it, solved is every mine flagged and every other cell revealed (``MinesweeperEnv._is_solved``)."""
    env, game = _made("game:Minesweeper-v0-easy")
    env.step(boxed("reveal 0 0"))
    mines = [(r, c) for r in range(env.rows) for c in range(env.cols) if env.grid[r][c] == -1]
    assert mines and not env.first_reveal
    env.flags = [[env.grid[r][c] == -1 for c in range(env.cols)] for r in range(env.rows)]
    env.revealed = [[env.grid[r][c] != -1 for c in range(env.cols)] for r in range(env.rows)]
    assert game.won(env) is True and env._is_solved() is True
    r, c = mines[0]
    env.flags[r][c] = False  # one mine left unflagged
    assert game.won(env) is False and env._is_solved() is False
    env.flags[r][c] = True
    safe = next((r, c) for r in range(env.rows) for c in range(env.cols) if env.grid[r][c] != -1)
    env.revealed[safe[0]][safe[1]] = False  # one safe cell hidden (flagged or not, it is not revealed)
    env.flags[safe[0]][safe[1]] = True
    assert game.won(env) is False and env._is_solved() is False
    fresh, rules = _made("game:Minesweeper-v0-easy")
    fresh.revealed = [[True] * fresh.cols for _ in range(fresh.rows)]  # no mines placed yet: all cells "safe"
    assert fresh._is_solved() is True and rules.won(fresh) is False


def test_a_game_it_does_not_know_gets_gems_random_actions_drawn_apart_from_the_global_random():
    """GuessTheNumber's ``sample_random_action`` is ``random.randint(min, max)`` in \\boxed{}: six draws
    from a generator seeded "envaudit-gem-fallback", repeats dropped, each played on a copy."""
    import random

    from envaudit.adapters.gem_moves import fallback_moves

    env, _ = _made("game:GuessTheNumber-v0-easy")
    drawn = random.Random("envaudit-gem-fallback")
    expected = list(dict.fromkeys(boxed(str(drawn.randint(1, 10))) for _ in range(6)))
    random.seed(1)
    state = random.getstate()
    moves, source = fallback_moves(env, "")
    assert (moves, source) == (expected, "sample_random_action")
    assert random.getstate() == state  # the global generator is where it was
    random.seed(2)
    assert fallback_moves(env, "")[0] == expected  # whatever the global generator holds
    hanoi, _ = _made("game:TowerofHanoi-v0-easy")  # no sample_random_action: the prompt's examples
    assert fallback_moves(hanoi, "e.g. \\boxed{A C} or \\boxed{A B}, not \\boxed{C A}") == (
        ["\\boxed{A C}", "\\boxed{A B}"], "the \\boxed{} examples of the prompt")
    assert fallback_moves(hanoi, "e.g. \\boxed{C A}") == (
        ["\\boxed{C A}"], "the \\boxed{} examples of the prompt (none accepted on a copy of the game)")


def test_a_trial_records_the_move_and_the_games_answer_on_a_copy():
    env, _ = _made("game:GuessTheNumber-v0-easy")
    t = try_move(env, boxed("3"))
    assert (t.text, t.reward, t.terminated, t.truncated, t.accepted) == (boxed("3"), 0.0, False, False, True)
    assert env.previous_guesses == set() and t.twin.previous_guesses == {3}  # the copy played, the game did not
    short = gem.make("game:GuessTheNumber-v0-easy", max_turns=1)
    short.reset(seed=0)
    last = try_move(short, boxed(str(next(n for n in range(1, 11) if n != short.game_number))))
    assert last.terminated and last.truncated  # GEM marks both at its turn limit


def test_a_minesweeper_board_solved_by_a_flag_is_a_success_gem_never_ends():
    """GEM checks ``_is_solved`` only after a reveal (``MinesweeperEnv.step``'s flag branch never does),
    so a board whose last mine is flagged after every safe cell was revealed plays on to the turn limit
    (25 on the easy variant) and ends with "You have reached the maximum number of turns." and no
    win. Success is read from the board, not from that message: the episode is a truncated success.
    Seed 0: the first reveal at (0, 0) opens 13 cells; 12 safe cells and 5 mines are left."""
    from envaudit.adapters.gem import GemEnv

    env = GemEnv("game:Minesweeper-v0-easy")
    env.reset(seed=0)
    base = env.inner.unwrapped
    env.step(boxed("reveal 0 0"))
    cells = [(r, c) for r in range(base.rows) for c in range(base.cols)]
    safe = [(r, c) for r, c in cells if base.grid[r][c] != -1 and not base.revealed[r][c]]
    mines = [(r, c) for r, c in cells if base.grid[r][c] == -1]
    assert (len(safe), len(mines), base.max_turns) == (12, 5, 25)
    for r, c in safe:
        env.step(boxed(f"reveal {r} {c}"))
    for r, c in mines:
        obs, reward, terminated, truncated, info = env.step(boxed(f"flag {r} {c}"))
    assert base._is_solved() and (terminated, truncated) == (False, False)  # solved, and the game goes on
    assert obs.startswith("At turn 18, you added a flag") and "success" not in info
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(boxed("reveal 0 0"))  # already revealed: rejected
    assert (obs, reward, terminated, truncated) == ("You have reached the maximum number of turns.", 0.0, False, True)
    assert info["success"] is True and info["invalid_move"] is False and env._turn == 25
