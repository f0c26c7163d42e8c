"""How the TextArena adapter reads a game's moves from its state (textarena 0.7.4).

``GAMES``, keyed by the env class name: every legal move of the player to move, a well-formed move
the rules reject, a stall (a legal move that makes the least progress), the game's own give-up
move, the reference move and the game's own win state where the game has them, read from
``env.state.game_state`` and the env's attributes, the same state its ``step()`` validates against.
Each reader mirrors one check of the game's ``step()`` (named beside it); the tests check them
against that ``step()`` on copies of real games. Games not listed here get moves read from their
text and tried on copies (``textarena_moves``).
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envaudit.adapters.textarena_moves import BRACKETED, MAX_LEGAL


@dataclass(frozen=True)
class GameMoves:
    """How to read one game's moves from its state. ``env`` is the unwrapped TextArena env; ``rng`` a
    ``random.Random`` that never is the global one; ``last`` the agent's previous move text."""

    legal: Callable[[Any, random.Random], list[str]]
    """Every legal move of the player to move, in a fixed order (or a uniform sample of at most
    ``MAX_LEGAL``); [] when the reader sees none."""
    illegal: Callable[[Any], str] | None = None
    """A move in the game's own format that its rules reject now."""
    stall: Callable[[Any, str | None], str | None] | None = None
    """A legal move that makes the least progress (None: the game has none now)."""
    forfeit: Callable[[Any], str | None] | None = None
    """The game's own way to give up, when it has one and it is legal now."""
    reference: Callable[[Any], str] | None = None
    """The move that solves the game at once, read from its hidden state."""
    success: Callable[[Any], bool] | None = None
    """The game's own win state, read from its state at the end, where its reward does not say it (a
    score that is not TextArena's solved-game 1); None: the reward does (``textarena.won``)."""


# -- Guess the Number (envs/GuessTheNumber/env.py: a number in range, not guessed before) --------
def _gtn_legal(env: Any, rng: random.Random) -> list[str]:
    guessed = getattr(env, "guessed_numbers", set())
    return [f"[{n}]" for n in range(env.min_number, env.max_number + 1) if n not in guessed]


def _gtn_stall(env: Any, last: str | None) -> str | None:
    """The guess that keeps the game furthest from its answer: the end of the range farthest from it."""
    left = _gtn_legal(env, random.Random(0))
    if not left:
        return None
    return max(left, key=lambda m: abs(int(m.strip("[]")) - env.game_number))


# -- Tower of Hanoi (envs/TowerOfHanoi/env.py: a non-empty source, no larger disk on a smaller) ---
def _hanoi_moves(env: Any) -> list[str]:
    towers = env.state.game_state["towers"]
    return [f"[{a} {b}]" for a in towers for b in towers
            if a != b and towers[a] and (not towers[b] or towers[b][-1] > towers[a][-1])]


def _hanoi_illegal(env: Any) -> str:
    towers = env.state.game_state["towers"]
    for a, b in itertools.permutations(towers, 2):
        if not towers[a] or (towers[b] and towers[b][-1] < towers[a][-1]):
            return f"[{a} {b}]"
    return "[A D]"


def _hanoi_stall(env: Any, last: str | None) -> str | None:
    """Undo the last move (the same disk straight back), else move the smallest disk."""
    moves = _hanoi_moves(env)
    if last and last.startswith("[") and len(last.strip("[]").split()) == 2:
        a, b = last.strip("[]").upper().split()
        if f"[{b} {a}]" in moves:
            return f"[{b} {a}]"
    towers = env.state.game_state["towers"]
    smallest = min((t for t in towers if towers[t]), key=lambda t: towers[t][-1], default=None)
    return next((m for m in moves if m[1] == smallest), moves[0] if moves else None)


# -- Mastermind (envs/Mastermind/env.py: code_length digits in 1..num_numbers, no repeats unless
#    allowed, not guessed before) --------------------------------------------------------------------
def _mastermind_legal(env: Any, rng: random.Random) -> list[str]:
    gs = env.state.game_state
    n, k, dup = gs["num_numbers"], gs["code_length"], gs["duplicate_numbers"]
    seen = {tuple(h["guess"]) for h in gs["history"]}
    digits = range(1, n + 1)
    total = n**k if dup else _perm_count(n, k)
    if total <= MAX_LEGAL:
        codes = itertools.product(digits, repeat=k) if dup else itertools.permutations(digits, k)
        return [_code(c) for c in codes if c not in seen]
    out: dict[tuple[int, ...], None] = {}
    while len(out) < MAX_LEGAL:
        c = tuple(rng.choices(digits, k=k)) if dup else tuple(rng.sample(digits, k))
        if c not in seen:
            out[c] = None
    return [_code(c) for c in out]


