"""skyrl-gym's search envs (``search``, ``searchcode``) through their own API.

``search`` calls a retrieval server: here a tiny one on 127.0.0.1 (tests/fixtures/search_server.py)
that skyrl-gym's real ``SearchToolGroup`` reaches with requests. The rows
(tests/adapters/data/skyrl_search.jsonl, skyrl_searchcode.jsonl) have ``max_turns`` 3. What the envs
do, read from skyrl-gym's source and checked by hand:

- search: a reply with ``<answer>...</answer>`` ends the episode; so does the third reply whatever it
  is (``_is_done``: ``turns >= max_turns``). The reward is ``em_check`` of the *last* ``<answer>`` of
  the whole history against the targets, after removing case, punctuation and every article. So a
  reply that lists wrong answers and then the reference is paid 1.0 (the hedge), and so is a
  wrong answer that differs from the reference only by articles and word order ("Kessel The").
- search's failures reach the model only as text: ``Search error: ...`` (``Timeout Error`` inside
  when requests timed out); a reply without ``<search>`` tags searches ``None`` and gets an empty
  ``<information>``.
- searchcode's python tool: ``Error executing Python code: Execution timed out after T seconds.``
  when the program overruns; ``Error executing Python code: <stderr>`` when it fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("skyrl_gym")

from envaudit.adapters.skyrl_gym import SkyRLGymEnv  # noqa: E402
from envaudit.rollout import Runner, SequencePolicy  # noqa: E402
from tests.fixtures.search_server import SLOW_WORD, SearchServer  # noqa: E402

DATA = Path(__file__).parent / "data"
SEARCH = str(DATA / "skyrl_search.jsonl")
SEARCHCODE = str(DATA / "skyrl_searchcode.jsonl")
MAX_TURNS = 3
SEEDS = range(4)


@pytest.fixture(scope="module")
def url():
    with SearchServer() as served:
        yield served


def _run(name: str, options: dict, labels: list[str], seeds=SEEDS):
    env = SkyRLGymEnv(name, **options)
    actions = [env.action_labels.index(label) for label in labels]
    env.close()
    runner = Runner(lambda: SkyRLGymEnv(name, **options))
    return runner.run(SequencePolicy(actions, name="+".join(labels)), list(seeds), rng=np.random.default_rng(0)).records


def test_search_then_answer_and_answer_at_once_succeed_by_the_reference(url):
    options = {"tasks": SEARCH, "search_url": url}
    searched = _run("search", options, ["tool_valid", "reference"])
    eps, steps = searched.episodes, searched.steps
    assert (eps["outcome"] == "success").all() and (eps["return"] == 1.0).all() and (eps["length"] == 2).all()
    first = steps[steps["step"] == 0]
    assert set(first["tool_status"]) == {"ok"} and set(first["tool_name"]) == {"search"}
    at_once = _run("search", options, ["reference"]).episodes
    assert (at_once["outcome"] == "success").all() and (at_once["return"] == 1.0).all()
    for label in ("transplant", "wrong_1", "junk_inside"):
        eps = _run("search", options, [label]).episodes
        assert (eps["outcome"] == "failure").all() and (eps["return"] == 0.0).all(), label
    # The hedge: the scorer reads the last <answer>, the judge wants every answer right.
    hedge = _run("search", options, ["hedge_last"]).episodes
    assert (hedge["return"] == 1.0).all() and (hedge["outcome"] == "failure").all()


def test_the_turn_limit_truncates_only_an_unanswered_episode(url):
    options = {"tasks": SEARCH, "search_url": url}
    stalled = _run("search", options, ["tool_valid"] * MAX_TURNS)
    eps = stalled.episodes
    assert (eps["end_reason"] == "truncated").all() and (eps["outcome"] == "timeout").all()
    assert (eps["length"] == MAX_TURNS).all() and (eps["return"] == 0.0).all()
    # The reference on the last allowed turn is an answer, not a timeout.
    last = _run("search", options, ["tool_valid"] * (MAX_TURNS - 1) + ["reference"]).episodes
    assert (last["end_reason"] == "terminated").all() and (last["outcome"] == "success").all()
    assert (last["length"] == MAX_TURNS).all() and (last["return"] == 1.0).all()
    # A wrong answer on the last turn is an honest failure, not a timeout either.
    wrong = _run("search", options, ["tool_valid"] * (MAX_TURNS - 1) + ["wrong_1"]).episodes
    assert (wrong["end_reason"] == "terminated").all() and (wrong["outcome"] == "failure").all()


def test_search_failures_map_onto_tool_statuses(url, monkeypatch):
    options = {"tasks": SEARCH, "search_url": url}
    steps = _run("search", options, ["tool_failing", "tool_malformed", "reference"], seeds=[0]).steps
    # The empty query: the server refuses it (400), skyrl-gym answers "Search error: ...".
    # The unclosed tag: no query at all, an empty <information>.
    assert list(steps["tool_status"][:2]) == ["error", "error"]
    assert "Search error" in steps["error"].iloc[0] and "no <search>" in steps["error"].iloc[1]
    # A request past the client's timeout: skyrl-gym retries it ten times with back-off (about a
    # minute); one attempt is enough to see its text, "Search error: ... Timeout Error: ...".
    import skyrl_gym.tools.search as search_tool

    monkeypatch.setattr(search_tool, "MAX_RETRIES", 1)
    env = SkyRLGymEnv("search", tasks=SEARCH, search_url=url, timeout=0.5)
    try:
        env.reset(seed=0)
        _, reward, terminated, truncated, info = env.step(f"<search>{SLOW_WORD} river</search>")
        assert info["tool"]["status"] == "timeout" and not (terminated or truncated) and reward == 0.0
    finally:
        env.close()


def test_searchcode_python_timeout_is_a_tool_timeout():
    env = SkyRLGymEnv("searchcode", tasks=SEARCHCODE)
    try:
        env.reset(seed=0)
        # skyrl-gym's PythonCodeExecutorToolGroup gives a program 10 s; the test gives it 0.5 s.
        python = next(g for g in env.inner.tool_groups if type(g).__name__ == "PythonCodeExecutorToolGroup")
        python.timeout = 0.5
        obs, _, terminated, _, info = env.step("<tool><python>import time\ntime.sleep(5)</python></tool>")
        assert "Execution timed out" in obs and info["tool"]["status"] == "timeout" and not terminated
        python.timeout = 10.0  # its own deadline again: a failing program, not a slow one
        _, _, _, _, info = env.step(env.action_labels.index("tool_failing"))
        assert info["tool"]["status"] == "error"
        _, reward, terminated, truncated, info = env.step(env.action_labels.index("reference"))
        assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    finally:
        env.close()


def test_a_wrong_answer_the_scorer_pays_is_relabelled(tmp_path):
    # em_check drops every article: "Kessel The" (wrong_answers' first candidate for "The Kessel", its
    # words rotated) normalises to the target's "kessel" and is paid 1.0. The judge rejects it, so it
    # is set aside, reported, and the next candidate (the reference reversed) is wrong_1.
    row = json.loads(Path(SEARCH).read_text().splitlines()[0])
    row["reward_spec"]["ground_truth"]["target"] = ["The Kessel"]
    rows = tmp_path / "kessel.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    env = SkyRLGymEnv("search", tasks=str(rows))
    try:
        _, info = env.reset(seed=0)
        paid = [r for r in info["relabelled"] if r["label"] == "wrong_1"]
        assert paid and paid[0]["text"] == "Kessel The" and paid[0]["score"] == 1.0 and paid[0]["success"] is False
        assert env.candidates()["wrong_1"] == "<answer>lesseK ehT</answer>"
    finally:
        env.close()


def test_catalogue_check_with_and_without_the_server(url):
    env = SkyRLGymEnv("search", tasks=SEARCH, search_url=url)
    try:
        check = env.adapter_info["catalogue_check"]
    finally:
        env.close()
    assert check["playable"] and check["reference_success_share"] == 1.0 and "note" not in check
    assert check["full_marks_without_success"] == {"hedge_last": 1.0}
    down = SkyRLGymEnv("search", tasks=SEARCH, search_url="http://127.0.0.1:9/retrieve")
    try:
        check = down.adapter_info["catalogue_check"]
    finally:
        down.close()
    assert "accepted no connection" in check["note"] and check["playable"]


def test_the_judge_normalises_case_punctuation_and_a_leading_article(url):
    # Row 0's targets are "Kessel River" and "the Kessel". em_check pays all three replies below;
    # each is the same answer written another way, so each is a success too.
    env = SkyRLGymEnv("search", tasks=SEARCH, search_url=url)
    try:
        for reply in ("<answer> kessel  river </answer>", "<answer>The Kessel.</answer>", "<answer>KESSEL</answer>"):
            env.reset(seed=0)
            _, reward, terminated, _, info = env.step(reply)
            assert (reward, terminated, info["success"]) == (1.0, True, True), reply
        # Another river is neither paid nor a success.
        env.reset(seed=0)
        assert env.step("<answer>the Rhine</answer>")[1] == 0.0
    finally:
        env.close()
