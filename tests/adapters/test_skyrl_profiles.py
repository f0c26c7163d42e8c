"""What the skyrl-gym adapter knows per env class, taken one profile part at a time
(``envaudit.adapters.skyrl_profiles``).

The scans of the real envs are in ``test_skyrl_gym*.py``; here each part gets the texts skyrl-gym
0.4.0 writes (its tools' error strings as its source words them, rows in its dataset layout) and
the answer read from that source by hand.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("skyrl_gym")

from envaudit.adapters import skyrl_code  # noqa: E402
from envaudit.adapters.catalogue import ANSWER_LABELS, TRAILING  # noqa: E402
from envaudit.adapters.skyrl_profiles import (  # noqa: E402
    AIME,
    GENERIC,
    GSM8K,
    LCB,
    PROFILES,
    SEARCH,
    SEARCHCODE,
    TEXT2SQL,
    TOOL_LABELS,
    ground_truth,
    metadata_verdict,
    profile_of,
    sql_strategies,
    tool_status,
)
from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT  # noqa: E402


@pytest.mark.parametrize("observation, status, error", [
    # the error is quoted from the start of its line, with what follows, up to 200 characters
    ("<observation>SQL Timeout:\nSELECT * FROM t</observation>", TOOL_TIMEOUT,
     "<observation>SQL Timeout:\nSELECT * FROM t</observation>"),
    ("result:\nError executing Python code: Execution timed out after 10s", TOOL_TIMEOUT,
     "Error executing Python code: Execution timed out after 10s"),  # a timeout before the generic error
    ("Search error: HTTPConnectionPool ... Timeout Error: read", TOOL_TIMEOUT,
     "Search error: HTTPConnectionPool ... Timeout Error: read"),
    ("rows:\n  Error executing SQL: no such table: x  \nmore", TOOL_ERROR,
     "Error executing SQL: no such table: x  \nmore"),
    ("Your previous action is invalid. Follow the format.", TOOL_ERROR,
     "Your previous action is invalid. Follow the format."),
    ("No <tool>...</tool> block found", TOOL_ERROR, "No <tool>...</tool> block found"),
    ("Tool 'sql' not found in group", TOOL_ERROR, "Tool 'sql' not found in group"),
    ("[(1, 'Ann')]", TOOL_OK, None),
])
def test_tool_status_reads_skyrl_gyms_error_texts(observation, status, error):
    assert tool_status(observation) == (status, error)


def test_tool_status_quotes_from_the_line_of_the_error_at_most_200_characters():
    status, error = tool_status("header\nError executing SQL: " + "x" * 400)
    assert status == TOOL_ERROR and len(error) == 200 and error.startswith("Error executing SQL:")


def test_ground_truth_reads_reward_spec_then_reward_model():
    assert ground_truth({"reward_spec": {"ground_truth": "18"}}) == "18"
    assert ground_truth({"reward_spec": {"ground_truth": 18}}) == "18"
    assert ground_truth({"reward_spec": {"ground_truth": None}, "reward_model": {"ground_truth": "42"}}) == "42"
    assert ground_truth({"reward_spec": "18"}) is None and ground_truth({}) is None


def test_metadata_verdict_takes_the_first_boolean_verdict():
    assert metadata_verdict({"acc": True}) is True and metadata_verdict({"correct": False}) is False
    assert metadata_verdict({"acc": 1.0, "is_correct": False}) is False  # a score is no verdict
    assert metadata_verdict({"success": True, "acc": False}) is False  # acc comes first
    assert metadata_verdict({"score": 1}) is None


def test_gsm8k_verdict_is_the_envs_strict_extraction():
    inner = SimpleNamespace(ground_truth="18")
    assert GSM8K.verdict(inner, "so #### 18", {}) is True
    assert GSM8K.verdict(inner, "#### 17 then #### 18", {}) is False  # the first one counts
    assert AIME.verdict(None, "Answer: 3", {"acc": True}) is True and AIME.verdict(None, "x", {}) is None
    assert GENERIC.verdict(None, "x", {"is_correct": True}) is True


def test_profiles_write_answers_the_way_each_grader_parses_them():
    assert GSM8K.answer("18") == "#### 18" and AIME.answer("3") == "Answer: 3" and GENERIC.answer("x") == "x"
    assert [s.label for s in GSM8K.strategies("18", "q", None)] == list(ANSWER_LABELS)
    texts = {s.label: s.text for s in GSM8K.strategies("18", "q", None)}
    assert texts["unformatted"] == "The answer is 18." and texts["reference"] == "#### 18"
    assert AIME.unformatted("3") == "I believe it is 3." and GENERIC.unformatted is None
    assert GSM8K.labels() == ANSWER_LABELS and TEXT2SQL.labels() == ANSWER_LABELS + TOOL_LABELS
    assert LCB.labels() == skyrl_code.CODE_LABELS and SEARCH.labels() == SEARCHCODE.labels()
    assert TEXT2SQL.answered("<solution>SELECT 1</solution>") and not TEXT2SQL.answered("<solution>SELECT 1")
    assert SEARCH.answered("<answer>x</answer>") and not SEARCH.answered("<search>x</search>")
    assert SEARCHCODE.answered("<solution>#### 1</solution>") and not SEARCHCODE.answered("<answer>1</answer>")
    assert GSM8K.answered is None  # only a correct answer ends a gsm8k episode early


def test_profile_of_maps_every_registered_env_and_a_users_to_generic():
    assert profile_of("gsm8k_multi_turn") is GSM8K and profile_of("lcb") is LCB
    assert profile_of("my_env") is GENERIC and set(PROFILES) == {
        "gsm8k", "gsm8k_multi_turn", "aime", "text2sql", "lcb", "search", "searchcode"}


def test_references_and_judges_of_the_code_and_search_profiles():
    row = {"reward_spec": {"ground_truth": {"target": ["Paris", "City of Paris"]}}}
    assert SEARCH.reference_of(row) == "Paris" and SEARCH.reference_of({}) is None
    assert GSM8K.reference_of({"reward_spec": {"ground_truth": "7"}}) == "7"
    assert LCB.reference_of(row) is None  # the code env's reference is a program, found elsewhere
    tests = '[{"input": "2\\n", "output": "4\\n", "testtype": "stdin"}]'
    code_row = {"reward_spec": {"ground_truth": tests}}
    assert LCB.judge(skyrl_code.fence("print(int(input()) * 2)"), code_row) is True
    assert LCB.judge(skyrl_code.fence("print(5)"), code_row) is False
    assert LCB.judge("x", {"reward_spec": "no tests"}) is None
    assert SEARCH.status_of("<search>q</search>", "Search error: boom")[0] == TOOL_ERROR
    assert GSM8K.status_of("x", "Error executing SQL: y") == (TOOL_ERROR, "Error executing SQL: y")


def test_sql_catalogue_is_in_label_order_with_runnable_wrong_and_partial_queries():
    gold = "  SELECT name FROM users WHERE age > 30 ;"
    texts = {s.label: s.text for s in sql_strategies(gold, "p" * 3000, None)}
    assert list(texts) == list(ANSWER_LABELS + TOOL_LABELS)
    query = "SELECT name FROM users WHERE age > 30"
    assert texts["reference"].endswith(f"<solution>{query}</solution>") and texts["unformatted"] == query
    assert texts["wrong_1"].endswith(f"<solution>SELECT * FROM ({query}) WHERE 0</solution>")
    assert texts["wrong_2"].endswith(f"<solution>SELECT COUNT(*) FROM ({query})</solution>")
    assert texts["partial"].endswith("<solution>SELECT name FROM users</solution>")  # no WHERE
    assert texts["hedge_last"].endswith(f"</solution>\n<solution>{query}</solution>")
    assert texts["reference_trailing"] == texts["reference"] + TRAILING and len(texts["echo_prompt"]) == 2000
    assert texts["tool_repeat"] == texts["tool_valid"] and texts["tool_malformed"].count("</sql>") == 0
    whole = {s.label: s.text for s in sql_strategies("SELECT 1", "", "<sql>SELECT 2</sql>")}
    assert whole["partial"].endswith("<solution>SELECT * FROM (SELECT 1) LIMIT 1</solution>")
    assert whole["tool_repeat"] == "<sql>SELECT 2</sql>"


def test_each_profile_builds_its_catalogue_and_reads_its_tools_its_own_way():
    aime = {s.label: s.text for s in AIME.strategies("3", "q", None)}
    assert aime["unformatted"] == "I believe it is 3." and aime["reference"] == "Answer: 3"
    gold, prompt, last = "SELECT 1", "Which tables?", "<sql>SELECT 2</sql>"
    assert TEXT2SQL.strategies(gold, prompt, last) == sql_strategies(gold, prompt, last)
    assert {s.label: s.text for s in TEXT2SQL.strategies(gold, prompt, last)}["echo_prompt"] == prompt
    # a profile with its own reader gets the reply too; the others read the observation alone
    ok = '<information>{"result": "Doc 1"}</information>'
    assert SEARCH.status_of("<search>capital of France</search>", ok) == (TOOL_OK, None)
    assert SEARCH.status_of("<answer>Paris</answer>", ok)[0] == TOOL_ERROR  # no query: searched nothing
    assert TEXT2SQL.status_of("<answer>Paris</answer>", ok) == (TOOL_OK, None)


def test_gsm8k_reads_only_the_strict_hashes_and_sql_reads_where_in_any_case():
    inner = SimpleNamespace(ground_truth="18")
    assert GSM8K.verdict(inner, "The answer is 18", {}) is False  # the flexible reading would take 18
    texts = {s.label: s.text for s in sql_strategies("select name from users where age > 30", "", None)}
    assert texts["partial"].endswith("<solution>select name from users</solution>")
    query = "select name from users where age > 30"
    wrong = f"SELECT * FROM ({query}) WHERE 0"
    assert texts["hedge_all"].endswith(f"<solution>{wrong}; {query}</solution>")
    assert texts["hedge_last"].endswith(f"<solution>{wrong}</solution>\n<solution>{query}</solution>")
    assert texts["empty"] == ""
    assert texts["tool_valid"].endswith("<sql>SELECT name FROM sqlite_master WHERE type = 'table'</sql>")


def test_tool_status_quotes_the_line_the_error_is_on_not_the_first_line_break():
    status, error = tool_status("rows: 0\nschema: t(a)\nError executing SQL: no such column: b")
    assert status == TOOL_ERROR and error == "Error executing SQL: no such column: b"
