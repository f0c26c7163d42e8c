"""``same_state.prefix_faults``: the faults an episode was played with, before its last step, so the
counterfactual engine replays it into the same state (``Prefix.faults``); ``failed_call_premium``:
what a failed call pays beyond any step, from the same state, on ``FlakyLookup`` (its failed
lookup pays ``failure_pay - step_cost``; every ordinary step ``-step_cost``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envaudit.probes._shared.same_state import failed_call_premium, prefix_faults
from tests.fixtures.context import explore
from tests.fixtures.counterfactual_envs import FlakyLookup


def _episode(statuses, injected) -> pd.DataFrame:
    return pd.DataFrame({"step": range(len(statuses)), "tool_status": statuses, "injected": injected})


def test_injected_faults_before_the_last_step_are_the_prefix_faults():
    ep = _episode(["timeout", "ok", "error", "timeout"], [True, False, True, True])
    # The last step is the one replaced by each continuation: its fault is not part of the prefix.
    assert prefix_faults(ep) == ((0, "timeout"), (2, "error"))


def test_an_episode_without_injection_has_no_prefix_faults():
    assert prefix_faults(_episode(["timeout", "ok"], [False, None])) == ()
    assert prefix_faults(pd.DataFrame({"step": [0, 1], "tool_status": ["ok", "ok"]})) == ()


def test_an_injected_step_whose_status_cannot_be_forced_again_is_no_prefix():
    assert prefix_faults(_episode(["ok", "ok"], [True, False])) is None


def _failed_call_premium(failure_pay: float, error_rate: float = 0.7) -> dict | None:
    ctx = explore(lambda: FlakyLookup(error_rate=error_rate, failure_pay=failure_pay, step_cost=0.01), episodes=96)
    try:
        eps = ctx.exploration.episodes
        return failed_call_premium(ctx, eps, ctx.exploration.steps, 1.0, np.random.default_rng(0), tag="test",
                                   min_effect=0.1)
    finally:
        ctx.close()


def test_a_failed_lookup_that_pays_what_any_step_pays_has_no_premium():
    # Class 3: the lookup fails 70% of the time and a failed call costs the step cost, as an ok
    # one does; retrying is the only honest way, and failing pays nothing beyond its step.
    out = _failed_call_premium(0.0)
    assert out is not None and out["n_pairs"] >= 8 and not out["holds"]
    assert out["mean"] == pytest.approx(0.0) and out["step_reference"] == pytest.approx(-0.01)
    assert out["replay_steps"] > 0


def test_a_failed_lookup_that_pays_has_the_premium_it_pays():
    out = _failed_call_premium(0.2)
    assert out["holds"] and out["mean"] == pytest.approx(0.2)
