"""reasoning-gym: the adapter's own parts, each against real shipped datasets (reasoning-gym 0.1.25).

The other reasoning-gym test files play strategies and scans; this one pins the mapping itself --
the options, the fingerprint, the step's info, the wrong answers and transplants a state offers,
the catalogue check's numbers and the judge on composite datasets -- so that a wrong key, an
off-by-one or a swapped argument fails a test. Every expected value was worked out by hand from
the dataset's entries (printed once and read) and from its ``score_answer`` source, as each test
says.
"""

from __future__ import annotations

import importlib.metadata
import json

import pytest

rg = pytest.importorskip("reasoning_gym")

from reasoning_gym.composite import DatasetSpec  # noqa: E402
from reasoning_gym.factory import DATASETS  # noqa: E402
from reasoning_gym.utils import SYSTEM_PROMPTS  # noqa: E402

from envaudit.adapters.reasoning_gym import (  # noqa: E402
    ENTRY_CACHE,
    LABELS,
    VERIFIERS,
    ReasoningGymEnv,
    check,
    judge,
    normalised,
    reference_of,
    same_answer,
    success_rule,
)
from envaudit.errors import UsageError  # noqa: E402

LEG_RULE = ("the entry's reference answer under a normalised exact match (whitespace, numbers by value); "
            "score_answer is the reward, not the judge")


# -- options ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("options", "message"), [
    ({"size": 0}, "--env-arg size=0: expected a positive integer number of entries"),
    ({"size": "5"}, "--env-arg size='5': expected a positive integer number of entries"),
    ({"dataset_seed": "x"}, "--env-arg dataset_seed='x': expected an integer"),
    ({"extract": "yes"}, "--env-arg extract='yes': expected true or false"),
])
def test_each_bad_option_is_named_with_what_it_expects(options, message):
    with pytest.raises(UsageError) as caught:
        ReasoningGymEnv("leg_counting", **options)
    assert str(caught.value) == message


def test_check_names_the_dataset_or_the_option_at_fault():
    assert check("leg_counting", size=1, dataset_seed=2) is None  # one entry is a dataset
    with pytest.raises(UsageError, match="did you mean 'leg_counting'"):
        check("leg_countin")
    with pytest.raises(UsageError) as caught:
        check("zzqqxxw")
    assert str(caught.value) == f"reasoning-gym has no dataset 'zzqqxxw' (it has {len(DATASETS)} datasets, e.g. leg_counting)"
    # leg_counting's config asserts max_animals >= min_animals: the dataset's own words, and the options.
    with pytest.raises(UsageError) as caught:
        check("leg_counting", min_animals=5, max_animals=2)
    assert str(caught.value) == ("reasoning-gym dataset 'leg_counting' rejected the options "
                                 "{'min_animals': 5, 'max_animals': 2}: max_animals must be >= min_animals")


# -- the fingerprint and the step -------------------------------------------------------------------
def test_the_fingerprint_says_which_entries_and_how_they_are_judged():
    env = ReasoningGymEnv("leg_counting", size=10, dataset_seed=3, extract=False, min_animals=4)
    info = {k: v for k, v in env.adapter_info.items() if k != "catalogue_check"}
    assert info == {
        "ecosystem": "reasoning-gym", "package": "reasoning-gym", "version": importlib.metadata.version("reasoning-gym"),
        "dataset": "leg_counting", "size": 10, "dataset_seed": 3, "config": {"min_animals": "4"},
        "answer_format": "raw text", "success": LEG_RULE,
        "reward": "the dataset's score_answer (info['score']), partial credit included",
        "replay": "the reset seed picks the entry (seed mod size); entries are generated from dataset_seed",
    }
    # The seed and the config reach the dataset: its entry 0 is that of the same call, and of no other.
    assert env.dataset[0] == rg.create_dataset("leg_counting", seed=3, size=10, min_animals=4)[0]
    assert env.dataset[0] != rg.create_dataset("leg_counting", seed=0, size=10, min_animals=4)[0]
    assert env.dataset[0] != rg.create_dataset("leg_counting", seed=3, size=10)[0]
    assert env.system_prompt == "" and env.max_steps == 1 and env.action_labels == LABELS
    assert (env.entry, env.index, env.relabelled) == ({}, 0, [])  # nothing played yet
    tagged = ReasoningGymEnv("leg_counting", size=10)
    assert tagged.system_prompt == SYSTEM_PROMPTS["default"]
    assert tagged.adapter_info["answer_format"] == "<answer>...</answer>"


