"""TextArena episodes the adapter must not get wrong: a reward that is not a number, and the
observation history TextArena's default wrapper carries across resets.

ThreeCardMonte-v0 passes its arguments to ``SinglePlayerState.set_invalid_move(reason, reward)``
the wrong way round (envs/ThreeCardMonte/env.py line 43: ``set_invalid_move(0.0, "Bad action. Use
`[k]`.")``, read by hand), so the second badly formatted move ends the game with the *reason* as
player 0's reward, a ``str``. The adapter raises ``RewardTypeError`` naming that line, and the scan's
``env-error`` finding carries it.

Nim-v0 under TextArena's default ``LLMObservationWrapper``: resetting an instance keeps every earlier
game's transcript (checked by hand: the second game's first observation starts with the first
game's, the prompt twice). The adapter lets that show on an instance's second game only (so the
scan reports it as non-replayable, test_textarena.py) and plays every later game on a fresh env, so
what the wrapper holds stays bounded where a TextArena instance reset in place grows with every game.

SpiteAndMalice-v0 stalls: a turn ends only with a discard from the hand (envs/SpiteAndMalice/env.py,
``step``: ``rotate_player`` is set by the discard branch alone), so once the deck is empty and a
player's hand too, that player can never hand the turn on and its ``[draw]`` repeats ("There are no
more cards to draw from"). From seed 1, with player 0 playing ``legal_1`` again and again, player 1
reaches that state after player 0's 40th move (read from the transcript: an empty hand, the draw pile
empty); the adapter gives up after ``OPPONENT_MOVES_PER_TURN`` moves and raises ``GameStalled`` at
the game's own ``step``, never a RuntimeError of its own.
"""

from __future__ import annotations

import pytest

pytest.importorskip("textarena")

import textarena as ta  # noqa: E402

from envaudit.adapters.textarena import OPPONENT_MOVES_PER_TURN, GameStalled, TextArenaEnv  # noqa: E402
from envaudit.adapters.textarena_rewards import RewardTypeError  # noqa: E402
from envaudit.errors import user_frame  # noqa: E402
from envaudit.scan import run_scan  # noqa: E402

PROMPT = "Welcome to Nim, Player 0!"


def _monte_line() -> tuple[str, int]:
    import textarena.envs.ThreeCardMonte.env as monte

    lines = open(monte.__file__).read().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if 'set_invalid_move(0.0, "Bad action' in text)
    return monte.__file__, line


def test_a_reward_of_the_wrong_type_names_the_games_own_line():
    file, line = _monte_line()
    env = TextArenaEnv("ThreeCardMonte-v0")
    env.reset(seed=1)
    *_, info = env.step(env.action_labels.index("empty"))  # the first bad move: TextArena lets the player retry
    assert info["tool"] == {"name": "move", "status": "error", "error": "TextArena counted an invalid move"}
    with pytest.raises(RewardTypeError) as caught:
        env.step(env.action_labels.index("empty"))
    assert f"{file}:{line}" in str(caught.value) and "'Bad action. Use `[k]`.' (str)" in str(caught.value)
    assert str(caught.value).startswith("TextArena's ThreeCardMonteEnv set player 0's reward to 'Bad action.")
    assert user_frame(caught.value) == f"{file}:{line}"  # where the scan's problem points


def test_the_scan_reports_the_reward_type_as_an_env_error_at_that_line():
    file, line = _monte_line()
    report = run_scan(lambda: TextArenaEnv("ThreeCardMonte-v0"), env_id="textarena:ThreeCardMonte-v0",
                      quick=True, seed=0, probes=["api"])
    errors = [f for f in report.findings if f.code == "env-error"]
    assert errors and f"{file}:{line}" in errors[0].summary and "RewardTypeError" in errors[0].summary


STALLED_AT = 39
"""Player 0's step (from 0) after which player 1 is stuck, from seed 1 with `legal_1` (measured: the deal is the seed's)."""


