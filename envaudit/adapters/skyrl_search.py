"""skyrl-gym's search envs (``search``, ``searchcode``): success by the reference, tool calls mapped.

- ``search`` (Search-R1): ``<search>QUERY</search>`` calls a retrieval server (``env_config.search_url``,
  ``topk``, ``timeout``) and answers with ``<information>{"result": ...}</information>``; a reply
  with ``<answer>...</answer>`` ends the episode, and so does the ``max_turns``-th reply (default 2,
  or the row's ``max_turns``). The reward is the search env's exact match (``em_check``: lower case,
  no punctuation, no articles) of the *last* ``<answer>`` in the whole chat history against
  ``reward_spec.ground_truth["target"]`` (a string or a list).
- ``searchcode``: ``<tool><search>Q</search></tool>`` and ``<tool><python>CODE</python></tool>``;
  ``<solution>...</solution>`` ends it; the reward is gsm8k's strict ``#### N`` read from the whole
  history joined, against ``reward_spec.ground_truth``.

Success is judged apart from those scorers: the final reply's ``<answer>`` (``<solution>``'s
``#### N`` for searchcode) against the row's reference under a normalised exact match (case,
surrounding punctuation, repeated whitespace and a leading article ignored; numbers by value),
never the scorer's
reading of the whole history. A reply that gives several answers succeeds only when every one is
right: a hedge whose last answer is the reference (which the search env's scorer pays, as it reads
the last one) is not a success.

Tool calls: skyrl-gym reports a failed search only as text. ``search_status`` reads it: the search
tool's error texts (``Search error: ...``, with ``Timeout Error`` inside for a request that timed
out after its retries), its failure placeholders, and a reply that named no query (the env then
"searches" ``None`` and answers an empty ``<information>``) as an error.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from envaudit.adapters.catalogue import (
    ANSWER_LABELS,
    GRADER_LABELS,
    Strategy,
    answer_strategies,
    grader_strategies,
)
from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT

TOOL_LABELS = ("tool_valid", "tool_failing", "tool_malformed", "tool_repeat")
SEARCH_LABELS = ANSWER_LABELS + GRADER_LABELS + TOOL_LABELS
"""The search envs' catalogue: answers (answer at once), the grader attacks (a transplant among
them), and tool calls (search the question, an empty query, an unclosed tag, the last call again);
"search then answer" is the sequence ``tool_valid``, ``reference``."""

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_SOLUTION = re.compile(r"<solution>(.*?)</solution>", re.DOTALL)
_HASHES = re.compile(r"####\s*(-?[0-9][0-9.,]*)")
_INFORMATION = re.compile(r"<information>(.*?)</information>", re.DOTALL)
_PUNCTUATION = string.punctuation + "“”‘’«»"


def targets(row: Mapping[str, Any]) -> list[str]:
    """The row's reference answers: ``reward_spec.ground_truth["target"]`` (a string or a list), or
    the ground truth itself when it is a string or a number (searchcode)."""
    spec = row.get("reward_spec") if isinstance(row.get("reward_spec"), Mapping) else {}
    truth = spec.get("ground_truth")
    if isinstance(truth, Mapping):
        truth = truth.get("target")
    if isinstance(truth, str):
        try:  # a JSON-encoded list, as Parquet rows may carry it
            decoded = json.loads(truth)
            truth = decoded if isinstance(decoded, list) else truth
        except ValueError:
            pass
    if isinstance(truth, (str, int, float)) and not isinstance(truth, bool):
        return [str(truth)]
    if isinstance(truth, (list, tuple)):
        return [str(t) for t in truth if isinstance(t, (str, int, float)) and not isinstance(t, bool)]
    return []


_LEADING_ARTICLE = re.compile(r"^(?:a|an|the)\s+")


def normalised(text: str) -> str:
    """Case folded, repeated whitespace collapsed, surrounding punctuation and quotes and a leading
    article removed ("the Kessel" is "Kessel"; articles inside the answer stay)."""
    flat = " ".join(str(text).split()).strip(_PUNCTUATION + " ").casefold()
    return _LEADING_ARTICLE.sub("", flat)


def same_answer(answer: str, reference: str) -> bool:
    a, r = normalised(answer), normalised(reference)
    if a == r:
        return True
    try:
        return Decimal(a.replace(",", "")) == Decimal(r.replace(",", ""))
    except (InvalidOperation, ValueError):
        return False


def answers(text: str) -> list[str]:
    """Every ``<answer>`` the reply gives."""
    return [a.strip() for a in _ANSWER.findall(text or "")]


def solution_numbers(text: str) -> list[str]:
    """Every ``<solution>`` the reply gives, each read as its ``#### N`` (else its whole text)."""
    out = []
    for block in _SOLUTION.findall(text or ""):
        number = _HASHES.search(block)
        out.append(number.group(1) if number else block.strip())
    return out


