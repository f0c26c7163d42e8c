"""GEM's games as their own source defines them (gem-llm 0.1.0, ``gem/envs/game_env/``).

For each game: how it reads a move (every game takes the *last* ``\\boxed{...}`` of the reply and
parses it with a regex of its own), its legal moves in a state (read from the game's attributes),
a well-formed move its rules reject, and its win state (the same condition the game's ``step``
checks before it says "Congratulations"). The message is not the signal: the state is.

Why not GEM's ``sample_random_action``: TowerofHanoi and Sudoku do not implement it (it raises
``NotImplementedError``), FifteenPuzzle's returns the direction without ``\\boxed{}`` and
Crosswords' and WordSearch's wrap it in brackets (``\\boxed{[0 0 A]}``) that their own regex does
not read, so every one of those "moves" is a format error. A game this module does not know gets
``sample_random_action``'s moves where it has one, else the ``\\boxed{...}`` examples its prompt
shows; either way every move is tried on a copy of the game (``try_move``) and kept only when the
game accepts it.

A move the game rejects but goes on after (GEM's ``invalid_action_reward``) is recognised by the
game's own rejection messages (``INVALID``, every one of them in the source, the Sokoban wall
collision included); a reply it cannot parse ends the game at ``format_error_reward`` with one of
the ``FORMAT_ERROR`` messages.
"""

from __future__ import annotations

import copy
import random
import re
import string
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DIRECTIONS = ("up", "down", "left", "right")
INVALID = re.compile(
    r"outside the (range|bounds)|out of bounds|has been already guessed|already been revealed|"
    r"already filled|already tried|has \d+ entries but|has \d+ letters but|which is of length|"
    r"numbers outside the range|, which is empty|is larger than the top disk|violates Sudoku rules|"
    r"would collide with wall|invalid move - cannot move|doesn't change the board state|black dot|"
    r"is not valid because|you chose an invalid action", re.IGNORECASE)
"""Every message a GEM game answers a rejected move with (the step pays ``invalid_action_reward``
and the game goes on)."""
FORMAT_ERROR = re.compile(r"did not provide a valid|submitted action is not valid", re.IGNORECASE)
"""GEM's messages for a reply it cannot parse (the game ends at ``format_error_reward``)."""
BOXED_EXAMPLE = re.compile(r"\\boxed\{[^{}\n]*\}")


def boxed(content: str) -> str:
    return "\\boxed{" + content + "}"


def unboxed(move: str) -> str:
    found = re.search(r"\\boxed\{(.*)\}", move, re.DOTALL)
    return found.group(1) if found else move


@contextmanager
def global_random_kept() -> Iterator[None]:
    """GEM draws from Python's and NumPy's global generators (a 2048 tile, Minesweeper's mines):
    whatever runs here leaves their state as it found it."""
    kept = random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        random.setstate(kept[0])
        np.random.set_state(kept[1])


@dataclass(frozen=True)
class Trial:
    """What the game did with one move, played on a copy of it."""

    text: str
    obs: str
    reward: Any
    terminated: bool
    truncated: bool
    twin: Any = field(default=None, repr=False, compare=False)
    """The copy the move was played on (its state after the move)."""

    @property
    def format_error(self) -> bool:
        return self.terminated and bool(FORMAT_ERROR.search(self.obs))

    @property
    def invalid(self) -> bool:
        return bool(INVALID.search(self.obs))

    @property
    def accepted(self) -> bool:
        """The game read the move and played it (neither a format error nor a rejected move)."""
        return not (self.format_error or self.invalid)


def try_move(env: Any, text: str, *, shallow: bool = False) -> Trial | None:
    """``text`` played on a copy of ``env`` (the game itself is untouched, and so are the global
    generators); None when the copy or the step raised."""
    with global_random_kept():
        try:
            twin = copy.copy(env) if shallow else copy.deepcopy(env)
            obs, reward, terminated, truncated, _ = twin.step(text)
        except Exception:
            return None
    return Trial(text, str(obs), reward, bool(terminated), bool(truncated), twin)


# -- the games ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Game:
    """One GEM game class: its legal moves in a state, a well-formed move its rules reject there,
    its win state, and (where the state shows it) the move that makes progress for sure."""

    legal: Callable[[Any, np.random.Generator], list[str]]
    illegal: Callable[[Any], str]
    won: Callable[[Any], bool]
    reference: Callable[[Any], str | None] | None = None
    progress: str = ""
    """What the win state is, in words (for the report)."""


