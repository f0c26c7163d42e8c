"""The TextArena adapter's mapping, part by part, on games TextArena ships (textarena 0.7.4).

Every expected value is worked out from TextArena's source, read by hand:

- ``check``: an id the registry lacks is a usage error with the closest registered id; a bad
  ``num_players`` is one too (the CLI exits 2 with it). Without the package, the message names the
  extra that installs it.
- ``held_history`` / ``stateful_wrappers``: TextArena's default ``LLMObservationWrapper`` keeps
  ``full_observations`` (a dict), empty when made and filled by the first game's messages.
- ``won``: with other players, player 0's final reward above every other player's (``set_winner``
  pays 1 and -1; a draw pays both the same); alone, an outcome of exactly 1 that ended neither at
  the turn limit nor by an invalid move.
- The turn limit: GuessTheNumber-v0 is registered with ``max_turns=10`` (one player), so the game
  cuts itself after its 11th guess (``State.check_turn_limit`` runs before the turn is counted) and
  the adapter's guard is twice that, 22 steps (a retried invalid move is a step, not a turn);
  SimpleNegotiation-v0 has ``max_turns=10`` too but two players, whose turns alternate, so the
  adapter keeps its own cap (``turn_cap``).
"""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

pytest.importorskip("textarena")

import textarena as ta  # noqa: E402

from envaudit.adapters import textarena as T  # noqa: E402
from envaudit.errors import UsageError  # noqa: E402


def test_an_unknown_game_is_a_usage_error_naming_the_closest_registered_id():
    with pytest.raises(UsageError, match=r"TextArena has no env 'TicTacTo-v0'; did you mean 'TicTacToe-v0'\?"):
        T.check("TicTacTo-v0")
    with pytest.raises(UsageError, match=r"TextArena has no env 'qqqq'.*\(e\.g\. GuessTheNumber-v0\)"):
        T.check("qqqq")
    assert T.check("Nim-v0") is None and T.check("Nim-v0", num_players=2) is None


@pytest.mark.parametrize("players", [0, -1, "2", 2.0, None])
def test_num_players_must_be_a_positive_integer(players):
    with pytest.raises(UsageError, match=rf"--env-arg num_players={players!r}: expected a positive integer"):
        T.check("Nim-v0", num_players=players)


def test_without_the_package_the_error_names_the_extra_that_installs_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "textarena", None)  # an import of it fails as if it were absent
    with pytest.raises(UsageError) as caught:
        T.check("Nim-v0")
    assert str(caught.value) == ("the textarena adapter needs the 'textarena' package, which is not installed; "
                                 "install it with: pip install 'envaudit-rl[textarena]'")


def test_the_observation_wrappers_history_is_held_once_a_game_is_played():
    game = ta.make("Nim-v0")
    assert T.stateful_wrappers(game) == ["LLMObservationWrapper.full_observations"]
    assert T.held_history(game) == []  # made, never played: the dict is there, empty
    game.reset(num_players=2, seed=0)
    game.get_observation()
    assert T.held_history(game) == ["LLMObservationWrapper.full_observations"]
    raw = ta.make("Nim-v0-raw")  # no observation wrapper: nothing to hold
    raw.reset(num_players=2, seed=0)
    assert T.stateful_wrappers(raw) == [] and T.held_history(raw) == []


@pytest.mark.parametrize("rewards, players, at_limit, invalid, expected", [
    ({0: 1, 1: -1}, 2, False, False, True),
    ({0: -1, 1: 1}, 2, False, False, False),
    ({0: 1, 1: 1}, 2, False, False, False),  # a draw paid 1 each is no win
    ({0: 0, 1: 0}, 2, False, False, False),
    ({0: 0.5, 1: 0.0}, 2, False, False, True),  # above every other player's, whatever the scale
    ({0: 1, 1: -1, 2: 1}, 3, False, False, False),
    ({0: 1, 1: -1, 2: 0}, 3, False, False, True),
    ({0: 1}, 2, False, False, False),  # nobody else was paid: nothing to be above
    ({0: 1}, 1, False, False, True),
    ({0: 1}, 1, True, False, False),  # at the turn limit: not solved
    ({0: 1}, 1, False, True, False),  # by an invalid move
    ({0: 0.9}, 1, False, False, False),  # a fraction completed
    ({}, 1, False, False, False),  # no reward for player 0
    (None, 1, False, False, False),
])
def test_won_is_player_0_above_every_other_or_a_solved_game_alone(rewards, players, at_limit, invalid, expected):
    assert T.won(rewards, players, at_limit=at_limit, invalid=invalid) is expected


def test_a_single_player_games_own_limit_sets_the_guard_and_the_fingerprint():
    env = T.TextArenaEnv("GuessTheNumber-v0")
    assert (env.num_players, env.turn_limit, env.turn_cap, env.max_steps) == (1, 10, 22, 22)
    info = env.adapter_info
    assert {k: info[k] for k in ("package", "version", "env_id", "env_class", "num_players", "options")} == {
        "package": "textarena", "version": importlib.metadata.version("textarena"), "env_id": "GuessTheNumber-v0",
        "env_class": "textarena.envs.GuessTheNumber.env.GuessTheNumberEnv", "num_players": 1, "options": {}}
    assert info["opponent"] is None
    shorter = T.TextArenaEnv("GuessTheNumber-v0", max_turns=4)
    assert (shorter.turn_limit, shorter.turn_cap) == (4, 10) and shorter.adapter_info["options"] == {"max_turns": "4"}


def test_the_game_ends_itself_at_its_limit_before_the_guard():
    env = T.TextArenaEnv("GuessTheNumber-v0", max_turns=4)
    env.reset(seed=0)
    wrong = env.action_labels.index("stall")
    steps = 0
    while True:
        _, _, terminated, truncated, info = env.step(wrong)
        steps += 1
        if terminated or truncated:
            break
    assert steps == 5 < env.turn_cap and truncated and info["success"] is False


