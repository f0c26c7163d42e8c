"""``replay_run`` on hand-built logs of the Corridor env (tests/logs/replay_envs.py): which episodes are
replayed, what each row of the replay table says, the run's notes and the ``non-replayable`` finding,
all known from the logs' design."""

from __future__ import annotations

import functools
import math

import pytest

from envaudit.conclusion import broken_finding
from envaudit.config import ScanConfig
from envaudit.logs.replay import replay_run
from tests.logs.replay_envs import (
    ANSWER,
    SEARCH,
    SEARCH_REWARD,
    WAIT,
    Corridor,
    LabelledCorridor,
    episode,
    logged,
    make_corridor,
)

NEEDS = "(replay needs each episode's reset seed and its actions)"


def replayed(episodes, env=make_corridor, config=None, **columns):
    return replay_run(logged(episodes, **columns), env, config or ScanConfig())


@pytest.mark.parametrize(("columns", "missing"), [
    ({"episode_columns": ("end_reason", "success")}, "seed"),
    ({"step_columns": ("reward", "tool_status")}, "steps.action"),
    ({"episode_columns": ("end_reason",), "step_columns": ("reward",)}, "seed, steps.action"),
])
def test_a_log_without_seeds_or_actions_is_skipped_naming_the_columns(columns, missing):
    out = replayed([episode(0, 2, [WAIT, ANSWER]), episode(1, 3, [ANSWER])], **columns)
    assert (out.status, out.error) == ("skipped", f"not run: the log has no {missing} column {NEEDS}")
    assert out.table is None and out.findings == [] and out.broken is None


def test_a_log_without_a_step_table_is_skipped_for_its_actions():
    out = replayed([episode(0, 2, [])])
    assert (out.status, out.error) == ("skipped", f"not run: the log has no steps.action column {NEEDS}")


def test_a_log_whose_seeds_are_all_missing_is_skipped_for_its_seeds():
    out = replayed([episode(0, None, [ANSWER]), episode(1, None, [WAIT, ANSWER])])
    assert (out.status, out.error) == ("skipped", f"not run: the log has no seed column {NEEDS}")


def test_a_log_whose_seeded_episodes_have_no_steps_replays_nothing():
    out = replayed([episode("a", None, [WAIT, ANSWER]), episode("b", 2, [])])
    assert (out.status, out.error) == ("skipped", "not run: no logged episode had both a seed and steps")
    assert out.table.empty and out.findings == []
    assert out.notes == {"env": "make_corridor", "replayed": 0}


def test_an_episode_without_steps_is_passed_over_and_the_next_replayed():
    out = replayed([episode("a", 2, []), episode("b", None, [ANSWER]), episode("c", 4, [SEARCH, ANSWER])])
    assert out.status == "ok" and list(out.table["log_episode_id"]) == ["c"]
    assert out.notes["replayed"] == 1


def test_an_exact_log_replays_with_no_finding_and_a_closed_env():
    envs = []

    def make():
        envs.append(LabelledCorridor())
        return envs[-1]

    eps = [episode("a", 2, [WAIT, SEARCH, ANSWER]), episode("b", 3, [WAIT, WAIT, WAIT]),
           episode("c", 5, [SEARCH, ANSWER]), episode("d", 6, [SEARCH])]
    out = replayed(eps, env=make)
    assert out.status == "ok" and out.error is None and out.findings == [] and out.broken is None
    assert out.notes == {"env": "make", "replayed": 4, "diverged": 0, "off_policy_step_share": 0.0,
                         "mean_return_gap": 0.0}
    assert not out.table["diverged"].any()
    assert list(out.table["replayed_steps"]) == [3, 3, 2, 1]
    assert list(out.table["logged_steps"]) == [3, 3, 2, 1]
    assert list(out.table["replayed_return"]) == pytest.approx([0.9, 0.0, SEARCH_REWARD, SEARCH_REWARD])
    assert len(envs) == 1 and envs[0].closed


def test_an_env_without_a_name_is_called_env():
    out = replayed([episode(0, 3, [SEARCH, ANSWER], success=True)], env=functools.partial(Corridor))
    assert out.notes["env"] == "env"
    [finding] = out.findings
    assert finding.title == "Logged episodes do not replay on env" and finding.evidence["env"] == "env"


def broken_factory():
    raise ValueError("no GPU here")