def _perm_count(n: int, k: int) -> int:
    out = 1
    for i in range(k):
        out *= n - i
    return out


def _code(digits: Any) -> str:
    return "[" + " ".join(str(d) for d in digits) + "]"


def _mastermind_illegal(env: Any) -> str:
    gs = env.state.game_state
    return _code([gs["num_numbers"] + 1] * gs["code_length"])


# -- Connect Four (envs/ConnectFour/env.py: a column in range whose top cell is empty) ----------
def _c4_legal(env: Any, rng: random.Random) -> list[str]:
    top = env.state.game_state["board"][0]
    return [f"[col {c}]" for c in range(env.num_cols) if top[c] == "."]


def _c4_illegal(env: Any) -> str:
    top = env.state.game_state["board"][0]
    full = [c for c in range(env.num_cols) if top[c] != "."]
    return f"[col {full[0] if full else env.num_cols}]"


# -- Nim (envs/Nim/env.py: a pile in range, 1 <= quantity <= what the pile holds) ---------------
def _nim_legal(env: Any, rng: random.Random) -> list[str]:
    piles = env.state.game_state["piles"]
    return [f"[{i} {q}]" for i, size in enumerate(piles) for q in range(1, size + 1)]


def _nim_illegal(env: Any) -> str:
    piles = env.state.game_state["piles"]
    i = max(range(len(piles)), key=lambda j: piles[j])
    return f"[{i} {piles[i] + 1}]"


def _nim_stall(env: Any, last: str | None) -> str | None:
    """Take one object from the largest pile: the longest game."""
    piles = env.state.game_state["piles"]
    i = max(range(len(piles)), key=lambda j: piles[j])
    return f"[{i} 1]" if piles[i] > 0 else None


# -- Kuhn Poker (envs/KuhnPoker/env.py: an action of the current legal-action tree) -------------
KUHN_ACTIONS = ("check", "bet", "call", "fold")


def _kuhn_legal(env: Any, rng: random.Random) -> list[str]:
    tree = env.state.game_state["current_legal_action_tree"]
    return [f"[{a}]" for a in tree] if isinstance(tree, dict) else []


def _kuhn_illegal(env: Any) -> str:
    tree = env.state.game_state["current_legal_action_tree"]
    return next(f"[{a}]" for a in KUHN_ACTIONS if not isinstance(tree, dict) or a not in tree)


def _kuhn_move(name: str) -> Callable[..., str | None]:
    def move(env: Any, *_: Any) -> str | None:
        tree = env.state.game_state["current_legal_action_tree"]
        return f"[{name}]" if isinstance(tree, dict) and name in tree else None

    return move


# -- Tic Tac Toe (envs/TicTacToe/env.py: a cell 0-8 that is empty) ------------------------------
def _ttt_legal(env: Any, rng: random.Random) -> list[str]:
    board = env.state.game_state["board"]
    return [f"[{r * 3 + c}]" for r in range(3) for c in range(3) if board[r][c] == ""]


def _ttt_illegal(env: Any) -> str:
    board = env.state.game_state["board"]
    taken = [r * 3 + c for r in range(3) for c in range(3) if board[r][c] != ""]
    return f"[{taken[0] if taken else 9}]"


# -- Three-Card Monte (envs/ThreeCardMonte/env.py: a cup index 0..num_cups-1) ------------------
def _monte_legal(env: Any, rng: random.Random) -> list[str]:
    return [f"[{i}]" for i in range(env.num_cups)]


# -- Sudoku (envs/Sudoku/env.py: [row col number], 1-based, an empty cell, the solution's digit:
#    ``_is_move_correct`` compares with ``full_grid``) ------------------------------------------------
def _sudoku_legal(env: Any, rng: random.Random) -> list[str]:
    board = env.state.game_state["board"]
    return [f"[{r + 1} {c + 1} {env.full_grid[r][c]}]" for r in range(9) for c in range(9) if board[r][c] == 0]


