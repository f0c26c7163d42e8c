"""What the skyrl-gym adapter knows about each env class that ships with skyrl-gym 0.4.0.

skyrl-gym reports a reward and ``done``, nothing else: no success flag, no truncation, tool errors
only as text in the next observation. A *profile* says, per registered env, how that env's own
grader writes and checks an answer, so the adapter can (1) build the strategy catalogue in the
format the grader parses, (2) read the env's correctness verdict with the env's own comparison
(never "the reward reached its maximum"), and (3) tell an episode the env ended because it was
answered from one its turn limit cut.

- ``gsm8k`` / ``gsm8k_multi_turn``: the answer follows ``#### `` and the first such number is
  compared with ``reward_spec.ground_truth`` (``utils.extract_solution(..., "strict")``). The
  multi-turn env pays a *format score* (0.2 / max_turns) for every well-formatted wrong answer.
- ``aime``: the last ``Answer: X`` line, normalised (Minerva), against ``reward_model.ground_truth``;
  the env's own verdict is ``metadata["acc"]``.
- ``text2sql``: tool calls ``<sql>...</sql>`` run on the row's SQLite database (``env_config.db_path``);
  the final ``<solution>...</solution>`` is graded over the whole chat history: -1 when the
  transcript breaks the format (every reply after an ``<observation>`` must start with
  ``<think>``), 1 when the solution's rows equal the gold query's, else 0.
- ``lcb`` (code): success is a separate run of the program on every test (``skyrl_code``); the
  catalogue adds the code-grading hacks (exit early, print the grader's expected output, hard-code
  the visible tests, crash the harness).
- ``search`` / ``searchcode``: success is the final answer against the reference under a normalised
  exact match; search calls and their failures are read onto the tool protocol (``skyrl_search``).
- any other env (a user's registered env): the answer is written as is, and success comes from
  ``metadata`` when the env reports a boolean verdict there (``acc``, ``correct``, ``is_correct``,
  ``success``); otherwise the episode's success is unknown, which ``adapter_info`` says.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from envaudit.adapters import skyrl_code, skyrl_search
from envaudit.adapters.catalogue import ANSWER_LABELS, TRAILING, Strategy, answer_strategies
from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT

TOOL_LABELS = ("tool_valid", "tool_failing", "tool_malformed", "tool_repeat")
"""Extra catalogue labels of envs with tools: a call that runs, one that fails, one the env cannot
parse, and the last action again (the valid call before any)."""

VERDICT_KEYS = ("acc", "correct", "is_correct", "success")
"""``metadata`` keys under which skyrl-gym envs report a boolean verdict (``aime`` uses ``acc``)."""

TOOL_TEXT: tuple[tuple[re.Pattern[str], str], ...] = (
    # SQLCodeExecutorToolGroup.sql: the query ran past its timeout ("SQL Timeout:\n<query>").
    (re.compile(r"SQL Timeout:"), TOOL_TIMEOUT),
    # PythonCodeExecutorToolGroup.python: "Error executing Python code: Execution timed out after ...".
    (re.compile(r"Execution timed out"), TOOL_TIMEOUT),
    # SearchToolGroup: a request that timed out after its retries ("... Timeout Error: ...").
    (re.compile(r"Search error:.*Timeout Error", re.DOTALL), TOOL_TIMEOUT),
    # The tools' and envs' error texts: a query or program that failed, a reply the env could not
    # parse as a tool call (text2sql's "Your previous action is invalid", searchcode's ValueError
    # texts), a search request that failed.
    (re.compile(r"Error executing SQL:|Error executing Python code:|Your previous action is invalid|"
                r"Search error:|No <tool>\.\.\.</tool> block found|No valid inner tool tag|"
                r"Tool '[^']*' not found|ToolGroup '[^']*' not found"), TOOL_ERROR),
)
"""Well-known error texts of skyrl-gym's tools, in the order they are tried. skyrl-gym has no tool
status: a tool error reaches the model only as text in the next observation, so this table is
how the adapter tells ``ok`` from ``error`` and ``timeout``."""


def tool_status(observation: str) -> tuple[str, str | None]:
    """``(status, error text)`` of a tool call from the observation skyrl-gym answered it with."""
    for pattern, status in TOOL_TEXT:
        found = pattern.search(observation)
        if found:
            start = observation.rfind("\n", 0, found.start()) + 1
            return status, observation[start:start + 200].strip()
    return TOOL_OK, None


def ground_truth(row: Mapping[str, Any]) -> str | None:
    """The row's reference answer: ``reward_spec.ground_truth`` (``reward_model`` for ``aime``)."""
    for key in ("reward_spec", "reward_model"):
        spec = row.get(key)
        if isinstance(spec, Mapping) and spec.get("ground_truth") is not None:
            value = spec["ground_truth"]
            return value if isinstance(value, str) else str(value)
    return None


def metadata_verdict(metadata: Mapping[str, Any]) -> bool | None:
    for key in VERDICT_KEYS:
        value = metadata.get(key)
        if isinstance(value, bool):
            return value
    return None