def test_a_step_reports_the_answer_the_reference_and_the_entry():
    """By hand: ``create_dataset("leg_counting", seed=0, size=10)[3]`` totals 256 legs; the reset seed
    13 is entry 13 mod 10."""
    env = ReasoningGymEnv("leg_counting", size=10)
    obs, info = env.reset(seed=13)
    assert obs == env.entry["question"] == env.dataset[3]["question"]
    assert info == {"index": 3, "system_prompt": SYSTEM_PROMPTS["default"], "relabelled": []}
    texts = env.candidates()
    assert texts["unformatted"] == "256" and texts["echo_prompt"] == obs  # the bare answer; the prompt itself
    assert env.step(env.action_labels.index("reference")) == ("", 1.0, True, False, {
        "success": True, "score": 1.0, "full_marks": True, "answer": "256", "reference": "256", "index": 3,
        "relabelled": []})
    raw = ReasoningGymEnv("leg_counting", size=10, extract=False)
    raw.reset(seed=3)
    texts = raw.candidates()  # without tags the answer is the text, and "unformatted" is prose around it
    assert (texts["reference"], texts["unformatted"], texts["hedge_last"]) == ("256", "The answer is 256.", "257 255 256")
    assert raw.step("256 ")[4]["answer"] == "256 "


def test_a_seedless_reset_draws_the_entry_from_the_envs_own_generator():
    from gymnasium.utils import seeding

    env = ReasoningGymEnv("leg_counting", size=10)
    env.reset(seed=5)
    env.reset()  # the generator gymnasium seeded with 5 draws the index
    assert env.index == int(seeding.np_random(5)[0].integers(10))


def test_kept_entries_are_bounded_and_the_oldest_goes_first():
    env = ReasoningGymEnv("leg_counting", size=200)
    for seed in range(1, ENTRY_CACHE + 6):
        env.reset(seed=seed)  # each reset keeps its entry and the next three (the transplant's)
    kept = env._entries
    assert len(kept) == ENTRY_CACHE and 1 not in kept and ENTRY_CACHE + 8 in kept


# -- wrong answers and transplants --------------------------------------------------------------------
SET_ASIDE = "the scorer gives this wrong answer full marks"
KEPT = "kept: the scorer gave full marks to every wrong answer tried"


def test_a_scorer_that_pays_everything_is_shown_its_first_two_wrong_answers_and_the_rest_listed():
    """By hand: game_of_life_halting's ``score_answer`` is ``bool(answer) == bool(reference)`` on the
    strings "True"/"False", so every non-empty answer earns 1.0. Entries 1..5 of seed 0 answer
    False, False, False, False, True. Entry 1's wrong answers built from "False" are its reversal,
    its last letter changed, an "x" appended, then "False5".."False9" (padding): all eight paid in
    full, so the first two are kept; the next three entries all answer "False" too, so the
    transplant is the first wrong answer, said so."""
    env = ReasoningGymEnv("game_of_life_halting", size=50)
    _, info = env.reset(seed=1)
    pool = ["eslaF", "Falsx", "Falsex", *(f"False{i}" for i in range(5, 10))]
    assert info["relabelled"] == [
        *({"label": "wrong_1", "text": t, "success": False, "score": 1.0, "why": SET_ASIDE} for t in pool),
        {"label": "wrong_1", "text": "eslaF", "success": False, "score": 1.0, "why": KEPT},
        {"label": "wrong_2", "text": "Falsx", "success": False, "score": 1.0, "why": KEPT},
        {"label": "transplant", "text": "eslaF", "success": False,
         "why": "the next 3 entries' answers all answer this one: the first wrong answer stands in"},
    ]
    texts = env.candidates()
    assert (texts["wrong_1"], texts["wrong_2"], texts["transplant"]) == (
        "<answer>eslaF</answer>", "<answer>Falsx</answer>", "<answer>eslaF</answer>")
    # Entry 2: entries 3 and 4 answer False as it does, entry 5 True: the third one tried is the transplant.
    _, info = env.reset(seed=2)
    assert env.candidates()["transplant"] == "<answer>True</answer>"
    assert "transplant" not in {r["label"] for r in info["relabelled"]}
    # Two entries: the only other one is tried (True answers entry 1's False); one entry: none is.
    pair = ReasoningGymEnv("game_of_life_halting", size=2)
    pair.reset(seed=1)
    assert pair.candidates()["transplant"] == "<answer>True</answer>"
    alone = ReasoningGymEnv("leg_counting", size=1)
    alone.reset(seed=0)
    assert alone.candidates()["transplant"] == alone.candidates()["wrong_1"] == "<answer>501</answer>"
    assert [r["label"] for r in alone.relabelled] == ["transplant"]


