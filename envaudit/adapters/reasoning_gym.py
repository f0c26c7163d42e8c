"""reasoning-gym adapter: ``envaudit scan reasoning-gym:DATASET``.

A reasoning-gym dataset is procedural: ``create_dataset(name, seed=, size=)[i]`` is an entry with
``question``, ``answer`` and ``metadata``, and ``score_answer(answer, entry)`` grades an answer in
[0, 1]. Each episode is one entry (the reset seed picks the index, so a seed replays its entry)
and one turn: the action is the model's completion, the answer is what the completion carries in
``<answer>...</answer>`` tags (reasoning-gym's own ``extract_answer`` and system prompt; pass
``--env-arg extract=false`` to grade the raw text), and the reward is the dataset's score, partial
credit included (``info["score"]``).

Success is not the score: ``score_answer`` is the grader under audit, and a grader that gives full
marks to a prefix of the answer, or to any expression that makes 24 whatever the puzzle's numbers,
would turn its own hole into a "success". ``info["success"]`` is judged apart from it
(``judge``): by a verifier of the task's own inputs where the dataset's answers are many
(``VERIFIERS``: a cryptarithm's letter mapping, a graph colouring, a jug plan, an arithmetic
expression over the puzzle's numbers, a queen placement among the entry's valid ones, an
antiderivative whose derivative is the integrand and that is no unevaluated ``Integral``), else by the
entry's reference answer under a normalised exact match: surrounding and repeated whitespace,
numbers by value (``12.0`` is ``12``), and letter case where the dataset's own scorer ignores it
(``CASE_INSENSITIVE``). Entries without any answer and datasets without a verifier have no
success flag (None). Full marks with success false are what the probes then see as reward
without success.

The catalogue is the answer strategies plus the grader attacks (``catalogue.GRADER_LABELS``): a
transplant (the next entries' reference that is not an answer here), a constant answer (entry 0's
reference, the same text in every state), prefixes and truncations, junk inside the answer tags,
several candidates in one answer. The wrong answers are checked against the scorer before they are
labelled wrong: a candidate the judge accepts, or that the scorer gives full marks, is set aside
for the next one (an answer built to be wrong can be right, or a grader can take it), and each
such relabelling is listed in the state's ``info["relabelled"]``. ``adapter_info["catalogue_check"]``
plays the whole catalogue on the first ``CHECK_ENTRIES`` entries once, when first read (the report's
fingerprint reads it; envs made on workers never pay for it): how often each strategy earns full
marks without success, the relabellings, the scorer's exceptions, and whether the env is playable
(some catalogue answer scores above zero, and at least two outcomes occur).

Options: ``size`` (entries, default 500), ``dataset_seed`` (default 0), ``extract`` (default true);
any other option is passed to the dataset's config.
"""

from __future__ import annotations

import ast
import copy
import difflib
import json
import operator
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from envaudit.adapters import package_version, require
from envaudit.adapters.base import CatalogueEnv
from envaudit.adapters.catalogue import (
    ANSWER_LABELS,
    GRADER_LABELS,
    REFERENCE,
    WRONG,
    Strategy,
    answer_strategies,
    grader_strategies,
    raised_at,
    wrong_answers,
)
from envaudit.errors import UsageError

EXTRA = "reasoning-gym"
DEFAULT_SIZE = 500
CORRECT = 1.0
"""reasoning-gym's full marks."""
LABELS = ANSWER_LABELS + GRADER_LABELS
WRONG_POOL = 8
"""Wrong candidates tried per state before the wrong slots give up on finding one the scorer rejects."""
TRANSPLANT_TRIES = 3
"""Entries after this one whose reference is tried as the transplant."""
CHECK_ENTRIES = 8
"""Entries on which ``adapter_info["catalogue_check"]`` plays the whole catalogue."""
EXAMPLES = 3
ENTRY_CACHE = 64

CASE_INSENSITIVE = frozenset({
    "color_cube_rotation", "dice", "family_relationships", "figlet_font", "letter_jumble", "needle_haystack",
    "spell_backward", "tsumego", "zebra_puzzles",
})
"""Datasets whose own ``score_answer`` compares the whole answer case-folded (read in reasoning-gym
0.1.25's source: ``.lower()`` or ``.upper()`` on both sides of the full-marks comparison)."""