def _sudoku_illegal(env: Any) -> str:
    board = env.state.game_state["board"]
    r, c = next(((r, c) for r in range(9) for c in range(9) if board[r][c] != 0), (0, 0))
    return f"[{r + 1} {c + 1} {board[r][c] % 9 + 1}]"  # overwrites a filled cell


# -- Peg Jump (envs/PegJump/env.py: ``[from to]`` of an allowed triple with pegs on from and over,
#    the hole to empty) ----------------------------------------------------------------------------
def _peg_legal(env: Any, rng: random.Random) -> list[str]:
    board = env.state.game_state["board"]
    return [f"[{f} {t}]" for f, o, t in env.ALLOWED_MOVES if board[f] and board[o] and not board[t]]


def _peg_illegal(env: Any) -> str:
    board = env.state.game_state["board"]
    return next((f"[{f} {t}]" for f, o, t in env.ALLOWED_MOVES if board[t]), "[1 1]")  # a jump onto a peg


# -- Colonel Blotto (envs/ColonelBlotto/env.py: units on named fields, non-negative, summing to
#    ``num_total_units``) -----------------------------------------------------------------------------
def _blotto(fields: list[str], units: tuple[int, ...]) -> str:
    return "[" + " ".join(f"{f}{u}" for f, u in zip(fields, units, strict=True)) + "]"


def _blotto_legal(env: Any, rng: random.Random) -> list[str]:
    fields, total = env.field_names, env.num_total_units
    if len(fields) <= 3:  # every split: (total + 1) * (total + 2) / 2 of them for three fields
        splits = [c for c in itertools.product(range(total + 1), repeat=len(fields) - 1) if sum(c) <= total]
        return [_blotto(fields, (*c, total - sum(c))) for c in splits]
    out: dict[str, None] = {}
    for _ in range(MAX_LEGAL):  # stars and bars: a uniform split of the units over the fields
        cuts = sorted(rng.sample(range(total + len(fields) - 1), len(fields) - 1))
        bounds = [-1, *cuts, total + len(fields) - 1]
        out[_blotto(fields, tuple(b - a - 1 for a, b in itertools.pairwise(bounds)))] = None
    return list(out)


# -- Santorini (envs/Santorini/env.py: ``step`` validates ``[worker source dest build]`` with
#    ``_is_valid_move`` and ``_is_valid_build``, and after each move stores the next player's moves,
#    built by the same checks, in ``game_state["valid_moves"]``; the prompt's "Valid moves" are player
#    0's for every player, as ``reset`` renders all prompts from that one list) ----------------------
def _santorini_legal(env: Any, rng: random.Random) -> list[str]:
    mine = env.PLAYER_COLORS[env.state.current_player_id][0]
    listed = BRACKETED.findall(str(env.state.game_state.get("valid_moves", "")))
    return [m for m in listed if m[1:2].upper() == mine]


def _santorini_illegal(env: Any) -> str:
    legal = _santorini_legal(env, random.Random(0))
    worker, source = (legal[0][1:3], legal[0][3:5]) if legal else ("X1", "A1")
    return f"[{worker}{source}{source}{source}]"  # a worker that stays where it is


# -- Settlers of Catan (envs/SettlersOfCatan/env.py ``step``: in the "action" phase an index of
#    ``env.game_moves``, its last two "Negotiate." and "Nothing." (which ends the turn); in
#    "negotiation_start" another player still in the game; in "negotiation" the main negotiator's
#    ``[done]`` (``_negotiation_step``) and the partner's ``[deny]`` (``_negotiation_response_step``)
#    hand the turn on. A turn also ends after ``move_allowance`` moves) ---------------------------------
def _catan_legal(env: Any, rng: random.Random) -> list[str]:
    gs, pid = env.state.game_state, env.state.current_player_id
    phase = gs.get("turn_phase")
    if phase == "action":
        return [f"[{idx}]" for idx, _desc, _act in env.game_moves or []]
    if phase == "negotiation_start":
        out = gs.get("eliminated_players", set())
        return [f"[{p}]" for p in range(env.state.num_players) if p != pid and p not in out]
    if phase == "negotiation":
        return ["[done]"] if pid == gs.get("main_negotiator") else ["[deny]"]
    return []


