"""The ladder's building blocks on tables whose answer is known by construction."""

import numpy as np
import pandas as pd

from envaudit.probes._shared.delays import delayed_success
from envaudit.probes.grpo.verdicts import failure_conditioned_endings, quitting_beats_persisting

RNG = np.random.default_rng(0)


def _wins(groups, fast=(1, 1.0), late=(4, 1.3), late_failures=0):
    """Per group two fastest successes (length, return) and two later ones."""
    rows = []
    for g in range(groups):
        rows += [(g, "success", *fast, 0)] * 2 + [(g, "success", *late, late_failures)] * 2 + [(g, "failure", 2, 0.0, 0)]
    e = pd.DataFrame(rows, columns=["group", "outcome", "length", "return", "n_tool_errors"])
    return e.assign(n_tool_timeouts=0, episode_id=range(len(e)), iteration=0)


def test_later_successes_that_earn_more_from_the_same_start_are_delayed_success():
    # Three extra wrong-but-formatted attempts at 0.1 each: 1.3 against 1.0.
    d = delayed_success({"run": _wins(10)}, RNG, margin=0.1, alpha=0.05)
    assert d["holds"] and d["n_sets"] == 10 and d["extra_steps"] == 3
    assert abs(d["test"]["diff"] - 0.3) < 1e-9
    assert d["fastest"] == {"length": 1, "return": 1.0}
    assert set(d["examples"]) == set(_wins(10).query("length == 4")["episode_id"])


def test_a_step_cost_or_a_flat_success_reward_is_not_delayed_success():
    assert not delayed_success({"run": _wins(10, late=(4, 0.94))}, RNG, margin=0.1, alpha=0.05)["holds"]
    assert not delayed_success({"run": _wins(10, late=(4, 1.0))}, RNG, margin=0.1, alpha=0.05)["holds"]
    # Below the margin: a difference too small to change what an agent prefers.
    assert not delayed_success({"run": _wins(10, late=(4, 1.01))}, RNG, margin=0.1, alpha=0.05)["holds"]
    # Too few starts to tell.
    assert not delayed_success({"run": _wins(4)}, RNG, margin=0.1, alpha=0.05)["holds"]


def test_later_successes_with_more_failed_calls_are_not_compared_with_the_fastest():
    # The later successes paid more and hit a failed call each: what paid may be the failure
    # (failure-rewarded), so they are not read as a delay.
    d = delayed_success({"run": _wins(10, late_failures=1)}, RNG, margin=0.1, alpha=0.05)
    assert not d["holds"] and d["n_sets"] == 0


def _endings(pay_after_failure, n=12):
    """Episodes of two steps: search (ok or error), then handoff ending without success."""
    steps, episodes = [], []
    for e in range(2 * n):
        failed = e < n
        steps += [(e, 0, 0, "search", "error" if failed else "ok", -0.01),
                  (e, 1, 2, "handoff", "ok", (pay_after_failure if failed else 0.0) - 0.01)]
        episodes.append((e, "failure", 2, steps[-1][-1] + steps[-2][-1]))
    steps = pd.DataFrame(steps, columns=["episode_id", "step", "action", "action_label", "tool_status", "reward"])
    return steps, pd.DataFrame(episodes, columns=["episode_id", "outcome", "length", "return"])


def test_an_ending_paid_only_after_a_failed_call_is_failure_conditioned():
    steps, episodes = _endings(0.8)
    d = failure_conditioned_endings(steps, episodes, RNG, margin=0.1, alpha=0.05)
    assert d["holds"] and d["actions"] == ["handoff"]
    assert abs(d["ending_after_failure"] - 0.79) < 1e-9 and abs(d["ending_otherwise"] + 0.01) < 1e-9
    assert d["episode_ids"] == list(range(12))
    steps, episodes = _endings(0.0)
    assert not failure_conditioned_endings(steps, episodes, RNG, margin=0.1, alpha=0.05)["holds"]


def _quits_and_persisters(charge, n=16):
    """Quitting at once earns 0. Persisting takes two failed calls at ``charge`` each and then
    succeeds half the time (+1): without the charge persisting earns 0.5, with 0.5 each -0.5."""
    quit = pd.DataFrame({"return": np.zeros(n), "n_tool_errors": 0, "n_tool_timeouts": 0})
    wins = np.arange(n) % 2 == 0
    persist = pd.DataFrame({"return": wins * 1.0 - 2 * charge, "n_tool_errors": 2, "n_tool_timeouts": 0})
    return quit, persist


def test_quitting_beats_persisting_only_when_the_failure_charge_makes_it_pay():
    quit, persist = _quits_and_persisters(0.5)
    d = quitting_beats_persisting(quit, persist, 0.5, RNG, margin=0.1, alpha=0.05)
    assert d["holds"] and d["charged"]["holds"] and not d["refunded"]["holds"]
    assert d["mean_persist"] == -0.5 and d["mean_quit"] == 0.0
    # No charge: persisting pays (0.5 against 0).
    quit, persist = _quits_and_persisters(0.0)
    assert not quitting_beats_persisting(quit, persist, 0.0, RNG, margin=0.1, alpha=0.05)["holds"]
    # Quitting that pays even with failures refunded is not a failure shortcut (persisters that
    # never succeed: something else makes quitting pay).
    quit, persist = _quits_and_persisters(0.5)
    persist["return"] = -2 * 0.5 - 0.3
    d = quitting_beats_persisting(quit, persist, 0.5, RNG, margin=0.1, alpha=0.05)
    assert d["charged"]["holds"] and d["refunded"]["holds"] and not d["holds"]
    quit, persist = _quits_and_persisters(0.5, n=4)
    assert quitting_beats_persisting(quit, persist, 0.5, RNG, margin=0.1, alpha=0.05)["charged"]["underpowered"]


def test_returns_equal_up_to_float_rounding_are_never_a_delay_incentive():
    # The same rewards summed in another order: 2.694 and 2.694 + 2 ulp. Even with no margin at
    # all (a scale read from identical successes), equal returns are no delay incentive.
    same = 2.694
    late = float(np.nextafter(np.nextafter(same, 3.0), 3.0))
    assert late > same
    d = delayed_success({"run": _wins(20, fast=(3, same), late=(4, late))}, RNG, margin=0.0, alpha=0.05)
    assert not d["holds"] and d["test"]["diff"] == 0.0
