"""TextArena adapter: ``envaudit scan textarena:ENV_ID`` (textarena 0.7.4, e.g. ``GuessTheNumber-v0``).

TextArena envs are turn-based games: ``ta.make(id)``, ``reset(num_players, seed)``,
``get_observation() -> (player_id, text)``, ``step(text) -> (done, info)`` and, at the end,
``close() -> (rewards, game_info)``. What the adapter maps:

- **Reward.** TextArena pays only at the end (``state.rewards``); every earlier step is 0 and the
  last step carries the agent's (player 0's) reward.
- **Success.** In a game for two or more players, player 0 won: its reward is above every other
  player's (TextArena's ``set_winner``). Alone, TextArena marks a solved game with
  ``set_outcome(reward=1)`` and a lost one with the fraction completed, so success is an outcome
  of 1 that ended neither by the turn limit nor by an invalid move.
- **Truncation.** A game that ended because its turn limit was reached (its reason says so, or,
  when it gives no reason, the turn count reached ``max_turns``) is truncated, not terminated; so is an episode cut by the
  adapter's own guard (``turn_cap`` agent steps, for games without a limit of their own).
- **Moves as tool calls.** Every agent step the game goes on after is a ``move`` call, status
  ``error`` when TextArena counted it an invalid move (its error count rose: the player may retry).
  The step that ends the game carries the game's verdict instead, with ``info["invalid_move"]``:
  a game lost by an invalid move is a failure paid by TextArena's rule, not a tool error.
- **Opponents.** Other players play a fixed policy: the first move of the "Available Moves"
  listing of their observation, else the first move the prompt quotes as an example, else
  ``[0]``; so an episode is a function of the seed and the agent's actions. Games for more than
  two players need ``--env-arg num_players=N``.
- **Seeding.** ``reset(seed=...)`` seeds Python's *global* ``random`` (``ta.State.__init__``);
  anything else that draws from it in the same process changes the episodes. The fingerprint
  records this replayability risk.

Catalogue: legal moves (Guess the Number's unguessed numbers and Tower of Hanoi's playable moves,
read from the game's state; else the observation's "Available Moves/Actions" listing; else the
moves the prompt quotes as examples; else bracketed guesses that may not be legal, as
``adapter_info`` says), an illegal move, the move without brackets, a repeat of the last move, a
forfeit, the empty reply and an echo of the prompt; games whose secret the adapter can read (Guess
the Number, Mastermind) also get the reference move and an oracle.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from typing import Any

from envaudit.adapters import package_version, require
from envaudit.adapters.base import CatalogueEnv
from envaudit.adapters.catalogue import Strategy, game_labels, game_strategies
from envaudit.errors import UsageError
from envaudit.protocol import TOOL_ERROR, TOOL_OK

EXTRA = "textarena"
DEFAULT_TURN_CAP = 50
"""Agent turns after which the adapter truncates a game that has no turn limit of its own."""
OPPONENT_MOVES_PER_TURN = 20
"""Opponent steps between two agent turns before the adapter gives up on the game (a guard)."""
LISTING = re.compile(r"Available (?:Moves|Actions)\s*:\s*([^\n]*)", re.IGNORECASE)
BRACKETED = re.compile(r"\[[^\[\]\n]{1,40}\]")
TURN_LIMIT = re.compile(r"turn limit", re.IGNORECASE)
EXAMPLE = re.compile(r"['`](\[[^\[\]\n]{1,20}\])['`]")
"""A move the game's prompt quotes as an example ('[A C]', `[3 2]`): a well-formed move at least."""


def _guess_the_number_moves(env: Any, rng: random.Random) -> list[str]:
    guessed = getattr(env, "guessed_numbers", set())
    left = [n for n in range(env.min_number, env.max_number + 1) if n not in guessed]
    return [f"[{n}]" for n in rng.sample(left, min(3, len(left)))] if left else []


def _tower_of_hanoi_moves(env: Any, rng: random.Random) -> list[str]:
    towers = env.state.game_state["towers"]
    moves = [f"[{a} {b}]" for a in towers for b in towers
             if a != b and towers[a] and (not towers[b] or towers[b][-1] > towers[a][-1])]
    return rng.sample(moves, min(3, len(moves)))


