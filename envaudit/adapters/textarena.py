"""TextArena adapter: ``envaudit scan textarena:ENV_ID`` (textarena 0.7.4, e.g. ``GuessTheNumber-v0``).

TextArena envs are turn-based games: ``ta.make(id)``, ``reset(num_players, seed)``,
``get_observation() -> (player_id, text)``, ``step(text) -> (done, info)`` and, at the end,
``close() -> (rewards, game_info)``. What the adapter maps:

- **Reward.** TextArena pays only at the end (``state.rewards``); every earlier step is 0 and the
  last step carries the agent's (player 0's) reward. A reward that is not a number (a game that
  passes its reason where the reward belongs) raises ``RewardTypeError`` naming the game's own
  ``file:line`` that set it, so the scan's ``env-error`` points there, not at the adapter.
- **Success.** In a game for two or more players, player 0 won: its reward is above every other
  player's (TextArena's ``set_winner``). Alone, TextArena marks a solved game with
  ``set_outcome(reward=1)`` and a lost one with the fraction completed, so success is an outcome
  of 1 that ended neither by the turn limit nor by an invalid move. A game whose reward is a score
  has its win state read from its state instead (``GameMoves.success``: Set's perfect game).
- **Truncation.** A game that ended because its turn limit was reached (its reason says so, or,
  when it gives no reason, the turn count reached ``max_turns``) is truncated, not terminated; so is an episode cut by the
  adapter's own guard (``turn_cap`` agent steps, for games without a limit of their own).
- **Moves as tool calls.** Every agent step the game goes on after is a ``move`` call, status
  ``error`` when TextArena counted it an invalid move (its error count rose: the player may retry).
  The step that ends the game carries the game's verdict instead, with ``info["invalid_move"]``:
  a game lost by an invalid move is a failure paid by TextArena's rule, not a tool error.
- **Opponents.** Other players play a seeded random *legal* player: a uniform draw from the legal
  moves of their state (read as the agent's are, below), from a generator seeded by the reset seed,
  so an episode is a function of the seed and the agent's actions. The agent moves first only when
  the game says so: opponents who start move before the first observation. A game they finish
  before player 0 ever moves is dealt again from a seed derived from the reset seed (``DEALS``;
  ``info["deal"]`` says so). Games for more than
  two players need ``--env-arg num_players=N``. Others who never hand the turn back (a move
  each of ``OPPONENT_MOVES_PER_TURN``) raise ``GameStalled`` at the game's own ``step``.
- **Seeding.** ``reset(seed=...)`` seeds Python's *global* ``random`` (``ta.State.__init__``);
  anything else that draws from it in the same process changes the episodes. The fingerprint
  records this replayability risk. The adapter's own draws (catalogue, opponents) and its trial
  moves on copies of the game never touch the global generators' state.
- **Observation history.** TextArena's default ``LLMObservationWrapper`` keeps every earlier game's
  transcript when an instance is reset (a ``non-replayable`` flaw of TextArena's, and a leak that
  grows without bound over a scan). The adapter lets it show once, on an instance's second game, so
  the scan reports it, and plays every later game on a freshly made TextArena env, so memory stays
  flat.

Legal moves come from the game itself, never from a guess when the game can tell: for the games of
``textarena_games.GAMES`` (Guess the Number, Tower of Hanoi, Mastermind, Connect Four, Nim, Kuhn
Poker, Tic Tac Toe, Three-Card Monte, Sudoku, Peg Jump, Colonel Blotto, Santorini, Settlers of
Catan, Quantum Tic Tac Toe, Set, Crosswords, Logic Puzzle, Simple Negotiation, Two Dollar, New Recruit)
from its state; for every other game, moves read from its text (the last "Available/Valid Moves" listing, the bracketed moves
of the newest messages and of the prompt, and those with their numbers or placeholders varied) are
each tried on a copy of the game, through its own ``step()``, and kept only when the game accepts
them. Only a game whose text shows no move it accepts, or that cannot be copied, gets unchecked
guesses, and ``adapter_info`` says so.

Catalogue: three legal moves, an illegal move (well formed, rejected by the rules), the move without
brackets, a repeat of the last move, a forfeit (the game's own give-up move where it has one: Kuhn
Poker's fold; else a sentence of surrender), the empty reply, an echo of the prompt and a stall (a
legal move that makes the least progress where the game's state says which; else a legal move that
does not end the game), which repeated runs a game into its turn limit. Games whose secret the
adapter can read (Guess the Number, Mastermind, Three-Card Monte) also get the reference move and an
oracle. ``adapter_info["playability"]`` is the share of catalogue moves the game accepts as valid,
measured when the env is made on a few states of one seeded game; a game that accepted none of the
legal moves says so in its ``note``.
"""