def test_an_env_that_cannot_be_made_is_a_crash_with_the_env_error_finding():
    out = replayed([episode(0, 2, [ANSWER])], env=broken_factory)
    broken = {"stage": "make", "message": "ValueError: no GPU here",
              "where": f"{__file__}:{broken_factory.__code__.co_firstlineno + 1}"}
    assert (out.status, out.error, out.broken) == ("crashed", "ValueError: no GPU here", broken)
    assert out.findings == [broken_finding(broken)]
    assert out.findings[0].code == "env-error" and out.table is None


def test_at_most_REPLAY_EPISODES_are_replayed_spread_over_the_log():
    eps = [episode(i, 2 * i, [ANSWER]) for i in range(100)]
    out = replayed(eps)
    ids = [int(i) for i in out.table["log_episode_id"]]
    # 64 of 100: the first, the last and every one between a step of 99/63 apart
    assert ids == [round(k * 99 / 63) for k in range(64)] and out.notes["replayed"] == 64


def test_quick_replays_a_quarter_of_the_episodes_or_sixteen():
    eps = [episode(i, 2 * i, [ANSWER]) for i in range(40)]
    assert len(replayed(eps).table) == 40
    out = replayed(eps, config=ScanConfig(quick=True))
    ids = [int(i) for i in out.table["log_episode_id"]]
    assert ids == [round(k * 39 / 15) for k in range(16)]
    assert ids[0] == 0 and ids[-1] == 39


def test_a_logged_ending_the_env_does_not_reproduce_diverges():
    # the log says the env ended the episode; it only stopped at the horizon
    out = replayed([episode("a", 3, [WAIT, WAIT, WAIT], end_reason="terminated")])
    row = out.table.iloc[0]
    assert (row["step"], row["field"], row["logged"], row["replayed"]) == (2, "ending", "terminated", "truncated")


def test_a_log_without_end_reasons_compares_no_ending():
    # without the column every episode reads as "terminated"; the horizon's truncations are no divergence
    eps = [episode("a", 3, [WAIT, WAIT, WAIT]), episode("b", 2, [WAIT, SEARCH, ANSWER])]
    out = replayed(eps, episode_columns=("seed", "success"))
    assert out.findings == [] and not out.table["diverged"].any()


def test_a_log_without_step_rewards_or_tool_statuses_compares_neither():
    eps = [episode("a", 3, [WAIT, SEARCH, ANSWER]), episode("b", 2, [SEARCH, WAIT, WAIT])]
    for step_columns in (("action",), ("action", "reward"), ("action", "tool_status")):
        out = replayed(eps, step_columns=step_columns)
        assert out.findings == [] and not out.table["diverged"].any(), step_columns
        assert list(out.table["replayed_return"]) == pytest.approx([SEARCH_REWARD, SEARCH_REWARD])


def test_success_flags_missing_from_the_log_are_not_compared():
    # the flags say nothing (no column, or no value): the env's verdicts contradict nothing
    eps = [episode("a", 2, [ANSWER]), episode("b", 3, [ANSWER])]
    out = replayed(eps, episode_columns=("seed", "end_reason"))
    assert not out.table["diverged"].any()
    eps = [episode("a", 2, [ANSWER], success=None), episode("b", 3, [ANSWER], success=None),
           episode("c", 3, [ANSWER], success=True)]
    out = replayed(eps)
    assert list(out.table["diverged"]) == [False, False, True]
    assert out.table.iloc[2][["field", "logged", "replayed"]].tolist() == ["success", "True", "False"]


def test_an_env_that_raises_on_a_logged_action_diverges_from_its_first_step():
    out = replayed([episode("a", 2, [WAIT, 7])])   # the env has no action 7
    row = out.table.iloc[0]
    assert bool(row["diverged"]) and row["field"] == "exception"
    assert (row["logged"], row["replayed"]) == ("a step", "ValueError: no action 7")
    assert row["step"] is None or math.isnan(row["step"])
    assert math.isnan(row["replayed_return"]) and row["replayed_steps"] == 0
    [finding] = out.findings
    assert "episode a (seed 2) at its first step, exception logged a step vs replayed ValueError: no action 7" \
        in finding.summary
    # the whole episode counts as off-policy
    assert out.notes["off_policy_step_share"] == 1.0