def _catan_stall(env: Any, last: str | None) -> str | None:
    """"Nothing." (the last listed action): the turn ends with nothing built."""
    if env.state.game_state.get("turn_phase") != "action" or not env.game_moves:
        return None
    return f"[{env.game_moves[-1][0]}]"


# -- Quantum Tic Tac Toe (envs/QuantumTicTacToe/env.py: ``[a,b]``, two different cells 0-8, neither
#    solidified) -------------------------------------------------------------------------------------
def _qttt_open(env: Any) -> list[int]:
    board = env.state.game_state["board"]
    return [r * 3 + c for r in range(3) for c in range(3) if board[r][c] == ""]


def _qttt_legal(env: Any, rng: random.Random) -> list[str]:
    return [f"[{a},{b}]" for a, b in itertools.combinations(_qttt_open(env), 2)]


def _qttt_illegal(env: Any) -> str:
    a = (_qttt_open(env) or [0])[0]
    return f"[{a},{a}]"  # the same cell twice


# -- Set (envs/Set/env.py: three 1-based indices into the board; when the board holds no Set and the
#    deck is not empty, three cards are dealt (``pop()``: the deck's last first) *before* the move is
#    read, so a move may name them; a turn is counted for every well-formed move, a Set or not) -------
def _is_set(cards: Any) -> bool:
    """Every attribute the same on all three cards or different on all three (``_is_set``)."""
    return all(len(set(values)) in (1, 3) for values in zip(*cards, strict=True))


def _set_board(env: Any) -> list[Any]:
    gs = env.state.game_state
    board = list(gs["board"])
    if not any(_is_set(t) for t in itertools.combinations(board, 3)):
        board += gs["deck"][::-1][:3]
    return board


def _set_triples(env: Any) -> list[tuple[int, int, int]]:
    return list(itertools.combinations(range(1, len(_set_board(env)) + 1), 3))


def _set_move(triple: tuple[int, int, int]) -> str:
    return "[" + ", ".join(str(i) for i in triple) + "]"


def _set_legal(env: Any, rng: random.Random) -> list[str]:
    return [_set_move(t) for t in _set_triples(env)]


def _set_found(env: Any) -> list[tuple[int, int, int]]:
    board = _set_board(env)
    return [t for t in _set_triples(env) if _is_set([board[i - 1] for i in t])]


def _set_stall(env: Any, last: str | None) -> str | None:
    """A well-formed triple that is no Set: the turn is spent and nothing is scored."""
    found = set(_set_found(env))
    return next((_set_move(t) for t in _set_triples(env) if t not in found), None)


def _set_reference(env: Any) -> str:
    """A Set on the board (the first, in index order); the first triple where the board has none."""
    return _set_move(next(iter(_set_found(env)), (1, 2, 3)))


def _set_perfect(env: Any) -> bool:
    """Set has no win state of its own: its goal is as many Sets as there are turns, "without making
    mistakes". Success is that perfect game, a Set found on every one of its turns."""
    gs = env.state.game_state
    return gs["num_turns"] > 0 and gs["score"] == gs["num_turns"]


# -- Crosswords (envs/Crosswords/env.py: ``[row col letter]`` on a cell that is "_" (not black "."
#    nor filled), the solution's letter there, else an invalid move) ------------------------------
def _crossword_empty(env: Any) -> list[tuple[int, int]]:
    board = env.state.game_state["board"]
    return [(r, c) for r, row in enumerate(board) for c, cell in enumerate(row) if cell == "_"]


def _crossword_legal(env: Any, rng: random.Random) -> list[str]:
    solution = env.state.game_state["solution"]
    return [f"[{r} {c} {solution[r][c]}]" for r, c in _crossword_empty(env)]


def _crossword_illegal(env: Any) -> str:
    r, c = (_crossword_empty(env) or [(0, 0)])[0]
    right = str(env.state.game_state["solution"][r][c]).upper()
    return f"[{r} {c} {'B' if right == 'A' else 'A'}]"  # a letter the solution does not have there


