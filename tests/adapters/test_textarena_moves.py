"""TextArena's legal moves come from the game, and the opponent is a seeded random legal player.

Real shipped games through TextArena's own API, none of them used by test_textarena.py:

- ConnectFour-v0 (7 columns, 6 rows; ``_validate_action`` rejects a column out of range or whose
  top cell is taken): the legal moves are the columns whose top cell is ".", read from the board;
  with column 3 filled by hand (six discs written into the board), ``[col 3]`` is the illegal move
  and TextArena's own ``step()`` rejects it while accepting every listed column.
- Nim-v0 (piles 3, 4, 5; ``_execute_move`` accepts ``[pile quantity]`` with 1 <= quantity <= the
  pile): the twelve moves ``[0 1]``..``[0 3]``, ``[1 1]``..``[1 4]``, ``[2 1]``..``[2 5]``, counted by
  hand from the rules; ``[2 6]`` is rejected.
- KuhnPoker-v0 (player 1 starts round 1): the opponent moves before the agent's first observation,
  and the agent's legal moves are the keys of the game's legal-action tree: ``[fold]``/``[call]``
  facing a bet, ``[check]``/``[bet]`` after a check.
- Sudoku-v0: a digit goes only into an empty cell, and only the solution's digit.
- NewRecruit-v0 without its state reader: moves read from its text alone (a proposal is ``[Propose]``
  and eight letters outside the brackets) are all rejected; its playability says so.
- Chopsticks-v0 (no reader of its state: moves come from its text, tried on copies): its prompt
  names ``[attack M O]`` and ``[split L R]``, both rejected as written; at the start (hands [1, 1]
  each) its ``step()`` accepts exactly ``[attack a b]`` for a, b in {0, 1} and the splits
  ``[split 0 2]``/``[split 2 0]`` (read from its ``step()`` by hand), and the catalogue's legal
  moves are among those six.

"Accepted" is read in these tests straight from TextArena: a deep copy of the whole wrapped game
(TextArena's own ``Wrapper.__deepcopy__``) steps the move, and the game's error count rising (or
the game ending by an invalid move) is TextArena's rejection.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("textarena")

from envaudit.adapters.textarena import TextArenaEnv  # noqa: E402
from envaudit.adapters.textarena_games import GAMES  # noqa: E402
from envaudit.adapters.textarena_moves import MAX_TRIALS, MIN_TRIALS  # noqa: E402
from tests.adapters.textarena_checks import game_accepts  # noqa: E402

SEEDS = range(8)


def legal_moves(env: TextArenaEnv) -> set[str]:
    return {env.candidates()[f"legal_{i}"] for i in (1, 2, 3)}


def test_connect_four_moves_are_the_open_columns_and_a_full_column_is_the_illegal_move():
    env = TextArenaEnv("ConnectFour-v0")
    env.reset(seed=0)
    board = env.base.state.game_state["board"]
    for row in range(6):  # fill column 3 by hand
        board[row][3] = "X" if row % 2 else "O"
    env._cache = None  # the catalogue of this (hand-made) state
    env._refresh()
    assert env.known.legal(env.base, random.Random(0)) == [f"[col {c}]" for c in (0, 1, 2, 4, 5, 6)]
    assert env.candidates()["illegal"] == "[col 3]" and not game_accepts(env, "[col 3]")
    for c in (0, 1, 2, 4, 5, 6):
        assert game_accepts(env, f"[col {c}]")


def test_connect_four_catalogue_covers_every_column_over_a_game():
    # The old catalogue only ever offered the prompt's two examples, [col 4] and [col 1].
    env = TextArenaEnv("ConnectFour-v0")
    offered: set[str] = set()
    for seed in SEEDS:
        env.reset(seed=seed)
        offered |= legal_moves(env)
        assert all(game_accepts(env, m) for m in legal_moves(env))
    assert offered == {f"[col {c}]" for c in range(7)}


def test_nim_moves_are_every_pile_and_quantity():
    env = TextArenaEnv("Nim-v0")
    env.reset(seed=0)
    expected = {f"[{pile} {q}]" for pile, size in enumerate((3, 4, 5)) for q in range(1, size + 1)}
    assert set(env.known.legal(env.base, random.Random(0))) == expected and len(expected) == 12
    assert all(game_accepts(env, m) for m in expected)
    assert env.candidates()["illegal"] == "[2 6]" and not game_accepts(env, "[2 6]")
    assert env.candidates()["stall"] == "[2 1]"  # one object from the largest pile


def test_kuhn_poker_opponent_moves_first_and_the_agent_gets_the_tree_actions():
    env = TextArenaEnv("KuhnPoker-v0")
    seen = set()
    for seed in SEEDS:
        obs, _ = env.reset(seed=seed)
        assert env.base.state.current_player_id == 0 and "You are Player 0" in obs
        opened = env.base.state.game_state["current_legal_action_tree"]
        legal = legal_moves(env)
        assert legal == ({"[fold]", "[call]"} if "call" in opened else {"[check]", "[bet]"})
        assert all(game_accepts(env, m) for m in legal) and not game_accepts(env, env.candidates()["illegal"])
        seen.add(frozenset(legal))
    assert len(seen) == 2  # the random opponent both bets and checks across seeds


def test_chopsticks_moves_read_from_its_text_are_checked_by_the_game():
    start = {"[attack 0 0]", "[attack 0 1]", "[attack 1 0]", "[attack 1 1]", "[split 0 2]", "[split 2 0]"}
    env = TextArenaEnv("Chopsticks-v0")
    assert env.adapter_info["legal_moves"].startswith("moves read from the game's text, each tried")
    for seed in SEEDS:
        env.reset(seed=seed)
        legal = legal_moves(env)
        assert legal <= start, legal
        assert not game_accepts(env, "[attack M O]") and not game_accepts(env, "[split L R]")
        assert all(game_accepts(env, m) for m in legal)
        assert not game_accepts(env, env.candidates()["illegal"])


def test_opponent_is_a_seeded_random_legal_player():
    def first_replies(env_id: str) -> list[str]:
        env = TextArenaEnv(env_id)
        out = []
        for seed in SEEDS:
            env.reset(seed=seed)
            env.step(env.action_labels.index("legal_1"))
            out.append(env.base.state.logs[-2][1])  # the opponent's move, as TextArena logged it
            assert not env.base.state.game_info[1]["invalid_move"] and env.base.state.error_count == 0
        return out

    replies = first_replies("ConnectFour-v0")
    assert len(set(replies)) >= 3  # a fixed opponent always answered with one column
    assert first_replies("ConnectFour-v0") == replies  # the same seed replays the same opponent


def test_playability_is_the_share_of_catalogue_moves_the_game_accepts(monkeypatch):
    info = TextArenaEnv("ConnectFour-v0").adapter_info["playability"]
    assert info["legal_valid_share"] == 1.0 and info["by_label"]["illegal"] == 0.0
    assert info["by_label"]["empty"] == 0.0 and 0 < info["valid_share"] < 1
    # NewRecruit-v0 read from its text alone (its state reader removed) writes a proposal as
    # "[Propose] CCAACCCC", the letters outside the brackets, and at the first turn there is nothing
    # to accept: none of the moves its text shows is one it accepts, and the figure says so instead
    # of letting exploration look as if it had played.
    monkeypatch.delitem(GAMES, "NewRecruitEnv")
    stuck_env = TextArenaEnv("NewRecruit-v0")
    stuck = stuck_env.adapter_info["playability"]
    assert stuck["legal_valid_share"] == 0.0 and "accepted none" in stuck["note"]
    assert stuck["legal_moves_from"] == "guessed"
    stuck_env.reset(seed=0)
    assert not any(game_accepts(stuck_env, m) for m in legal_moves(stuck_env))
    assert game_accepts(stuck_env, "I think this is fair. [Propose] CCAACCCC")


def test_sudoku_moves_are_the_solution_digits_of_empty_cells():
    # Sudoku-v0 accepts a digit only where the cell is empty and the digit is the solution's
    # (_is_move_correct compares with full_grid); its prompt's examples name filled cells.
    env = TextArenaEnv("Sudoku-v0")
    env.reset(seed=0)
    board = env.base.state.game_state["board"]
    moves = env.known.legal(env.base, random.Random(0))
    assert len(moves) == sum(row.count(0) for row in board)
    assert all(game_accepts(env, m) for m in moves)
    assert not any(game_accepts(env, m) for m in ("[5 3 7]", "[1 1 9]", "[1 3 5]"))
    assert not game_accepts(env, env.candidates()["illegal"])


def test_trying_moves_leaves_the_global_random_alone():
    # Facing a bet in KuhnPoker-v0, [fold] and [call] end the round, and the next round's deal is
    # random.shuffle on the global generator (_init_round): trying them on copies must not move it.
    env = TextArenaEnv("KuhnPoker-v0")
    seed = next(s for s in range(20) if env.reset(seed=s) and "[call]" in legal_moves(env))
    env.reset(seed=seed)
    before = random.getstate()
    env._cache = None
    env._refresh()
    assert env.candidates()["stall"] in ("[fold]", "[call]")  # tried on a copy: no check to make
    assert random.getstate() == before


def test_stall_undoes_the_last_move_until_the_turn_limit():
    # TowerOfHanoi-v0 (3 disks, max_turns=14, which allows 15 moves): the stall moves the smallest
    # disk A->B and back, every move legal, and the game ends at its turn limit with no disk on C,
    # so TextArena pays 0 (its completion) for a truncated, unsuccessful episode.
    env = TextArenaEnv("TowerOfHanoi-v0")
    stall = env.action_labels.index("stall")
    env.reset(seed=0)
    moves, ended = [], False
    while not ended:
        moves.append(env.candidates()["stall"])
        _, reward, terminated, truncated, info = env.step(stall)
        ended = terminated or truncated
        assert info.get("tool", {}).get("status", "ok") == "ok"
    assert moves[:4] == ["[A B]", "[B A]", "[A B]", "[B A]"] and len(moves) == 15
    assert truncated and not terminated and reward == 0.0 and info["success"] is False


def test_a_game_that_is_slow_to_copy_gets_fewer_trials_per_state():
    # Set-v0 holds all 6,480 possible sets as tuples of card tuples: 113 kB pickled (a deep copy
    # takes tenths of a second), so it gets the fewest trials; Connect Four's state is under 2 kB.
    assert TextArenaEnv("Set-v0").adapter_info["move_trials_per_state"] == MIN_TRIALS
    assert TextArenaEnv("ConnectFour-v0").adapter_info["move_trials_per_state"] == MAX_TRIALS


def test_the_stall_of_a_game_without_a_reader_for_it_never_ends_the_game():
    # TicTacToe-v0 has no stall reader: the stall is the first legal move that, tried on a copy,
    # leaves the game going. Player 0 plays 'O' (env.py: 'X' only for player 1); with O in cells 1
    # and 2 (written into the board by hand, X in 4 and 8), [0] wins at once and ends the game.
    env = TextArenaEnv("TicTacToe-v0")
    env.reset(seed=0)
    board = env.base.state.game_state["board"]
    for r in range(3):
        for c in range(3):
            board[r][c] = ""
    board[0][1] = board[0][2] = "O"
    board[1][1] = board[2][2] = "X"
    env._cache = None  # the catalogue of this (hand-made) state
    env._refresh()
    legal = env.known.legal(env.base, random.Random(0))
    assert legal[0] == "[0]" and game_accepts(env, "[0]")
    stall = env.candidates()["stall"]
    assert stall in legal and stall != "[0]" and game_accepts(env, stall)
