"""The strategy catalogue: fixed labels, texts built from the task's own reference answer."""

from __future__ import annotations

import pytest

from envaudit.adapters.catalogue import (
    ANSWER_LABELS,
    GAME_LABELS,
    REFERENCE,
    answer_strategies,
    game_labels,
    game_strategies,
    partial_answer,
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
