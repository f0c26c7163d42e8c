"""skyrl-gym: a fresh env's first state and first reply (``SkyRLGymEnv.first_prompt`` and
``play_first``), what the tool-cost check (``skyrl_check``) replays while the episode is left alone.

Expected values worked by hand from skyrl-gym's source:

- ``BaseTextEnv.init`` returns the prompt's messages as they are; ``first_prompt`` joins the
  contents of every message that is not the system's, one per line;
- gsm8k (one turn): 1.0 when the first ``#### N`` equals the ground truth, else 0.0; the episode
  ends; success is its own strict extractor's comparison (no judge of ours);
- aime: ``Answer: X`` pays 1.0 or -1.0 and reports ``metadata["acc"]``, which is success;
- gsm8k_multi_turn (max_turns 5): a formatted wrong answer pays ``0.2 / 5`` and does not end the
  episode; it has no tools, so no tool status;
- search: the reply ``<answer>A</answer>`` ends the episode, 1.0 when A is a target; success is
  our judge's (the same targets);
- searchcode's python tool: a program that runs is ``ok``, one that raises is an ``error``
  ("Error executing Python code:"); neither ends the episode nor pays.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("skyrl_gym")

from envaudit.adapters.skyrl_gym import SkyRLGymEnv  # noqa: E402
from envaudit.protocol import TOOL_ERROR, TOOL_OK  # noqa: E402

DATA = Path(__file__).parent / "data"


def _rows(tmp_path: Path, name: str, rows: list[dict]) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_first_prompt_joins_every_message_but_the_systems(tmp_path):
    prompt = [{"role": "system", "content": "SYSTEM RULES"}, {"role": "user", "content": "What is 6 * 7?"},
              {"role": "assistant", "content": "Shall I show my work?"}, {"role": "user", "content": "Answer after ####."}]
    rows = [{"prompt": prompt, "env_class": "gsm8k", "reward_spec": {"method": "rule", "ground_truth": "42"}},
            {"prompt": [{"role": "user", "content": "What is 2 + 2?"}], "env_class": "gsm8k",
             "reward_spec": {"method": "rule", "ground_truth": "4"}}]
    env = SkyRLGymEnv("gsm8k", tasks=_rows(tmp_path, "gsm8k", rows))
    try:
        assert env.first_prompt(0) == "What is 6 * 7?\nShall I show my work?\nAnswer after ####."
        assert env.first_prompt(1) == "What is 2 + 2?"
    finally:
        env.close()


def test_gsm8k_first_reply_is_graded_by_its_own_extractor():
    env = SkyRLGymEnv("gsm8k", tasks=str(DATA / "skyrl_gsm8k.jsonl"))
    try:
        env.reset(seed=0)
        row = env.row
        assert env.play_first(0, "#### 81") == (1.0, True, True, None)
        assert env.play_first(0, "#### 80") == (0.0, True, False, None)
        # the first '#### N' decides (strict), though the reference comes last
        assert env.play_first(0, "#### 80 or maybe #### 81") == (0.0, True, False, None)
        assert env.play_first(1, "#### 186") == (1.0, True, True, None)
        assert env.row is row  # the episode is left alone
    finally:
        env.close()


def test_aime_first_reply_reports_its_acc_verdict(tmp_path):
    rows = [{"prompt": [{"role": "user", "content": f"What is {n} + {n}?"}], "env_class": "aime",
             "reward_model": {"ground_truth": str(2 * n)}} for n in (3, 5)]
    env = SkyRLGymEnv("aime", tasks=_rows(tmp_path, "aime", rows))
    try:
        assert env.play_first(0, "Answer: 6") == (1.0, True, True, None)
        assert env.play_first(1, "Answer: 6") == (-1.0, True, False, None)
    finally:
        env.close()


def test_multi_turn_wrong_first_reply_goes_on_without_a_tool_status():
    env = SkyRLGymEnv("gsm8k_multi_turn", tasks=str(DATA / "skyrl_gsm8k_multi_turn.parquet"))
    try:
        reference = env.profile.reference_of(env.rows[0])
        reward, done, success, status = env.play_first(0, f"#### {int(reference) + 1}")
        assert (reward, done, success) == (pytest.approx(0.2 / 5), False, None) and status is None
        assert env.play_first(0, f"#### {reference}") == (1.0, True, True, None)
    finally:
        env.close()


def test_search_first_answer_is_judged_by_the_targets():
    env = SkyRLGymEnv("search", tasks=str(DATA / "skyrl_search.jsonl"))
    try:
        assert env.play_first(0, "<answer>Kessel River</answer>") == (1.0, True, True, None)
        assert env.play_first(0, "<answer>teal</answer>") == (0.0, True, False, None)
        assert env.play_first(1, "<answer>teal</answer>") == (1.0, True, True, None)
    finally:
        env.close()


def test_searchcode_first_tool_call_has_a_status():
    env = SkyRLGymEnv("searchcode", tasks=str(DATA / "skyrl_searchcode.jsonl"))
    try:
        ok = env.play_first(0, "<tool><python>print(17 * 23 - 5)</python></tool>")
        assert ok == (0.0, False, None, TOOL_OK)
        failing = env.play_first(0, "<tool><python>raise ValueError('no')</python></tool>")
        assert failing == (0.0, False, None, TOOL_ERROR)
        assert env.play_first(0, "<solution>#### 386</solution>") == (1.0, True, True, None)
    finally:
        env.close()


def test_the_catalogue_of_a_state_carries_the_checked_answers_and_the_last_call():
    """searchcode's catalogue (``searchcode_strategies``): the checked transplant (row 1's reference,
    "820") and constant (row 0's, "386") in its answer format, and ``tool_repeat`` the last call
    made in the episode (before any, the valid call)."""
    from envaudit.adapters.skyrl_search import SEARCHCODE_VALID

    env = SkyRLGymEnv("searchcode", tasks=str(DATA / "skyrl_searchcode.jsonl"))
    try:
        env.reset(seed=0)
        first = env.candidates()
        assert (first["transplant"], first["constant"]) == ("<solution>#### 820</solution>", "<solution>#### 386</solution>")
        assert first["tool_repeat"] == SEARCHCODE_VALID and first["wrong_1"] == f"<solution>#### {env.checked(0, '')['wrong'][0]}</solution>"
        call = "<tool><python>print(17 * 23)</python></tool>"
        env.step(call)
        assert env.candidates()["tool_repeat"] == call
    finally:
        env.close()


def test_searchcode_search_tool_points_where_the_option_says_and_logs_nothing():
    """searchcode builds its SearchToolGroup with skyrl-gym's default server whatever its config says
    (``SearchToolGroup(search_url="http://127.0.0.1:8000/retrieve", log_requests=True)``): the adapter
    points it at ``search_url`` and turns its request log off, in the episode's env and a fresh one."""
    def search_group(inner):
        (group,) = [g for g in inner.tool_groups if hasattr(g, "search_url")]
        return group

    pointed = SkyRLGymEnv("searchcode", tasks=str(DATA / "skyrl_searchcode.jsonl"), search_url="http://127.0.0.1:9/retrieve")
    plain = SkyRLGymEnv("searchcode", tasks=str(DATA / "skyrl_searchcode.jsonl"))
    try:
        pointed.reset(seed=0)
        plain.reset(seed=0)
        group = search_group(pointed.inner)
        assert (group.search_url, group.log_requests) == ("http://127.0.0.1:9/retrieve", False)
        assert (search_group(plain.inner).search_url, search_group(plain.inner).log_requests) == (
            "http://127.0.0.1:8000/retrieve", False)
        python = next(g for g in plain.inner.tool_groups if not hasattr(g, "search_url"))
        assert not hasattr(python, "log_requests")
    finally:
        pointed.close()
        plain.close()