def _guess_legal(env: Any, rng: np.random.Generator) -> list[str]:
    return [boxed(str(n)) for n in range(env.min_number, env.max_number + 1) if n not in env.previous_guesses]


def _mastermind_legal(env: Any, rng: np.random.Generator) -> list[str]:
    out: list[str] = []
    for _ in range(64):
        code = tuple(int(d) for d in rng.integers(1, env.num_numbers + 1, size=env.code_length))
        text = boxed(" ".join(map(str, code)))
        if code not in env.previous_guesses and text not in out:
            out.append(text)
        if len(out) >= 8:
            break
    return out


def _cells(rows: int, cols: int) -> list[tuple[int, int]]:
    return [(r, c) for r in range(rows) for c in range(cols)]


def _mines_legal(env: Any, rng: np.random.Generator) -> list[str]:
    hidden = [(r, c) for r, c in _cells(env.rows, env.cols) if not env.revealed[r][c]]
    reveal = [boxed(f"reveal {r} {c}") for r, c in hidden if not env.flags[r][c]]
    flag = [boxed(f"flag {r} {c}") for r, c in hidden]
    return reveal + flag


def _mines_won(env: Any) -> bool:
    # GEM's own condition (MinesweeperEnv._is_solved): every mine flagged, every other cell revealed.
    return not env.first_reveal and all(
        (env.grid[r][c] == -1 and env.flags[r][c]) or (env.grid[r][c] != -1 and env.revealed[r][c])
        for r, c in _cells(env.rows, env.cols))


def _hanoi_moves(env: Any) -> tuple[list[str], list[str]]:
    legal, illegal = [], []
    for src in "ABC":
        for dst in "ABC":
            if src == dst:
                continue
            ok = bool(env.board[src]) and (not env.board[dst] or env.board[src][-1] < env.board[dst][-1])
            (legal if ok else illegal).append(boxed(f"{src} {dst}"))
    return legal, illegal


def _sudoku_empty(env: Any) -> list[tuple[int, int]]:
    return [(r, c) for r, c in _cells(env.scale, env.scale) if env.board[r][c] == 0]


def _sudoku_legal(env: Any, rng: np.random.Generator) -> list[str]:
    # GEM accepts a placement only when it matches its solution grid; any other is "violates".
    return [boxed(f"{r + 1} {c + 1} {env.full_grid[r][c]}") for r, c in _sudoku_empty(env)]


def _sudoku_illegal(env: Any) -> str:
    filled = [(r, c) for r, c in _cells(env.scale, env.scale) if env.board[r][c] != 0]
    r, c = filled[0] if filled else (0, 0)
    return boxed(f"{r + 1} {c + 1} {env.full_grid[r][c]}") if filled else boxed(f"{env.scale + 1} 1 1")


def _crossword_empty(env: Any) -> list[tuple[int, int]]:
    return [(r, c) for r, row in enumerate(env.board) for c, cell in enumerate(row) if cell == "_"]


def _crossword_legal(env: Any, rng: np.random.Generator) -> list[str]:
    # Any letter in an empty cell is a legal move (a wrong one is "incorrect", not rejected).
    return [boxed(f"{r} {c} {string.ascii_uppercase[int(rng.integers(26))]}") for r, c in _crossword_empty(env)]


def _crossword_reference(env: Any) -> str | None:
    empty = _crossword_empty(env)
    if not empty:
        return None
    r, c = empty[0]
    return boxed(f"{r} {c} {env.solution[r][c].upper()}")


def _crossword_illegal(env: Any) -> str:
    for r, row in enumerate(env.board):
        for c, cell in enumerate(row):
            if cell == ".":
                return boxed(f"{r} {c} A")
    return boxed(f"{len(env.board)} 0 A")


def _tried_directions(env: Any, rng: np.random.Generator) -> list[str]:
    out = []
    for d in DIRECTIONS:
        t = try_move(env, boxed(d))
        if t is not None and t.accepted:
            out.append(boxed(d))
    return out


