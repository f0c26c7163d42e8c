"""``same_state.prefix_faults``: the faults an episode was played with, before its last step, so the
counterfactual engine replays it into the same state (``Prefix.faults``)."""

from __future__ import annotations

import pandas as pd

from envaudit.probes._shared.same_state import prefix_faults


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