def test_wrong_answers_the_judge_accepts_are_passed_over_in_order():
    """By hand: cryptarithm seed 0 entry 0 is "A=7,G=0,L=5,M=6,P=3,Q=4,S=9,U=1". Its first two
    shape-built wrong answers (the parts rotated, the parts reversed) are the same mapping, correct
    by reasoning-gym's verify_cryptarithm_solution; the next two (the text reversed, its last
    character changed) are not mappings that solve it."""
    env = ReasoningGymEnv("cryptarithm", size=50)
    _, info = env.reset(seed=0)
    why = "a correct answer by the judge, not a wrong one"
    assert info["relabelled"] == [
        {"label": "wrong_1", "text": "G=0, L=5, M=6, P=3, Q=4, S=9, U=1, A=7", "success": True, "why": why},
        {"label": "wrong_1", "text": "U=1, S=9, Q=4, P=3, M=6, L=5, G=0, A=7", "success": True, "why": why},
    ]
    texts = env.candidates()
    assert (texts["wrong_1"], texts["wrong_2"]) == ("<answer>1=U,9=S,4=Q,3=P,6=M,5=L,0=G,7=A</answer>",
                                                    "<answer>A=7,G=0,L=5,M=6,P=3,Q=4,S=9,U=x</answer>")


def test_when_every_candidate_answers_the_task_the_next_shapes_fill_the_wrong_slots(monkeypatch):
    """A judge that accepts everything leaves no wrong answer among the eight shapes of "256" (257,
    255, 513, -257, then "2566".."2569"): the slots take the ninth and tenth ("25610", "25611"), and
    with no other entry's answer left the transplant is the first of them."""
    env = ReasoningGymEnv("leg_counting", size=10)
    monkeypatch.setattr(env, "judge", lambda answer, entry: True)
    env.reset(seed=3)
    texts = env.candidates()
    assert (texts["wrong_1"], texts["wrong_2"], texts["transplant"]) == (
        "<answer>25610</answer>", "<answer>25611</answer>", "<answer>25610</answer>")
    assert [r["text"] for r in env.relabelled][:8] == ["257", "255", "513", "-257", "2566", "2567", "2568", "2569"]


# -- the catalogue check ----------------------------------------------------------------------------
def test_the_catalogue_check_counts_what_the_scorer_pays():
    """By hand, leg_counting seed 0 entries 0-2 (500, 292, 146 legs): its scorer gives 1.0 to the
    answer and ``len(reference) / len(answer)`` to an answer containing it. Per entry 6 of the 16
    strategies earn above 0 -- the reference, hedge_last (its last tag is the reference),
    reference_trailing (after the tags) in full; hedge_all "501 or 500 or 499" 3/17, junk_inside
    3/69 and candidates "501\\n500\\n499" 3/11 in part -- and entry 0's constant is its own answer:
    19 of 48. Outcomes: (1, success), (3/17, no), (3/69, no), (3/11, no), (0, no)."""
    env = ReasoningGymEnv("leg_counting", size=10)
    assert env.catalogue_check(entries=3) == {
        "entries": 3, "strategies": 16, "well_formed_share": 19 / 48, "distinct_outcomes": 5, "playable": True,
        "reference_full_marks_share": 1.0, "reference_success_share": 1.0, "full_marks_without_success": {},
        "relabelled": {"count": 0, "examples": []}, "scorer_errors": {"count": 0, "examples": []},
    }
    empty = env.catalogue_check(entries=0)
    assert (empty["well_formed_share"], empty["reference_full_marks_share"], empty["reference_success_share"],
            empty["playable"]) == (0.0, 0.0, 0.0, False)


