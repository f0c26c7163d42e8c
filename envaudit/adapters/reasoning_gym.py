"""reasoning-gym adapter: ``envaudit scan reasoning-gym:DATASET``.

A reasoning-gym dataset is procedural: ``create_dataset(name, seed=, size=)[i]`` is an entry with
``question``, ``answer`` and ``metadata``, and ``score_answer(answer, entry)`` grades an answer in
[0, 1]. Each episode is one entry (the reset seed picks the index, so a seed replays its entry)
and one turn: the action is the model's completion, the answer is what the completion carries in
``<answer>...</answer>`` tags (reasoning-gym's own ``extract_answer`` and system prompt; pass
``--env-arg extract=false`` to grade the raw text), and the reward is the dataset's score, partial
credit included.

Success is reasoning-gym's correctness verdict: the dataset's scorer gives exactly 1.0 only to a
correct answer (alternative correct answers included, where a dataset accepts several) and less
to anything partially right or wrong. It is not "the reward reached its maximum": the reward is
the score, and a hedged answer that earns 0.4 is a failure with reward 0.4, which is what the
probes need to see. Options: ``size`` (entries, default 500), ``dataset_seed`` (default 0),
``extract`` (default true); any other option is passed to the dataset's config.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from envaudit.adapters import package_version, require
from envaudit.adapters.base import CatalogueEnv
from envaudit.adapters.catalogue import ANSWER_LABELS, Strategy, answer_strategies
from envaudit.errors import UsageError

EXTRA = "reasoning-gym"
DEFAULT_SIZE = 500
CORRECT = 1.0
"""reasoning-gym's score of a correct answer; every dataset's scorer returns it only then."""


def _rg() -> Any:
    return require("reasoning_gym", package="reasoning-gym", extra=EXTRA)


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
    has_reference = True

    def __init__(self, dataset: str, **options: Any) -> None:
        rg = _rg()
        from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer

        size, seed, self.extract, config = _split(options)
        self.dataset_name = dataset
        self.dataset = rg.create_dataset(dataset, seed=seed, size=size, **config)
        self.system_prompt = SYSTEM_PROMPTS["default"] if self.extract else ""
        self._extract_answer = extract_answer
        super().__init__(ANSWER_LABELS, max_steps=1)
        self.adapter_info.update({
            "package": "reasoning-gym", "version": package_version("reasoning-gym"),
            "dataset": dataset, "size": size, "dataset_seed": seed, "config": {k: repr(v) for k, v in config.items()},
            "answer_format": "<answer>...</answer>" if self.extract else "raw text",
            "success": "the dataset's score_answer is exactly 1.0 (reasoning-gym's correct answer)",
            "replay": "the reset seed picks the entry (seed mod size); entries are generated from dataset_seed",
        })
        self.entry: dict[str, Any] = {}
        self.index = 0

    def _reset(self, seed: int | None, options: Mapping[str, Any] | None):
        size = len(self.dataset)
        self.index = seed % size if seed is not None else int(self.np_random.integers(size))
        self.entry = self.dataset[self.index]
        return str(self.entry["question"]), {"index": self.index, "system_prompt": self.system_prompt}

    def _answer(self, text: str) -> str | None:
        return self._extract_answer(text) if self.extract else text

    def _step_text(self, text: str):
        answer = self._answer(text)
        score = float(self.dataset.score_answer(answer, self.entry))
        info = {"success": score == CORRECT, "score": score, "answer": answer,
                "reference": str(self.entry["answer"]), "index": self.index}
        return "", score, True, False, info

    def _strategies(self) -> list[Strategy]:
        fmt = (lambda a: f"<answer>{a}</answer>") if self.extract else (lambda a: a)
        return answer_strategies(str(self.entry["answer"]), str(self.entry["question"]), fmt=fmt,
                                 unformatted=(lambda a: a) if self.extract else None)
