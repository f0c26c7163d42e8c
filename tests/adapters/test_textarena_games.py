"""Set, Quantum Tic Tac Toe, Crosswords, Logic Puzzle, Simple Negotiation, Two Dollar and New Recruit:
moves read from their state, success from Set's own goal.

Both were blind in ``benchmarks/ecosystems.py`` before their readers: every move read from Quantum
Tic Tac Toe's text is a single bracketed cell (``[4]``), which its ``step()`` rejects ("Invalid
format. Use '[a,b]'"), so every episode ended by an invalid move; Set accepts any three indices,
but a random triple of its 12 cards is a Set about once in 80, so every catalogue move scored 0,
and its reward is its score (0..20), not TextArena's solved-game 1. Checked by hand against
``textarena/envs/Set/env.py`` and ``textarena/envs/QuantumTicTacToe/env.py`` (textarena 0.7.4):

- Set: a move is ``[i, j, k]``, 1-based board indices; the game's ``_is_set`` wants each of the four
  attributes all equal or all different on the three cards; a Set scores 1 and the cards are
  replaced; every well-formed move counts one of 20 turns; when the board holds no Set and the deck
  is not empty, three cards are dealt (``deck.pop()``) *before* the move is read.
- Quantum Tic Tac Toe: a move is ``[a,b]``, two different cells 0-8, neither solidified by a collapse.
- Crosswords (``envs/Crosswords/env.py``): ``[row col letter]`` on a "_" cell, and only the solution's
  letter there (any other letter is an invalid move); complete, ``set_outcome(reward=1)``. Its text
  shows ``[0 0 d]``, which the varied-text path never turned into an accepted move: blind before.
- Logic Puzzle (``envs/LogicPuzzle/env.py``): ``[row col mark]``, a cell of one of its grids and O or
  X, not the mark the cell holds; solved when every grid equals the solution (``set_outcome(1)``),
  else at its 30-turn limit the share of cells marked right. Blind before for the same reason.
- Simple Negotiation (``envs/SimpleNegotiation/env.py``): ``[Accept]`` executes the pending offer when
  the one to move holds what it asks (else an invalid move), any other reply rejects it, ``[Offer: Q R
  -> Q R]`` is a new offer (an invalid move when the offerer lacks what it offers); the player whose
  inventory value gained more wins. Before, every move read from its text was accepted but no trade
  ever happened: every game a draw, one outcome.
- Two Dollar (``envs/TwoDollar/env.py`` ``_is_valid_action``): exactly one of ``[Propose] $X.XX`` (0 to
  $2.00), ``[Accept]``, ``[Reject]``, the last two only against the other player's pending proposal;
  a "high_tension" role may concede at most $0.01 below its own last proposal. Its text writes
  ``[Propose] $X.XX`` with the amount outside the brackets, so no move read from it was accepted.
- New Recruit (``envs/NewRecruit/env.py`` ``_process_action``): ``[Accept]``/``[Reject]`` of a pending
  proposal, else ``[Propose]`` and eight letters A-E; the letters sit outside the brackets, so no move
  read from its text was accepted either.
- Cryptarithm (``envs/Cryptarithm/env.py`` ``step``): ``[L d]`` for a letter of SEND + MORE = MONEY
  and a digit no other letter holds, never 0 on S or M (a word's first letter); a letter may be
  re-assigned; the game ends when all eight letters have a digit: 1.0 when the sum holds, else 0.0.
  Its text shows ``[A 5]``, and A is no letter of the puzzle: every move read from it was invalid,
  and an invalid move there ends the game with its reason as the reward (a ``str``): an env-error in
  every episode before this reader. The puzzle's one solution, worked by hand column by column:
  D=7, E=5, Y=2, N=6, R=8, O=0, S=9, M=1 (9567 + 1085 = 10652).
"""

from __future__ import annotations

import copy
import itertools
import random

import pytest

pytest.importorskip("textarena")

from envaudit.adapters.textarena import TextArenaEnv  # noqa: E402
from tests.adapters.textarena_checks import stepped_copy  # noqa: E402

SET_TURNS = 20


def is_set(cards) -> bool:
    """Set's rule, written from its prompt: each attribute all the same or all different."""
    return all(len(set(v)) in (1, 3) for v in zip(*cards, strict=True))


