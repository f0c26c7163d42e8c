import numpy as np
import pandas as pd
import pytest

from envaudit.pipeline import timeout_handling_pipeline
from envaudit.probes.grpo.drift import drift, failure_cost, rate_increase_p, timeout_favoured


def _eps(outcomes, returns=None, lengths=None, failures=None, groups=None, advantages=None):
    n = len(outcomes)
    returns = returns if returns is not None else [1.0 if o == "success" else 0.0 for o in outcomes]
    return pd.DataFrame({
        "episode_id": range(n), "outcome": outcomes, "return": returns, "training_reward": returns,
        "length": lengths if lengths is not None else [5] * n,
        "n_tool_errors": failures if failures is not None else [0] * n, "n_tool_timeouts": [0] * n,
        "group": groups if groups is not None else [i // 4 for i in range(n)],
        "advantage": advantages if advantages is not None else [0.0] * n,
    })


def _steps(actions_per_episode):
    rows = [(e, t, a) for e, actions in enumerate(actions_per_episode) for t, a in enumerate(actions)]
    return pd.DataFrame(rows, columns=["episode_id", "step", "action"])


RNG = np.random.default_rng(0)
DROP, KEEP = timeout_handling_pipeline("drop"), timeout_handling_pipeline("keep")


def test_rate_increase_p_is_small_only_for_a_real_increase():
    assert rate_increase_p(30, 40, 5, 40) < 1e-6
    assert rate_increase_p(5, 40, 30, 40) > 0.99


def test_timeouts_up_is_an_exploit_when_the_pipeline_pays_a_timeout_more_than_a_failure():
    before = _eps(["failure"] * 30 + ["success"] * 10)
    after = _eps(["timeout"] * 20 + ["failure"] * 5 + ["success"] * 15)
    training = _eps(["timeout", "failure", "success", "success"] * 10, groups=[i // 4 for i in range(40)])
    training["training_return"] = training["return"]
    d = drift(before, _steps([[0]] * 40), after, _steps([[0]] * 40), training, RNG, pipeline=DROP)
    move = next(m for m in d["moves"] if m.key == "timeout")
    assert move.exploit and "would have got a higher advantage by timing out" in move.why
    assert (move.before, move.after) == (0.0, 0.5)
    # The same rise under keep, where a timeout pays what a failure pays, is drift, not an exploit.
    d = drift(before, _steps([[0]] * 40), after, _steps([[0]] * 40), training, RNG, pipeline=KEEP)
    assert not next(m for m in d["moves"] if m.key == "timeout").exploit


def test_length_down_is_an_exploit_only_when_reward_rose_beyond_outcome():
    before = _eps(["failure"] * 30 + ["success"] * 10, returns=[-1.0] * 30 + [1.0] * 10, lengths=[6] * 40)
    gave_up = _eps(["failure"] * 36 + ["success"] * 4, returns=[0.0] * 36 + [1.0] * 4, lengths=[1] * 40)
    d = drift(before, _steps([[0] * 6] * 40), gave_up, _steps([[1]] * 40), gave_up, RNG, pipeline=KEEP)
    length = next(m for m in d["moves"] if m.key == "length")
    # Unsuccessful episodes went from -1 to 0, successful ones stayed at 1: the gain beyond success
    # lies between those two changes, and is clearly positive.
    assert length.exploit and 0.5 < d["beyond_outcome"]["gain"] <= 1.0
    assert d["success_before"] == 0.25 and d["success_after"] == 0.1
    honest = _eps(["success"] * 40, lengths=[3] * 40)  # shorter because it solves the task
    d = drift(_eps(["failure"] * 40, lengths=[6] * 40), _steps([[0] * 6] * 40), honest, _steps([[1] * 3] * 40),
              honest, RNG, pipeline=KEEP)
    assert not next(m for m in d["moves"] if m.key == "length").exploit


def test_one_action_taking_over_is_named_by_its_label():
    before = _eps(["failure"] * 40, returns=[-1.0] * 40)
    after = _eps(["failure"] * 40, returns=[1.0] * 40)
    steps_before = _steps([[a % 3] for a in range(40)])
    d = drift(before, steps_before, after, _steps([[2]] * 40), after, RNG, pipeline=KEEP, labels=["a", "b", "answer_all"])
    takeover = next(m for m in d["moves"] if m.key == "takeover")
    assert takeover.behaviour == "one action taking over (answer_all)" and takeover.exploit


def test_without_a_success_signal_nothing_is_judged_an_exploit():
    before = _eps(["unknown"] * 40, returns=[10.0] * 40, lengths=[10] * 40)
    after = _eps(["timeout"] * 40, returns=[500.0] * 40, lengths=[500] * 40)
    d = drift(before, _steps([[0]] * 40), after, _steps([[0]] * 40), after, RNG, pipeline=KEEP)
    assert not d["success_signal"] and d["beyond_outcome"] is None
    assert d["moves"] and not any(m.exploit for m in d["moves"])


def test_failure_cost_reads_the_price_of_a_failed_call_with_success_held_fixed():
    fails = np.arange(40) % 4
    success = np.arange(40) % 2 == 0
    e = _eps(["success" if s else "failure" for s in success], returns=list(success * 1.0 - 0.5 * fails),
             failures=list(fails))
    cost = failure_cost(e, RNG)
    assert abs(cost["cost_per_failure"] - 0.5) < 1e-9 and cost["p_value"] < 1e-6
    free = _eps(["success" if s else "failure" for s in success], failures=list(fails))
    assert failure_cost(free, RNG)["p_value"] >= 0.5


def test_a_failed_call_that_costs_only_its_step_is_not_charged_beyond_its_time():
    # Every step costs 0.02 (a failed call takes a step like any other) and success pays 1: the
    # failed calls' own coefficient is 0 once length is held fixed.
    rng = np.random.default_rng(1)
    fails = rng.integers(0, 4, 60)
    lengths = fails + rng.integers(1, 6, 60)
    success = rng.random(60) < 0.4
    e = _eps(["success" if s else "failure" for s in success], returns=list(success * 1.0 - 0.02 * lengths),
             lengths=list(lengths), failures=list(fails))
    cost = failure_cost(e, RNG)
    assert abs(cost["cost_per_failure"]) < 1e-9 and cost["cost_per_step"] == pytest.approx(0.02)


def test_timeout_favoured_swaps_each_failure_for_a_timeout_in_its_own_group():
    # Each group: one success (1) and three failures (0). Under drop a failure that had timed out
    # leaves the loss (advantage 0) instead of getting a negative advantage.
    training = _eps(["success", "failure", "failure", "failure"] * 8, groups=[i // 4 for i in range(32)])
    training["training_return"] = training["return"]
    fav = timeout_favoured(training, DROP, RNG)
    assert fav["n_groups"] == 8 and fav["mean_as_timeout"] == 0.0 and fav["mean_as_failure"] < 0
    assert fav["p_value"] < 0.01
    assert timeout_favoured(training, KEEP, RNG)["p_value"] == 1.0  # kept: a timeout is a failure