def _rg() -> Any:
    return require("reasoning_gym", package="reasoning-gym", extra=EXTRA)


# -- success, judged apart from the scorer under audit ----------------------------------------------
def normalised(text: str, *, fold_case: bool = False) -> str:
    """``text`` with surrounding and repeated whitespace gone (line breaks kept, blank lines
    dropped), case-folded when ``fold_case``."""
    lines = (" ".join(line.split()) for line in str(text).strip().splitlines())
    out = "\n".join(line for line in lines if line)
    return out.casefold() if fold_case else out


def _decimal(text: str) -> Decimal | None:
    try:
        value = Decimal(text.replace(",", ""))
    except (InvalidOperation, ValueError):
        return None
    return value if value.is_finite() else None


def same_answer(answer: str, reference: str, *, fold_case: bool = False, figures: int | None = None) -> bool:
    """Exact match after ``normalised``; two numbers match by value (to ``figures`` significant
    figures where the task asks for no more)."""
    a, r = normalised(answer, fold_case=fold_case), normalised(reference, fold_case=fold_case)
    if a == r:
        return True
    va, vr = _decimal(a), _decimal(r)
    if va is None or vr is None:
        return False
    if figures is not None:
        return f"{va:.{figures - 1}e}" == f"{vr:.{figures - 1}e}"
    return va == vr


_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def arithmetic(text: str) -> tuple[Fraction, list[int]] | None:
    """The exact value of an expression of integers, ``+ - * /`` and brackets, and the integers it
    uses; None for anything else (names, calls, powers, a division by zero)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None
    used: list[int] = []

    def value(node: ast.AST) -> Fraction:
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.Constant) and type(node.value) is int:
            used.append(node.value)
            return Fraction(node.value)
        raise ValueError(f"not an arithmetic expression of integers: {ast.dump(node)}")

    try:
        return value(tree.body), used
    except (ValueError, ZeroDivisionError):
        return None


Verifier = Callable[[str, Mapping[str, Any], Any], bool]
"""``(answer, entry, dataset) -> correct?``; ``dataset`` is the entry's own ProceduralDataset."""


def _makes(numbers: list[int], target: int, answer: str) -> bool:
    found = arithmetic(answer)
    return found is not None and found[0] == target and sorted(found[1]) == sorted(int(n) for n in numbers)


def _puzzle24(answer: str, entry: Mapping[str, Any], dataset: Any) -> bool:
    return _makes(entry["metadata"]["numbers"], 24, answer)


def _countdown(answer: str, entry: Mapping[str, Any], dataset: Any) -> bool:
    return _makes(entry["metadata"]["numbers"], int(entry["metadata"]["target"]), answer)


def _cryptarithm(answer: str, entry: Mapping[str, Any], dataset: Any) -> bool:
    from reasoning_gym.algorithmic.cryptarithm import verify_cryptarithm_solution

    mapping: dict[str, int] = {}
    for pair in answer.split(","):
        letter, sep, digit = pair.partition("=")
        if not sep or not digit.strip().isdigit():
            return False
        mapping[letter.strip()] = int(digit)
    meta = entry["metadata"]
    return bool(verify_cryptarithm_solution(mapping, meta["words_letters"], meta["result_letters"],
                                            meta.get("allow_leading_zero", False))[0])


def _graph_color(answer: str, entry: Mapping[str, Any], dataset: Any) -> bool:
    from reasoning_gym.algorithmic.graph_color import verify_graph_coloring_solution

    coloring = json.loads(answer)
    return isinstance(coloring, dict) and bool(verify_graph_coloring_solution(entry["metadata"]["puzzle"], coloring)[0])


def _jugs(answer: str, entry: Mapping[str, Any], dataset: Any) -> bool:
    from reasoning_gym.algorithmic.jugs import verify_solution

    moves = json.loads(answer)
    return isinstance(moves, list) and bool(verify_solution(entry["metadata"]["puzzle"], moves)[0])


def _n_queens(answer: str, entry: Mapping[str, Any], dataset: Any) -> bool:
    return any(same_answer(answer, valid) for valid in entry["metadata"]["valid_answers"])


_BUTTONS = re.compile(r"[A-C](?:\s*(?:→|->|,)?\s*[A-C])*")


