"""How the TextArena adapter finds a game's moves (textarena 0.7.4).

Two ways, the first where it applies:

- **From the game's state** (``textarena_games.GAMES``, keyed by the env class name), for the
  games that have a reader there.
- **From the game's text, checked by the game** (``text_moves``, ``try_move``): moves the text shows
  (its "Available/Valid Moves" listing, bracketed moves, and those with their values varied) are
  stepped on a deep copy of the game, and kept only when its own validity check accepts them.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_TRIALS = 32
"""Moves tried on copies of the game per state, at most (a game that is slow to copy gets fewer:
``TRIAL_BYTES``)."""
MIN_TRIALS = 4
TRIAL_BYTES = 200_000
"""Bytes of the game copied per state, at most, when trying moves: a game whose state pickles to
``n`` bytes gets ``TRIAL_BYTES // n`` trials per state (between ``MIN_TRIALS`` and ``MAX_TRIALS``).
Counted in bytes, not seconds, so the catalogue is the same on any machine under any load. (The
copy's memo undercounts: ``deepcopy`` memoises no tuple of atoms, and Set-v0's 6,480 possible sets
are such tuples: 18 memoised objects, 113 kB pickled, 0.2-0.7 s a copy.)"""
TRIAL_OBJECTS = 2_000
"""Objects per state when the game cannot be pickled: ``TRIAL_OBJECTS // n`` trials for a copy
whose memo holds ``n`` objects (between ``MIN_TRIALS`` and ``MAX_TRIALS``)."""
ENOUGH_LEGAL = 8
"""Trying stops once this many moves read from the text were accepted."""
DIGITS = tuple(str(d) for d in range(10))
LETTERS = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
MAX_LEGAL = 2000
"""At most this many legal moves are listed for one state (Mastermind's codes); a uniform sample
of them when there are more."""

LISTING = re.compile(r"(?:Available|Valid|Legal|Possible)\s+(?:Moves|Actions)(?:\s+are)?\s*:\s*([^\n]*)",
                     re.IGNORECASE)
BRACKETED = re.compile(r"\[[^\[\]\n]{1,40}\]")
LINE_MOVE = re.compile(r"^[ \t]*(\[[^\n]{1,80}\])[ \t]*$", re.MULTILINE)
"""A line that is one bracketed move, brackets inside included (Tak's ``[place () {(3,2): [C0]}]``)."""
SLOT = re.compile(r"<[^<>\[\]]+>|\d+|[A-Za-z]+")
"""The parts of a move read from the text that are varied: a number, a word, a ``<placeholder>``."""
WORD_IN_TEXT = re.compile(r"\b[a-z]{3,12}\b")


def unwrap(env: Any) -> Any:
    while hasattr(env, "env") and not hasattr(type(env), "state"):
        inner = env.__dict__.get("env")
        if inner is None:
            break
        env = inner
    return env


def layers(game: Any) -> Iterator[Any]:
    """The wrappers of a TextArena env, outermost first (the base env not included)."""
    base = unwrap(game)
    while game is not base:
        yield game
        game = game.__dict__["env"]


def action_text(game: Any, text: str) -> str:
    """What the base env receives when ``text`` is stepped through ``game``'s action wrappers
    (``ActionFormattingWrapper`` brackets a move that has none)."""
    from textarena.core import ActionWrapper

    for layer in layers(game):
        if isinstance(layer, ActionWrapper):
            text = layer.action(text)
    return text


@contextlib.contextmanager
def global_random_kept() -> Iterator[None]:
    """Leave Python's and NumPy's global generators as they were (a game's step may draw from them)."""
    py, npy = random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        random.setstate(py)
        np.random.set_state(npy)


# -- moves tried on a copy of the game -------------------------------------------------------------
@dataclass(frozen=True)
class Trial:
    """What the game did with one move on a copy of itself."""

    valid: bool
    ends: bool


def invalid_flag(state: Any, pid: int) -> bool:
    info = getattr(state, "game_info", None) or {}
    return bool(info.get(pid, {}).get("invalid_move")) if isinstance(info, Mapping) else False


def player_out(state: Any, pid: int = 0) -> bool:
    """Whether the game eliminated ``pid`` while it goes on for the others: TextArena's
    ``FFAMultiPlayerState.elimination_order`` or a game's own ``game_state["eliminated_players"]``
    (SettlersOfCatan's ``_handle_invalid``, after the second invalid move)."""
    game_state = getattr(state, "game_state", None)
    gone = game_state.get("eliminated_players", ()) if isinstance(game_state, Mapping) else ()
    return pid in (getattr(state, "elimination_order", None) or ()) or pid in (gone or ())


def try_move(game: Any, text: str) -> Trial | None:
    """Step ``text`` for the player to move on a deep copy of ``game``'s base env and report whether
    the game's own validity check accepted it (its error count did not rise and it did not end the
    game by an invalid move); None when the game cannot be copied. The global generators are left
    as they were, so trying moves never changes the game that is played."""
    base = unwrap(game)
    with global_random_kept():
        try:
            twin = copy.deepcopy(base)
        except Exception:
            return None
        state = twin.state
        pid, errors, flagged = state.current_player_id, getattr(state, "error_count", 0), invalid_flag(
            state, state.current_player_id)
        try:
            done, _ = twin.step(action_text(game, text))
        except Exception:  # a move that makes the game raise is no move to offer
            return Trial(valid=False, ends=True)
    invalid = getattr(state, "error_count", 0) > errors or (invalid_flag(state, pid) and not flagged)
    return Trial(valid=not invalid, ends=bool(done))


def _slots(move: str) -> list[tuple[int, int]]:
    """The spans of a move read from the text that stand for values: numbers, one-letter parts and
    ``<placeholders>``, the first three of them; a move of words only (``[pile quantity]``) has
    its words as slots, a move with value parts keeps its words (``play`` of ``[play X]``)."""
    parts = [m.span() for m in SLOT.finditer(move)]
    values = [(a, b) for a, b in parts if not move[a:b].isalpha() or b - a == 1]
    return (values or parts)[:3]


def _variations(move: str, letters: bool) -> list[tuple[int, str]]:
    """``move`` with one or two of its slots replaced, each with its rank (the sum of the replacing
    values' positions: small numbers first). ``letters``: one-letter slots take letters, else digits."""
    slots = _slots(move)
    out = []
    for chosen in (c for r in (1, 2) for c in itertools.combinations(slots, r)):
        pools = [LETTERS if letters else DIGITS for _ in chosen]
        if letters and not all(b - a == 1 and move[a:b].isalpha() for a, b in chosen):
            continue
        for ranks in itertools.product(*(range(len(pool)) for pool in pools)):
            text = move
            for (a, b), pool, r in sorted(zip(chosen, pools, ranks, strict=True), reverse=True):
                value = pool[r] if move[a:b].isupper() or not letters else pool[r].lower()
                text = text[:a] + value + text[b:]  # right to left: the spans to its left stay put
            out.append((len(chosen) * 100 + sum(ranks), text))
    return out


def text_moves(messages: list[str], prompt: str, rng: random.Random) -> list[str]:
    """Moves read from a game's text, in the order they are worth trying: the last "Available/Valid
    Moves" listing of the newest messages; then, taking turns, one from each of: the other bracketed
    moves of the newest messages and of the prompt, those moves with one slot (``_slots``) set to a
    digit, with two, with one-letter slots set to letters (``[A 5]`` -> ``[S 5]``), and the newest
    messages' words in brackets (``[red]`` for a button the text names). Variations come small
    values first, ties in an order drawn from ``rng``; so ``[play X]`` is tried as ``[play 0]``,
    ``[play 1]``, ... and ``[attack M O]`` as ``[attack 0 0]``, ``[attack 0 1]``, ..."""
    newest = "\n".join(messages)
    listings = LISTING.findall(newest)
    listed = list(dict.fromkeys(BRACKETED.findall(listings[-1]))) if listings else []
    literal = [m for m in dict.fromkeys(LINE_MOVE.findall(newest) + LINE_MOVE.findall(prompt) + BRACKETED.findall(newest)
                                        + BRACKETED.findall(prompt)) if m not in listed]
    seen = set(listed) | set(literal)

    def ranked(pairs: list[tuple[int, str]]) -> list[str]:
        rng.shuffle(pairs)
        pairs.sort(key=lambda p: p[0])  # stable: the shuffle breaks ties
        out = [m for _, m in pairs if m not in seen]
        seen.update(out)
        return list(dict.fromkeys(out))

    digits = [v for m in listed + literal for v in _variations(m, letters=False)]
    one = ranked([v for v in digits if v[0] < 200])
    two = ranked([v for v in digits if v[0] >= 200])
    letters = ranked([v for m in listed + literal for v in _variations(m, letters=True)])
    words = ranked([(0, f"[{w}]") for w in WORD_IN_TEXT.findall(newest)])
    queues = [literal, one, two, letters, words]
    mixed = [m for batch in itertools.zip_longest(*queues) for m in batch if m is not None]
    return listed + mixed


def trial_budget(base: Any, copied_objects: int) -> int:
    """Moves tried per state on copies of the base env ``base`` (``TRIAL_BYTES``); ``copied_objects``
    (the memo of one deep copy) stands in when the game cannot be pickled."""
    import pickle

    try:
        with global_random_kept():
            size = len(pickle.dumps(base, protocol=pickle.HIGHEST_PROTOCOL))
        budget = TRIAL_BYTES // max(1, size)
    except Exception:  # lambdas, locks, generators: count the copy's objects instead
        budget = TRIAL_OBJECTS // max(1, copied_objects)
    return max(MIN_TRIALS, min(MAX_TRIALS, budget))


class Trials:
    """The moves tried on copies of the game in one state, each at most once, within a budget."""

    def __init__(self, game: Any, budget: int) -> None:
        self.game, self.left = game, budget
        self.seen: dict[str, Trial | None] = {}

    def __call__(self, move: str) -> Trial | None:
        """The game's verdict on ``move``, or None when it cannot be tried (no copy, or no budget left)."""
        if move not in self.seen:
            if self.left <= 0:
                return None
            self.left -= 1
            self.seen[move] = try_move(self.game, move)
        return self.seen[move]


__all__ = ["BRACKETED", "MAX_LEGAL", "MAX_TRIALS", "MIN_TRIALS", "TRIAL_BYTES", "Trial", "Trials", "action_text", "global_random_kept",
           "invalid_flag", "layers", "player_out", "text_moves", "trial_budget", "try_move", "unwrap"]
