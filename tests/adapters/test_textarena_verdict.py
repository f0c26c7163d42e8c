"""TextArena's verdict on a game that ended: success, truncation and the invalid-move flag.

Each rule is checked on real shipped games through TextArena's own API, with the outcomes read
from TextArena's source by hand (textarena 0.7.4):

- ``State.check_turn_limit`` is ``turn >= max_turns and not done`` and runs *before* the move is
  counted (``SinglePlayerState.step`` / ``TwoPlayerState.step`` add 1 to ``turn`` afterwards, the
  last move included). So GuessTheNumber-v0 (``max_turns=10``) allows 11 guesses; a game cut at
  its limit ends with ``turn == 11``, a win on the 10th guess with ``turn == 10`` and a win on the
  11th, the last allowed one, with ``turn == 11`` too: only the game's reason ("Congratulations!"
  vs "The turn limit has been reached") tells those two apart.
- ``TwoPlayerState.set_draw`` pays ``{0: 0, 1: 0}``; ``set_winner`` pays 1 and -1. A draw is no win.
- An invalid move is forgiven once (``error_allowance=1``: the error count rises and the player
  retries); the second in a row ends the game and sets ``game_info[pid]["invalid_move"]``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("textarena")

from envaudit.adapters.textarena import TextArenaEnv, ended_at_limit, won  # noqa: E402
from envaudit.adapters.textarena_moves import try_move  # noqa: E402

GUESSES = 11  # GuessTheNumber-v0: max_turns=10 allows 11 guesses


def _steps(env: TextArenaEnv, labels: list[str]):
    out = []
    for label in labels:
        out.append(env.step(env.action_labels.index(label)))
        if out[-1][2] or out[-1][3]:
            break
    return out


@pytest.mark.parametrize("misses", [GUESSES - 2, GUESSES - 1])
def test_a_win_on_the_last_allowed_guesses_is_a_success_not_a_timeout(misses):
    env = TextArenaEnv("GuessTheNumber-v0")
    env.reset(seed=0)
    steps = _steps(env, ["stall"] * misses + ["reference"])
    assert len(steps) == misses + 1  # the stall (the far end of the range) never hits the number
    _, reward, terminated, truncated, info = steps[-1]
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    assert env.base.state.turn == misses + 1  # the turn count reaches 11 on the last allowed guess


def test_the_turn_limit_ends_the_eleventh_miss_as_a_timeout():
    env = TextArenaEnv("GuessTheNumber-v0")
    env.reset(seed=0)
    steps = _steps(env, ["stall"] * (GUESSES + 5))
    assert len(steps) == GUESSES and env.base.state.turn == GUESSES
    _, reward, terminated, truncated, info = steps[-1]
    assert truncated and not terminated and info["success"] is False and 0 < reward < 1
    # The stall guesses the end of the range farthest from the number, so no guess comes close.
    first = int(env.base.state.game_state["guess_history"][0][0])
    assert first in (1, 20) and abs(first - env.base.game_number) >= 10


def test_without_a_reason_the_turn_count_decides_one_past_the_limit():
    # TextArena counts the move that ends the game after checking the limit: a game cut at its
    # limit of 10 ends with turn 11; one that ended on an earlier move has turn 10 at most.
    assert ended_at_limit("", 11, 10) and not ended_at_limit("", 10, 10) and not ended_at_limit("", 3, 10)
    assert not ended_at_limit("", 50, None)  # a game without a limit of its own never ends at one
    # A reason decides whatever the count says.
    assert not ended_at_limit("Congratulations! You guessed the correct number.", 11, 10)
    assert ended_at_limit("The turn limit has been reached. Guess: 18, Target: 13", 11, 10)


def test_success_is_a_win_never_a_draw():
    assert won({0: 1, 1: -1}, 2, at_limit=False, invalid=False)
    assert not won({0: 0, 1: 0}, 2, at_limit=False, invalid=False)  # set_draw
    assert not won({0: -1, 1: 1}, 2, at_limit=False, invalid=False)
    assert not won({0: 1, 1: 1, 2: -1}, 3, at_limit=False, invalid=False)  # a shared first place
    assert won({0: 1.0}, 1, at_limit=False, invalid=False)
    assert not won({0: 1.0}, 1, at_limit=True, invalid=False) and not won({0: 1.0}, 1, at_limit=False, invalid=True)
    assert not won({0: 0.95}, 1, at_limit=False, invalid=False)  # partial completion is not solved


def test_a_tic_tac_toe_draw_against_the_seeded_opponent_is_no_success():
    env = TextArenaEnv("TicTacToe-v0")
    draws = wins = 0
    for seed in range(30):
        env.reset(seed=seed)
        _, reward, terminated, _, info = _steps(env, ["legal_1"] * 9)[-1]
        assert terminated
        if info["rewards"] == {0: 0, 1: 0}:  # TextArena's set_draw
            draws += 1
            assert reward == 0.0 and info["success"] is False
        elif info["rewards"] == {0: 1, 1: -1}:
            wins += 1
            assert reward == 1.0 and info["success"] is True
    assert draws and wins  # both occur among these seeds


def test_the_second_invalid_move_ends_the_game_flagged_and_unsuccessful():
    env = TextArenaEnv("GuessTheNumber-v0")
    env.reset(seed=2)
    (_, _, t1, _, first), (_, reward, t2, _, last) = _steps(env, ["illegal", "illegal"])
    assert not t1 and first["tool"]["status"] == "error"  # forgiven once: a rejected move, retried
    assert t2 and last["invalid_move"] is True and last["success"] is False and "tool" not in last
    env.reset(seed=2)
    *_, (_, _, _, _, won_info) = _steps(env, ["illegal", "reference"])
    assert won_info["invalid_move"] is False and won_info["success"] is True  # one error, then the win


def test_a_move_that_ends_the_game_by_an_invalid_move_is_not_a_valid_move():
    # After one forgiven illegal column, a second one ends ConnectFour-v0 by TextArena's invalid-move
    # rule without raising the error count again: trying it on a copy must still call it invalid.
    env = TextArenaEnv("ConnectFour-v0")
    env.reset(seed=0)
    illegal = env.candidates()["illegal"]
    env.step(env.action_labels.index("illegal"))
    assert env.base.state.error_count == 1
    trial = try_move(env.game, illegal)
    assert trial is not None and not trial.valid and trial.ends
    legal = try_move(env.game, env.candidates()["legal_1"])
    assert legal is not None and legal.valid


def test_the_adapters_turn_cap_truncates_a_game_without_a_limit_at_the_cap():
    # ConnectFour-v0 has no turn limit of its own, and three moves a side cannot make four in a row.
    env = TextArenaEnv("ConnectFour-v0", turn_cap=3)
    env.reset(seed=0)
    steps = _steps(env, ["stall"] * 10)
    assert len(steps) == 3
    _, reward, terminated, truncated, info = steps[-1]
    assert truncated and not terminated and reward == 0.0 and info["success"] is False
