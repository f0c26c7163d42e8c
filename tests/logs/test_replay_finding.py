"""The ``non-replayable`` finding and the replay's notes, on a log of the Corridor env
(tests/logs/replay_envs.py) built so every number is known:

- ``a`` (seed 2: wait, search, answer) replays exactly: return 0.9, 3 steps, nothing off-policy.
- ``b`` (seed 3: search, answer) logs 1.0 for the answer, which pays 0 on an odd seed: it diverges
  at step 1 in the reward; steps 1.. of its 2 are off-policy (1); replayed return -0.1 against the
  logged 0.9, a gap of 1.0.
- ``c`` (seed 4: wait, then action 7, which the env does not have) raises: it diverges from its first
  step (its 2 steps off-policy) and has no replayed return (left out of the mean gap).

So 2 of 3 diverged, 3 of the 7 logged steps come after a divergence, and the mean return gap is
(0 + 1.0) / 2 = 0.5.
"""

from __future__ import annotations

import math

import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.logs.replay import replay_run
from tests.logs.replay_envs import ANSWER, SEARCH, WAIT, episode, logged, make_corridor

FIX = ("Draw every random choice of reset and step from the env's seeded generator (self.np_random), "
       "never from global random state or the clock, so a seed and the actions replay the episode.")


def replayed():
    """The log of the module docstring, replayed (by each test: milliseconds)."""
    b = episode("b", 3, [SEARCH, ANSWER])
    b["steps"][1]["reward"] = 1.0
    b["return"] = 0.9
    eps = [episode("a", 2, [WAIT, SEARCH, ANSWER]), b, episode("c", 4, [WAIT, 7])]
    return replay_run(logged(eps), make_corridor, ScanConfig())


def test_the_replay_table_has_one_row_per_replayed_episode():
    outcome = replayed()
    table = outcome.table
    assert list(table.columns) == ["episode_id", "log_episode_id", "seed", "logged_steps", "logged_return",
                                   "replayed_return", "replayed_steps", "diverged", "step", "field", "logged",
                                   "replayed"]
    assert list(table["episode_id"]) == [0, 1, 2] and list(table["log_episode_id"]) == ["a", "b", "c"]
    assert list(table["seed"]) == [2, 3, 4] and list(table["logged_steps"]) == [3, 2, 2]
    assert list(table["logged_return"]) == pytest.approx([0.9, 0.9, 0.0])
    assert table["replayed_return"].iloc[:2].tolist() == pytest.approx([0.9, -0.1])
    assert math.isnan(table["replayed_return"].iloc[2])
    assert list(table["replayed_steps"]) == [3, 2, 0]
    assert list(table["diverged"]) == [False, True, True]
    assert table[["field", "logged", "replayed"]].iloc[0].isna().all()
    assert table["field"].iloc[1:].tolist() == ["reward", "exception"]
    assert table["logged"].iloc[1:].tolist() == ["1.0", "a step"]
    assert table["replayed"].iloc[1:].tolist() == ["0.0", "ValueError: no action 7"]
    assert table["step"].iloc[1] == 1 and all(s is None or math.isnan(s) for s in table["step"].iloc[[0, 2]])


def test_the_notes_count_the_divergences_the_off_policy_share_and_the_return_gap():
    outcome = replayed()
    assert outcome.status == "ok" and outcome.error is None
    assert outcome.notes == {"env": "make_corridor", "replayed": 3, "diverged": 2,
                             "off_policy_step_share": pytest.approx(3 / 7), "mean_return_gap": pytest.approx(0.5)}


def test_the_finding_names_the_first_diverging_episode_and_the_numbers():
    outcome = replayed()
    [finding] = outcome.findings
    assert (finding.code, finding.severity, finding.probe) == ("non-replayable", Severity.FAIL, "replay")
    assert finding.title == "Logged episodes do not replay on make_corridor"
    assert finding.summary == (
        "Replayed with their logged seeds and actions, 2 of 3 logged episodes diverged from the log; first: "
        "episode b (seed 3) at step 1, reward logged 1.0 vs replayed 0.0. 43% of the replayed steps come "
        "after a divergence: off-policy for what the env returns now (mean return gap 0.50).")
    assert finding.fix == FIX
    assert finding.examples == [1, 2]


def test_the_evidence_lists_the_divergences():
    outcome = replayed()
    [finding] = outcome.findings
    evidence = dict(finding.evidence)
    divergences = evidence.pop("divergences")
    assert evidence == {"behaviour": "non-replayable", "reward_path": "env", "source": "logs",
                        "env": "make_corridor", "n_replayed": 3, "n_diverged": 2, "first_step": 1,
                        "first_field": "reward", "fields": {"reward": 1, "exception": 1},
                        "off_policy_step_share": pytest.approx(3 / 7), "mean_return_gap": pytest.approx(0.5)}
    assert divergences[0] == {"log_episode_id": "b", "seed": 3, "step": 1, "field": "reward", "logged": "1.0",
                              "replayed": "0.0"}
    c = divergences[1]
    assert c["step"] in (None, "nan")   # no step known: the env raised (evidence is JSON: NaN as text)
    assert {k: v for k, v in c.items() if k != "step"} == {
        "log_episode_id": "c", "seed": 4, "field": "exception", "logged": "a step",
        "replayed": "ValueError: no action 7"}


def test_a_single_step_log_diverging_at_it_is_wholly_off_policy():
    eps = [episode("only", 3, [ANSWER], success=True)]     # the env says an odd seed's answer is wrong
    out = replay_run(logged(eps), make_corridor, ScanConfig())
    assert out.notes["off_policy_step_share"] == 1.0 and out.notes["mean_return_gap"] == 0.0
    assert out.findings[0].evidence["first_field"] == "success"


def test_the_evidence_keeps_the_first_five_divergences():
    # seven odd seeds each logged as paid for their answer: all seven diverge at step 0
    eps = [episode(f"e{i}", 2 * i + 1, [ANSWER], success=False) for i in range(7)]
    for ep in eps:
        ep["steps"][0]["reward"] = 1.0
        ep["return"] = 1.0
    out = replay_run(logged(eps), make_corridor, ScanConfig())
    [finding] = out.findings
    assert finding.evidence["n_diverged"] == 7 and finding.evidence["fields"] == {"reward": 7}
    assert [d["log_episode_id"] for d in finding.evidence["divergences"]] == ["e0", "e1", "e2", "e3", "e4"]
    assert finding.examples == [0, 1, 2, 3, 4]
    assert out.notes["off_policy_step_share"] == 1.0 and out.notes["mean_return_gap"] == pytest.approx(1.0)
    assert "7 of 7 logged episodes diverged" in finding.summary and "(mean return gap 1.00)" in finding.summary
