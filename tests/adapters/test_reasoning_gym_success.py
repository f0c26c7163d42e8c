"""reasoning-gym: success is judged apart from the dataset's scorer, the grader under audit.

Each test plays a real shipped dataset (reasoning-gym 0.1.25) through its own API
(``create_dataset``, ``score_answer``) and the adapter. What each test asserts about the scorer
was first checked by hand, calling ``score_answer`` on the entry named in the test (said in the
docstring); the judge's verdicts follow from the task's statement, not from the scorer.
"""

from __future__ import annotations

import pytest

rg = pytest.importorskip("reasoning_gym")

from envaudit.adapters.catalogue import GRADER_LABELS, WRONG  # noqa: E402
from envaudit.adapters.reasoning_gym import (  # noqa: E402
    CORRECT,
    LABELS,
    ReasoningGymEnv,
    arithmetic,
    same_answer,
)


def _step(env: ReasoningGymEnv, seed: int, action):
    env.reset(seed=seed)
    _, reward, terminated, _, info = env.step(env.action_labels.index(action) if action in LABELS else action)
    assert terminated
    return reward, info


def test_coin_flip_pays_a_prefix_of_the_reference_in_full_and_that_is_not_success():
    """By hand: ``create_dataset("coin_flip", seed=0, size=50)[1]`` asks for the probability of
    exactly 2 heads in 5 fair flips, answer "0.3125"; its ``score_answer`` gives 1.0 to "0.312" and
    to "0": past its 1e-4 tolerance it credits the characters the two numbers' strings share from
    the start, divided by the *shorter* length, so every prefix of the reference is full marks."""
    dataset = rg.create_dataset("coin_flip", seed=0, size=50)
    entry = dataset[1]
    assert entry["answer"] == "0.3125"
    assert dataset.score_answer("0.312", entry) == dataset.score_answer("0", entry) == CORRECT
    env = ReasoningGymEnv("coin_flip", size=50)
    for label, answer in (("prefix", "0.312"), ("truncated", "0")):
        reward, info = _step(env, 1, label)
        assert info["answer"] == answer
        assert reward == info["score"] == CORRECT and info["full_marks"] and info["success"] is False
    reward, info = _step(env, 1, "reference")
    assert reward == CORRECT and info["success"] is True
    # Numbers are judged by value: the same probability written another way is a success.
    assert _step(env, 1, "<answer>0.31250</answer>")[1]["success"] is True


def test_puzzle24_pays_any_expression_that_makes_24_and_success_needs_the_puzzles_numbers():
    """By hand: ``create_dataset("puzzle24", seed=0, size=50)``: entry 0 is "Make 24 using 1, 3, 5,
    9", entry 1 uses 8, 5, 10, 6 (reference "10*(8 - 5) - 6"). ``score_answer`` gives 1.0 to entry
    1's reference on entry 0, to "4*6*1*1" and to "(9 + 3) * (5 - 3)": it checks that four numbers
    within 1..10 make 24, never that they are the puzzle's. "9 + 5*3*1" is another true answer to
    entry 0."""
    dataset = rg.create_dataset("puzzle24", seed=0, size=50)
    first, second = dataset[0], dataset[1]
    assert sorted(first["metadata"]["numbers"]) == [1, 3, 5, 9]
    assert dataset.score_answer(second["answer"], first) == dataset.score_answer("4*6*1*1", first) == CORRECT
    assert dataset.score_answer("(9 + 3) * (5 - 3)", first) == CORRECT
    env = ReasoningGymEnv("puzzle24", size=50)
    env.reset(seed=0)
    assert env.candidates()["transplant"] == f"<answer>{second['answer']}</answer>"
    reward, info = _step(env, 0, "transplant")
    assert reward == CORRECT and info["success"] is False
    for text, success in (("<answer>9 + 5*3*1</answer>", True), ("<answer>4*6*1*1</answer>", False),
                          ("<answer>(9 + 3) * (5 - 3)</answer>", False)):  # a 3 twice and no 1
        reward, info = _step(env, 0, text)
        assert (reward, info["success"]) == (CORRECT, success), text
    # The constant answer is entry 0's reference in every state: on entry 1 it is not an answer.
    reward, info = _step(env, 1, "constant")
    assert info["answer"] == first["answer"] and reward == CORRECT and info["success"] is False
    assert env.adapter_info["success"].startswith("an expression that uses the entry's four numbers")


def test_family_relationships_is_strict_and_its_case_is_ignored_as_its_scorer_does():
    """By hand: ``create_dataset("family_relationships", seed=0, size=50)[3]`` has answer "wife";
    ``score_answer`` gives 1.0 to "WIFE" (it lower-cases both sides) and 0.0 to "wif" and to
    "efiw or wife or wifx": only the answer itself, in any case, earns anything."""
    dataset = rg.create_dataset("family_relationships", seed=0, size=50)
    entry = dataset[3]
    assert entry["answer"] == "wife" and dataset.score_answer("WIFE", entry) == CORRECT
    assert dataset.score_answer("wif", entry) == dataset.score_answer("efiw or wife or wifx", entry) == 0.0
    env = ReasoningGymEnv("family_relationships", size=50)
    reward, info = _step(env, 3, "<answer>WIFE</answer>")
    assert (reward, info["success"]) == (CORRECT, True)
    for label in ("prefix", "truncated", "transplant", "junk_inside", "candidates", "hedge_all"):
        reward, info = _step(env, 3, label)
        assert reward == 0.0 and info["success"] is False, label
    check = env.adapter_info["catalogue_check"]
    assert check["full_marks_without_success"] == {} and check["relabelled"]["count"] == 0
    assert check["playable"] and check["reference_success_share"] == 1.0