LEGAL: dict[str, Callable[[Any, random.Random], list[str]]] = {
    "GuessTheNumberEnv": _guess_the_number_moves,
    "TowerOfHanoiEnv": _tower_of_hanoi_moves,
}
REFERENCES: dict[str, Callable[[Any], str]] = {
    "GuessTheNumberEnv": lambda env: f"[{env.game_number}]",
    "MastermindEnv": lambda env: "[" + " ".join(str(d) for d in env.state.game_state["secret_code"]) + "]",
}


def _listed_moves(observation: str) -> list[str]:
    """The moves of the observation's *last* "Available Moves" listing (TextArena's LLM observation
    is the whole transcript, so earlier listings are of earlier boards)."""
    listings = LISTING.findall(observation)
    return BRACKETED.findall(listings[-1]) if listings else []


def _ta() -> Any:
    return require("textarena", package="textarena", extra=EXTRA)


def check(env_id: str, **options: Any) -> None:
    _ta()
    from textarena.envs.registration import ENV_REGISTRY

    if env_id not in ENV_REGISTRY:
        import difflib

        close = difflib.get_close_matches(env_id, sorted(ENV_REGISTRY), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (e.g. GuessTheNumber-v0)"
        raise UsageError(f"TextArena has no env {env_id!r}{hint}")
    players = options.get("num_players", 1)
    if not isinstance(players, int) or players < 1:
        raise UsageError(f"--env-arg num_players={players!r}: expected a positive integer")


def make(env_id: str, **options: Any) -> TextArenaEnv:
    return TextArenaEnv(env_id, **options)


def _unwrap(env: Any) -> Any:
    while hasattr(env, "env") and not hasattr(type(env), "state"):
        inner = env.__dict__.get("env")
        if inner is None:
            break
        env = inner
    return env


class TextArenaEnv(CatalogueEnv):
    """One TextArena game, the agent as player 0, behind the Gymnasium API and the info protocol."""

    ecosystem = "textarena"

    def __init__(self, env_id: str, *, num_players: int | None = None, turn_cap: int = DEFAULT_TURN_CAP,
                 **options: Any) -> None:
        ta = _ta()
        try:
            self.game = ta.make(env_id, **options)
        except TypeError as exc:
            raise UsageError(f"TextArena env {env_id!r} rejected the options {options}: {exc}") from exc
        self.env_id = env_id
        self.base = _unwrap(self.game)
        kind = type(self.base).__name__
        self._legal = LEGAL.get(kind)
        self._reference = REFERENCES.get(kind)
        self.has_reference = self._reference is not None
        self.num_players = num_players or self._default_players()
        limit = getattr(self.base, "max_turns", None)
        self.turn_limit = int(limit) if isinstance(limit, int) and self.num_players == 1 else None
        # The game ends itself at its own limit; the adapter's cap is only a guard, above the most
        # steps a game can take (TextArena checks its limit before counting the turn, so a limit
        # of 10 allows 11 moves, and a retried invalid move is a step that is not a turn).
        self.turn_cap = 2 * (self.turn_limit + 1) if self.turn_limit else int(turn_cap)
        super().__init__(game_labels(self.has_reference), max_steps=self.turn_cap)
        self.adapter_info.update({
            "package": "textarena", "version": package_version("textarena"), "env_id": env_id,
            "env_class": f"{type(self.base).__module__}.{kind}", "num_players": self.num_players,
            "options": {k: repr(v) for k, v in options.items()},
            "success": ("player 0's final reward above every other player's" if self.num_players > 1 else
                        "a final outcome of 1 (TextArena's solved game), not at the turn limit, not by an invalid move"),
            "opponent": "first move of the opponent's 'Available Moves' listing, else the prompt's first quoted "
                        "example move, else [0]"
                        if self.num_players > 1 else None,
            "legal_moves": "game-specific" if self._legal else "the observation's 'Available Moves/Actions' "
                           "listing when it has one, else the prompt's quoted example moves, else "
                           "bracketed guesses that may be illegal",
            "replayability_risk": "reset(num_players, seed) seeds Python's global random (ta.State.__init__); "
                                  "other users of the global random in the same process change the episodes",
        })
        self._seed = 0
        self._turn = 0
        self._last: str | None = None
        self._obs = ""

    def _default_players(self) -> int:
        import inspect

        try:
            source = inspect.getsource(type(self.base).reset)
        except (OSError, TypeError):
            return 1
        return 2 if "TwoPlayerState" in source else 1

    def _state(self) -> Any:
        return self.base.state

    # -- episodes --------------------------------------------------------------------------------
    def _reset(self, seed: int | None, options: Mapping[str, Any] | None):
        self._seed = seed if seed is not None else int(self.np_random.integers(2**31))
        self._turn, self._last = 0, None
        self.game.reset(num_players=self.num_players, seed=self._seed)
        self._obs = self._agent_observation()
        return self._obs, {}

    def _agent_observation(self) -> str:
        _pid, obs = self.game.get_observation()
        return obs if isinstance(obs, str) else str(obs)

    def _play_opponents(self) -> bool:
        """Let the other players move until it is player 0's turn; True when the game ended."""
        state = self._state()
        for _ in range(OPPONENT_MOVES_PER_TURN):
            if state.done or state.current_player_id == 0:
                return bool(state.done)
            _pid, obs = self.game.get_observation()
            moves = _listed_moves(str(obs or "")) or EXAMPLE.findall(self.prompt)
            done, _ = self.game.step(moves[0] if moves else "[0]")
            if done:
                return True
        raise RuntimeError(f"the opponents of {self.env_id} made {OPPONENT_MOVES_PER_TURN} moves without "
                           "handing the turn back to player 0")

    def _step_text(self, text: str):
        state = self._state()
        errors_before = getattr(state, "error_count", 0)
        done, _ = self.game.step(text)
        self._turn += 1
        self._last = text
        invalid = getattr(state, "error_count", 0) > errors_before
        if not done and state.current_player_id != 0:
            done = self._play_opponents()
        if not done:
            self._obs = self._agent_observation()
            truncated = self._turn >= self.turn_cap
            info = {"tool": self._tool(invalid)}
            if truncated:
                info["success"] = False
            return self._obs, 0.0, False, truncated, info
        rewards, game_info = self.game.close()
        mine = (game_info or {}).get(0, {})
        invalid = invalid or bool(mine.get("invalid_move"))
        reason = str(mine.get("reason", ""))
        limit = getattr(state, "max_turns", None)
        # The game's reason says why it ended; the turn count only stands in when it gives none
        # (a win on the last allowed move also ends with the count at the limit).
        at_limit = bool(TURN_LIMIT.search(reason)) if reason else (isinstance(limit, int) and state.turn >= limit)
        reward = float((rewards or {}).get(0, 0.0))
        if self.num_players > 1:
            others = [float(v) for k, v in (rewards or {}).items() if k != 0]
            success = bool(others) and reward > max(others)
        else:
            success = reward == 1.0 and not at_limit and not invalid
        # The step that ends the game carries the game's verdict, not a tool status: a game lost by
        # an invalid move is a failure TextArena pays by its own rule, not a tool error.
        info = {"success": success, "invalid_move": invalid, "reason": reason, "rewards": dict(rewards or {})}
        return reason, reward, not at_limit, at_limit, info

    @staticmethod
    def _tool(invalid: bool) -> dict[str, Any]:
        return {"name": "move", "status": TOOL_ERROR if invalid else TOOL_OK,
                **({"error": "TextArena counted an invalid move"} if invalid else {})}

    # -- the catalogue ---------------------------------------------------------------------------
    def _legal_moves(self) -> list[str]:
        rng = random.Random(f"envaudit-catalogue:{self._seed}:{self._turn}")  # never the global random
        if self._legal is not None:
            moves = self._legal(self.base, rng)
            if moves:
                return moves
        moves = _listed_moves(self._obs) or EXAMPLE.findall(self.prompt)
        if moves:
            return [moves[i] for i in sorted(rng.sample(range(len(moves)), min(3, len(moves))))]
        return [f"[{rng.randint(0, 9)}]" for _ in range(3)]

    def _strategies(self) -> list[Strategy]:
        legal = self._legal_moves()
        inner = legal[0].strip("[]")
        reference = self._reference(self.base) if self._reference else None
        return game_strategies(legal, self.prompt if self._turn == 0 else self._obs,
                               illegal=f"[{inner}{inner}{inner}]", unformatted=inner,
                               last=self._last, reference=reference)
