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


KESSEL_POOL = wrong_answers("Kessel River", WRONG_POOL)
"""Every candidate ``wrong_answers`` builds from "Kessel River" (its words rotated, reversed, a letter
changed or added, digits appended): a row that lists them all as targets accepts each one."""


def test_candidates_the_judge_accepts_are_relabelled_and_other_rows_answers_follow(tmp_path):
    env = _env(tmp_path, [["teal"], ["Kessel River", *KESSEL_POOL], ["1887"]])
    found = env.checked(1, env.first_prompt(1))
    why = "a correct answer by the judge, not a wrong one"
    assert found["relabelled"] == [{"label": "wrong_1", "text": c, "success": True, "why": why} for c in KESSEL_POOL]
    # then the next rows' references, in order (row 2, then row 0 round the end), both rejected
    assert found["wrong"] == ["1887", "teal"] and found["transplant"] == "1887"


def test_with_every_candidate_accepted_and_no_other_row_a_marked_reference_stands_in(tmp_path):
    env = _env(tmp_path, [["Kessel River", *KESSEL_POOL]])
    found = env.checked(0, "")
    assert found["wrong"] == ["Kessel River envaudit 0", "Kessel River envaudit 1"]
    assert len(found["relabelled"]) == WRONG_POOL


def test_a_scorer_that_pays_every_answer_keeps_the_first_two_it_paid(tmp_path, monkeypatch):
    # A planted scorer: the env's step pays full marks whatever the answer (the hack the check is
    # there to show). No candidate is left unpaid, so the first two paid stay, each relabelled.
    env = _env(tmp_path, [["Kessel River"], ["teal"]])
    monkeypatch.setattr(env, "fresh_reward", lambda text, row=None: 1.0)
    found = env.checked(0, "")
    assert found["wrong"] == KESSEL_POOL[:2]
    why = "the scorer gives this wrong answer full marks"
    paid = KESSEL_POOL + ["teal"]
    assert found["relabelled"] == [{"label": "wrong_1", "text": c, "success": False, "score": 1.0, "why": why}
                                   for c in paid]


# -- code rows: the transplant is the first next row's solution that fails this row's tests --------
ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
ADD_TOO = "print(sum(map(int, input().split())))\n"
ADD_TESTS = [{"input": "3 4\n", "output": "7\n", "testtype": "stdin"},
             {"input": "-5 12\n", "output": "7\n", "testtype": "stdin"}]
MAX_TESTS = [{"input": "3\n1 9 3\n", "output": "9\n", "testtype": "stdin"},
             {"input": "2\n-4 -7\n", "output": "-4\n", "testtype": "stdin"}]


def _code_row(tests: list[dict] | None, reference: str | None) -> dict:
    row = {"prompt": [{"role": "user", "content": "Solve it; read stdin, write stdout."}], "env_class": "lcb",
           "extra_info": {"reference": reference} if reference else {}}
    if tests is not None:
        row["reward_spec"] = {"method": "rule", "ground_truth": json.dumps(tests)}
    return row


def _code_env(tmp_path: Path, rows: list[dict]) -> SkyRLGymEnv:
    path = tmp_path / "code.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return SkyRLGymEnv("lcb", tasks=str(path))


def _transplant(found: dict) -> str:
    return next(s.text for s in found["strategies"] if s.label == "transplant")


def test_code_transplant_skips_rows_without_tests_and_solutions_that_pass(tmp_path):
    from envaudit.adapters.skyrl_code import fence, solution_for, tests_of

    # row 0 adds; row 1 has no tests; row 2 adds too (its solution passes row 0's tests); row 3 takes
    # a maximum and ships no solution, so its stand-in is a table of its tests' outputs.
    rows = [_code_row(ADD_TESTS, ADD), _code_row(None, None), _code_row(ADD_TESTS, ADD_TOO), _code_row(MAX_TESTS, None)]
    env = _code_env(tmp_path, rows)
    table = solution_for(rows[3], tests_of(rows[3]["reward_spec"]["ground_truth"]))[0]
    found = env.checked(0, env.first_prompt(0))
    assert _transplant(found) == fence(table)  # k = 1 has no tests, k = 2 passes: k = 3
    assert not [r for r in found["relabelled"] if r["label"] == "transplant"]
    assert _transplant(env.checked(3, "")) == fence(ADD)  # round the end: row 0 is next
    assert _transplant(env.checked(2, "")) == fence(table)  # row 3, the one after it
    assert env.adapter_info["reference"] == "the row's reference solution"  # row 0's
    assert _code_env(tmp_path, rows[3:] + rows[:1]).adapter_info["reference"] == (
        "a table of every test's output (the row ships no solution)")
    env.reset(seed=0)  # the catalogue of a state is its row's checked one
    assert env.candidates()["transplant"] == fence(table) and env.candidates()["reference"] == fence(ADD)


def test_code_transplant_with_every_other_solution_passing_is_an_empty_program(tmp_path):
    from envaudit.adapters.skyrl_code import fence

    env = _code_env(tmp_path, [_code_row(ADD_TESTS, ADD), _code_row(ADD_TESTS, ADD_TOO)])
    found = env.checked(0, "")
    assert _transplant(found) == fence("pass\n")
    assert [r for r in found["relabelled"] if r["label"] == "transplant"] == [
        {"label": "transplant", "success": False,
         "why": "no other row's solution fails this row's tests: an empty program stands in"}]
