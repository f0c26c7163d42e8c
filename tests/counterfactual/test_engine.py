"""The counterfactual engine on a real env: continuations from the same prefix, their returns as the
env's design says, paired differences and their test, and the cost in env steps.

``PartialCredit`` (need 15, credit 0.5, step limit 20): from a prefix with ``p`` research steps,
submitting pays ``0.5 * p / 15``; waiting to the step limit pays the same partial credit (plus
``limit_bonus`` in the flawed twin).
"""

from __future__ import annotations

import numpy as np
import pytest

from envaudit.counterfactual import (
    Counterfactuals,
    Prefix,
    end_now,
    forced,
    from_runner,
    idle_then_end,
    paired_test,
    run_into_limit,
)
from envaudit.rollout import Runner
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.counterfactual_envs import PartialCredit, PartialCreditDesk

RESEARCH, WAIT, SUBMIT = 0, 1, 2


def _engine(bonus: float = 0.0) -> Counterfactuals:
    return Counterfactuals(from_runner(Runner(lambda: PartialCredit(limit_bonus=bonus))), tag="test")


def test_continuations_from_the_same_prefix_pay_what_the_env_says():
    prefixes = [Prefix(s, (RESEARCH,) * p + (WAIT,)) for s, p in zip(range(10), range(10), strict=True)]
    played = _engine(bonus=0.25).play(prefixes, [end_now(SUBMIT, name="submit"), idle_then_end(WAIT, 3, SUBMIT),
                                                 run_into_limit(WAIT)])
    for i, prefix in enumerate(prefixes):
        credit = 0.5 * prefix.actions.count(RESEARCH) / 15
        assert played.get("submit", i).ret == pytest.approx(credit)
        assert played.get("idle-3-end-2", i).ret == pytest.approx(credit)
        limit = played.get("step-limit", i)
        assert limit.ret == pytest.approx(credit + 0.25) and limit.truncated and limit.length == 20
    diffs, where = played.pairs("step-limit", "submit")
    assert where == list(range(10)) and np.allclose(diffs, 0.25)
    # Cost: each episode's steps, counted per continuation.
    lengths = [len(p.actions) for p in prefixes]
    assert played.steps["submit"] == sum(n + 1 for n in lengths)
    assert played.steps["idle-3-end-2"] == sum(n + 4 for n in lengths)
    assert played.steps["step-limit"] == 20 * len(prefixes) and played.cost == sum(played.steps.values())


def test_an_ending_continuation_that_does_not_end_is_left_out():
    # WAIT never ends the episode: "end now with WAIT" runs on to the step limit, which is no ending.
    played = _engine().play([Prefix(0, (RESEARCH,))], [end_now(WAIT, name="wait")])
    assert played.get("wait", 0) is None and played.diverged["wait"] == 1


def test_a_prefix_replays_with_its_faults_and_a_continuation_forces_its_own():
    # PartialCreditDesk: a research call that times out makes no progress. The prefix's first
    # research timed out when it was played (an injection run's episode), so its state has 2
    # progress, not 3; the continuation's forced timeout on submit ends nothing.
    engine = Counterfactuals(from_runner(Runner(PartialCreditDesk)), tag="test")
    prefixes = [Prefix(3, (RESEARCH,) * 3, faults=((0, "timeout"),)), Prefix(4, (RESEARCH,) * 3)]
    played = engine.play(prefixes, [end_now(SUBMIT, name="submit"), forced(SUBMIT, "timeout", then=(WAIT,))])
    assert [played.get("submit", i).ret for i in (0, 1)] == pytest.approx([0.5 * 2 / 15, 0.5 * 3 / 15])
    timed = played.get("2-timeout", 0)
    assert timed.truncated and timed.tail["tool_status"].iloc[0] == "timeout"
    assert list(timed.steps["tool_status"][:3]) == ["timeout", "ok", "ok"]
    assert timed.ret == pytest.approx(0.5 * 2 / 15)  # the step limit's partial credit, same state


def test_prefixes_that_share_a_seed_each_play_from_their_own_state():
    prefixes = [Prefix(7, (RESEARCH,) * 3), Prefix(7, (WAIT,) * 3)]
    played = _engine().play(prefixes, [end_now(SUBMIT, name="submit")])
    assert played.get("submit", 0).ret == pytest.approx(0.1) and played.get("submit", 1).ret == 0.0


def test_paired_test_pays_when_significant_and_material():
    rng = np.random.default_rng(0)
    out = paired_test(np.full(10, 0.5), 5.0, rng, alpha=0.05, min_effect=0.1)
    assert out["pays"] and out["mean"] == 0.5 and out["n_pairs"] == 10 and out["p_value"] == pytest.approx(2.0 ** -10)
    assert not paired_test(np.full(10, 0.5), 5.01, rng, alpha=0.05, min_effect=0.1)["pays"]  # below the bar
    assert not paired_test(-np.full(10, 0.5), 1.0, rng, alpha=0.05, min_effect=0.1)["pays"]  # one-sided
    few = paired_test(np.full(MIN_SAMPLES - 1, 1.0), 1.0, rng, alpha=0.05, min_effect=0.1)
    assert few["underpowered"] and not few["pays"] and few["p_value"] == 1.0
    assert paired_test(np.array([]), 1.0, rng, alpha=0.05, min_effect=0.1)["mean"] is None
