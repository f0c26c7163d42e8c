"""skyrl-gym end to end: envs that ship with skyrl-gym 0.4.0, through its own API (make, init, step).

The task rows are the small files in tests/adapters/data (built by make_skyrl_rows.py; nothing
downloads). What the envs pay, read from skyrl-gym's source (checked by hand, see each test):

- gsm8k: 1 when the *first* ``#### N`` of the answer equals the ground truth, else 0; one turn.
- gsm8k_multi_turn (max_turns 5 in the rows): a correct answer pays 1 and ends the episode; a
  well-formatted wrong answer pays the format score 0.2 / 5 = 0.04 and the episode goes on; at the
  fifth turn it ends whatever was answered.
- text2sql (max_turns 5): ``<sql>`` tool calls run on the shipped SQLite database and pay 0; a
  ``<solution>`` ends the episode: 1 when its rows equal the gold query's, 0 when they differ,
  -1 when the transcript breaks the format (two solutions, or any reply after an observation that
  does not start with ``<think>``) or the turns run out without a solution.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("skyrl_gym")

from envaudit.adapters.skyrl_gym import SkyRLGymEnv  # noqa: E402
from envaudit.adapters.skyrl_profiles import tool_status  # noqa: E402
from envaudit.cli import main  # noqa: E402
from envaudit.rollout import Runner, SequencePolicy  # noqa: E402
from envaudit.scan import run_scan  # noqa: E402

DATA = Path(__file__).parent / "data"
GSM8K = str(DATA / "skyrl_gsm8k.jsonl")
MULTI = str(DATA / "skyrl_gsm8k_multi_turn.parquet")
SQL = str(DATA / "skyrl_text2sql.jsonl")
SQL_OPTIONS = {"tasks": SQL, "db_path": str(DATA / "skyrl_sql")}
MAX_TURNS = 5
FORMAT_SCORE = 0.2 / MAX_TURNS
"""gsm8k_multi_turn's pay for a well-formatted wrong answer (skyrl-gym: format_score 0.2 / max_turns)."""
SEEDS = list(range(6))


def _env(name: str, options: dict):
    return SkyRLGymEnv(name, **options)


def _run(name: str, options: dict, labels: list[str], seeds=SEEDS):
    env = _env(name, options)
    actions = [env.action_labels.index(label) for label in labels]
    runner = Runner(lambda: _env(name, options))
    return runner.run(SequencePolicy(actions, name="+".join(labels)), seeds, rng=np.random.default_rng(0)).records


def test_gsm8k_outcomes_follow_its_own_grader():
    options = {"tasks": GSM8K}
    for label in ("reference", "reference_trailing"):
        eps = _run("gsm8k", options, [label]).episodes
        assert (eps["outcome"] == "success").all() and (eps["return"] == 1.0).all()
    for label in ("wrong_1", "unformatted", "empty", "hedge_all", "hedge_last"):
        # hedge_last puts the reference last; gsm8k's strict extractor reads the first '#### N'.
        eps = _run("gsm8k", options, [label]).episodes
        assert (eps["outcome"] == "failure").all() and (eps["return"] == 0.0).all(), label
        assert (eps["end_reason"] == "terminated").all()


def test_multi_turn_limit_is_a_truncation_and_wrong_answers_pay_the_format_score():
    options = {"tasks": MULTI}  # the Parquet rows
    records = _run("gsm8k_multi_turn", options, ["wrong_1"])
    for _, ep in records.episodes.iterrows():
        assert ep["end_reason"] == "truncated" and ep["outcome"] == "timeout" and ep["length"] == MAX_TURNS
        assert ep["return"] == pytest.approx(MAX_TURNS * FORMAT_SCORE) and not ep["success"]
    assert records.steps["tool_status"].isna().all()  # answers, not tool calls
    eps = _run("gsm8k_multi_turn", options, ["reference"]).episodes
    assert (eps["outcome"] == "success").all() and (eps["length"] == 1).all() and (eps["return"] == 1.0).all()
    # Delaying: two wrong attempts, then the reference, earns the success plus two format scores.
    delayed = _run("gsm8k_multi_turn", options, ["wrong_1", "wrong_2", "reference"]).episodes
    assert (delayed["outcome"] == "success").all() and (delayed["length"] == 3).all()
    assert delayed["return"].to_numpy() == pytest.approx(np.full(len(SEEDS), 1.0 + 2 * FORMAT_SCORE))