def play(env: TextArenaEnv, labels: list[str], seed: int = 0) -> tuple[float, dict]:
    env.reset(seed=seed)
    total, info = 0.0, {}
    for t in range(env.max_steps):
        label = labels[min(t, len(labels) - 1)]
        _, reward, terminated, truncated, info = env.step(env.action_labels.index(label))
        total += reward
        if terminated or truncated:
            return total, info
    raise AssertionError("the game did not end")


def random_endings(env: TextArenaEnv, seeds: range, read) -> set:
    """``read(reward, info)`` of the last step of one episode per seed of uniformly random catalogue
    actions (exploration's policy), from ``random.Random(0)``."""
    rng, out = random.Random(0), set()
    for seed in seeds:
        env.reset(seed=seed)
        for _ in range(env.max_steps):
            _, reward, terminated, truncated, info = env.step(rng.randrange(env.action_space.n))
            if terminated or truncated:
                out.add(read(reward, info))
                break
    return out


def test_set_moves_are_every_triple_of_the_board_and_the_reference_is_a_set_the_game_scores():
    env = TextArenaEnv("Set-v0")
    env.reset(seed=0)
    board = env.base.state.game_state["board"]
    assert len(board) == 12
    legal = env.known.legal(env.base, random.Random(0))
    assert len(legal) == 220 and legal[0] == "[1, 2, 3]" and legal[-1] == "[10, 11, 12]"
    moves = env.candidates()
    reference = [int(i) for i in moves["reference"].strip("[]").split(",")]
    assert is_set([board[i - 1] for i in reference])
    after, accepted = stepped_copy(env, moves["reference"])
    assert accepted and after.state.game_state["score"] == 1 and after.state.game_state["num_turns"] == 1
    stall = [int(i) for i in moves["stall"].strip("[]").split(",")]
    assert not is_set([board[i - 1] for i in stall])
    after, accepted = stepped_copy(env, moves["stall"])
    assert accepted and after.state.game_state["score"] == 0 and after.state.game_state["num_turns"] == 1
    _, accepted = stepped_copy(env, moves["illegal"])
    assert not accepted


def test_set_reads_the_three_cards_dealt_before_the_move_on_a_board_without_a_set():
    env = TextArenaEnv("Set-v0")
    env.reset(seed=3)
    gs = env.base.state.game_state
    cards = gs["board"] + gs["deck"]
    capped: list = []  # twelve cards without a Set, built greedily from the game's own cards
    for card in cards:
        if not any(is_set((a, b, card)) for a, b in itertools.combinations(capped, 2)):
            capped.append(card)
        if len(capped) == 12:
            break
    rest = [c for c in cards if c not in capped]
    # The deck's second-last card (dealt second: ``pop()`` takes the last first) makes a Set with the
    # board's first two cards, and no other dealt card makes one with any two.
    a, b = capped[0], capped[1]
    third = next(c for c in rest if is_set((a, b, c)))
    rest.remove(third)
    quiet = [c for c in rest if not any(is_set((x, y, c)) for x, y in itertools.combinations([*capped, third], 2))]
    rest = [c for c in rest if c not in quiet[:2]]
    gs["board"], gs["deck"] = capped, [*rest, quiet[0], third, quiet[1]]
    env._cache = None
    env._refresh()
    legal = env.known.legal(env.base, random.Random(0))
    assert len(legal) == 455  # C(15, 3): the move may name the three cards about to be dealt
    moves = env.candidates()
    assert moves["reference"] == "[1, 2, 14]"
    after, accepted = stepped_copy(env, moves["reference"])
    assert accepted and after.state.game_state["score"] == 1
    # With the deck spent nothing is dealt: no Set anywhere, and the reference is the first triple.
    gs["deck"] = []
    env._cache = None
    env._refresh()
    assert len(env.known.legal(env.base, random.Random(0))) == 220
    assert env.candidates()["reference"] == "[1, 2, 3]"


def test_set_success_is_a_set_on_every_turn_not_a_score_of_one():
    env = TextArenaEnv("Set-v0")
    assert "a Set found on every one of its turns" in env.adapter_info["success"]
    total, info = play(env, ["reference"])
    assert total == SET_TURNS and info["success"] is True
    # One Set and nineteen wasted turns pays 1, TextArena's solved-game mark, and is no success.
    total, info = play(env, ["reference", *["stall"] * (SET_TURNS - 1)])
    assert total == 1.0 and info["success"] is False
    total, info = play(env, ["stall"])
    assert total == 0.0 and info["success"] is False