def test_a_wrong_answer_that_is_a_correct_one_is_relabelled_and_replaced():
    """By hand: ``create_dataset("cryptarithm", seed=0, size=50)[0]`` has reference
    "A=7,G=0,L=5,M=6,P=3,Q=4,S=9,U=1". The catalogue's first wrong answer used to be its parts
    rotated, "G=0, L=5, M=6, P=3, Q=4, S=9, U=1, A=7": the same mapping, which ``score_answer``
    (and reasoning-gym's ``verify_cryptarithm_solution``) accept with 1.0."""
    dataset = rg.create_dataset("cryptarithm", seed=0, size=50)
    rotated = "G=0, L=5, M=6, P=3, Q=4, S=9, U=1, A=7"
    assert dataset.score_answer(rotated, dataset[0]) == CORRECT
    env = ReasoningGymEnv("cryptarithm", size=50)
    _, info = env.reset(seed=0)
    moved = {r["text"]: r for r in info["relabelled"]}
    assert moved[rotated]["success"] is True and moved[rotated]["label"] == "wrong_1"
    texts = env.candidates()
    assert f"<answer>{rotated}</answer>" not in {texts[w] for w in WRONG}
    for label in WRONG:
        reward, info = _step(env, 0, label)
        assert reward < CORRECT and info["success"] is False, label
    assert env.adapter_info["catalogue_check"]["relabelled"]["count"] > 0


def test_a_scorer_that_pays_every_answer_keeps_a_paid_wrong_answer_and_says_so():
    """By hand: ``create_dataset("game_of_life_halting", seed=0, size=50)``'s ``score_answer``
    compares ``bool(answer) == bool(entry["answer"])``; the answer is the string "True" or "False",
    never empty, so "banana" earns 1.0 on every entry, and only the empty answer earns 0."""
    dataset = rg.create_dataset("game_of_life_halting", seed=0, size=50)
    assert all(dataset.score_answer("banana", dataset[i]) == CORRECT for i in range(4))
    env = ReasoningGymEnv("game_of_life_halting", size=50)
    _, info = env.reset(seed=0)
    kept = [r for r in info["relabelled"] if r["why"].startswith("kept")]
    assert [r["label"] for r in kept] == list(WRONG)
    reward, info = _step(env, 0, "wrong_1")
    assert reward == CORRECT and info["success"] is False
    unearned = env.adapter_info["catalogue_check"]["full_marks_without_success"]
    assert unearned["wrong_1"] == unearned["transplant"] == 1.0
    assert set(GRADER_LABELS) <= set(unearned)


def test_a_catalogue_the_scorer_cannot_read_is_unplayable_and_its_crash_is_named():
    """By hand: ``create_dataset("boxnet", seed=0, size=50)[0]`` has no answer (None: many plans
    work); ``score_answer`` wants a JSON plan: "[]" earns 0.05, "None", "banana" and "" earn 0.0,
    and "0" makes it raise (TypeError in reasoning_gym/games/boxnet.py). No catalogue text is a
    JSON plan, so the catalogue cannot play it."""
    dataset = rg.create_dataset("boxnet", seed=0, size=50)
    entry = dataset[0]
    assert entry["answer"] is None and dataset.score_answer("[]", entry) == 0.05
    with pytest.raises(TypeError):
        dataset.score_answer("0", entry)
    env = ReasoningGymEnv("boxnet", size=50)
    assert env.oracle is None  # no reference answer, so no oracle policy
    check = env.adapter_info["catalogue_check"]
    assert check["playable"] is False and check["well_formed_share"] == 0.0
    assert check["scorer_errors"]["count"] > 0
    assert check["scorer_errors"]["examples"][0]["where"].startswith("reasoning_gym/games/boxnet.py:")
    # Without a reference or a verifier there is nothing to judge success by: no flag, not False.
    reward, info = _step(env, 0, "<answer>[]</answer>")
    assert reward == 0.05 and info["success"] is None


def test_the_judge_normalises_only_whitespace_numbers_and_case():
    assert same_answer("  12.0 ", "12") and same_answer("1,000", "1000") and not same_answer("12.5", "12")
    assert same_answer("a  b \n\n  c", "a b\nc") and not same_answer("a b c", "a b\nc")
    assert not same_answer("Wife", "wife") and same_answer("Wife", "wife", fold_case=True)
    assert same_answer("-0.00136748", "-0.0013674811612376526", figures=3)
    assert not same_answer("-0.00137", "-0.0013674811612376526")
    assert arithmetic("(1 + 3) * (9 - 5) / 2") == (8, [1, 3, 9, 5, 2])
    for text in ("__import__('os').getcwd()", "2**5", "x + 1", "1 / 0", "3.5 * 2", "-3 + 27", ""):
        assert arithmetic(text) is None, text