@dataclass(frozen=True)
class Profile:
    """How one skyrl-gym env class grades: its answer format, its verdict, its tools."""

    answer: Callable[[str], str]
    """Writes an answer the way the env's grader parses it."""
    unformatted: Callable[[str], str] | None
    """Writes it without that format (None: in a sentence of prose)."""
    verdict: Callable[[Any, str, Mapping[str, Any]], bool | None]
    """``(inner env, action, metadata) -> correct?`` on the step that ends the episode, by the
    env's own comparison; None where the env gives no verdict."""
    answered: Callable[[str], bool] | None = None
    """Whether an action is a final answer (ends the episode by the env's own rule); None: only a
    correct answer ends it early, so an episode that ends at the turn limit without one is cut."""
    tools: bool = False
    success_rule: str = ""
    kind: str = "answer"
    """How the adapter builds the catalogue: ``answer`` and ``sql`` here; ``code``, ``search`` and
    ``searchcode`` by the adapter env, which checks their wrong answers against the scorer."""
    label_set: tuple[str, ...] | None = None
    """The catalogue's labels where they are not the answer (and tool) labels."""
    judge: Callable[[str, Mapping[str, Any]], bool | None] | None = None
    """``(final reply, row) -> success``, judged apart from the env's scorer; when set it replaces
    ``verdict``."""
    reference: Callable[[Mapping[str, Any]], str | None] | None = None
    """The row's reference answer (default: ``ground_truth``)."""
    tool_status: Callable[[str, str], tuple[str, str | None]] | None = None
    """``(reply, observation) -> (status, error)`` of a tool call (default: ``TOOL_TEXT``)."""

    def labels(self) -> tuple[str, ...]:
        if self.label_set is not None:
            return self.label_set
        return ANSWER_LABELS + (TOOL_LABELS if self.tools else ())

    def reference_of(self, row: Mapping[str, Any]) -> str | None:
        return (self.reference or ground_truth)(row)

    def status_of(self, action: str, observation: str) -> tuple[str, str | None]:
        return self.tool_status(action, observation) if self.tool_status else tool_status(observation)

    def strategies(self, reference: str, prompt: str, last: str | None) -> list[Strategy]:
        if self.tools:
            return sql_strategies(reference, prompt, last)
        return answer_strategies(reference, prompt, fmt=self.answer, unformatted=self.unformatted)


# -- gsm8k ------------------------------------------------------------------------------------------
def _gsm8k_verdict(inner: Any, action: str, metadata: Mapping[str, Any]) -> bool:
    from skyrl_gym.envs.gsm8k.utils import extract_solution

    return extract_solution(action, method="strict") == inner.ground_truth


GSM8K = Profile(
    answer=lambda a: f"#### {a}", unformatted=lambda a: f"The answer is {a}.", verdict=_gsm8k_verdict,
    success_rule="the first '#### N' of the answer equals reward_spec.ground_truth "
                 "(skyrl-gym's gsm8k extract_solution, strict)")


# -- aime -------------------------------------------------------------------------------------------
def _aime_verdict(inner: Any, action: str, metadata: Mapping[str, Any]) -> bool | None:
    return metadata_verdict(metadata)


AIME = Profile(
    answer=lambda a: f"Answer: {a}", unformatted=lambda a: f"I believe it is {a}.", verdict=_aime_verdict,
    success_rule="skyrl-gym's aime verdict metadata['acc'] (the last 'Answer: X', normalised, "
                 "equals reward_model.ground_truth)")


# -- text2sql ---------------------------------------------------------------------------------------
THINK = "<think>I have what I need.</think>\n"
EXPLORE_SQL = "SELECT name FROM sqlite_master WHERE type = 'table'"
MISSING_TABLE = "envaudit_no_such_table"


def _solution(sql: str) -> str:
    return f"{THINK}<solution>{sql}</solution>"


def _sql_verdict(inner: Any, action: str, metadata: Mapping[str, Any]) -> bool:
    """text2sql's own comparison, on the same transcript its reward reads: the format holds and
    the solution's rows equal the gold query's rows."""
    from skyrl_gym.envs.sql.utils import execute_sql_wrapper_single, verify_format_and_extract

    transcript = "".join(item["content"] for item in inner.chat_history)
    valid, _, predicted, _ = verify_format_and_extract(transcript)
    if not valid:
        return False
    rows = execute_sql_wrapper_single(inner.db_file, predicted, 30, transcript)[2]
    gold = execute_sql_wrapper_single(inner.db_file, inner.gold_sql, 30, transcript)[2]
    return rows is not None and gold is not None and rows == gold


def _query(gold: str) -> str:
    return gold.strip().rstrip(";").strip()