def test_text2sql_tool_calls_get_statuses_from_the_error_text():
    valid = _run("text2sql", SQL_OPTIONS, ["tool_valid"])
    steps = valid.steps
    calls = steps[steps["step"] < MAX_TURNS - 1]
    assert set(calls["tool_status"]) == {"ok"} and set(calls["tool_name"]) == {"sql"}
    # The last turn ends the episode without a solution: a truncation text2sql pays -1.
    assert steps.loc[steps["step"] == MAX_TURNS - 1, "tool_status"].isna().all()
    eps = valid.episodes
    assert (eps["end_reason"] == "truncated").all() and (eps["return"] == -1.0).all()
    for label in ("tool_failing", "tool_malformed", "empty"):
        calls = _run("text2sql", SQL_OPTIONS, [label]).steps
        assert set(calls.loc[calls["step"] < MAX_TURNS - 1, "tool_status"]) == {"error"}, label
    assert tool_status("\n\n<observation>SQL Timeout:\nSELECT 1\n</observation>")[0] == "timeout"
    assert tool_status("<observation>   name\ncustomers</observation>") == ("ok", None)


def test_text2sql_answers_are_graded_by_its_row_comparison():
    ref = _run("text2sql", SQL_OPTIONS, ["reference"]).episodes
    assert (ref["outcome"] == "success").all() and (ref["return"] == 1.0).all() and (ref["length"] == 1).all()
    wrong = _run("text2sql", SQL_OPTIONS, ["wrong_1"]).episodes
    assert (wrong["outcome"] == "failure").all() and (wrong["return"] == 0.0).all()
    # Two <solution> blocks break text2sql's format check: -1, although the reference is one of them.
    hedge = _run("text2sql", SQL_OPTIONS, ["hedge_last"]).episodes
    assert (hedge["outcome"] == "failure").all() and (hedge["return"] == -1.0).all()
    # Exploring first costs nothing and pays nothing: the same success, two turns later.
    explored = _run("text2sql", SQL_OPTIONS, ["tool_valid", "tool_failing", "reference"]).episodes
    assert (explored["outcome"] == "success").all() and (explored["return"] == 1.0).all()
    assert (explored["length"] == 3).all()
    # An empty reply after an observation breaks the transcript's format for good: the correct
    # solution that follows is graded -1 and is not a success.
    broken = _run("text2sql", SQL_OPTIONS, ["tool_valid", "empty", "reference"]).episodes
    assert (broken["outcome"] == "failure").all() and (broken["return"] == -1.0).all()


def test_aime_success_is_its_acc_verdict(tmp_path):
    # aime grades the last 'Answer: X' line and pays 1 or -1; its verdict is metadata["acc"].
    rows = tmp_path / "aime.jsonl"
    rows.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": f"What is {n} + {n}?"}],
                                        "env_class": "aime", "reward_model": {"ground_truth": str(2 * n)}}) + "\n"
                            for n in (7, 21)))
    options = {"tasks": str(rows)}
    ref = _run("aime", options, ["reference"], seeds=[0, 1]).episodes
    assert (ref["outcome"] == "success").all() and (ref["return"] == 1.0).all()
    wrong = _run("aime", options, ["wrong_1"], seeds=[0, 1]).episodes
    assert (wrong["outcome"] == "failure").all() and (wrong["return"] == -1.0).all()


def test_a_users_registered_env_gets_the_generic_profile(tmp_path):
    import skyrl_gym
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    class Chatty(BaseTextEnv):
        """A user's env: ends only when answered right, reports its verdict as metadata["correct"],
        pays 0.5 for a reply with a digit and None for anything else, and answers on odd turns with a
        string observation (skyrl-gym's contract says messages; the adapter takes either)."""

        def __init__(self, env_config=None, extras=None):
            super().__init__()
            self.answer = extras["reward_spec"]["ground_truth"]

        def step(self, action):
            self.turns += 1
            correct = action.strip() == self.answer
            observation = "again" if self.turns % 2 else [{"role": "user", "content": "once"}, {"role": "user"},
                                                          {"content": "more"}, "not a message"]
            return {"observations": observation, "done": correct,
                    "reward": 0.5 if any(c.isdigit() for c in action) else None, "metadata": {"correct": correct}}

    rows = tmp_path / "chatty.jsonl"
    rows.write_text(json.dumps({"prompt": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "Say 12."}],
                                "env_class": "envaudit-chatty", "reward_spec": {"ground_truth": "12"}}) + "\n")
    skyrl_gym.register(id="envaudit-chatty", entry_point=Chatty)
    try:
        options = {"tasks": str(rows), "turn_cap": 4}
        ref = _run("envaudit-chatty", options, ["reference"], seeds=[0]).episodes
        assert list(ref["outcome"]) == ["success"] and list(ref["return"]) == [0.5]
        # It never ends by itself: the adapter's cap truncates it; a None reward counts as 0.
        stall = _run("envaudit-chatty", options, ["empty"], seeds=[0]).episodes
        assert list(stall["end_reason"]) == ["truncated"] and list(stall["length"]) == [4]
        assert list(stall["return"]) == [0.0]
        # Step by step: reward None, string and message observations, the cap, the env's verdict.
        env = SkyRLGymEnv("envaudit-chatty", tasks=str(rows), turn_cap=3)
        assert (env.turn_limit, env.turn_cap, env.has_reference) == (1, 3, False)  # BaseTextEnv's max_turns 1
        assert env.reset(seed=0) == ("Say 12.", {"index": 0, "system_prompt": "Be brief."})
        assert env.step("hm") == ("again", 0.0, False, False, {
            "index": 0, "reward_note": "skyrl-gym returned reward None; counted as 0"})
        assert env.step("1") == ("once\n\nmore", 0.5, False, False, {"index": 0})  # a message without content: ""
        assert env.step("2") == ("again", 0.5, False, True, {"index": 0, "success": False})  # the cap
        env.reset(seed=0)
        assert env.step("12") == ("again", 0.5, True, False, {"index": 0, "success": True})
    finally:
        skyrl_gym.envs.registration.deregister("envaudit-chatty")