# -- Logic Puzzle (envs/LogicPuzzle/env.py: ``[row col mark]``, one word each, row and col a cell of
#    one of ``env.game_board``'s grids, mark O or X, not the mark the cell already holds; solved when
#    every grid equals ``env.game_board_solution``) ---------------------------------------------------
def _logic_cells(env: Any) -> list[tuple[str, str, Any, str]]:
    """(row, col, the mark the board holds, the solution's mark) of every cell a move can name."""
    return [(row, col, mark, env.game_board_solution[grid][row][col])
            for grid, rows in env.game_board.items() for row, cols in rows.items() for col, mark in cols.items()
            if row.isalpha() and col.isalpha()]


def _logic_legal(env: Any, rng: random.Random) -> list[str]:
    return [f"[{row} {col} {m}]" for row, col, mark, _ in _logic_cells(env) for m in "OX" if m != mark]


def _logic_illegal(env: Any) -> str:
    marked = next(((row, col, mark) for row, col, mark, _ in _logic_cells(env) if mark in ("O", "X")), None)
    return f"[{marked[0]} {marked[1]} {marked[2]}]" if marked else "[nowhere nobody O]"  # a repeat, else off the grid


def _logic_stall(env: Any, last: str | None) -> str | None:
    """A mark against the solution on a cell that does not hold it yet: a turn spent, nothing solved."""
    wrong = {"O": "X", "X": "O"}
    return next((f"[{row} {col} {wrong[sol]}]" for row, col, mark, sol in _logic_cells(env) if mark != wrong[sol]),
                None)


def _logic_reference(env: Any) -> str:
    """The solution's mark on the first cell that does not hold it: played every turn, it solves the puzzle."""
    return next((f"[{row} {col} {sol}]" for row, col, mark, sol in _logic_cells(env) if mark != sol),
                "[nowhere nobody O]")


# -- Simple Negotiation (envs/SimpleNegotiation/env.py: ``[Accept]`` executes the pending offer when the
#    one to move has what it asks for (else an invalid move); any other reply rejects it; ``[Offer: Q R
#    -> Q R]`` is a new offer, an invalid move when the offerer lacks what it offers) -------------------
def _offer_pending(env: Any) -> bool:
    gs, pid = env.state.game_state, env.state.current_player_id
    offer, mine = gs["current_offer"], gs["player_resources"][pid]
    return bool(offer) and offer["to_player"] == pid and all(
        mine.get(r, 0) >= q for r, q in offer["requested_resources"].items())


def _negotiation_legal(env: Any, rng: random.Random) -> list[str]:
    """Accept (when an offer to the one to move can be met), deny, and every one-for-one offer of a
    resource it holds."""
    mine = env.state.game_state["player_resources"][env.state.current_player_id]
    offers = [f"[Offer: 1 {a} -> 1 {b}]" for a in env.resource_names if mine.get(a, 0) >= 1
              for b in env.resource_names if b != a]
    return [*(["[Accept]"] if _offer_pending(env) else []), "[Deny]", *offers]


def _negotiation_illegal(env: Any) -> str:
    """An offer of one more of a resource than the one to move holds."""
    mine = env.state.game_state["player_resources"][env.state.current_player_id]
    a, b = env.resource_names[0], env.resource_names[1]
    return f"[Offer: {mine.get(a, 0) + 1} {a} -> 1 {b}]"


# -- Two Dollar (envs/TwoDollar/env.py ``_is_valid_action``: exactly one of ``[Propose] $X.XX`` (0 to
#    ``total_amount``), ``[Accept]``, ``[Reject]``; the last two only against the other player's pending
#    proposal; a "high_tension" role may not concede more than its ``max_concession`` below its own
#    last proposal) -------------------------------------------------------------------------------------
TWO_DOLLAR_STEP = 10
"""Cents between two proposals listed (21 of them for TextArena's $2.00)."""


def _two_dollar_allowed(env: Any, pid: int, amount: float) -> bool:
    role, history = env.player_roles.get(pid, {}), env.player_proposal_history[pid]
    if role.get("enforcement") != "action_validation" or role.get("name") != "high_tension":
        return True
    return not history or amount >= history[-1] or history[-1] - amount <= role["behavioral_rules"]["max_concession"]


def _two_dollar_legal(env: Any, rng: random.Random) -> list[str]:
    pid, pending = env.state.current_player_id, env.current_proposal
    cents = range(0, round(env.total_amount * 100) + 1, TWO_DOLLAR_STEP)
    proposals = [f"[Propose] ${c / 100:.2f}" for c in cents if _two_dollar_allowed(env, pid, c / 100)]
    answers = ["[Accept]", "[Reject]"] if pending["amount"] is not None and pending["proposer"] != pid else []
    return [*answers, *proposals]


