"""TextArena games whose turn passes on only by a legal move, or never comes back to an eliminated
player: the random opponents must hand the turn back to player 0, or its episode ends.

- SantoriniBaseFixed-v0 (2 players, Navy ``N1``/``N2`` against White ``W1``/``W2``): ``step`` keeps
  the turn with a player whose move it rejects (``FFAMultiPlayerState.step`` rotates only after a
  valid move), and every prompt lists *Navy's* opening moves (``reset`` renders all prompts from
  one ``valid_moves``), so White's moves read from its text are all rejected. The moves of the
  player to move are ``game_state["valid_moves"]``, which ``step`` refreshes for the next player;
  each of them, stepped on a copy of the game, is accepted and hands the turn on.
- SettlersOfCatan-v0 (4 players, ``MinimalMultiPlayerState`` with its default error allowance of 1):
  in the action phase a move is an index of the listed moves, and a turn ends on "Nothing." (the
  last index) or after the move allowance. A player's second invalid move in a row eliminates it
  (``_handle_invalid`` adds it to ``game_state["eliminated_players"]``) and the game goes on
  without it, so the turn never comes back to an eliminated player 0: its episode ends there, a
  failure by an invalid move.
"""

from __future__ import annotations

import copy
import random

import pytest

pytest.importorskip("textarena")

from envaudit.adapters.textarena import TextArenaEnv  # noqa: E402
from envaudit.adapters.textarena_games import GAMES  # noqa: E402


def _accepted_and_passes(env: TextArenaEnv, move: str) -> bool:
    """TextArena's own verdict on ``move``, on a deep copy of the game: no error counted, and the
    turn passed to the next player."""
    twin = copy.deepcopy(env.base)
    pid = twin.state.current_player_id
    twin.step(move)
    return twin.state.error_count == 0 and twin.state.current_player_id == (pid + 1) % 2


def test_santorini_moves_come_from_the_game_state_and_hand_the_turn_on():
    env = TextArenaEnv("SantoriniBaseFixed-v0")
    env.reset(seed=0)
    reader = GAMES["SantoriniBaseFixedWorkerEnv"]
    moves = reader.legal(env.base, random.Random(0))
    assert moves and all(m.startswith("[N") for m in moves)
    assert all(_accepted_and_passes(env, m) for m in moves)
    assert not _accepted_and_passes(env, reader.illegal(env.base))
    env.base.step(moves[0])  # White to move: its moves, not the Navy ones its prompt lists
    white = reader.legal(env.base, random.Random(0))
    assert white and all(m.startswith("[W") for m in white)
    assert all(_accepted_and_passes(env, m) for m in white)
    env.reset(seed=0)
    for _ in range(4):  # each step: the agent moves, White answers, and the turn is player 0's again
        _, _, terminated, truncated, info = env.step(env.action_labels.index("legal_1"))
        assert env.base.state.current_player_id == 0 or terminated
        assert info.get("tool", {}).get("status") != "error"
        if terminated or truncated:
            break


def test_catan_plays_its_turns_and_ends_the_episode_of_an_eliminated_player_0():
    env = TextArenaEnv("SettlersOfCatan-v0")
    env.reset(seed=0)
    for _ in range(3):
        _, _, terminated, _, _ = env.step(env.action_labels.index("legal_1"))
        assert not terminated and env.base.state.current_player_id == 0
    env.reset(seed=0)
    _, _, terminated, _, info = env.step(env.action_labels.index("illegal"))
    assert not terminated and info["tool"]["status"] == "error"  # the allowance of one invalid move
    _, reward, terminated, truncated, info = env.step(env.action_labels.index("illegal"))
    assert terminated and not truncated and reward == 0.0
    assert info["invalid_move"] and not info["success"] and "eliminated" in info["reason"]
    assert 0 in env.base.state.game_state["eliminated_players"]
