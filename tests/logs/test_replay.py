"""Replay of a logged run against the env: the unseeded variant diverges, its clean twin does not.

FlakySearch-Unseeded draws the hidden answer from Python's global random, so a replayed episode
that answers gets the logged answer graded against a fresh hidden answer: the reward of the
answering step (the episode's last) differs whenever the two answers differ (3 times in 4), and no
step before it differs (tool failures and latencies come from the seeded generator).
"""

from __future__ import annotations

import pytest

from envaudit.config import ScanConfig
from envaudit.logs.audit import run_logs
from envaudit.testing.logs import Drift, generate_log

UNSEEDED = "envaudit/FlakySearch-Unseeded-v0"


def test_a_non_replayable_env_is_named_with_its_first_diverging_step():
    run = generate_log(UNSEEDED, drift=Drift("none"), iterations=2, groups=4, group_size=4, sloppy=0.0)
    report = run_logs(run, ScanConfig(), env=UNSEEDED)
    [finding] = [f for f in report.findings if f.code == "non-replayable"]
    assert str(finding.severity) == "fail"
    table = report.tables["replay_episodes"]
    diverged = table[table["diverged"]]
    assert len(diverged) >= 1
    # The answer is the last step: every divergence is there, in the reward.
    assert (diverged["step"] == diverged["logged_steps"] - 1).all()
    assert set(diverged["field"]) == {"reward"}
    first = diverged.iloc[0]
    assert f"at step {int(first['step'])}" in finding.summary
    assert finding.evidence["off_policy_step_share"] > 0


def test_the_clean_twin_replays():
    run = generate_log(drift=Drift("stall", start=0), iterations=2, groups=4, group_size=4)
    report = run_logs(run, ScanConfig(), env="envaudit/FlakySearch-v0")
    assert not [f for f in report.findings if f.code == "non-replayable"]
    assert not report.tables["replay_episodes"]["diverged"].any()


def test_replay_without_seeds_says_which_column_is_missing():
    run = generate_log(drift=Drift("none"), iterations=2, groups=2, group_size=2)
    run.episodes = run.episodes.drop(columns=["seed"])
    report = run_logs(run, ScanConfig(), env="envaudit/FlakySearch-v0")
    status = next(p for p in report.probes if p.name == "replay")
    assert status.status == "skipped" and "seed" in status.error
    # the replay that could not run is in the "could not check" finding and makes the report incomplete
    assert {(i["probe"], i["skipped"]) for i in report.incomplete} >= {("replay", "the whole replay")}
    [note] = [f for f in report.findings if f.probe == "logs"]
    assert "non-replayable unchecked" in note.summary and "seed" in note.evidence["columns"]


@pytest.mark.parametrize("env", ["no_such_module:make"])
def test_an_env_that_cannot_be_made_is_a_usage_error(env):
    from envaudit.resolve import UsageError

    run = generate_log(drift=Drift("none"), iterations=1, groups=1, group_size=2)
    with pytest.raises(UsageError):
        run_logs(run, ScanConfig(), env=env)


def test_a_log_whose_success_flags_the_env_contradicts_does_not_replay():
    """The clean env, its log's success flags negated on the episodes it solved: every step replays,
    the env's own verdict on the last step does not."""
    run = generate_log(drift=Drift("none"), iterations=2, groups=4, group_size=4)
    solved = run.episodes["success"].eq(True).fillna(False)
    assert solved.any()
    run.episodes.loc[solved, "success"] = False
    report = run_logs(run, ScanConfig(), env="envaudit/FlakySearch-v0")
    table = report.tables["replay_episodes"]
    diverged = table[table["diverged"]]
    assert set(diverged["field"]) == {"success"}
    assert set(diverged["log_episode_id"]) == set(run.episodes.loc[solved, "episode_id"].astype(str))
    assert (diverged["step"] == diverged["logged_steps"] - 1).all()
    assert (diverged["logged"] == "False").all() and (diverged["replayed"] == "True").all()
    [finding] = [f for f in report.findings if f.code == "non-replayable"]
    assert finding.evidence["fields"] == {"success": int(solved.sum())}