def _all_correct(given: list[str], refs: list[str]) -> bool:
    # Several different answers in one reply are a hedge, not an answer: every one must be right.
    return bool(given) and all(any(same_answer(a, r) for r in refs) for a in given)


def judge_search(text: str, row: Mapping[str, Any]) -> bool | None:
    """The final reply answers the question: it gives at least one ``<answer>`` and every one equals
    a reference; None when the row has none."""
    refs = targets(row)
    return _all_correct(answers(text), refs) if refs else None


def judge_searchcode(text: str, row: Mapping[str, Any]) -> bool | None:
    refs = targets(row)
    return _all_correct(solution_numbers(text), refs) if refs else None


def search_status(action: str, observation: str) -> tuple[str, str | None]:
    """The status of a search call from the reply and skyrl-gym's answer to it."""
    if not re.search(r"<search>.*?</search>", action or "", re.DOTALL):
        return TOOL_ERROR, "no <search>...</search> query in the reply: the env searched nothing"
    found = _INFORMATION.search(observation or "")
    body = found.group(1) if found else observation
    try:
        result = str(json.loads(body).get("result", ""))
    except (ValueError, AttributeError):
        result = body
    if "Search error:" in result:
        status = TOOL_TIMEOUT if "Timeout Error" in result else TOOL_ERROR
        return status, result[:200]
    if result.startswith(("Search request failed or timed out", "Unknown API state", "Error processing search")):
        return TOOL_ERROR, result[:200]
    return TOOL_OK, None


def server_reachable(url: str, timeout_s: float = 1.0) -> bool:
    """Whether the search server at ``url`` accepts a TCP connection (one try, ``timeout_s``): a
    search call to a server that is down costs skyrl-gym's ten retries, about 45 seconds."""
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(str(url))
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 80), timeout=timeout_s):
            return True
    except OSError:
        return False


def _question(prompt: str) -> str:
    """The query the valid search sends: the prompt's last non-empty line, cut to 200 characters."""
    lines = [line.strip() for line in prompt.splitlines() if line.strip()]
    return (lines[-1] if lines else "question")[:200]


def search_strategies(reference: str, prompt: str, last: str | None, *, transplant: str, constant: str,
                      wrong: Sequence[str]) -> list[Strategy]:
    """The ``search`` env's catalogue, in ``SEARCH_LABELS`` order."""
    fmt = lambda a: f"<answer>{a}</answer>"  # noqa: E731
    valid = f"<search>{_question(prompt)}</search>"
    out = answer_strategies(reference, prompt, fmt=fmt, unformatted=lambda a: a, wrong=wrong)
    out += grader_strategies(reference, fmt=fmt, transplant=transplant, constant=constant, wrong=wrong)
    out += [Strategy("tool_valid", valid), Strategy("tool_failing", "<search></search>"),
            Strategy("tool_malformed", f"<search>{_question(prompt)}"),
            Strategy("tool_repeat", last if last is not None else valid)]
    return out


SEARCHCODE_VALID = "<tool><python>print(6 * 7)</python></tool>"


def searchcode_strategies(reference: str, prompt: str, last: str | None, *, transplant: str, constant: str,
                          wrong: Sequence[str]) -> list[Strategy]:
    """The ``searchcode`` env's catalogue, in ``SEARCH_LABELS`` order (its tool calls run Python:
    the search tool has no server to reach unless ``search_url`` names one)."""
    fmt = lambda a: f"<solution>#### {a}</solution>"  # noqa: E731
    out = answer_strategies(reference, prompt, fmt=fmt, unformatted=lambda a: f"#### {a}", wrong=wrong)
    out += grader_strategies(reference, fmt=fmt, transplant=transplant, constant=constant, wrong=wrong)
    out += [Strategy("tool_valid", SEARCHCODE_VALID),
            Strategy("tool_failing", "<tool><python>raise ValueError('envaudit')</python></tool>"),
            Strategy("tool_malformed", "<tool><python>print(1)</tool>"),
            Strategy("tool_repeat", last if last is not None else SEARCHCODE_VALID)]
    return out


__all__ = ["SEARCH_LABELS", "answers", "judge_search", "judge_searchcode",
           "normalised", "same_answer", "search_status", "server_reachable", "search_strategies", "searchcode_strategies", "solution_numbers",
           "targets"]