def test_quantum_tic_tac_toe_moves_are_pairs_of_open_cells_the_game_accepts():
    env = TextArenaEnv("QuantumTicTacToe-v0")
    env.reset(seed=0)
    board = env.base.state.game_state["board"]
    open_cells = [r * 3 + c for r in range(3) for c in range(3) if board[r][c] == ""]
    legal = env.known.legal(env.base, random.Random(0))
    assert legal == [f"[{a},{b}]" for a, b in itertools.combinations(open_cells, 2)]
    for move in random.Random(1).sample(legal, 8):
        assert stepped_copy(env, move)[1], move
    board[0][0] = board[1][1] = "X"  # solidified by hand: no move may name cell 0 or 4
    env._cache = None
    env._refresh()
    legal = env.known.legal(env.base, random.Random(0))
    assert len(legal) == 21 and not any(c in m for m in legal for c in "04")
    assert not stepped_copy(env, "[4,1]")[1]
    illegal = env.candidates()["illegal"]
    assert illegal == "[1,1]" and not stepped_copy(env, illegal)[1]
    for r in range(3):  # every cell solidified: no legal move, and the illegal one still well formed
        board[r][:] = ["O", "X", "O"]
    assert env.known.legal(env.base, random.Random(0)) == [] and env.known.illegal(env.base) == "[0,0]"


def test_quantum_tic_tac_toe_is_won_and_lost_by_catalogue_play():
    """Before the reader, every episode ended on an invalid move (one outcome): now the legal moves
    reach both a win and a loss against the random legal opponent over a few seeds."""
    env = TextArenaEnv("QuantumTicTacToe-v0")
    outcomes = {play(env, [label], seed)[1]["success"] for label in ("legal_1", "legal_2", "legal_3", "stall")
                for seed in range(3)}
    assert outcomes == {True, False}


def test_crosswords_moves_are_the_solution_letters_of_empty_cells_and_they_complete_it():
    env = TextArenaEnv("Crosswords-v0")
    env.reset(seed=0)
    gs = env.base.state.game_state
    empty = [(r, c) for r, row in enumerate(gs["board"]) for c, cell in enumerate(row) if cell == "_"]
    legal = env.known.legal(env.base, random.Random(0))
    assert legal == [f"[{r} {c} {gs['solution'][r][c]}]" for r, c in empty] and len(legal) > 5
    for move in legal[:4]:
        assert stepped_copy(env, move)[1], move
    illegal = env.candidates()["illegal"]
    r, c = empty[0]
    right = gs["solution"][r][c]
    assert illegal == f"[{r} {c} {'B' if right.upper() == 'A' else 'A'}]" and not stepped_copy(env, illegal)[1]
    for letter, wrong in (("a", "B"), ("A", "B"), ("b", "A")):  # whatever case the solution is written in
        gs["solution"][r][c] = letter
        assert env.known.illegal(env.base) == f"[{r} {c} {wrong}]"
    gs["solution"][r][c] = right
    full = copy.deepcopy(env.base)
    full.state.game_state["board"] = [["X" if cell == "_" else cell for cell in row] for row in gs["board"]]
    assert env.known.legal(full, random.Random(0)) == []
    assert env.known.illegal(full) == f"[0 0 {'B' if str(gs['solution'][0][0]).upper() == 'A' else 'A'}]"
    total, info = play(env, ["legal_1"])
    assert total == 1.0 and info["success"] is True
    gs = env.base.state.game_state
    assert all("_" not in row for row in gs["board"])


def test_logic_puzzle_moves_mark_its_cells_the_reference_solves_it_and_the_stall_does_not():
    env = TextArenaEnv("LogicPuzzle-v0")
    env.reset(seed=0)
    grids = env.base.game_board
    cells = [(row, col) for grid in grids.values() for row, cols in grid.items() for col in cols]
    legal = env.known.legal(env.base, random.Random(0))
    assert len(legal) == 2 * len(cells) == 36  # two 3x3 grids, O or X on each unmarked cell
    for move in random.Random(2).sample(legal, 6):
        assert stepped_copy(env, move)[1], move
    moves = env.candidates()
    row, col = cells[0]
    assert moves["reference"] == f"[{row} {col} {env.base.game_board_solution[next(iter(grids))][row][col]}]"
    assert not stepped_copy(env, moves["illegal"])[1]  # off the grid: nothing marked yet to repeat
    after, _ = stepped_copy(env, moves["reference"])
    grid = next(iter(after.game_board))
    assert after.game_board[grid][row][col] == after.game_board_solution[grid][row][col]
    total, info = play(env, ["reference"])
    assert total == 1.0 and info["success"] is True
    total, info = play(env, ["legal_1", "illegal"])  # one cell marked: the illegal move repeats its mark
    assert info["invalid_move"] is True and info["success"] is False
    total, info = play(env, ["stall"])
    assert info["success"] is False and total < 0.5