def test_a_seed_replays_its_row_and_each_reset_makes_a_fresh_env():
    env = _env("gsm8k", {"tasks": GSM8K})
    first, info = env.reset(seed=13)
    assert env.index == 3 and info["index"] == 3  # 13 mod 10 rows
    inner = env.inner
    env.step(0)
    again, _ = env.reset(seed=13)
    assert again == first and env.inner is not inner
    assert env.candidates()["reference"] == "#### " + json.loads(Path(GSM8K).read_text().splitlines()[3])[
        "reward_spec"]["ground_truth"]
    assert env.adapter_info["rows"] == 10 and env.adapter_info["env"] == "gsm8k"


def test_the_turn_limit_and_the_info_come_from_the_env_and_its_rows(tmp_path):
    """search's own turn limit is 2 without a row's ``max_turns`` (``SearchEnv.__init__``); a row that
    declares more raises the limit; the adapter's cap bounds the episode. The info names how tool
    statuses are read and the options as given."""
    rows = [json.loads(line) for line in (DATA / "skyrl_search.jsonl").read_text().splitlines()]
    for row in rows:
        row.pop("max_turns", None)
        (row.get("extra_info") or {}).pop("max_turns", None)
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = SkyRLGymEnv("search", tasks=str(plain), topk=2)
    assert (env.turn_limit, env.turn_cap, env.adapter_info["max_turns"]) == (2, 2, 2)
    assert env.adapter_info["env_config"] == {"topk": "2"}
    assert env.adapter_info["tool_status"] == ("read from the reply and the search tool's answer "
                                               "(envaudit.adapters.skyrl_search.search_status)")
    longer = tmp_path / "longer.jsonl"
    longer.write_text("".join(json.dumps({**r, "max_turns": 4 + i}) + "\n" for i, r in enumerate(rows)))
    assert SkyRLGymEnv("search", tasks=str(longer)).turn_limit == 4 + len(rows) - 1
    assert SkyRLGymEnv("search", tasks=str(longer), turn_cap=3).turn_cap == 3
    assert _env("gsm8k", {"tasks": GSM8K}).adapter_info["tool_status"] == (
        "read from skyrl-gym's error texts in the next observation (envaudit.adapters.skyrl_profiles.TOOL_TEXT)")


def test_quick_scan_finds_the_format_score_paid_for_delaying():
    # Checked by hand: stepping gsm8k_multi_turn with '#### <wrong>' three times, then the ground
    # truth, pays 0.04 + 0.04 + 0.04 + 1.0 = 1.12 against 1.0 for answering at once (skyrl-gym's
    # compute_score(method="strict", format_score=0.2 / max_turns)): a return maximiser delays.
    report = run_scan("skyrl-gym:gsm8k_multi_turn", env_args={"tasks": MULTI}, quick=True, seed=0,
                      probes=["length"])
    delays = [f for f in report.findings if f.code == "length-bias" and f.severity.name == "FAIL"]
    assert delays and "wrong" in delays[0].summary, [f.summary for f in report.findings]
    assert report.fingerprint["adapter"]["env"] == "gsm8k_multi_turn"


