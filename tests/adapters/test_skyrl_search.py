"""skyrl-gym's search envs, the adapter's readers taken one at a time (``envaudit.adapters.skyrl_search``).

The scans of the real ``search``/``searchcode`` envs are in ``test_skyrl_gym_search.py``; here each
reader gets the texts skyrl-gym produces (its search tool's error strings, Search-R1's
``<information>`` block, Parquet rows with JSON-encoded targets) and the answer the env's source
says it must give.
"""

from __future__ import annotations

import json
import socket

from envaudit.adapters.catalogue import ANSWER_LABELS, GRADER_LABELS
from envaudit.adapters.skyrl_search import (
    SEARCH_LABELS,
    SEARCHCODE_VALID,
    judge_search,
    judge_searchcode,
    same_answer,
    search_status,
    search_strategies,
    searchcode_strategies,
    server_reachable,
    solution_numbers,
    targets,
)
from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT


def _row(truth) -> dict:
    return {"reward_spec": {"method": "rule", "ground_truth": truth}}


def test_targets_read_every_shape_a_row_carries():
    assert targets(_row({"target": ["Paris", "paris, france"]})) == ["Paris", "paris, france"]
    assert targets(_row({"target": json.dumps(["Kessel", "Kessel Run"])})) == ["Kessel", "Kessel Run"]  # Parquet
    assert targets(_row({"target": "not [json"})) == ["not [json"]
    assert targets(_row("42")) == ["42"]  # JSON, but a number, not a list: the text stands
    assert targets(_row(18)) == ["18"]  # searchcode's ground truth is the number itself
    assert targets(_row(["x", 3, True, None, 2.5])) == ["x", "3", "2.5"]  # a bool is no answer
    assert targets(_row(True)) == []
    assert targets({"reward_spec": "ground truth as text"}) == [] and targets({}) == []


def test_same_answer_compares_numbers_by_value_and_text_by_its_normal_form():
    assert same_answer("1,000", "1000") and same_answer("3.50", "3.5") and same_answer("The Kessel.", "kessel")
    assert not same_answer("12", "13") and not same_answer("1,001", "1000") and not same_answer("Kessel", "Kessel Run")


def test_solution_numbers_read_the_hashes_of_each_solution_else_its_text():
    text = "<solution>so #### 1,234</solution> then <solution>\n forty-two \n</solution><solution>#### -7</solution>"
    assert solution_numbers(text) == ["1,234", "forty-two", "-7"]
    assert solution_numbers(None) == [] and solution_numbers("#### 5") == []


def test_judges_need_every_answer_right_and_a_reference_to_judge_by():
    row = _row({"target": ["Paris"]})
    assert judge_search("<answer> paris </answer>", row) is True
    assert judge_search("<answer>Lyon</answer><answer>Paris</answer>", row) is False  # a hedge
    assert judge_search("Paris", row) is False  # no answer given
    assert judge_search("<answer>Paris</answer>", _row(None)) is None  # nothing to judge by
    assert judge_searchcode("<solution>#### 18.0</solution>", _row(18)) is True
    assert judge_searchcode("<solution>#### 18</solution>", {}) is None


def test_search_status_reads_skyrl_gyms_failure_texts():
    ask = "<search>who\nwrote it</search>"  # a query over two lines is still a query
    ok = '<information>{"result": "Doc 1 (Title: X) ..."}</information>'
    assert search_status(ask, ok) == (TOOL_OK, None)
    assert search_status(ask, '<information>{"documents": []}</information>') == (TOOL_OK, None)
    timed_out = '\n<information>{"result": "Search error: Timeout Error after 10 retries"}</information>\n'
    assert search_status(ask, timed_out) == (TOOL_TIMEOUT, "Search error: Timeout Error after 10 retries")
    assert search_status(ask, "Search error: connection refused") == (TOOL_ERROR, "Search error: connection refused")
    assert search_status(ask, json.dumps({"result": "Unknown API state"})) == (TOOL_ERROR, "Unknown API state")
    long = "Search request failed or timed out " + "x" * 300
    status, message = search_status(ask, f"<information>{json.dumps({'result': long})}</information>")
    assert status == TOOL_ERROR and message == long[:200]
    status, message = search_status(ask, "Search error: " + "y" * 300)
    assert status == TOOL_ERROR and len(message) == 200
    status, message = search_status("<answer>x</answer>", ok)
    assert status == TOOL_ERROR and message.startswith("no <search>")


def test_search_catalogue_asks_the_prompts_last_line_and_repeats_the_last_call():
    prompt = "You are a search agent.\n\n   Who wrote Dune?   \n\n"
    out = search_strategies("Frank Herbert", prompt, None, transplant="Tolkien", constant="yes", wrong=["A", "B"])
    texts = {s.label: s.text for s in out}
    assert [s.label for s in out] == list(SEARCH_LABELS)
    assert texts["tool_valid"] == texts["tool_repeat"] == "<search>Who wrote Dune?</search>"
    assert texts["tool_malformed"] == "<search>Who wrote Dune?"
    assert texts["unformatted"] == "Frank Herbert" and texts["reference"] == "<answer>Frank Herbert</answer>"
    assert texts["transplant"] == "<answer>Tolkien</answer>" and texts["constant"] == "<answer>yes</answer>"
    assert [texts[w] for w in ANSWER_LABELS[1:3]] == ["<answer>A</answer>", "<answer>B</answer>"]
    again = search_strategies("x", "", "<search>before</search>", transplant="t", constant="c", wrong=["A", "B"])
    assert {s.label: s.text for s in again}["tool_repeat"] == "<search>before</search>"
    assert {s.label: s.text for s in again}["tool_valid"] == "<search>question</search>"  # no line to ask
    cut = {s.label: s.text for s in search_strategies("x", "q" * 300, None, transplant="t", constant="c",
                                                        wrong=["A", "B"])}
    assert cut["tool_valid"] == f"<search>{'q' * 200}</search>"


def test_searchcode_catalogue_writes_gsm8k_hashes_and_python_calls():
    out = searchcode_strategies("18", "Janet's ducks?", None, transplant="7", constant="0", wrong=["17", "19"])
    texts = {s.label: s.text for s in out}
    assert [s.label for s in out] == list(SEARCH_LABELS)
    assert texts["reference"] == "<solution>#### 18</solution>" and texts["unformatted"] == "#### 18"
    assert texts["transplant"] == "<solution>#### 7</solution>" and texts["constant"] == "<solution>#### 0</solution>"
    assert [texts[w] for w in ANSWER_LABELS[1:3]] == ["<solution>#### 17</solution>", "<solution>#### 19</solution>"]
    assert texts["candidates"] == "<solution>#### 17\n18\n19</solution>"
    assert texts["tool_valid"] == texts["tool_repeat"] == SEARCHCODE_VALID
    assert texts["tool_malformed"] == "<tool><python>print(1)</tool>"
    assert "raise" in texts["tool_failing"]
    again = searchcode_strategies("18", "", "<tool><python>1</python></tool>", transplant="7", constant="0",
                                  wrong=["17", "19"])
    assert again[-1].text == "<tool><python>1</python></tool>"
    assert len(GRADER_LABELS) and all(s.text is not None for s in out)


def test_server_reachable_tries_the_named_port_and_defaults_the_host():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert server_reachable(f"http://127.0.0.1:{port}/retrieve")
        assert server_reachable(f"http://:{port}/retrieve")  # no host named: this machine
    assert not server_reachable(f"http://127.0.0.1:{port}/retrieve", timeout_s=0.5)