def test_logic_puzzle_moves_by_hand():
    """Exact moves on a fresh board and on boards marked by hand: the legal moves in the game's own
    case, the illegal move a repeat of a mark, the stall the mark the solution does not have, and
    cells whose names are not one word (which the game's pattern cannot name) left out."""
    env = TextArenaEnv("LogicPuzzle-v0")
    env.reset(seed=0)
    base = env.base
    grid = next(iter(base.game_board))
    solution = base.game_board_solution[grid]
    row = next(iter(base.game_board[grid]))
    first, second = list(base.game_board[grid][row])[:2]
    other = {"O": "X", "X": "O"}
    legal = env.known.legal(base, random.Random(0))
    assert legal[:4] == [f"[{row} {first} O]", f"[{row} {first} X]", f"[{row} {second} O]", f"[{row} {second} X]"]
    assert env.known.illegal(base) == "[nowhere nobody O]"
    assert env.known.stall(base, None) == f"[{row} {first} {other[solution[row][first]]}]"
    assert env.known.reference(base) == f"[{row} {first} {solution[row][first]}]"
    base.game_board[grid][row][first] = other[solution[row][first]]  # the first cell marked wrong
    assert env.known.illegal(base) == f"[{row} {first} {other[solution[row][first]]}]"
    assert env.known.stall(base, None) == f"[{row} {second} {other[solution[row][second]]}]"
    assert f"[{row} {first} {other[solution[row][first]]}]" not in env.known.legal(base, random.Random(0))
    for g, rows in base.game_board.items():  # every cell as the solution has it: nothing left to solve
        for r, cols in rows.items():
            for c in cols:
                cols[c] = base.game_board_solution[g][r][c]
    assert env.known.reference(base) == "[nowhere nobody O]"
    assert env.known.stall(base, None) == f"[{row} {first} {other[solution[row][first]]}]"
    # A cell whose solution is O: the stall marks it X, and once it holds X the illegal move repeats X.
    for rows in base.game_board.values():
        for cols in rows.values():
            for c in cols:
                cols[c] = None
    solution[row][first] = "O"
    assert env.known.stall(base, None) == f"[{row} {first} X]"
    base.game_board[grid][row][first] = "X"
    assert env.known.illegal(base) == f"[{row} {first} X]"
    base.game_board[grid]["ice cream"] = {first: None}  # two words: the game's pattern cannot name it
    base.game_board_solution[grid]["ice cream"] = {first: "O"}
    base.game_board[grid][row]["new york"] = None
    base.game_board_solution[grid][row]["new york"] = "X"
    assert not any("ice cream" in m or "new york" in m for m in env.known.legal(base, random.Random(0)))


def test_simple_negotiation_accepts_only_a_pending_offer_it_can_meet_and_trades_decide_the_game():
    env = TextArenaEnv("SimpleNegotiation-v0")
    env.reset(seed=0)
    base = env.base
    gs = base.state.game_state
    mine = gs["player_resources"][0]
    legal = env.known.legal(base, random.Random(0))
    assert legal[0] == "[Deny]" and len(legal) == 1 + sum(4 for r in base.resource_names if mine[r] >= 1)
    for move in legal[:6]:
        assert stepped_copy(env, move)[1], move
    illegal = env.candidates()["illegal"]
    assert illegal == f"[Offer: {mine['Wheat'] + 1} Wheat -> 1 Wood]" and not stepped_copy(env, illegal)[1]
    # An offer from player 1 that player 0 can meet: [Accept] is legal and executes the trade.
    gs["current_offer"] = {"from_player": 1, "to_player": 0, "offered_resources": {"Ore": 1},
                           "requested_resources": {"Wheat": 1}}
    legal = env.known.legal(base, random.Random(0))
    assert legal[:2] == ["[Accept]", "[Deny]"]
    after, accepted = stepped_copy(env, "[Accept]")
    assert accepted and after.state.game_state["player_resources"][0]["Ore"] == mine["Ore"] + 1
    # One asking exactly what it holds can be met; one asking more is not offered.
    gs["current_offer"]["requested_resources"] = {"Wheat": mine["Wheat"]}
    assert env.known.legal(base, random.Random(0))[0] == "[Accept]" and stepped_copy(env, "[Accept]")[1]
    gs["current_offer"]["requested_resources"] = {"Wheat": mine["Wheat"] + 1}
    assert "[Accept]" not in env.known.legal(base, random.Random(0))
    assert not stepped_copy(env, "[Accept]")[1]
    # A resource held once can be offered, one not held cannot.
    mine["Wood"], mine["Ore"] = 1, 0
    legal = env.known.legal(base, random.Random(0))
    assert "[Offer: 1 Wood -> 1 Wheat]" in legal and stepped_copy(env, "[Offer: 1 Wood -> 1 Wheat]")[1]
    assert not any(m.startswith("[Offer: 1 Ore") for m in legal)
    # Exploration's random catalogue play trades, and a trade decides the game: won, drawn and lost.
    assert random_endings(env, range(6), lambda reward, info: reward) == {-1.0, 0.0, 1.0}