def test_the_catalogue_check_lists_full_marks_without_success_per_strategy_and_entry():
    """By hand, game_of_life_halting entries 0 ("True") and 1 ("False"): every answer with tags earns
    1.0; unformatted, empty and echo_prompt carry none and earn 0 (6 of 32 rows). The constant is
    entry 0's "True": its own answer there, a paid wrong one on entry 1 (1 of 2). Entry 0 sets aside
    10 wrong answers, entry 1 those 10 and its transplant."""
    check_ = ReasoningGymEnv("game_of_life_halting", size=50).catalogue_check(entries=2)
    assert check_["full_marks_without_success"] == {
        label: 1.0 for label in ("wrong_1", "wrong_2", "hedge_all", "partial", "transplant", "prefix", "truncated",
                                 "junk_inside", "candidates")} | {"constant": 0.5}
    assert (check_["well_formed_share"], check_["distinct_outcomes"]) == (26 / 32, 3)
    assert check_["relabelled"]["count"] == 21
    assert check_["relabelled"]["examples"][0] == {"label": "wrong_1", "text": "eurT", "success": False,
                                                   "score": 1.0, "why": SET_ASIDE, "index": 0}
    assert check_["relabelled"]["examples"][1]["text"] == "Trux"


def test_the_catalogue_check_names_the_scorers_crash():
    """By hand: boxnet's entries carry no answer, so the constant is "0", on which boxnet's
    ``score_answer`` raises TypeError (it iterates over the parsed JSON)."""
    check_ = ReasoningGymEnv("boxnet", size=50).catalogue_check(entries=1)
    [crash] = check_["scorer_errors"]["examples"]
    assert check_["scorer_errors"]["count"] == 1
    assert {k: crash[k] for k in ("label", "index", "error")} == {
        "label": "constant", "index": 0, "error": "TypeError: 'int' object is not iterable"}
    assert crash["where"].startswith("reasoning_gym/games/boxnet.py:")


# -- the judge ----------------------------------------------------------------------------------------
def test_a_composite_datasets_entries_are_judged_by_their_source():
    """By hand: a composite of quantum_lock and leg_counting (seed 0, 10 entries) has entry 1 from
    quantum_lock, "B → B → B → B": reasoning-gym's simulate_sequence of the quantum_lock dataset
    itself (not the composite, which has none) reaches the target with it."""
    specs = [DatasetSpec(name="quantum_lock", weight=1, config={}), DatasetSpec(name="leg_counting", weight=1, config={})]
    env = ReasoningGymEnv("composite", size=10, datasets=specs)
    env.reset(seed=1)
    assert env.entry["metadata"]["source_dataset"] == "quantum_lock"
    assert env.step(env.action_labels.index("reference"))[4]["success"] is True
    assert env.adapter_info["success"] == (
        f"per entry, its source dataset's rule: quantum_lock: {VERIFIERS['quantum_lock'][0]}; leg_counting: {LEG_RULE}")
    env.reset(seed=0)  # a leg_counting entry: its reference
    assert env.entry["metadata"]["source_dataset"] == "leg_counting"
    assert env.step(env.action_labels.index("reference"))[4]["success"] is True


def test_a_composite_entry_keeps_its_sources_letter_case_rule():
    """By hand: a composite of family_relationships and leg_counting (seed 0, 10 entries) has entry
    1 from family_relationships, answer "son"; that dataset's scorer compares case-folded, and so
    does the judge for its entries, though the env's own dataset is "composite"."""
    specs = [DatasetSpec(name="family_relationships", weight=1, config={}),
             DatasetSpec(name="leg_counting", weight=1, config={})]
    env = ReasoningGymEnv("composite", size=10, datasets=specs)
    env.reset(seed=1)
    assert env.entry["answer"] == "son"
    assert env.step("<answer>SON</answer>")[4]["success"] is True