# -- Cryptarithm (envs/Cryptarithm/env.py ``step``: ``[L d]`` for a letter of the puzzle, a digit no
#    other letter holds, never 0 on a word's first letter; a letter may be re-assigned; the game ends
#    when every letter has a digit, solved (1.0) when the sum holds) -----------------------------------
def _crypt_free(env: Any, letter: str) -> list[int]:
    return [d for d in range(10) if env.digit_used.get(d, letter) == letter and not (d == 0 and letter in env.first_letters)
            and env.mapping.get(letter) != d]


def _crypt_legal(env: Any, rng: random.Random) -> list[str]:
    """Digits for the letters without one first (each move there is progress), then re-assignments."""
    letters = sorted(env.letters)
    return [f"[{letter} {d}]" for mapped in (False, True) for letter in letters
            if (letter in env.mapping) == mapped for d in _crypt_free(env, letter)]


def _crypt_illegal(env: Any) -> str:
    return f"[{min(env.first_letters)} 0]"  # a word's first letter cannot be 0


def _crypt_stall(env: Any, last: str | None) -> str | None:
    """A letter given the digit it already holds: a turn spent, nothing changed."""
    return next((f"[{letter} {d}]" for letter, d in sorted(env.mapping.items())), None)


def _crypt_reference(env: Any) -> str:
    """The next move to the solution. Letters holding a wrong digit are put right first (assigning the
    last free letter ends the game): the first (alphabetically) whose digit is free takes it; when each
    such digit is held by another misplaced letter, the first moves to a digit no letter of the
    solution wants. Then the unassigned letters take theirs, in order."""
    solution = crypt_solution(tuple(env.addends), env.result)
    misplaced = [letter for letter in sorted(env.mapping) if solution.get(letter) != env.mapping[letter]]
    for letter in misplaced:
        if solution.get(letter) is not None and solution[letter] not in env.digit_used:
            return f"[{letter} {solution[letter]}]"
    free = [d for d in _crypt_free(env, misplaced[0]) if d not in env.digit_used] if misplaced else []
    if free:  # (a puzzle of ten letters leaves no digit free: the swap cannot be broken)
        return f"[{misplaced[0]} {min(free, key=lambda d: (d in solution.values(), d))}]"
    unassigned = [letter for letter in sorted(solution) if letter not in env.mapping]
    return f"[{unassigned[0]} {solution[unassigned[0]]}]" if unassigned else "[]"


@functools.cache
def crypt_solution(addends: tuple[str, ...], result: str) -> dict[str, int]:
    """A digit per letter that makes ``sum(addends) == result`` with no word led by 0, found column by
    column from the right (carries included); {} when there is none."""
    width = max(len(w) for w in (*addends, result))
    columns = [([w[-1 - i] for w in addends if i < len(w)], result[-1 - i] if i < len(result) else None)
               for i in range(width)]
    order = list(dict.fromkeys(letter for column, out in columns for letter in (*column, out) if letter))
    leading = {w[0] for w in (*addends, result)}

    def holds(mapping: dict[str, int]) -> bool:
        carry = 0
        for column, out in columns:
            if out is None or any(letter not in mapping for letter in (*column, out)):
                return out is not None  # not decided yet (or an addend longer than the result)
            total = sum(mapping[letter] for letter in column) + carry
            if total % 10 != mapping[out]:
                return False
            carry = total // 10
        return carry == 0

    def search(mapping: dict[str, int], used: set[int]) -> dict[str, int] | None:
        if len(mapping) == len(order):
            return dict(mapping)
        letter = order[len(mapping)]
        for d in range(1 if letter in leading else 0, 10):
            if d in used:
                continue
            mapping[letter] = d
            if holds(mapping) and (found := search(mapping, used | {d})) is not None:
                return found
            del mapping[letter]
        return None

    return search({}, set()) or {}


# -- New Recruit (envs/NewRecruit/env.py ``_process_action``: ``[Accept]``/``[Reject]`` of a pending
#    proposal, else ``[Propose]`` and one letter A-E for each of its eight issues) -------------------
RECRUIT_ISSUES, RECRUIT_CHOICES, RECRUIT_PROPOSALS = 8, "ABCDE", 8
"""Proposals listed per state, a uniform sample of the 5^8: the random legal opponent draws from the
listed moves, and among thousands of proposals it would never answer one (a deal would never close)."""