def test_quick_scan_of_text2sql_maps_outcomes_and_tool_statuses():
    # Checked by hand (test_text2sql_answers_are_graded_by_its_row_comparison): a failing query
    # pays 0 like a valid one and the final grade reads only the format and the solution, so a
    # failed tool call costs nothing beyond its turn and the failures probe has nothing to report.
    report = run_scan("skyrl-gym:text2sql", env_args=SQL_OPTIONS, quick=True, seed=0, probes=["failures"])
    eps, steps = report.records.episodes, report.records.steps
    assert {"success", "failure", "timeout"} <= set(eps["outcome"])
    assert {"ok", "error"} <= set(steps["tool_status"].dropna())
    assert (eps.loc[eps["outcome"] == "success", "return"] == 1.0).all()
    assert (eps.loc[eps["outcome"] == "timeout", "return"] == -1.0).all()
    assert not [f for f in report.findings if f.probe == "failures"], [f.summary for f in report.findings]


def test_quick_scan_of_gsm8k_reports_no_incentive():
    # Checked by hand: every catalogue strategy that is not the reference earns exactly 0 (the
    # strict extractor reads the first '#### N', so hedges and partial answers fail; prose without
    # '####' finds no answer), and the reference with trailing text is still the correct answer
    # (reward 1, success): nothing but success pays, so no probe should report an incentive.
    report = run_scan("skyrl-gym:gsm8k", env_args={"tasks": GSM8K}, quick=True, seed=0,
                      probes=["replay", "intent", "exploits", "length", "failures"])
    assert not [f for f in report.findings if f.severity.name in ("WARN", "FAIL")], [f.summary for f in report.findings]
    assert report.exploration["episodes"] > 0


# -- usage errors -------------------------------------------------------------------------------------
def test_cli_scans_with_tasks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = main(["scan", "skyrl-gym:gsm8k", "--tasks", GSM8K, "--quick", "--probes", "replay",
               "--out", "out", "--no-progress"])
    assert rc == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["env_id"] == "skyrl-gym:gsm8k" and report["fingerprint"]["adapter"]["rows"] == 10


def test_missing_tasks_is_a_usage_error_naming_the_option(capsys):
    assert main(["scan", "skyrl-gym:gsm8k", "--quick", "--no-progress"]) == 2
    assert "--tasks rows.jsonl" in capsys.readouterr().err


def test_missing_package_exits_2_naming_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "skyrl_gym", None)  # as if not installed
    assert main(["scan", "skyrl-gym:gsm8k", "--tasks", GSM8K, "--no-progress"]) == 2
    assert "pip install 'envaudit-rl[skyrl]'" in capsys.readouterr().err


@pytest.mark.parametrize("content, suffix, expected", [
    ('{"prompt": [{"role": "user", "content": "hi"}], "env_class": "gsm8k"\n', ".jsonl", "line 1: not valid JSON"),
    ('{"env_class": "gsm8k", "reward_spec": {"ground_truth": "1"}}\n', ".jsonl", "has no 'prompt'"),
    ('{"prompt": [{"role": "user", "content": "hi"}], "env_class": "gsm8k"}\n', ".jsonl", "reward_spec field is required"),
    ('{"prompt": [{"role": "user", "content": "hi"}], "env_class": "aime"}\n', ".jsonl", "rows are for env_class aime"),
    ("prompt,answer\nhi,1\n", ".csv", "expected a .jsonl, .json or .parquet file"),
])
def test_bad_row_files_are_usage_errors(tmp_path, capsys, content, suffix, expected):
    path = tmp_path / f"rows{suffix}"
    path.write_text(content)
    assert main(["scan", "skyrl-gym:gsm8k", "--tasks", str(path), "--no-progress"]) == 2
    assert expected in capsys.readouterr().err


def test_other_usage_errors(capsys):
    assert main(["scan", "skyrl-gym:text2sql", "--tasks", SQL, "--no-progress"]) == 2
    assert "--env-arg db_path=DIR" in capsys.readouterr().err
    assert main(["scan", "skyrl-gym:gsm8", "--tasks", GSM8K, "--no-progress"]) == 2
    assert "did you mean 'gsm8k'" in capsys.readouterr().err
    assert main(["scan", "skyrl-gym:gsm8k", "--tasks", "no/such/rows.jsonl", "--no-progress"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["scan", "skyrl-gym:gsm8k", "--tasks", GSM8K, "--env-arg", f"tasks={MULTI}", "--no-progress"]) == 2
    assert "disagree" in capsys.readouterr().err
    pytest.importorskip("reasoning_gym")
    assert main(["scan", "reasoning-gym:leg_counting", "--tasks", GSM8K, "--no-progress"]) == 2
    assert "takes no --tasks" in capsys.readouterr().err


def test_run_scan_env_args_belong_to_a_spec_string():
    from envaudit.errors import UsageError

    with pytest.raises(UsageError, match="functools.partial"):
        run_scan(lambda: _env("gsm8k", {"tasks": GSM8K}), env_args={"tasks": GSM8K}, quick=True)