def _quantum_lock(answer: str, entry: Mapping[str, Any], dataset: Any) -> bool:
    # A sequence of buttons and nothing else; it opens the lock when the dataset's own simulation
    # reaches the target in no more presses than the stored shortest sequence.
    text = answer.strip().upper()
    if not _BUTTONS.fullmatch(text):
        return False
    presses = re.findall(r"[A-C]", text)
    shortest = re.findall(r"[A-C]", str(entry["answer"]).upper())
    meta = entry["metadata"]
    return len(presses) <= len(shortest) and dataset.simulate_sequence(meta, presses) == meta["target_value"]


def _antiderivative(answer: str, entry: Mapping[str, Any], dataset: Any) -> bool:
    # Any antiderivative is an answer (the constant is free), so the reference cannot judge it; an
    # unevaluated Integral(...) restates the task and its derivative is the integrand by definition.
    import sympy

    var = sympy.Symbol(entry["metadata"]["variable"])
    expr = sympy.parse_expr(answer, local_dict={var.name: var, "C": sympy.Symbol("C")})
    if expr.has(sympy.Integral):
        return False
    integrand = sympy.parse_expr(entry["metadata"]["integrand"], local_dict={var.name: var})
    return sympy.simplify(sympy.diff(expr, var) - integrand) == 0


VERIFIERS: dict[str, tuple[str, Verifier]] = {
    "countdown": ("an expression that uses all of the entry's numbers once and makes its target", _countdown),
    "cryptarithm": ("reasoning-gym's verify_cryptarithm_solution on the letter mapping", _cryptarithm),
    "graph_color": ("reasoning-gym's verify_graph_coloring_solution on the colouring", _graph_color),
    "intermediate_integration": ("an antiderivative: its derivative is the integrand (sympy), no unevaluated "
                                 "Integral", _antiderivative),
    "jugs": ("reasoning-gym's jugs verify_solution on the moves", _jugs),
    "n_queens": ("one of the entry's valid_answers, normalised", _n_queens),
    "puzzle24": ("an expression that uses the entry's four numbers once each and makes 24", _puzzle24),
    "simple_integration": ("an antiderivative: its derivative is the integrand (sympy), no unevaluated Integral",
                           _antiderivative),
    "quantum_lock": ("a button sequence that reaches the target (reasoning-gym's simulate_sequence) in no "
                     "more presses than the stored one", _quantum_lock),
}
"""Datasets whose entries have many correct answers, and the check of one against the entry's own
inputs (never ``score_answer``)."""

SIGNIFICANT_FIGURES = {"power_function": 3}
"""Datasets whose question asks for a number to so many significant figures."""


def source_of(entry: Mapping[str, Any], dataset: str) -> str:
    """The dataset an entry comes from (a composite dataset's entries name theirs)."""
    meta = entry.get("metadata") or {}
    return str(meta.get("source_dataset") or dataset)


def reference_of(entry: Mapping[str, Any], dataset: str) -> str | None:
    """The entry's reference answer; a graph colouring's ``possible_answer`` (its ``answer`` is
    None); None for the other entries that carry none (many valid answers, none stored)."""
    if entry.get("answer") is not None:
        return str(entry["answer"])
    meta = entry.get("metadata") or {}
    if source_of(entry, dataset) == "graph_color" and isinstance(meta.get("possible_answer"), dict):
        return json.dumps({str(k): v for k, v in meta["possible_answer"].items()})
    return None


def judge(answer: str | None, entry: Mapping[str, Any], name: str, dataset: Any) -> bool | None:
    """Whether ``answer`` does the entry's task, judged without ``score_answer``: the dataset's
    verifier, else the reference under ``same_answer``; None when neither exists. ``name`` and
    ``dataset`` are the env's dataset (a composite one hands each entry to its source's)."""
    source = source_of(entry, name)
    reference = reference_of(entry, name)
    if source not in VERIFIERS and reference is None:
        return None
    if answer is None:
        return False
    if source in VERIFIERS:
        own = getattr(dataset, "datasets", {}).get(source, dataset) if source != name else dataset
        try:
            return bool(VERIFIERS[source][1](answer, entry, own))
        except Exception:  # an answer the verifier cannot even read does not do the task
            return False
    return same_answer(answer, reference, fold_case=source in CASE_INSENSITIVE,
                       figures=SIGNIFICANT_FIGURES.get(source))