def _recruit_answers(env: Any) -> list[str]:
    pending = env.state.game_state.get("current_proposal")
    return ["[Accept]", "[Reject]"] if pending and pending["proposer_id"] != env.state.current_player_id else []


def _recruit_legal(env: Any, rng: random.Random) -> list[str]:
    """The answers to the other side's proposal, and a uniform sample of ``RECRUIT_PROPOSALS`` proposals."""
    proposals: dict[str, None] = {}
    while len(proposals) < RECRUIT_PROPOSALS:
        proposals["[Propose] " + "".join(rng.choices(RECRUIT_CHOICES, k=RECRUIT_ISSUES))] = None
    return [*_recruit_answers(env), *proposals]


GAMES: dict[str, GameMoves] = {
    "GuessTheNumberEnv": GameMoves(_gtn_legal, illegal=lambda env: f"[{env.max_number + 1}]", stall=_gtn_stall,
                                   reference=lambda env: f"[{env.game_number}]"),
    "TowerOfHanoiEnv": GameMoves(lambda env, rng: _hanoi_moves(env), illegal=_hanoi_illegal, stall=_hanoi_stall),
    "MastermindEnv": GameMoves(_mastermind_legal, illegal=_mastermind_illegal,
                               reference=lambda env: _code(env.state.game_state["secret_code"])),
    "ConnectFourEnv": GameMoves(_c4_legal, illegal=_c4_illegal),
    "NimEnv": GameMoves(_nim_legal, illegal=_nim_illegal, stall=_nim_stall),
    "KuhnPokerEnv": GameMoves(_kuhn_legal, illegal=_kuhn_illegal, stall=_kuhn_move("check"),
                              forfeit=_kuhn_move("fold")),
    "TicTacToeEnv": GameMoves(_ttt_legal, illegal=_ttt_illegal),
    "ThreeCardMonteEnv": GameMoves(_monte_legal, illegal=lambda env: f"[{env.num_cups}]",
                                   reference=lambda env: f"[{env.ball_pos}]"),
    "SudokuEnv": GameMoves(_sudoku_legal, illegal=_sudoku_illegal),
    "PegJumpEnv": GameMoves(_peg_legal, illegal=_peg_illegal),
    "ColonelBlottoEnv": GameMoves(_blotto_legal, illegal=lambda env: _blotto(env.field_names[:1],
                                                                            (env.num_total_units + 1,))),
    "SantoriniBaseFixedWorkerEnv": GameMoves(_santorini_legal, illegal=_santorini_illegal),
    "SettlersOfCatanEnv": GameMoves(_catan_legal, illegal=lambda env: f"[{len(env.game_moves or []) + 1}]",
                                    stall=_catan_stall),
    "QuantumTicTacToeEnv": GameMoves(_qttt_legal, illegal=_qttt_illegal),
    "SimpleNegotiationEnv": GameMoves(_negotiation_legal, illegal=_negotiation_illegal,
                                      stall=lambda env, last: "[Deny]"),
    "TwoDollarEnv": GameMoves(_two_dollar_legal, illegal=lambda env: f"[Propose] ${env.total_amount + 1:.2f}"),
    "NewRecruitEnv": GameMoves(_recruit_legal, illegal=lambda env: "[Propose] " + "F" * RECRUIT_ISSUES,
                               stall=lambda env, last: next(iter(_recruit_answers(env)[1:]), None)),
    "CrosswordsEnv": GameMoves(_crossword_legal, illegal=_crossword_illegal),
    "LogicPuzzleEnv": GameMoves(_logic_legal, illegal=_logic_illegal, stall=_logic_stall, reference=_logic_reference),
    "CryptarithmEnv": GameMoves(_crypt_legal, illegal=_crypt_illegal, stall=_crypt_stall, reference=_crypt_reference),
    "SetEnv": GameMoves(_set_legal, illegal=lambda env: "[0, 1, 2]", stall=_set_stall, reference=_set_reference,
                        success=_set_perfect),
}
"""Env class name -> its readers."""

__all__ = ["GAMES", "GameMoves", "crypt_solution"]