from __future__ import annotations

import copy
import inspect
import random
import re
import sys
import types
from collections.abc import Mapping
from typing import Any, NoReturn

import numpy as np

from envaudit.adapters import package_version, require
from envaudit.adapters.base import CatalogueEnv
from envaudit.adapters.catalogue import FORFEIT, Strategy, game_labels, game_strategies
from envaudit.adapters.textarena_games import GAMES
from envaudit.adapters.textarena_moves import (
    ENOUGH_LEGAL,
    Trials,
    global_random_kept,
    invalid_flag,
    layers,
    player_out,
    text_moves,
    trial_budget,
    try_move,
    unwrap,
)
from envaudit.adapters.textarena_rewards import (
    RewardSink,
    check_rewards,
    watch_rewards,
)
from envaudit.errors import UsageError
from envaudit.protocol import TOOL_ERROR, TOOL_OK

EXTRA = "textarena"


class GameStalled(RuntimeError):
    """A game whose other players, moving legally, never hand the turn back to player 0 (TextArena's
    SpiteAndMalice once its deck and a player's hand are empty: only a discard from the hand ends a
    turn). Raised with the game's own ``step`` frame innermost, so the scan's ``env-error`` names it."""

DEFAULT_TURN_CAP = 50
"""Agent turns after which the adapter truncates a game that has no turn limit of its own."""
OPPONENT_MOVES_PER_TURN = 20
"""Steps per opponent between two agent turns before the adapter gives up on the game (a guard)."""
MAX_PLAYERS = 16
"""The most players tried when a game of several players does not say how many it needs."""
DEALS = 8
"""Games dealt per reset, at most, until one leaves player 0 a move (the opponents can end a game first)."""
PLAYABILITY_SEED = 0
PLAYABILITY_TURNS = 3
"""States of one seeded game on which ``adapter_info["playability"]`` is measured."""

TURN_LIMIT = re.compile(r"turn limit", re.IGNORECASE)
GIVE_UP = re.compile(r"\b(?:fold|forfeit|resign|surrender|concede|give up|quit)\b", re.IGNORECASE)
ILLEGAL_TRIES = ("[999]", "[-1]", "[999 999]", "[z]")
"""Well-bracketed moves tried as the illegal move of a game the adapter reads from its text."""

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


def _containers(game: Any) -> list[tuple[str, Any]]:
    """Each wrapper's dict, list or set, as ``(Wrapper.attribute, value)`` (never ``env``, the layer it wraps)."""
    return [(f"{type(layer).__name__}.{name}", value) for layer in layers(game)
            for name, value in vars(layer).items() if isinstance(value, (dict, list, set))]


def held_history(game: Any) -> list[str]:
    """The wrappers' containers that hold data, as ``Wrapper.attribute``: TextArena's ``Wrapper.reset``
    forwards to the env and clears none of them, so what they hold outlives a game."""
    return [label for label, value in _containers(game) if value]


def stateful_wrappers(game: Any) -> list[str]:
    return [label for label, _ in _containers(game)]


# -- the game's verdict ----------------------------------------------------------------------------
def ended_at_limit(reason: str, turn: int, max_turns: Any) -> bool:
    """Whether a game that ended did so at its turn limit. The game's reason says why it ended; the
    turn count stands in only when it gives none. TextArena checks ``turn >= max_turns`` before the
    move that ends the game is counted (``State.check_turn_limit``), and counts it afterwards, so a
    game cut at its limit ends with ``turn == max_turns + 1``; a game that ended on any earlier move
    has ``turn <= max_turns``. (A win on the last allowed move also ends at ``max_turns + 1``: only a
    reason tells the two apart.)"""
    if reason:
        return bool(TURN_LIMIT.search(reason))
    return isinstance(max_turns, int) and not isinstance(max_turns, bool) and turn > max_turns


