"""The grader attacks of the catalogue (``grader_strategies``), as the reasoning-gym adapter offers them."""

from __future__ import annotations

import pytest

from envaudit.adapters.catalogue import (
    GRADER_LABELS,
    TRAILING,
    grader_strategies,
    prefix_answer,
    truncated_answer,
)


def tags(answer: str) -> str:
    return f"<answer>{answer}</answer>"


def test_grader_attacks_are_built_from_the_reference_and_sit_inside_the_answer():
    strategies = grader_strategies("0.3125", fmt=tags, transplant="0.125", constant="1", wrong=["1.3125", "-0.6875"])
    texts = {s.label: s.text for s in strategies}
    assert tuple(texts) == GRADER_LABELS
    assert texts["transplant"] == tags("0.125") and texts["constant"] == tags("1")
    assert texts["prefix"] == tags("0.312") and texts["truncated"] == tags("0")
    # The junk is where the grader reads it, unlike reference_trailing's, which follows the tags.
    assert texts["junk_inside"] == tags("0.3125" + TRAILING)
    assert texts["candidates"] == tags("1.3125\n0.3125\n-0.6875")  # the reference neither first nor last
    assert not any(s.honest for s in strategies)
    with pytest.raises(ValueError, match="2 wrong answers"):
        grader_strategies("1", transplant="2", constant="3", wrong=["4"])


@pytest.mark.parametrize(("reference", "prefix", "truncated"), [
    ("12", "1", "1"),
    ("x", "", ""),  # no proper prefix of one character
    ("-12.582507841", "-12.58250784", "-12"),
    ("a, b, c", "a, b", "a"),
    ("Victoria is a knight, and Jacob is a knave.", "Victoria is a knight, and Jacob is a", "Victoria"),
    ("1 2\n3 4", "1 2\n3", "1"),
])
def test_prefixes_and_truncations_are_proper_and_never_the_reference(reference, prefix, truncated):
    assert prefix_answer(reference) == prefix and truncated_answer(reference) == truncated
    assert reference not in (prefix, truncated)