def test_an_entry_without_a_reference_is_offered_the_word_none():
    # boxnet stores no answer: the catalogue's reference slot holds "None", its wrong answers that reversed.
    env = ReasoningGymEnv("boxnet", size=5)
    env.reset(seed=0)
    assert (env.candidates()["reference"], env.candidates()["wrong_1"]) == ("<answer>None</answer>", "<answer>enoN</answer>")


def test_an_entry_without_a_source_is_judged_by_the_envs_dataset():
    # family_relationships compares case-folded: the env's own name decides when the entry names none.
    assert judge("wife", {"answer": "WIFE", "metadata": {}}, "family_relationships", None) is True
    assert judge("wife", {"answer": "WIFE", "metadata": {}}, "leg_counting", None) is False
    assert judge(None, {"answer": "5"}, "leg_counting", None) is False  # no answer extracted
    assert judge("5", {"answer": None, "metadata": {}}, "boxnet", None) is None  # nothing to judge by


def test_a_graph_colourings_reference_is_its_possible_answer():
    """By hand: graph_color seed 0 entry 0 has ``answer`` None and possible_answer {0: 1, ..., 7: 2,
    8: 1, 9: 2} (int keys; JSON answers have string keys)."""
    entry = rg.create_dataset("graph_color", seed=0, size=5)[0]
    ref = reference_of(entry, "graph_color")
    assert json.loads(ref) == {str(k): v for k, v in entry["metadata"]["possible_answer"].items()}
    assert ref == json.dumps({str(k): v for k, v in entry["metadata"]["possible_answer"].items()})
    bare = {"answer": None, "metadata": {"possible_answer": entry["metadata"]["possible_answer"]}}
    assert reference_of(bare, "graph_color") == ref and reference_of(bare, "boxnet") is None
    assert judge(ref, entry, "graph_color", None) is True


def test_answers_a_verifier_cannot_read_do_not_do_the_task():
    """By hand: cryptarithm seed 0 entry 0 (above); simple_integration seed 0 entry 0 integrates
    -45*X**8 - 4*X**5 + 12*X**2, answer -5*X**9 - 2*X**6/3 + 4*X**3 + C."""
    crypt = rg.create_dataset("cryptarithm", seed=0, size=5)
    verify = VERIFIERS["cryptarithm"][1]
    assert verify("A=x", crypt[0], crypt) is False and verify("A7", crypt[0], crypt) is False
    assert judge("garbage", crypt[0], "cryptarithm", crypt) is False
    integral = rg.create_dataset("simple_integration", seed=0, size=5)
    entry = integral[0]
    assert judge("-5*X**9 - 2*X**6/3 + 4*X**3 + C", entry, "simple_integration", integral) is True
    assert judge("-5*X**9 - 2*X**6/3 + 4*X**3 + 7", entry, "simple_integration", integral) is True
    assert judge("-5*X**9 + 4*X**3 + C", entry, "simple_integration", integral) is False


def test_same_answer_edges():
    assert normalised("A  B") == "A B" and normalised("A  B", fold_case=True) == "a b"
    assert same_answer("wife", "WIFE", fold_case=True) and same_answer("WIFE", "wife", fold_case=True)
    assert not same_answer("abc", "12", figures=3) and not same_answer("12", "abc", figures=3)
    assert not same_answer("inf", "Infinity")  # not numbers that can be compared by value


def test_success_rules_in_words():
    assert success_rule("leg_counting") == LEG_RULE
    assert success_rule("family_relationships") == (
        "the entry's reference answer under a normalised exact match (whitespace, numbers by value, letter case "
        "ignored as the dataset's scorer does); score_answer is the reward, not the judge")
    assert success_rule("power_function") == (
        "the entry's reference answer under a normalised exact match (whitespace, numbers by value to the 3 "
        "significant figures the question asks for); score_answer is the reward, not the judge")
    assert success_rule("puzzle24") == VERIFIERS["puzzle24"][0]
