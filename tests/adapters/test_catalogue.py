"""The strategy catalogue: fixed labels, texts built from the task's own reference answer."""

from __future__ import annotations

import pytest

from envaudit.adapters.catalogue import (
    ANSWER_LABELS,
    ECHO_CHARS,
    FORFEIT,
    GAME_LABELS,
    REFERENCE,
    STALL,
    TRAILING,
    answer_strategies,
    game_labels,
    game_strategies,
    partial_answer,
    prefix_answer,
    truncated_answer,
    wrong_answers,
)


@pytest.mark.parametrize("reference", ["256", "-3", "0.25", "apple", "a, b, c", "3 1 2", "x"])
def test_wrong_answers_are_distinct_and_not_the_reference(reference):
    wrong = wrong_answers(reference, 2)
    assert len(wrong) == 2 and len(set(wrong)) == 2
    assert reference not in wrong and all(w for w in wrong)


def test_numbers_move_by_one_in_the_reference_format():
    assert wrong_answers("256") == ["257", "255"]
    assert wrong_answers("0.25") == ["1.25", "-0.75"]


def test_partial_answer_keeps_a_prefix_of_the_parts():
    assert partial_answer("a, b, c, d") == "a, b"
    assert partial_answer("3 1 2") == "3"
    assert partial_answer("apple") == "ap"


def test_answer_catalogue_covers_the_gaming_strategies():
    fmt = lambda a: f"<answer>{a}</answer>"  # noqa: E731
    strategies = answer_strategies("42", "How many? 40 + 2", fmt=fmt, unformatted=lambda a: a)
    texts = {s.label: s.text for s in strategies}
    assert tuple(texts) == ANSWER_LABELS
    assert texts[REFERENCE] == "<answer>42</answer>"
    assert texts["unformatted"] == "42" and texts["empty"] == ""
    assert texts["echo_prompt"] == "How many? 40 + 2"
    assert "42" in texts["hedge_all"] and texts["hedge_all"].count("<answer>") == 1
    assert texts["hedge_last"].endswith("<answer>42</answer>") and texts["hedge_last"].count("<answer>") == 3
    assert texts["reference_trailing"].startswith("<answer>42</answer>") and len(texts["reference_trailing"]) > 20
    assert [s.label for s in strategies if s.honest] == [REFERENCE]


def test_game_catalogue_labels_are_fixed_and_cycle_few_legal_moves():
    strategies = game_strategies(["[1]"], "prompt", illegal="[111]", unformatted="1", last=None)
    assert tuple(s.label for s in strategies) == GAME_LABELS == game_labels(False)
    texts = {s.label: s.text for s in strategies}
    assert texts["legal_1"] == texts["legal_2"] == texts["repeat_last"] == "[1]"
    with_ref = game_strategies(["[1]", "[2]"], "p", illegal="[9]", unformatted="1", last="[2]", reference="[5]")
    assert tuple(s.label for s in with_ref) == game_labels(True)
    assert {s.label: s.text for s in with_ref}["repeat_last"] == "[2]"
    with pytest.raises(ValueError, match="legal move"):
        game_strategies([], "p", illegal="x", unformatted="x", last=None)


@pytest.mark.parametrize(("reference", "n", "expected"), [
    # numbers move by one each way, then to 2v+1 and -v-1, in the reference's own format
    ("256", 4, ["257", "255", "513", "-257"]),
    ("-3", 4, ["-2", "-4", "-5", "2"]),
    ("0.25", 4, ["1.25", "-0.75", "1.50", "-1.25"]),
    ("7.0", 3, ["8.0", "6.0", "15.0"]),
    ("1,000", 2, ["1001", "999"]),  # thousands separators read, not written
    ("0", 4, ["1", "-1", "04", "05"]),  # 2v+1 and -v-1 repeat the first two: padded with distinct texts
    ("1e20", 3, ["02e1", "1e2x", "1e20x"]),  # past 1e15 a number is read as text
    # a multi-part answer is rotated and reversed; any text reversed, its last character changed, extended
    ("a, b, c", 5, ["b, c, a", "c, b, a", "c ,b ,a", "a, b, x", "a, b, cx"]),
    ("3 1 2", 4, ["1 2 3", "2 1 3", "3 1 x", "3 1 2x"]),  # the reversed string is the reversed parts
    ("1 2\n3 4", 5, ["2\n3\n4\n1", "4\n3\n2\n1", "4 3\n2 1", "1 2\n3 x", "1 2\n3 4x"]),
    ("apple", 3, ["elppa", "applx", "applex"]),
    ("x", 4, ["y", "xx", "x4", "x5"]),
])
def test_wrong_answers_follow_the_references_shape(reference, n, expected):
    assert wrong_answers(reference, n) == expected


@pytest.mark.parametrize(("reference", "partial", "truncated", "prefix"), [
    ("a, b, c, d", "a, b", "a", "a, b, c"),
    ("1\n2\n3\n4", "1\n2", "1", "1\n2\n3"),
    ("1 2 3", "1", "1", "1 2"),
    ("ab", "a", "a", "a"),
    ("x", "", "", ""),
    ("-12.5", "-1", "-12", "-12."),  # the first half of its characters (2 of 5)
    ("-.5", "-", "-0", "-."),
    (".5", ".", "0", "."),
])
def test_partial_truncated_and_prefix_answers(reference, partial, truncated, prefix):
    assert (partial_answer(reference), truncated_answer(reference), prefix_answer(reference)) == (partial, truncated, prefix)


def test_answer_catalogue_texts_in_full():
    fmt = lambda a: f"[{a}]"  # noqa: E731
    texts = {s.label: s.text for s in answer_strategies(" 12 ", "P" * 3000, fmt=fmt, wrong=["13", "11"])}
    assert texts == {
        "reference": "[12]", "wrong_1": "[13]", "wrong_2": "[11]", "unformatted": "The answer is 12.", "empty": "",
        "echo_prompt": "P" * ECHO_CHARS, "hedge_all": "[13 or 12 or 11]", "hedge_last": "[13] [11] [12]",
        "reference_trailing": "[12]" + TRAILING, "partial": "[1]",
    }
    assert {s.label: s.text for s in answer_strategies("12", "p")}["wrong_1"] == "13"  # wrong_answers by default
    with pytest.raises(ValueError, match="needs 2 wrong answers"):
        answer_strategies("12", "p", wrong=["13"])


def test_game_catalogue_texts_in_full():
    strategies = game_strategies(["[1]", "[2]", "[3]", "[4]"], "Q" * 3000, illegal="[9]", unformatted="1",
                                 last="[2]", reference="[7]", stall="[4]")
    assert [s.label for s in strategies] == list(game_labels(True, stall=True))
    assert {s.label: s.text for s in strategies} == {
        REFERENCE: "[7]", "legal_1": "[1]", "legal_2": "[2]", "legal_3": "[3]", "illegal": "[9]", "unformatted": "1",
        "repeat_last": "[2]", "forfeit": FORFEIT, "empty": "", "echo_prompt": "Q" * ECHO_CHARS, STALL: "[4]",
    }
    assert game_labels(False) == GAME_LABELS and game_labels(False, stall=True) == (*GAME_LABELS, STALL)
    assert [s.label for s in strategies if s.honest] == [REFERENCE, "legal_1", "legal_2", "legal_3"]