def test_a_game_that_never_hands_the_turn_back_is_blamed_on_its_own_step():
    import textarena.envs.SpiteAndMalice.env as spite

    env = TextArenaEnv("SpiteAndMalice-v0")
    env.reset(seed=1)
    moves = []
    game_step = env.game.step
    env.game.step = lambda move: (moves.append((env.base.state.current_player_id, move)), game_step(move))[1]
    with pytest.raises(GameStalled) as caught:
        for turn in range(60):  # noqa: B007 - read after the loop: the step that raised
            env.step(env.action_labels.index("legal_1"))
    assert turn == STALLED_AT
    where = user_frame(caught.value)
    assert where.startswith(f"{spite.__file__}:") and "(SpiteAndMaliceEnv.step)" in str(caught.value)
    line = open(spite.__file__).read().splitlines()[int(where.rsplit(":", 1)[1]) - 1]
    assert "self.state.step(rotate_player)" in line  # where the game decides whose turn it is
    stuck = [m for p, m in moves[-OPPONENT_MOVES_PER_TURN:]]
    assert all(p == 1 for p, _ in moves[-OPPONENT_MOVES_PER_TURN:]) and stuck[-1] == "[draw]"
    assert "player 1 is still to move after '[draw]'" in str(caught.value)
    hand = env.base.players[1]["hand"]
    assert hand == [] and env.base.deck == []  # nothing to discard, nothing to draw: no move ends the turn


def test_watching_the_stalled_games_step_leaves_a_profiler_running_as_it_was():
    """The guard's last opponent move is stepped under ``sys.setprofile`` to keep the game's frame; a
    profiler the user runs the scan under (cProfile sets one) must be the one in place afterwards."""
    import sys

    calls = []

    def users_profiler(frame, event, arg):
        calls.append(event)

    env = TextArenaEnv("SpiteAndMalice-v0")
    env.reset(seed=1)
    sys.setprofile(users_profiler)
    try:
        with pytest.raises(GameStalled):
            for _ in range(STALLED_AT + 1):
                env.step(env.action_labels.index("legal_1"))
        assert sys.getprofile() is users_profiler
    finally:
        sys.setprofile(None)
    assert calls  # it saw the play before and after the watched move


def _held(game) -> int:
    while "full_observations" not in vars(game):
        game = vars(game)["env"]
    return sum(len(v) for v in game.full_observations.values())


def _play_out(env: TextArenaEnv) -> None:
    while True:
        _, _, terminated, truncated, _ = env.step(env.action_labels.index("legal_1"))
        if terminated or truncated:
            return


def test_the_transcript_shows_once_then_every_game_is_fresh():
    env = TextArenaEnv("Nim-v0")
    assert "LLMObservationWrapper.full_observations" in env.adapter_info["observation_history"]
    prompts, held = [], []
    for _ in range(6):
        obs, _ = env.reset(seed=3)
        prompts.append(obs.count(PROMPT))
        _play_out(env)
        held.append(_held(env.game))
    assert prompts == [1, 2, 1, 1, 1, 1]
    assert max(held[2:]) <= held[0] + 1  # bounded by one game, not growing with the games played
    # TextArena itself, reset in place, holds every game it ever played.
    game = ta.make("Nim-v0")
    raw = []
    for _ in range(6):
        game.reset(num_players=2, seed=3)
        for move in ("[0 3]", "[1 4]", "[2 5]"):
            game.get_observation()
            game.step(move)
        raw.append(_held(game))
    assert raw == sorted(raw) and raw[-1] >= 5 * raw[0]


def test_a_fresh_game_replays_the_same_episode():
    env = TextArenaEnv("Nim-v0")
    episodes = []
    for _ in range(4):
        obs, _ = env.reset(seed=11)
        steps = []
        while True:
            obs, reward, terminated, truncated, _ = env.step(env.action_labels.index("legal_2"))
            steps.append((obs, reward))
            if terminated or truncated:
                break
        episodes.append(steps)
    # The second game shows the first one's transcript; the games after it replay the first.
    assert episodes[0] == episodes[2] == episodes[3] and episodes[1] != episodes[0]


def test_a_game_the_opponents_finish_first_is_dealt_again_from_the_seed():
    # SecretMafia-v0 (6 players, the agent a villager at seed 0): the seeded random opponents vote
    # out both Mafia before player 0's first turn (checked by hand: TextArena's reason "All Mafia
    # were eliminated. Village wins!", 39 turns in). The reset deals again and replays that deal.
    env = TextArenaEnv("SecretMafia-v0")
    first, info = env.reset(seed=0)
    assert info["deal"] >= 1 and env.base.state.current_player_id == 0 and not env.base.state.done
    again, info_again = TextArenaEnv("SecretMafia-v0").reset(seed=0)
    assert (again, info_again) == (first, info)
    assert "deal" not in env.reset(seed=1)[1]  # a game that leaves player 0 a move is the seed's own


def test_a_legal_move_the_game_goes_on_after_is_a_move_that_worked():
    env = TextArenaEnv("TicTacToe-v0")
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(env.action_labels.index("legal_1"))
    assert (reward, terminated, truncated) == (0.0, False, False) and info["tool"] == {"name": "move", "status": "ok"}