def _rejected_direction(env: Any) -> str:
    for d in DIRECTIONS:
        t = try_move(env, boxed(d))
        if t is not None and t.invalid:
            return boxed(d)
    return boxed("upward")  # every direction plays here: a near miss of the format


def _fifteen_won(env: Any) -> bool:
    return [tile for row in env.board for tile in row] == list(range(1, env.greatest_num + 1)) + [None]


GAMES: dict[str, Game] = {
    "GuessTheNumberEnv": Game(
        _guess_legal, lambda env: boxed(str(env.max_number + 1)),
        lambda env: env.game_number in env.previous_guesses,
        reference=lambda env: boxed(str(env.game_number)),
        progress="the secret number was guessed (GuessTheNumberEnv.game_number in previous_guesses)"),
    "MastermindEnv": Game(
        _mastermind_legal, lambda env: boxed(" ".join(["1"] * (env.code_length + 1))),
        lambda env: tuple(env.game_code) in env.previous_guesses,
        reference=lambda env: boxed(" ".join(str(d) for d in env.game_code)),
        progress="the secret code was guessed (MastermindEnv.game_code in previous_guesses)"),
    "MinesweeperEnv": Game(
        _mines_legal, lambda env: boxed(f"reveal {env.rows} {env.cols}"), _mines_won,
        progress="every mine flagged and every other cell revealed (MinesweeperEnv._is_solved's rule)"),
    "TowerofHanoiEnv": Game(
        lambda env, rng: _hanoi_moves(env)[0], lambda env: _hanoi_moves(env)[1][0],
        lambda env: env.board["C"] == list(range(env.num_disks, 0, -1)),
        progress="every disk on tower C in order"),
    "SudokuEnv": Game(
        _sudoku_legal, _sudoku_illegal,
        lambda env: all(env.board[r][c] == env.full_grid[r][c] for r, c in _cells(env.scale, env.scale)),
        reference=lambda env: (_sudoku_legal(env, None) or [None])[0],  # type: ignore[arg-type]
        progress="the board equals the solution grid (SudokuEnv.full_grid)"),
    "CrosswordsEnv": Game(
        _crossword_legal, _crossword_illegal, lambda env: not _crossword_empty(env),
        reference=_crossword_reference, progress="no empty cell left (every placed letter is correct)"),
    "FifteenPuzzleEnv": Game(
        _tried_directions, _rejected_direction, _fifteen_won,
        progress="the tiles in order with the blank last"),
    "Game2048Env": Game(
        _tried_directions, _rejected_direction, lambda env: env.max_tile_achieved >= env.target_tile,
        progress="a tile reached target_tile"),
    "SokobanEnv": Game(
        _tried_directions, _rejected_direction, lambda env: int(np.sum(env.room_state == 3)) == env.num_boxes,
        progress="every box on a target"),
}
"""The games of gem-llm 0.1.0 whose state the adapter reads. Wordle, Hangman and WordSearch need
NLTK's ``words`` corpus (downloaded when made) and are played through the fallback."""


def fallback_moves(env: Any, prompt: str, draws: int = 6) -> tuple[list[str], str]:
    """Moves of a game this module does not know, each checked on a copy: ``sample_random_action``'s
    (under a saved generator state), else the ``\\boxed{...}`` examples of its prompt. Returns
    ``(accepted moves, where they came from)``; the moves are unchecked guesses only when no copy
    of the game accepts any."""
    drawn: list[str] = []
    source = "sample_random_action"
    with global_random_kept():
        random.seed("envaudit-gem-fallback")
        try:
            drawn = [str(env.sample_random_action()) for _ in range(draws)]
        except Exception:  # GEM's Env.sample_random_action raises NotImplementedError
            drawn = []
    if not drawn:
        drawn, source = BOXED_EXAMPLE.findall(prompt), "the \\boxed{} examples of the prompt"
    drawn = list(dict.fromkeys(drawn))
    kept = [m for m in drawn if (t := try_move(env, m)) is not None and t.accepted]
    return (kept, source) if kept else (drawn, source + " (none accepted on a copy of the game)")


__all__ = ["BOXED_EXAMPLE", "DIRECTIONS", "FORMAT_ERROR", "GAMES", "Game", "INVALID", "Trial", "boxed",
           "fallback_moves", "global_random_kept", "try_move", "unboxed"]