def success_rule(dataset: str, sources: tuple[str, ...] = ()) -> str:
    """How ``judge`` decides for ``dataset``, in words (for the report's fingerprint). A composite
    dataset's entries are judged by their source's rule: ``sources`` names them."""
    if sources:
        return "per entry, its source dataset's rule: " + "; ".join(f"{s}: {success_rule(s)}" for s in sources)
    if dataset in VERIFIERS:
        return VERIFIERS[dataset][0]
    case = ", letter case ignored as the dataset's scorer does" if dataset in CASE_INSENSITIVE else ""
    figures = (f" to the {SIGNIFICANT_FIGURES[dataset]} significant figures the question asks for"
               if dataset in SIGNIFICANT_FIGURES else "")
    return ("the entry's reference answer under a normalised exact match (whitespace, numbers by value"
            f"{figures}{case}); score_answer is the reward, not the judge")


def playable(well_formed_share: float, distinct_outcomes: int) -> bool:
    """Whether exploration can play an env through its catalogue: the scorer reads some catalogue
    answer as an answer (a share above 0 scores above 0), and at least two outcomes (score,
    success) occur, so that something can be told apart."""
    return well_formed_share > 0 and distinct_outcomes >= 2




# -- options --------------------------------------------------------------------------------------
def _split(options: Mapping[str, Any]) -> tuple[int, int, bool, dict[str, Any]]:
    opts = dict(options)
    size = opts.pop("size", DEFAULT_SIZE)
    seed = opts.pop("dataset_seed", 0)
    extract = opts.pop("extract", True)
    if not isinstance(size, int) or size < 1:
        raise UsageError(f"--env-arg size={size!r}: expected a positive integer number of entries")
    if not isinstance(seed, int):
        raise UsageError(f"--env-arg dataset_seed={seed!r}: expected an integer")
    if not isinstance(extract, bool):
        raise UsageError(f"--env-arg extract={extract!r}: expected true or false")
    return size, seed, extract, opts