def test_two_dollar_moves_are_proposals_and_answers_to_the_other_players_proposal():
    env = TextArenaEnv("TwoDollar-v0")
    env.reset(seed=0)
    base = env.base
    legal = env.known.legal(base, random.Random(0))
    assert legal == [f"[Propose] ${c / 100:.2f}" for c in range(0, 201, 10)]  # nothing pending: no answers
    for move in legal[::5]:
        assert stepped_copy(env, move)[1], move
    for move in ("[Accept]", "[Reject]", env.candidates()["illegal"]):
        assert not stepped_copy(env, move)[1], move
    base.current_proposal = {"amount": 1.2, "proposer": 1}
    legal = env.known.legal(base, random.Random(0))
    assert legal[:2] == ["[Accept]", "[Reject]"] and stepped_copy(env, "[Reject]")[1]
    # A high-tension player whose last proposal was $1.50 may only come down a cent.
    base.player_roles[0] = base.available_roles["high_tension"]
    base.player_proposal_history[0] = [1.5]
    proposals = [m for m in env.known.legal(base, random.Random(0)) if m.startswith("[Propose]")]
    assert proposals == [f"[Propose] ${c / 100:.2f}" for c in range(150, 201, 10)]
    assert not stepped_copy(env, "[Propose] $1.40")[1] and stepped_copy(env, "[Propose] $1.50")[1]
    base.player_proposal_history[0] = []  # no proposal of its own yet: any amount
    assert len([m for m in env.known.legal(base, random.Random(0)) if m.startswith("[Propose]")]) == 21
    base.player_roles[0] = base.available_roles["say_little"]  # validated too, but not on amounts
    base.player_proposal_history[0] = [1.5]
    assert len([m for m in env.known.legal(base, random.Random(0)) if m.startswith("[Propose]")]) == 21
    assert stepped_copy(env, "[Propose] $0.10")[1]


def test_new_recruit_moves_are_proposals_of_eight_letters_and_answers_to_the_other_sides():
    env = TextArenaEnv("NewRecruit-v0")
    env.reset(seed=0)
    base = env.base
    legal = env.known.legal(base, random.Random(0))
    assert base.state.game_state["current_proposal"] is None and len(legal) == 8
    assert all(m.startswith("[Propose] ") and len(m) == 18 and set(m[10:]) <= set("ABCDE") for m in legal)
    for move in legal[:3]:
        assert stepped_copy(env, move)[1], move
    illegal = env.candidates()["illegal"]
    assert illegal == "[Propose] FFFFFFFF" and not stepped_copy(env, illegal)[1]
    assert env.known.stall(base, None) is None  # nothing to reject yet
    base.state.game_state["current_proposal"] = {"proposer_id": 1, "choices": {}}
    legal = env.known.legal(base, random.Random(0))
    assert legal[:2] == ["[Accept]", "[Reject]"] and len(legal) == 10
    assert env.known.stall(base, None) == "[Reject]" and stepped_copy(env, "[Reject]")[1]
    base.state.game_state["current_proposal"] = {"proposer_id": 0, "choices": {}}  # its own: no answer
    assert not any(m in ("[Accept]", "[Reject]") for m in env.known.legal(base, random.Random(0)))
    # A deal closes under exploration's random play: won, lost, and no deal.
    assert random_endings(env, range(8), lambda reward, info: info["success"]) == {True, False}


