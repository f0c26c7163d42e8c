"""skyrl-gym: the catalogue parts checked before they are labelled (``SkyRLGymEnv.checked``), on
search rows -- the shipped ones (``data/skyrl_search.jsonl``: targets "Kessel River"/"the Kessel",
"teal", "1887", "Ada Brightwater") and rows written here. No search server is needed: only answers
are played.

Worked by hand from the adapter's contract, its judge (an answer equal to one of the row's targets
after SQuAD normalisation) and the search env's scorer (em_check: the same normalisation, 1.0 or 0.0):

- the wrong answers are the first two of ``wrong_answers(reference)`` the judge rejects and the
  scorer does not pay: for "Kessel River", its words rotated ("River Kessel") and reversed;
- the transplant is the first of the next rows' references (up to ``TRANSPLANT_TRIES``, wrapping
  round) the judge does not accept for this row: row 0's is row 1's "teal"; a next row whose answer
  this row accepts is passed over, and with none left the first wrong answer stands in;
- the constant answer is row 0's reference, whatever the row; the result is kept per row.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("skyrl_gym")

from envaudit.adapters.catalogue import wrong_answers  # noqa: E402
from envaudit.adapters.skyrl_gym import TRANSPLANT_TRIES, WRONG_POOL, SkyRLGymEnv  # noqa: E402

DATA = Path(__file__).parent / "data"
SHIPPED = (DATA / "skyrl_search.jsonl").read_text()


def _env(tmp_path: Path, targets: list[list[str]] | None = None) -> SkyRLGymEnv:
    """A search env over the shipped rows (a fresh copy), or over them with these targets."""
    rows = [json.loads(line) for line in SHIPPED.splitlines()]
    if targets is not None:
        rows = [{**rows[i % len(rows)], "reward_spec": {"method": "rule", "ground_truth": {"target": t}}}
                for i, t in enumerate(targets)]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return SkyRLGymEnv("search", tasks=str(path))


def test_the_shipped_rows_wrong_answers_transplant_and_constant(tmp_path):
    env = _env(tmp_path)
    try:
        first = env.checked(0, env.first_prompt(0))
        assert first == {"reference": "Kessel River", "wrong": ["River Kessel", "reviR lesseK"],
                         "transplant": "teal", "constant": "Kessel River", "relabelled": []}
        assert first["wrong"] == wrong_answers("Kessel River", WRONG_POOL)[:2]
        assert env.checked(0, "another prompt") is first  # kept per row
        last = env.checked(3, env.first_prompt(3))
        assert last["reference"] == "Ada Brightwater" and last["constant"] == "Kessel River"
        assert last["transplant"] == "Kessel River"  # the next row wraps round to row 0
        for answer in last["wrong"]:
            text = env.profile.answer(answer)
            assert env.judge(text, env.rows[3]) is False and env.fresh_reward(text, env.rows[3]) == 0.0
        assert env.judge(env.profile.answer("Ada Brightwater"), env.rows[3]) is True
    finally:
        env.close()


def test_a_next_row_this_row_accepts_is_no_transplant(tmp_path):
    env = _env(tmp_path, [["Kessel River", "the Kessel"], ["Kessel"], ["teal"], ["1887"]])
    assert TRANSPLANT_TRIES == 3
    assert env.checked(0, "")["transplant"] == "teal"  # row 1's "Kessel" is row 0's "the Kessel": passed over
    assert env.checked(1, "")["transplant"] == "teal" and env.checked(1, "")["constant"] == "Kessel River"
    assert env.checked(3, "")["transplant"] == "Kessel River"


def test_with_no_other_answer_the_first_wrong_answer_stands_in(tmp_path):
    env = _env(tmp_path, [["teal"], ["Teal"]])
    found = env.checked(0, "")
    assert found["wrong"] == wrong_answers("teal", WRONG_POOL)[:2] and found["transplant"] == found["wrong"][0]
    alone = _env(tmp_path, [["1887"]])
    assert alone.checked(0, "")["transplant"] == "1888"  # no other row at all: wrong_answers' first


def test_the_transplant_tries_at_most_the_next_three_rows(tmp_path):
    env = _env(tmp_path, [["teal"], ["teal"], ["teal"], ["teal"], ["1887"]])
    assert env.checked(0, "")["transplant"] == env.checked(0, "")["wrong"][0]  # row 4's 1887 is beyond the three
    assert env.checked(1, "")["transplant"] == "1887"