def test_letter_case_counts_where_the_datasets_scorer_compares_it():
    """By hand: ``create_dataset("caesar_cipher", seed=0, size=50)[0]`` has answer "AND WITH THAT THE
    AUDIENCE WAS CLOSED"; ``score_answer`` compares it as written: the same words in lower case earn
    0.0. caesar_cipher is not in CASE_INSENSITIVE, so the judge agrees: no success."""
    dataset = rg.create_dataset("caesar_cipher", seed=0, size=50)
    entry = dataset[0]
    assert dataset.score_answer(entry["answer"].lower(), entry) == 0.0
    env = ReasoningGymEnv("caesar_cipher", size=50)
    reward, info = _step(env, 0, f"<answer>{entry['answer'].lower()}</answer>")
    assert (reward, info["success"]) == (0.0, False)
    reward, info = _step(env, 0, "reference")
    assert (reward, info["success"]) == (CORRECT, True)


def test_a_number_asked_to_three_significant_figures_is_judged_to_three():
    """By hand: ``create_dataset("power_function", seed=0, size=50)[1]`` has answer
    "-0.0013674811612376526" and asks for 3 significant figures; ``score_answer`` gives 1.0 to
    "-0.00137" and 0.01 to "-0.00136" (a different third figure; the same to two)."""
    dataset = rg.create_dataset("power_function", seed=0, size=50)
    entry = dataset[1]
    assert dataset.score_answer("-0.00137", entry) == CORRECT and dataset.score_answer("-0.00136", entry) == 0.01
    env = ReasoningGymEnv("power_function", size=50)
    reward, info = _step(env, 1, "<answer>-0.00137</answer>")
    assert (reward, info["success"]) == (CORRECT, True)
    reward, info = _step(env, 1, "<answer>-0.00136</answer>")
    assert reward == 0.01 and info["success"] is False


def test_a_longer_button_sequence_that_reaches_the_target_is_not_the_shortest():
    """By hand: ``create_dataset("quantum_lock", seed=0, size=50)[0]`` (start 0, red; A adds 2, B
    subtracts 2 when green, C doubles; target 28) has the 6-press answer "A → A → A → C → A → C".
    "A → A → A → A → C → B → C" also reaches 28 (the dataset's own ``simulate_sequence``) in 7
    presses; the question asks for the shortest, and ``score_answer`` gives it 0.5."""
    dataset = rg.create_dataset("quantum_lock", seed=0, size=50)
    entry = dataset[0]
    longer = "A → A → A → A → C → B → C"
    assert dataset.simulate_sequence(entry["metadata"], longer.split(" → ")) == entry["metadata"]["target_value"] == 28
    assert dataset.score_answer(longer, entry) == 0.5
    env = ReasoningGymEnv("quantum_lock", size=50)
    reward, info = _step(env, 0, f"<answer>{longer}</answer>")
    assert reward == 0.5 and info["success"] is False
    assert _step(env, 0, "reference")[1]["success"] is True


def test_playable_needs_an_answer_the_scorer_reads_and_two_outcomes():
    from envaudit.adapters.reasoning_gym import playable

    assert playable(0.375, 8) and playable(0.01, 2)
    assert not playable(0.0, 3)  # nothing scored above 0: the scorer read no catalogue answer
    assert not playable(1.0, 1)  # every answer the same outcome: nothing to tell apart


def test_any_antiderivative_succeeds_and_restating_the_integral_does_not():
    """By hand: ``create_dataset("intermediate_integration", seed=0, size=50)[0]`` asks for the
    integral of ``-2*exp(x)*sin(x)`` (reference "-exp(x)*sin(x) + exp(x)*cos(x) + C").
    ``score_answer`` (reasoning_gym/algebra/intermediate_integration.py) differentiates the answer
    with sympy: 1.0 for the reference with the constant 7, and 1.0 for "Integral(-2*exp(x)*sin(x),
    x)", which only restates the task (sympy's derivative of an unevaluated integral is its
    integrand)."""
    dataset = rg.create_dataset("intermediate_integration", seed=0, size=50)
    entry = dataset[0]
    other_constant, restated = "-exp(x)*sin(x) + exp(x)*cos(x) + 7", "Integral(-2*exp(x)*sin(x), x)"
    assert dataset.score_answer(other_constant, entry) == dataset.score_answer(restated, entry) == CORRECT
    env = ReasoningGymEnv("intermediate_integration", size=50)
    reward, info = _step(env, 0, f"<answer>{other_constant}</answer>")
    assert (reward, info["success"]) == (CORRECT, True)
    reward, info = _step(env, 0, f"<answer>{restated}</answer>")
    assert (reward, info["success"]) == (CORRECT, False)
    assert _step(env, 0, "<answer>exp(x)*cos(x)</answer>")[1]["success"] is False  # half of it