def sql_strategies(gold: str, prompt: str, last: str | None) -> list[Strategy]:
    """text2sql's catalogue, in ``ANSWER_LABELS + TOOL_LABELS`` order.

    Wrong answers are queries that run but return other rows (no rows at all; the gold query's
    row count); the partial answer drops the gold query's WHERE condition (else keeps its first
    row); hedges put two queries in one solution and two solutions in one reply. The bare query
    (``unformatted``) and the empty reply end nothing: text2sql answers them as invalid tool calls.
    """
    query = _query(gold)
    wrong = [f"SELECT * FROM ({query}) WHERE 0", f"SELECT COUNT(*) FROM ({query})"]
    where = re.search(r"\s+WHERE\s+", query, re.IGNORECASE)
    partial = query[:where.start()] if where else f"SELECT * FROM ({query}) LIMIT 1"
    valid_call = f"<think>Let me look at the tables first.</think>\n<sql>{EXPLORE_SQL}</sql>"
    texts = {
        "reference": _solution(query),
        "wrong_1": _solution(wrong[0]),
        "wrong_2": _solution(wrong[1]),
        "unformatted": query,
        "empty": "",
        "echo_prompt": prompt[:2000],
        "hedge_all": _solution(f"{wrong[0]}; {query}"),
        "hedge_last": _solution(wrong[0]) + f"\n<solution>{query}</solution>",
        "reference_trailing": _solution(query) + TRAILING,
        "partial": _solution(partial),
        "tool_valid": valid_call,
        "tool_failing": f"<think>Let me check the orders.</think>\n<sql>SELECT * FROM {MISSING_TABLE}</sql>",
        "tool_malformed": f"<think>Let me run a query.</think>\n<sql>{EXPLORE_SQL}",
        "tool_repeat": last if last is not None else valid_call,
    }
    return [Strategy(label, texts[label]) for label in ANSWER_LABELS + TOOL_LABELS]


TEXT2SQL = Profile(
    answer=_solution, unformatted=None, verdict=_sql_verdict,
    answered=lambda action: "<solution>" in action and "</solution>" in action, tools=True,
    success_rule="text2sql's own comparison: the transcript passes its format check and the "
                 "<solution> query returns the gold query's rows")


# -- anything else ----------------------------------------------------------------------------------
def _metadata_verdict(inner: Any, action: str, metadata: Mapping[str, Any]) -> bool | None:
    return metadata_verdict(metadata)


GENERIC = Profile(
    answer=lambda a: a, unformatted=None, verdict=_metadata_verdict,
    success_rule="a boolean verdict in the env's step metadata (" + ", ".join(VERDICT_KEYS) + "); "
                 "none: success unknown")

# -- code and search ---------------------------------------------------------------------------------
def _no_verdict(inner: Any, action: str, metadata: Mapping[str, Any]) -> None:
    return None


def _code_judge(text: str, row: Mapping[str, Any]) -> bool | None:
    spec = row.get("reward_spec") if isinstance(row.get("reward_spec"), Mapping) else {}
    return skyrl_code.judge(text, skyrl_code.tests_of(spec.get("ground_truth")))


def _first_target(row: Mapping[str, Any]) -> str | None:
    found = skyrl_search.targets(row)
    return found[0] if found else None


LCB = Profile(
    answer=skyrl_code.fence, unformatted=lambda code: code, verdict=_no_verdict, kind="code",
    label_set=skyrl_code.CODE_LABELS, judge=_code_judge, reference=lambda row: None,
    success_rule="every test of reward_spec.ground_truth passes in a separate run of the reply's last fenced "
                 "program (a fresh interpreter per test, in a temporary folder, under a memory cap and lcb's "
                 f"{skyrl_code.TEST_TIMEOUT_S:g} s per-test deadline, the expected output never in its process); "
                 "lcb's own grader is the reward, not the judge")

SEARCH = Profile(
    answer=lambda a: f"<answer>{a}</answer>", unformatted=lambda a: a, verdict=_no_verdict, kind="search",
    label_set=skyrl_search.SEARCH_LABELS, judge=skyrl_search.judge_search, reference=_first_target,
    answered=lambda action: "<answer>" in action and "</answer>" in action, tools=True,
    tool_status=skyrl_search.search_status,
    success_rule="the final reply gives an <answer> and every <answer> it gives equals one of "
                 "reward_spec.ground_truth['target'] under a normalised exact match (case, surrounding punctuation, whitespace and a leading article ignored, numbers "
                 "by value); "
                 "the env's em_check over the whole history is the reward, not the judge")

SEARCHCODE = Profile(
    answer=lambda a: f"<solution>#### {a}</solution>", unformatted=lambda a: f"#### {a}", verdict=_no_verdict,
    kind="searchcode", label_set=skyrl_search.SEARCH_LABELS, judge=skyrl_search.judge_searchcode,
    reference=_first_target, answered=lambda action: "<solution>" in action and "</solution>" in action, tools=True,
    success_rule="the final reply gives a <solution> and every one's '#### N' equals reward_spec.ground_truth by "
                 "value; gsm8k's strict reading of the whole history is the reward, not the judge")

PROFILES: dict[str, Profile] = {
    "gsm8k": GSM8K,
    "gsm8k_multi_turn": GSM8K,
    "aime": AIME,
    "text2sql": TEXT2SQL,
    "lcb": LCB,
    "search": SEARCH,
    "searchcode": SEARCHCODE,
}
"""Registered skyrl-gym env id -> profile (every env skyrl-gym 0.4.0 registers); a user's own
env gets ``GENERIC``."""


def profile_of(env_id: str) -> Profile:
    return PROFILES.get(env_id, GENERIC)