SEND_MORE_MONEY = {"S": 9, "E": 5, "N": 6, "D": 7, "M": 1, "O": 0, "R": 8, "Y": 2}


def test_cryptarithm_solution_is_found_column_by_column():
    from envaudit.adapters.textarena_games import crypt_solution

    assert crypt_solution(("SEND", "MORE"), "MONEY") == SEND_MORE_MONEY
    assert crypt_solution(("TO", "GO"), "OUT") == {"O": 1, "T": 2, "G": 8, "U": 0}  # 21 + 81 = 102
    assert crypt_solution(("A", "A"), "A") == {}  # only A = 0, and A leads its word
    assert crypt_solution(("AB",), "A") == {}  # a sum shorter than its addend
    assert crypt_solution(("A", "B"), "CD") == {"A": 2, "B": 8, "C": 1, "D": 0}  # the first by digit order


def test_cryptarithm_moves_are_assignments_the_game_accepts_and_the_reference_solves_it():
    env = TextArenaEnv("Cryptarithm-v0")
    env.reset(seed=0)
    legal = env.known.legal(env.base, random.Random(0))
    # 8 letters: S and M take 1-9, the other six 0-9, none assigned yet
    assert len(legal) == 2 * 9 + 6 * 10 and legal[0] == "[D 0]" and legal[-1] == "[Y 9]"
    for move in random.Random(1).sample(legal, 8):
        assert stepped_copy(env, move)[1], move
    moves = env.candidates()
    assert moves["reference"] == "[D 7]" and moves["illegal"] == "[M 0]"
    assert not stepped_copy(env, moves["illegal"])[1]
    assert moves["stall"] == "[D 0]"  # nothing to re-assign yet: the first legal move that does not end the game
    total, info = play(env, ["reference"])
    assert total == 1.0 and info["success"] is True and env.base.mapping == SEND_MORE_MONEY
    total, info = play(env, ["legal_1"])  # D=0, E=1, ... in order: the sum does not hold
    assert total == 0.0 and info["success"] is False and info["invalid_move"] is False


def test_cryptarithm_reference_and_stall_from_a_board_assigned_by_hand():
    env = TextArenaEnv("Cryptarithm-v0")
    env.reset(seed=0)
    for move in ("[D 5]", "[E 7]", "[S 1]", "[M 9]"):  # four letters, each on another's digit
        env.step(move)
    assert env.base.mapping == {"D": 5, "E": 7, "S": 1, "M": 9}
    moves = env.candidates()
    assert moves["stall"] == "[D 5]"  # the digit D already holds: nothing changes
    after, accepted = stepped_copy(env, moves["stall"])
    assert accepted and after.mapping == env.base.mapping
    # D's 7 is E's, E's 5 is D's, M's 1 is S's, S's 9 is M's: every misplaced letter's digit is held,
    # so the first of them, D, moves to a digit the solution gives no letter (3 and 4; 3 first)
    assert moves["reference"] == "[D 3]"
    legal = env.known.legal(env.base, random.Random(0))
    assert legal[:3] == ["[N 0]", "[N 2]", "[N 3]"] and "[N 5]" not in legal  # unassigned letters first
    for _ in range(12):
        move = env.candidates()["reference"]
        assert stepped_copy(env, move)[1], move
        _, reward, terminated, _, info = env.step(move)
        if terminated:
            break
    assert env.base.mapping == SEND_MORE_MONEY and reward == 1.0 and info["success"] is True


def test_cryptarithm_reference_breaks_a_cycle_of_misplaced_letters_before_the_last_letter():
    env = TextArenaEnv("Cryptarithm-v0")
    env.reset(seed=0)
    for move in ("[D 5]", "[E 7]", "[M 1]", "[N 6]", "[O 0]", "[R 8]", "[S 9]"):  # D and E swapped, Y free
        env.step(move)
    # Y's 2 is free, but Y is the last letter: assigning it ends the game with D and E wrong. D's 7 is
    # E's and E's 5 is D's, so D moves to a digit no letter wants (3 and 4 are free; 3 first).
    assert env.candidates()["reference"] == "[D 3]"
    seen = []
    for _ in range(6):
        move = env.candidates()["reference"]
        seen.append(move)
        _, reward, terminated, _, info = env.step(move)
        if terminated:
            break
    assert seen == ["[D 3]", "[E 5]", "[D 7]", "[Y 2]"] and reward == 1.0 and info["success"] is True