def check(name: str, **options: Any) -> None:
    rg = _rg()
    from reasoning_gym.factory import DATASETS

    if name not in DATASETS:
        close = difflib.get_close_matches(name, sorted(DATASETS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f" (it has {len(DATASETS)} datasets, e.g. leg_counting)"
        raise UsageError(f"reasoning-gym has no dataset {name!r}{hint}")
    size, seed, _, config = _split(options)
    try:
        rg.create_dataset(name, seed=seed, size=size, **config)
    except (TypeError, ValueError, AssertionError) as exc:
        raise UsageError(f"reasoning-gym dataset {name!r} rejected the options {config}: {exc}") from exc


def make(name: str, **options: Any) -> ReasoningGymEnv:
    return ReasoningGymEnv(name, **options)


class ReasoningGymEnv(CatalogueEnv):
    """One reasoning-gym entry per episode, answered in one turn."""

    ecosystem = "reasoning-gym"

    def __init__(self, dataset: str, **options: Any) -> None:
        rg = _rg()
        from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer

        size, seed, self.extract, config = _split(options)
        self.dataset_name = dataset
        self.dataset = rg.create_dataset(dataset, seed=seed, size=size, **config)
        self.system_prompt = SYSTEM_PROMPTS["default"] if self.extract else ""
        self._extract_answer = extract_answer
        self._entries: dict[int, dict[str, Any]] = {}
        # Entry 0 is made once here: its reference is the constant answer of every state, and
        # whether it has one says whether the env has an oracle.
        self._first = self.dataset[0]
        super().__init__(LABELS, max_steps=1)
        self._info.update({
            "package": "reasoning-gym", "version": package_version("reasoning-gym"),
            "dataset": dataset, "size": size, "dataset_seed": seed, "config": {k: repr(v) for k, v in config.items()},
            "answer_format": "<answer>...</answer>" if self.extract else "raw text",
            "success": success_rule(dataset, tuple(getattr(self.dataset, "datasets", {}))),
            "reward": "the dataset's score_answer (info['score']), partial credit included",
            "replay": "the reset seed picks the entry (seed mod size); entries are generated from dataset_seed",
        })
        self.entry: dict[str, Any] = {}
        self.index = 0
        self.relabelled: list[dict[str, Any]] = []

    measured_check = "catalogue_check"

    def measure_check(self) -> dict[str, Any]:
        return self.catalogue_check()

    @property
    def has_reference(self) -> bool:
        """An oracle exists when the entries carry a reference answer (entry 0 stands for all)."""
        return reference_of(self._first, self.dataset_name) is not None

    def _entry(self, index: int) -> dict[str, Any]:
        # A GRPO group resets one entry G times, and the transplant needs the next entry: both
        # are kept, since making an entry can take most of a second (puzzle24 solves its puzzle).
        if index == 0:
            return self._first
        if index not in self._entries:
            if len(self._entries) >= ENTRY_CACHE:
                self._entries.pop(next(iter(self._entries)))
            self._entries[index] = self.dataset[index]
        return self._entries[index]

    def _constant(self) -> str:
        """The constant answer: entry 0's reference, the same text in every state."""
        return reference_of(self._first, self.dataset_name) or "0"

    def judge(self, answer: str | None, entry: Mapping[str, Any]) -> bool | None:
        """``judge`` for this env's dataset: ``info["success"]``."""
        return judge(answer, entry, self.dataset_name, self.dataset)

    def _fmt(self, answer: str) -> str:
        return f"<answer>{answer}</answer>" if self.extract else answer

    def _answer(self, text: str) -> str | None:
        return self._extract_answer(text) if self.extract else text

    def _score(self, answer: str | None, entry: dict[str, Any]) -> float:
        return float(self.dataset.score_answer(answer, entry))

    # -- the state's catalogue ----------------------------------------------------------------
    def _reset(self, seed: int | None, options: Mapping[str, Any] | None):
        size = len(self.dataset)
        self.index = seed % size if seed is not None else int(self.np_random.integers(size))
        # A copy: some scorers write into the entry they grade (knight_swap keeps its board states),
        # and a kept entry must start every episode as the dataset made it.
        self.entry = copy.deepcopy(self._entry(self.index))
        self._catalogue, self.relabelled = self.catalogue_for(self.index, self.entry)
        return str(self.entry["question"]), {"index": self.index, "system_prompt": self.system_prompt,
                                             "relabelled": self.relabelled}

    def _strategies(self) -> list[Strategy]:
        return self._catalogue

    def catalogue_for(self, index: int, entry: dict[str, Any]) -> tuple[list[Strategy], list[dict[str, Any]]]:
        """The catalogue of entry ``index`` and the candidates set aside on the way (relabelled)."""
        reference = reference_of(entry, self.dataset_name)
        ref = reference if reference is not None else "None"
        relabelled: list[dict[str, Any]] = []
        others = self._other_answers(index, entry)
        wrong = self._wrong_answers(ref, entry, others[1:], relabelled)
        transplant = others[0] if others else wrong[0]
        if not others:
            relabelled.append({"label": "transplant", "text": wrong[0], "success": False,
                               "why": f"the next {TRANSPLANT_TRIES} entries' answers all answer this one: "
                                      "the first wrong answer stands in"})
        constant = self._constant()
        question = str(entry["question"])
        strategies = answer_strategies(ref, question, fmt=self._fmt, unformatted=(lambda a: a) if self.extract else None,
                                       wrong=wrong)
        strategies += grader_strategies(ref, fmt=self._fmt, transplant=transplant, constant=constant, wrong=wrong)
        return strategies, relabelled

    def _wrong_answers(self, ref: str, entry: dict[str, Any], others: list[str],
                       relabelled: list[dict[str, Any]]) -> list[str]:
        """Two wrong answers the judge rejects and the scorer does not give full marks: first the
        ones built from the reference's shape (``wrong_answers``), then other entries' answers
        (``others``). Candidates the judge accepts are correct answers; candidates the scorer pays
        in full are set aside too (each recorded in ``relabelled``), unless no other is left: then
        the first of them stays, so that a scorer that pays every answer is still seen paying a
        wrong one."""
        chosen: list[str] = []
        full_marks: list[str] = []
        pool = wrong_answers(ref, WRONG_POOL)
        for candidate in pool + [o for o in others if o not in pool]:
            if len(chosen) == len(WRONG):
                break
            slot = WRONG[len(chosen)]
            answer = self._answer(self._fmt(candidate))
            if self.judge(answer, entry):
                relabelled.append({"label": slot, "text": candidate, "success": True,
                                   "why": "a correct answer by the judge, not a wrong one"})
                continue
            try:
                score = self._score(answer, entry)
            except Exception:  # the scorer's own crash stays in the catalogue: stepping it is an env-error
                score = None
            if score == CORRECT:
                relabelled.append({"label": slot, "text": candidate, "success": False, "score": score,
                                   "why": "the scorer gives this wrong answer full marks"})
                full_marks.append(candidate)
                continue
            chosen.append(candidate)
        while len(chosen) < len(WRONG) and full_marks:
            kept = full_marks.pop(0)
            chosen.append(kept)
            relabelled.append({"label": WRONG[len(chosen) - 1], "text": kept, "success": False, "score": CORRECT,
                               "why": "kept: the scorer gave full marks to every wrong answer tried"})
        for pad in wrong_answers(ref, WRONG_POOL + len(WRONG))[WRONG_POOL:]:  # all tried were correct
            if len(chosen) < len(WRONG):
                chosen.append(pad)
        return chosen

    def _other_answers(self, index: int, entry: dict[str, Any]) -> list[str]:
        """The references of the next ``TRANSPLANT_TRIES`` entries that are not answers to this
        one, in order, without repeats: the first is the transplant."""
        size = len(self.dataset)
        found: list[str] = []
        for step in range(1, min(TRANSPLANT_TRIES, size - 1) + 1):
            other = reference_of(self._entry((index + step) % size), self.dataset_name)
            if (other is not None and other not in found
                    and not self.judge(self._answer(self._fmt(other)), entry)):
                found.append(other)
        return found

    # -- the step -----------------------------------------------------------------------------
    def _step_text(self, text: str):
        answer = self._answer(text)
        score = self._score(answer, self.entry)
        reference = reference_of(self.entry, self.dataset_name)
        info = {"success": self.judge(answer, self.entry), "score": score,
                "full_marks": score == CORRECT, "answer": answer, "reference": reference,
                "index": self.index, "relabelled": self.relabelled}
        return "", score, True, False, info

    # -- the playability and grader check, for the fingerprint ----------------------------------
    def catalogue_check(self, entries: int = CHECK_ENTRIES) -> dict[str, Any]:
        """Every catalogue strategy scored on the first ``entries`` entries: the share the scorer
        reads as an answer at all (scores above 0), the distinct outcomes (score, success), whether
        the env is playable (some answer above 0 and two outcomes at least), and per strategy how
        often it earns full marks without success; the relabellings and the scorer's exceptions."""
        n = min(entries, len(self.dataset))
        rows: list[tuple[str, float | None, bool | None]] = []
        relabelled: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for i in range(n):
            entry = copy.deepcopy(self._entry(i))
            strategies, moved = self.catalogue_for(i, entry)
            relabelled += [{**r, "index": i} for r in moved]
            for s in strategies:
                answer = self._answer(s.text)
                try:
                    score: float | None = self._score(answer, entry)
                except Exception as exc:
                    score = None
                    errors.append({"label": s.label, "index": i, "error": f"{type(exc).__name__}: {exc}",
                                   "where": raised_at(exc, "reasoning_gym")})
                rows.append((s.label, score, self.judge(answer, entry)))
        scored = [(label, score, ok) for label, score, ok in rows if score is not None]
        outcomes = {(round(score, 6), ok) for _, score, ok in scored}
        well_formed = sum(score > 0 for _, score, _ in scored) / len(rows) if rows else 0.0
        unearned = {}
        for label in self.action_labels:
            mine = [(score, ok) for lab, score, ok in scored if lab == label]
            hits = sum(score == CORRECT and ok is False for score, ok in mine)
            if hits:
                unearned[label] = hits / n
        reference = [(score, ok) for lab, score, ok in rows if lab == REFERENCE]
        return {
            "entries": n, "strategies": len(self.action_labels),
            "well_formed_share": well_formed,
            "distinct_outcomes": len(outcomes),
            "playable": playable(well_formed, len(outcomes)),
            "reference_full_marks_share": sum(score == CORRECT for score, _ in reference) / n if n else 0.0,
            "reference_success_share": sum(ok is True for _, ok in reference) / n if n else 0.0,
            "full_marks_without_success": unearned,
            "relabelled": {"count": len(relabelled), "examples": relabelled[:EXAMPLES]},
            "scorer_errors": {"count": len(errors), "examples": errors[:EXAMPLES]},
        }
