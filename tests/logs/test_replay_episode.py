"""``replay_episode`` on the Corridor env (tests/logs/replay_envs.py): logged steps built from the env's
design replay exactly; each test changes one logged value and names the divergence it must give."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from envaudit.logs.replay import _same, _show, replay_episode
from envaudit.protocol import END_TERMINATED, END_TOOL_ERROR, END_TOOL_TIMEOUT, END_TRUNCATED
from tests.logs.replay_envs import (
    ANSWER,
    LABELS,
    SEARCH,
    SEARCH_REWARD,
    WAIT,
    Corridor,
    LabelledCorridor,
    TextCorridor,
    expected_steps,
)

INDEX = {label: i for i, label in enumerate(LABELS)}


def steps(seed: int, actions: list[int], changes: dict[int, dict[str, Any]] | None = None,
          labels: list[str | None] | None = None) -> pd.DataFrame:
    rows = expected_steps(seed, actions)
    for k, change in (changes or {}).items():
        rows[k].update(change)
    for k, row in enumerate(rows):
        row["action_label"] = labels[k] if labels else None
    return pd.DataFrame(rows)


def replay(seed, actions, end_reason=END_TERMINATED, success=None, changes=None, env=None, labels=None, index=None):
    return replay_episode(env or Corridor(), seed, steps(seed, actions, changes, labels), end_reason, index, success)


def test_an_exact_log_replays_with_its_return_and_step_count():
    out = replay(2, [WAIT, SEARCH, ANSWER], success=True)
    assert out["divergence"] is None
    assert out["replayed_steps"] == 3
    assert out["replayed_return"] == pytest.approx(0.0 + SEARCH_REWARD + 1.0)
    # the odd seed's answer pays nothing: the return is the search's cost alone
    out = replay(3, [SEARCH, SEARCH, ANSWER], success=False)
    assert out == {"divergence": None, "replayed_return": pytest.approx(2 * SEARCH_REWARD), "replayed_steps": 3}


def test_a_reward_the_env_no_longer_gives_is_the_divergence_at_its_step():
    # seed 3 answers wrong: the env pays 0 where the log says 1
    out = replay(3, [SEARCH, ANSWER], changes={1: {"reward": 1.0}})
    assert out["divergence"] == {"step": 1, "field": "reward", "logged": 1.0, "replayed": 0.0}
    assert type(out["divergence"]["logged"]) is float and type(out["divergence"]["replayed"]) is float
    assert out["replayed_return"] == pytest.approx(SEARCH_REWARD) and out["replayed_steps"] == 2


def test_only_the_first_divergence_is_kept_and_reward_is_checked_before_tool_status():
    out = replay(2, [SEARCH, SEARCH, ANSWER], changes={0: {"tool_status": "timeout"}, 2: {"reward": 5.0}})
    assert out["divergence"] == {"step": 0, "field": "tool_status", "logged": "timeout", "replayed": "ok"}
    out = replay(2, [SEARCH, ANSWER], changes={0: {"reward": 0.5, "tool_status": "error"}})
    assert out["divergence"] == {"step": 0, "field": "reward", "logged": 0.5, "replayed": -0.1}


def test_a_logged_tool_call_where_the_env_makes_none_replays_as_no_status():
    out = replay(2, [WAIT, ANSWER], changes={0: {"tool_status": "ok"}})
    assert out["divergence"] == {"step": 0, "field": "tool_status", "logged": "ok", "replayed": None}


def test_a_step_whose_tool_status_or_reward_was_not_logged_is_not_compared():
    # the search's status and the answer's reward are missing from the log (None / NaN)
    out = replay(3, [SEARCH, ANSWER], changes={0: {"tool_status": None}, 1: {"reward": float("nan")}})
    assert out["divergence"] is None
    assert out["replayed_return"] == pytest.approx(SEARCH_REWARD)


def test_an_episode_the_env_ends_before_the_log_does_diverges_in_its_ending():
    out = replay(2, [ANSWER, WAIT], changes={1: {"reward": 0.0}})
    assert out["divergence"] == {"step": 0, "field": "ending", "logged": "the episode went on",
                                 "replayed": "the env ended it here"}
    # the replay stops where the env ended: the logged step after it is never taken
    assert out["replayed_steps"] == 1 and out["replayed_return"] == pytest.approx(1.0)


@pytest.mark.parametrize(("end_reason", "actions", "logged", "replayed"), [
    (END_TERMINATED, [WAIT, WAIT, WAIT], "terminated", "truncated"),      # the horizon cut it
    (END_TERMINATED, [WAIT], "terminated", "not ended"),
    (END_TRUNCATED, [WAIT, ANSWER], "truncated", "terminated"),
    (END_TRUNCATED, [WAIT], "truncated", "not ended"),
    (END_TOOL_TIMEOUT, [SEARCH, ANSWER], "truncated", "terminated"),      # a timeout is a truncation
])
def test_a_logged_ending_the_env_does_not_reproduce_diverges_on_the_last_step(end_reason, actions, logged, replayed):
    out = replay(3, actions, end_reason=end_reason)
    assert out["divergence"] == {"step": len(actions) - 1, "field": "ending", "logged": logged,
                                 "replayed": replayed}


@pytest.mark.parametrize(("end_reason", "actions"), [
    (END_TERMINATED, [WAIT, ANSWER]),
    (END_TRUNCATED, [WAIT, SEARCH, WAIT]),
    (END_TOOL_TIMEOUT, [SEARCH, SEARCH, SEARCH]),
    (END_TOOL_ERROR, [SEARCH]),     # a crash has no ending to compare: the env going on is no divergence
    (END_TOOL_ERROR, [WAIT, ANSWER]),
    (None, [WAIT]),
])
def test_an_ending_the_env_reproduces_or_that_says_nothing_replays(end_reason, actions):
    assert replay(3, actions, end_reason=end_reason)["divergence"] is None


@pytest.mark.parametrize(("seed", "success", "replayed"), [(3, True, False), (2, False, True)])
def test_a_success_flag_the_env_contradicts_diverges_on_the_last_step(seed, success, replayed):
    out = replay(seed, [SEARCH, ANSWER], success=success)
    assert out["divergence"] == {"step": 1, "field": "success", "logged": success, "replayed": replayed}


def test_a_success_flag_is_only_compared_when_logged_and_on_an_ending():
    # not logged: the env's verdict is not checked against anything
    assert replay(2, [ANSWER], success=None)["divergence"] is None
    # logged success on an episode cut before its end (a crash): the env's "not yet" is no contradiction
    assert replay(2, [WAIT, SEARCH], end_reason=END_TOOL_ERROR, success=True)["divergence"] is None
    # a truncated episode logged as solved: the env says not solved when it cut it
    out = replay(2, [WAIT, WAIT, WAIT], end_reason=END_TRUNCATED, success=True)
    assert out["divergence"] == {"step": 2, "field": "success", "logged": True, "replayed": False}


def test_logged_labels_are_stepped_by_their_index_in_the_catalogue():
    # the logged codes (7, 8) are nonsense to the env: only the labels say what was done
    out = replay(2, [SEARCH, ANSWER], env=LabelledCorridor(), labels=["search", "answer"], index=INDEX,
                 changes={0: {"action": 7}, 1: {"action": 8}})
    assert out["divergence"] is None and out["replayed_return"] == pytest.approx(SEARCH_REWARD + 1.0)


def test_a_step_without_a_label_is_stepped_by_its_logged_code():
    out = replay(2, [WAIT, ANSWER], env=LabelledCorridor(), labels=[None, None], index=INDEX)
    assert out["divergence"] is None and out["replayed_return"] == pytest.approx(1.0)
    # no catalogue: the code, whatever the label says
    out = replay(2, [WAIT, ANSWER], labels=["answer", "wait"], index=None)
    assert out["divergence"] is None and out["replayed_steps"] == 2


def test_a_label_outside_the_catalogue_is_an_error_naming_it():
    with pytest.raises(KeyError, match="logged action 'jump' is not in the env's action catalogue"):
        replay(2, [WAIT], env=LabelledCorridor(), labels=["jump"], index=INDEX)


def test_a_text_env_is_stepped_with_the_logged_text():
    out = replay(2, [SEARCH, ANSWER], env=TextCorridor(), labels=["search", "answer"],
                 changes={0: {"action": 7}, 1: {"action": 8}})
    assert out["divergence"] is None and out["replayed_return"] == pytest.approx(SEARCH_REWARD + 1.0)


def test_a_text_env_without_a_logged_label_gets_the_code_as_text():
    with pytest.raises(ValueError, match=r"^no action '7'$"):
        replay(2, [WAIT], env=TextCorridor(), changes={0: {"action": 7}})


def test_numbers_compare_with_the_logs_rounding_tolerances():
    assert _same(1000.0, 1000.0005)        # 5e-7 relative: within rtol 1e-6
    assert not _same(1000.0, 1000.005)     # 5e-6 relative: a real difference
    assert _same(0.0, 5e-10)               # within atol 1e-9
    assert not _same(0.0, 5e-9)
    assert _same(np.float32(0.5), 0.5) and _same(np.int64(1), 1.0)


def test_nan_is_only_the_same_as_nan_and_a_number_never_equals_a_non_number():
    assert _same(float("nan"), np.nan)
    assert not _same(float("nan"), 1.0) and not _same(1.0, float("nan"))
    assert not _same(1.0, None) and not _same(None, 1.0) and not _same(0.0, "0.0")
    assert _same("ok", "ok") and not _same("ok", None) and _same(True, True)


def test_a_shown_numpy_float_is_a_plain_float():
    assert type(_show(np.float64(0.25))) is float and _show(np.float32(0.5)) == 0.5
    assert type(_show(np.float32(0.5))) is float
    assert _show("ok") == "ok" and _show(None) is None and _show(True) is True
    assert math.isnan(_show(np.float64("nan")))