def test_a_two_player_games_limit_is_not_the_agents():
    env = T.TextArenaEnv("SimpleNegotiation-v0", turn_cap=7)
    assert env.base.max_turns == 10 and env.num_players == 2
    assert (env.turn_limit, env.turn_cap, env.max_steps) == (None, 7, 7)
    assert T.TextArenaEnv("SimpleNegotiation-v0").turn_cap == T.DEFAULT_TURN_CAP
    assert env.adapter_info["opponent"].startswith("a uniformly random legal move")


def test_a_seedless_reset_draws_its_seed_from_the_seeded_generator():
    from gymnasium.utils import seeding

    env = T.TextArenaEnv("GuessTheNumber-v0")
    env.reset(seed=5)
    generator, _ = seeding.np_random(5)
    numbers, expected = [], []
    for _ in range(3):  # seedless: each episode's seed is the next draw of the generator reset(seed=5) made
        env.reset()
        numbers.append(env.base.game_number)
        twin = T.TextArenaEnv("GuessTheNumber-v0")
        twin.reset(seed=int(generator.integers(2**31)))
        expected.append(twin.base.game_number)
    assert numbers == expected


def test_a_game_dealt_again_names_the_deal_and_the_seed_it_was_dealt_from():
    """SecretMafia-v0 at seed 0 is decided by the other players before player 0 moves (see
    test_textarena_episodes.py); its second deal is seeded from the reset seed and the deal number
    (``envaudit-deal:0:1``'s first 31 bits), and that game is TextArena's own game of that seed."""
    import random

    env = T.TextArenaEnv("SecretMafia-v0")
    obs, info = env.reset(seed=0)
    assert info == {"deal": 1, "game_seed": random.Random("envaudit-deal:0:1").getrandbits(31)}
    roles = {pid: role for pid, role in env.base.player_roles.items()}
    game = ta.make("SecretMafia-v0")
    game.reset(num_players=env.num_players, seed=info["game_seed"])
    from envaudit.adapters.textarena_moves import unwrap

    assert unwrap(game).player_roles == roles  # the same deal


def test_playability_of_guess_the_number_by_its_rules():
    """Eleven labels tried on the first three states of the seed-0 game played with ``legal_1`` (a
    wrong guess each time): every legal guess and the reference are read (3 + 9), TextArena's regex
    also reads the bare number (3) and the prompt's own example guess (3), the stall is a legal
    guess (3); the illegal 21 is out of range, the forfeit and the empty reply are no guess, and a
    repeated guess is rejected (``repeat_last`` is a new guess only on the first state): 22 of 33."""
    play = T.TextArenaEnv("GuessTheNumber-v0").adapter_info["playability"]
    assert play == {
        "measured": True, "seed": T.PLAYABILITY_SEED, "states": 3, "valid_share": 22 / 33, "legal_valid_share": 1.0,
        "by_label": {"reference": 1.0, "legal_1": 1.0, "legal_2": 1.0, "legal_3": 1.0, "illegal": 0.0,
                     "unformatted": 1.0, "repeat_last": 1 / 3, "forfeit": 0.0, "empty": 0.0, "echo_prompt": 1.0,
                     "stall": 1.0},
        "legal_moves_from": "state"}


def test_playability_stopped_by_the_games_own_error_says_where_and_what_was_tried():
    """CharacterConclave's step calls ``add_observation`` without its ``observation_type`` (TextArena
    0.7.4, envs/CharacterConclave/env.py:34): no move is ever accepted and the measure stops after
    the first state, saying why. Its moves are guesses: it has no state reader, and nothing its text
    shows was accepted on a copy."""
    play = T.TextArenaEnv("CharacterConclave-v0").adapter_info["playability"]
    labels = ("legal_1", "legal_2", "legal_3", "illegal", "unformatted", "repeat_last", "forfeit", "empty",
              "echo_prompt", "stall")
    assert play == {
        "measured": True, "seed": 0, "states": 1, "valid_share": 0.0, "legal_valid_share": 0.0,
        "by_label": dict.fromkeys(labels, 0.0), "legal_moves_from": "guessed",
        "note": "stopped after 1 state(s): TypeError: State.add_observation() missing 1 required positional "
                "argument: 'observation_type'"}


def test_a_game_that_cannot_be_copied_is_measured_as_such_and_its_moves_are_unchecked(monkeypatch):
    from textarena.envs.GuessTheNumber.env import GuessTheNumberEnv

    def no_copy(self, memo):
        raise RuntimeError("holds a lock")

    monkeypatch.setattr(GuessTheNumberEnv, "__deepcopy__", no_copy, raising=False)
    env = T.TextArenaEnv("GuessTheNumber-v0")
    assert env.adapter_info["playability"] == {
        "measured": False, "why": "the game could not be reset and copied (RuntimeError: holds a lock), so no "
                                  "move could be tried"}
    assert env.adapter_info["move_trials_per_state"] == 0
    assert env.adapter_info["legal_moves"] == "read from the game's state (envaudit.adapters.textarena_games)"
    from textarena.envs.Countdown.env import (
        CountdownEnv,  # no state reader: its text's moves go untried
    )

    monkeypatch.setattr(CountdownEnv, "__deepcopy__", no_copy, raising=False)
    assert T.TextArenaEnv("Countdown-v0").adapter_info["legal_moves"] == (
        "moves read from the game's text, unchecked: the game cannot be copied to try them")
    monkeypatch.undo()
    assert T.TextArenaEnv("Countdown-v0").adapter_info["legal_moves"] == (
        "moves read from the game's text, each tried on a copy of the game and kept when its own step() accepts it")