def won(rewards: Mapping[Any, Any] | None, num_players: int, *, at_limit: bool, invalid: bool) -> bool:
    """Player 0's success. With other players: its final reward above every other player's (a draw,
    equal rewards, is no win; TextArena's ``set_winner`` pays 1 and -1). Alone: TextArena's solved
    game, an outcome of exactly 1 that ended neither at the turn limit nor by an invalid move."""
    rewards = dict(rewards or {})
    mine = float(rewards.get(0, 0.0))
    if num_players > 1:
        others = [float(v) for k, v in rewards.items() if k != 0]
        return bool(others) and mine > max(others)
    return mine == 1.0 and not at_limit and not invalid


def _move_tool(invalid: bool) -> dict[str, Any]:
    """``info["tool"]`` of a move the game goes on after: an error when it counted the move invalid."""
    return {"name": "move", "status": TOOL_ERROR if invalid else TOOL_OK,
            **({"error": "TextArena counted an invalid move"} if invalid else {})}


# -- the env ---------------------------------------------------------------------------------------
class TextArenaEnv(CatalogueEnv):
    """One TextArena game, the agent as player 0, behind the Gymnasium API and the info protocol."""

    ecosystem = "textarena"

    def __init__(self, env_id: str, *, num_players: int | None = None, turn_cap: int = DEFAULT_TURN_CAP,
                 **options: Any) -> None:
        self.env_id = env_id
        self._options = options
        self._history_shown = False  # an in-place reset already showed the wrappers' history
        self._new_game()
        kind = type(self.base).__name__
        self.known = GAMES.get(kind)
        self.has_reference = self.known is not None and self.known.reference is not None
        self.num_players = num_players or self._default_players()
        limit = getattr(self.base, "max_turns", None)
        self.turn_limit = int(limit) if isinstance(limit, int) and self.num_players == 1 else None
        # The game ends itself at its own limit; the adapter's cap is only a guard, above the most
        # steps a game can take (TextArena checks its limit before counting the turn, so a limit
        # of 10 allows 11 moves, and a retried invalid move is a step that is not a turn).
        self.turn_cap = 2 * (self.turn_limit + 1) if self.turn_limit else int(turn_cap)
        super().__init__(game_labels(self.has_reference, stall=True), max_steps=self.turn_cap)
        self._probe_game = self._copy_for_trials()
        self._copyable = self._probe_game is not None
        held = stateful_wrappers(self.game)
        self.adapter_info.update({
            "package": "textarena", "version": package_version("textarena"), "env_id": env_id,
            "env_class": f"{type(self.base).__module__}.{kind}", "num_players": self.num_players,
            "options": {k: repr(v) for k, v in options.items()},
            "success": ("the game's own win state, read from its state, not at the turn limit, not by an invalid "
                        "move: " + " ".join((self.known.success.__doc__ or "").split())
                        if self.known is not None and self.known.success is not None else
                        "player 0's final reward above every other player's" if self.num_players > 1 else
                        "a final outcome of 1 (TextArena's solved game), not at the turn limit, not by an invalid move"),
            "opponent": "a uniformly random legal move (read as the agent's legal moves are), from a generator "
                        "seeded by the reset seed" if self.num_players > 1 else None,
            "legal_moves": ("read from the game's state (envaudit.adapters.textarena_games)" if self.known else
                            "moves read from the game's text, each tried on a copy of the game and kept when its "
                            "own step() accepts it" if self._copyable else
                            "moves read from the game's text, unchecked: the game cannot be copied to try them"),
            "replayability_risk": "reset(num_players, seed) seeds Python's global random (ta.State.__init__); "
                                  "other users of the global random in the same process change the episodes",
            "observation_history": (f"{', '.join(held)} outlive reset() (TextArena's wrappers clear nothing): an "
                                    "instance's second game shows the first one's transcript (reported as "
                                    "non-replayable); every later game runs on a freshly made env so memory stays flat"
                                    if held else None),
        })
        self.adapter_info["move_trials_per_state"] = self._trial_budget if self._copyable else 0
        self.adapter_info["playability"] = self._measure_playability()

    # -- making the game ---------------------------------------------------------------------------
    def _new_game(self) -> None:
        ta = _ta()
        try:
            self.game = ta.make(self.env_id, **self._options)
        except TypeError as exc:
            raise UsageError(f"TextArena env {self.env_id!r} rejected the options {self._options}: {exc}") from exc
        except ImportError as exc:  # a game whose own dependency TextArena does not install (BabyAiText: gym)
            raise UsageError(f"TextArena env {self.env_id!r} cannot be made here: {exc}; install the package "
                             "it names, or scan another game") from exc
        self.base = unwrap(self.game)
        self._played = False  # reset() was called on this game

    def _copy_for_trials(self) -> Any | None:
        """A throwaway copy of the game (never reset) when a game in play can be copied, so moves
        can be tried on copies; None when it cannot (``self._why_not`` says why)."""
        self._why_not = None
        with global_random_kept():
            try:
                twin = copy.deepcopy(self.game)
                playing = copy.deepcopy(twin)
                playing.reset(num_players=self.num_players, seed=PLAYABILITY_SEED)
                memo: dict[int, Any] = {}
                copy.deepcopy(unwrap(playing), memo)
            except Exception as exc:
                self._why_not = f"{type(exc).__name__}: {exc}"
                return None
        self._trial_budget = trial_budget(unwrap(playing), len(memo))
        return twin

    def _default_players(self) -> int:
        """1 or 2 as the game's ``reset`` builds a one- or two-player state; for a game of more
        players, the fewest for which a copy of it resets (TextArena asserts its own bounds)."""
        try:
            source = inspect.getsource(type(self.base).reset)
        except (OSError, TypeError):
            return 1
        if "TwoPlayerState" in source:
            return 2
        if "MultiPlayerState" not in source:
            return 1
        for n in range(2, MAX_PLAYERS + 1):
            with global_random_kept():
                try:
                    copy.deepcopy(self.game).reset(num_players=n, seed=PLAYABILITY_SEED)
                except Exception:
                    continue
            return n
        return 2

    def _game_for_episode(self) -> None:
        """Reset in place, except once a wrapper's history has been shown: then a fresh game."""
        if self._played and held_history(self.game):
            if self._history_shown:
                self._new_game()
            else:
                self._history_shown = True
        self._played = True

    # -- episodes ------------------------------------------------------------------------------------
    def _reset(self, seed: int | None, options: Mapping[str, Any] | None):
        self._seed = seed if seed is not None else int(self.np_random.integers(2**31))
        self._turn, self._last = 0, None
        self._game_for_episode()
        for deal in range(DEALS):
            # A game the opponents finish before player 0 ever moves (SecretMafia-v0 at seed 0: the
            # village votes out both Mafia first) is dealt again, from a seed derived from this one.
            if deal:
                self._new_game()
                self._played = True
            game_seed = self._seed if not deal else random.Random(f"envaudit-deal:{self._seed}:{deal}").getrandbits(31)
            self.game.reset(num_players=self.num_players, seed=game_seed)
            self._sink = RewardSink()
            watch_rewards(self.base.state, self._sink)
            # Never the global random; the first deal's generator is the reset seed's alone.
            self._opponent = random.Random(f"envaudit-opponent:{self._seed}" + (f":{deal}" if deal else ""))
            self._cache: tuple[Any, list[Strategy]] | None = None
            self._prompts: dict[int, str] = {}  # each player's first messages of this game
            if not self._play_opponents():
                break
        else:
            raise RuntimeError(f"{self.env_id} ended before player 0's first move in {DEALS} deals")
        self._obs, self._newest = self._observe()
        return self._obs, ({"deal": deal, "game_seed": game_seed} if deal else {})

    def _observe(self) -> tuple[str, list[str]]:
        """The player to move's observation, and its messages new since its last one (read from the
        game's state, so the wrappers' history never changes which moves are read from the text)."""
        state = self.base.state
        pending = (getattr(state, "observations", None) or {}).get(state.current_player_id, [])
        newest = [str(m[1]) for m in pending if isinstance(m, tuple) and len(m) >= 2]
        self._prompts.setdefault(state.current_player_id, "\n".join(newest))
        _pid, obs = self.game.get_observation()
        return (obs if isinstance(obs, str) else str(obs)), newest

    def _play_opponents(self) -> bool:
        """Let the other players move until it is player 0's turn; True when the game ended for it.
        A player 0 the game eliminated (``player_out``) never gets the turn back: the others play on
        until the game ends or the guard, and its episode ends there (or at once, where the game
        still asks the eliminated player to move). A game that keeps the turn past the guard raises
        ``GameStalled`` at the game's own ``step``."""
        state = self.base.state
        limit = OPPONENT_MOVES_PER_TURN * max(1, self.num_players - 1)
        for moved in range(limit):
            if state.done:
                return True
            if state.current_player_id == 0:
                return player_out(state)
            _obs, newest = self._observe()
            moves, _ = self._legal(self._opponent, newest, self._trials())
            move = self._opponent.choice(moves)
            if moved < limit - 1:
                done, _ = self.game.step(move)
            else:  # the guard's last move: watched, so a stall is blamed on the game's step
                done, frame = self._watched_step(move)
            if done:
                return True
        if player_out(state) or state.current_player_id == 0:  # its last move handed the turn on
            return player_out(state)
        self._stalled(frame, move, state.current_player_id)

    def _watched_step(self, move: str) -> tuple[bool, Any]:
        """``game.step(move)`` with the frame of the game's own ``step`` kept as it returns."""
        code = getattr(type(self.base).step, "__code__", None)
        seen: list[Any] = []

        def watch(frame: Any, event: str, arg: Any) -> None:
            if event == "return" and frame.f_code is code:
                seen[:] = [frame]

        previous = sys.getprofile()
        sys.setprofile(watch)
        try:
            done, _ = self.game.step(move)
        finally:
            sys.setprofile(previous)
        return done, (seen[0] if seen else None)

    def _stalled(self, frame: Any, move: str, player: int) -> NoReturn:
        game = type(self.base)
        where = (f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_qualname})" if frame is not None
                 else f"{inspect.getsourcefile(game.step)} ({game.step.__qualname__})")
        exc = GameStalled(
            f"TextArena's {game.__name__} never handed the turn back to player 0: its other players made "
            f"{OPPONENT_MOVES_PER_TURN} legal moves each and player {player} is still to move after {move!r}, "
            f"at {where}; in a trainer the episode goes on until the trainer's own turn cap")
        if frame is not None:
            exc = exc.with_traceback(types.TracebackType(None, frame, frame.f_lasti, frame.f_lineno))
        raise exc

    def _step_text(self, text: str):
        state = self.base.state
        errors_before, flagged = getattr(state, "error_count", 0), invalid_flag(state, 0)
        done, _ = self.game.step(text)
        self._turn += 1
        self._last = text
        invalid = getattr(state, "error_count", 0) > errors_before or (invalid_flag(state, 0) and not flagged)
        if not done and (state.current_player_id != 0 or player_out(state)):
            done = self._play_opponents()
        if not done:
            self._obs, self._newest = self._observe()
            truncated = self._turn >= self.turn_cap
            info = {"tool": _move_tool(invalid)}
            if truncated:
                info["success"] = False
            return self._obs, 0.0, False, truncated, info
        rewards, game_info = self.game.close()
        check_rewards(rewards, self._sink, self.base)
        mine = (game_info or {}).get(0, {})
        invalid = invalid or bool(mine.get("invalid_move"))
        reason = str(mine.get("reason", ""))
        if not state.done and not reason:
            reason = "player 0 was eliminated by its invalid moves; the other players play on without it"
        at_limit = ended_at_limit(reason, state.turn, getattr(state, "max_turns", None))
        reward = float((rewards or {}).get(0, 0.0))
        success = (self.known.success(self.base) and not at_limit and not invalid
                   if self.known is not None and self.known.success is not None else
                   won(rewards, self.num_players, at_limit=at_limit, invalid=invalid))
        # The step that ends the game carries the game's verdict, not a tool status: a game lost by
        # an invalid move is a failure TextArena pays by its own rule, not a tool error.
        info = {"success": success, "invalid_move": invalid, "reason": reason, "rewards": dict(rewards or {})}
        return reason, reward, not at_limit, at_limit, info

    # -- legal moves -----------------------------------------------------------------------------------
    def _trials(self) -> Trials:
        return Trials(self.game, self._trial_budget if self._copyable else 0)

    def _legal(self, rng: random.Random, newest: list[str], trials: Trials) -> tuple[list[str], str]:
        """The legal moves of the player to move and where they came from: ``state`` (the game's state),
        ``tried`` (read from its text and accepted on a copy of the game) or ``guessed``."""
        if self.known is not None:
            moves = self.known.legal(self.base, rng)
            if moves:
                return moves, "state"
        candidates = text_moves(newest, self._prompts.get(self.base.state.current_player_id, ""), rng)
        accepted: list[str] = []
        for move in candidates:
            t = trials(move)
            if t is None and trials.left <= 0:
                break
            if t is not None and t.valid:
                accepted.append(move)
                if len(accepted) >= ENOUGH_LEGAL:
                    break
        if accepted:
            return accepted, "tried"
        return candidates[:3] or ["[0]"], "guessed"

    def _illegal(self, legal: list[str], trials: Trials) -> str:
        if self.known is not None and self.known.illegal is not None:
            return self.known.illegal(self.base)
        inner = legal[0].strip("[]")
        doubled = f"[{inner}{inner}{inner}]"
        for move in (doubled, *ILLEGAL_TRIES):
            t = trials(move)
            if t is not None and not t.valid:
                return move
        return doubled

    def _stall(self, legal: list[str], trials: Trials) -> str:
        if self.known is not None and self.known.stall is not None:
            move = self.known.stall(self.base, self._last)
            if move is not None:
                return move
        for move in legal:
            t = trials(move)
            if t is not None and t.valid and not t.ends:
                return move
        return legal[0]

    def _forfeit(self, legal: list[str]) -> str:
        if self.known is not None and self.known.forfeit is not None:
            return self.known.forfeit(self.base) or FORFEIT
        return next((m for m in legal if GIVE_UP.search(m)), FORFEIT)

    def _strategies(self) -> list[Strategy]:
        key = (self._seed, self._turn)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        rng = random.Random(f"envaudit-catalogue:{self._seed}:{self._turn}")  # never the global random
        trials = self._trials()
        moves, source = self._legal(rng, self._newest, trials)
        self._source = source
        legal = rng.sample(moves, min(3, len(moves)))
        reference = self.known.reference(self.base) if self.has_reference else None
        out = game_strategies(legal, self.prompt if self._turn == 0 else self._obs,
                              illegal=self._illegal(legal, trials), unformatted=legal[0].strip("[]"),
                              last=self._last, forfeit=self._forfeit(moves), reference=reference,
                              stall=self._stall(moves, trials))
        self._cache = (key, out)
        return out

    # -- playability ------------------------------------------------------------------------------------
    def _measure_playability(self) -> dict[str, Any]:
        """The share of catalogue moves the game accepts, on the first ``PLAYABILITY_TURNS`` states of a
        game from ``reset(seed=PLAYABILITY_SEED)`` played with ``legal_1``; each move is tried on a copy.
        Played on a throwaway game with the global generators restored, so nothing here changes a scan."""
        if not self._copyable:
            return {"measured": False, "why": f"the game could not be reset and copied ({self._why_not}), so no "
                                              "move could be tried"}
        accepted: dict[str, list[int]] = {label: [0, 0] for label in self.action_labels}
        states, note = 0, None
        game, np_random = self.game, self._np_random
        kept = (random.getstate(), np.random.get_state())
        try:
            self.game, self.base = self._probe_game, unwrap(self._probe_game)
            self._played = False
            self.reset(seed=PLAYABILITY_SEED)
            for _ in range(PLAYABILITY_TURNS):
                states += 1
                for s in self._current:
                    t = try_move(self.game, s.text)
                    accepted[s.label][0] += bool(t is not None and t.valid)
                    accepted[s.label][1] += 1
                _, _, terminated, truncated, _ = self.step(self.action_labels.index("legal_1"))
                if terminated or truncated:
                    break
        except Exception as exc:  # the measurement is a fact about the game, never a reason not to scan
            note = f"stopped after {states} state(s): {type(exc).__name__}: {exc}"
        finally:
            random.setstate(kept[0])
            np.random.set_state(kept[1])
            self._np_random = np_random
            self.game, self.base = game, unwrap(game)
            self._played, self._history_shown = False, False
            self._current, self._labels_by_text, self.prompt, self._cache = [], {}, "", None
            del self._probe_game
        tried = sum(n for _, n in accepted.values())
        legal = [accepted[f"legal_{i}"] for i in (1, 2, 3)]
        legal_tried = sum(n for _, n in legal)
        out = {
            "measured": True, "seed": PLAYABILITY_SEED, "states": states,
            "valid_share": sum(k for k, _ in accepted.values()) / tried if tried else None,
            "legal_valid_share": sum(k for k, _ in legal) / legal_tried if legal_tried else None,
            "by_label": {label: k / n for label, (k, n) in accepted.items() if n},
            "legal_moves_from": getattr(self, "_source", None),
        }
        if note:
            out["note"] = note
        elif out["legal_valid_share"] == 0:
            out["note"] = "the game accepted none of the catalogue's legal moves: exploration cannot play it"
        return out
