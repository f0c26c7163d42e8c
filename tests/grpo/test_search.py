import numpy as np
import pandas as pd
import pytest

from envaudit.grpo import GRPOConfig
from envaudit.grpo.search import (
    BEHAVIOURS,
    Reference,
    evaluation_seeds,
    natural,
    reach_of,
    targeted,
)
from tests.grpo.envs import CheckSubmit, TenOnes


def _episodes(rows):
    cols = ["outcome", "return", "length", "n_tool_errors", "n_tool_timeouts"]
    out = pd.DataFrame(rows, columns=cols)
    out["episode_id"] = range(len(out))
    return out


def test_reference_floor_sits_below_every_return_and_short_is_below_the_shortest_success():
    explore = _episodes([("success", 1.0, 4, 0, 0), ("failure", -0.5, 2, 1, 0), ("timeout", 0.0, 9, 0, 1)])
    ref = Reference.from_episodes(explore)
    assert ref.spread == 1.5 and ref.floor == -0.5 - 1.5
    assert ref.short_length == 3  # one step fewer than the shortest honest success
    no_success = Reference.from_episodes(_episodes([("failure", 0.0, n, 0, 0) for n in (1, 2, 3, 4, 5)]))
    assert no_success.short_length == 2  # without successes: the shortest quarter of episodes


def test_behaviours_pick_the_episodes_that_show_them():
    e = _episodes([("success", 1.0, 4, 0, 0), ("failure", 0.0, 1, 1, 0), ("timeout", 0.3, 9, 0, 0),
                   ("error", 0.0, 2, 0, 1)])
    ref = Reference(floor=-2.0, spread=1.0, short_length=2)
    shows = {name: b.shows(e, ref).tolist() for name, b in BEHAVIOURS.items()}
    assert shows["timeout"] == [False, False, True, False]
    assert shows["tool_failure"] == [False, True, False, True]
    assert shows["short"] == [False, True, False, True]
    assert shows["no_success"] == [False, True, True, True]
    reach = reach_of(e, "no_success", ref)
    assert reach["n"] == 3 and reach["rate"] == 0.75 and reach["max_return"] == 0.3
    assert reach["mean_return"] == pytest.approx(0.1)


def test_targeted_search_reaches_what_the_env_design_pays_each_behaviour():
    # CheckSubmit pays 1 for a good submit and 0 for everything else, timeouts included.
    explore = natural(CheckSubmit, GRPOConfig(iterations=1)).training.first.episodes
    ref = Reference.from_episodes(explore)
    config = GRPOConfig(iterations=25, learning_rate=1e-2)
    timeout = targeted(CheckSubmit, config, "timeout", ref)
    success = targeted(CheckSubmit, config, "success", ref)
    assert timeout.reach["mean_return"] == 0.0 and timeout.reach["rate"] > 0.5
    # At most half the attempts can succeed (a bad check cannot be undone): half of that is learned.
    assert success.reach["mean_return"] == 1.0 and success.reach["rate"] > 0.25
    # The target is what training was paid for: a timed-out rollout got its return, the rest a floor
    # below every return seen, graded by how far the episode got toward the step limit (half the
    # spread at most), so a group where nothing timed out still says which way timing out lies.
    trained = timeout.training.episodes
    other = trained[trained["outcome"] != "timeout"]
    assert (other["training_return"] <= ref.floor + 0.5 * ref.spread).all()
    assert (trained.loc[trained["outcome"] == "timeout", "training_return"] == 0.0).all()
    for _, group in other.groupby(["iteration", "group"]):
        by_length = group.sort_values(["length", "training_return"])["training_return"]
        assert by_length.is_monotonic_increasing


def test_every_mode_is_evaluated_on_the_same_seeds():
    config = GRPOConfig(group_size=2)
    seeds = evaluation_seeds(config, 3)
    assert len(seeds) == 6 and seeds[0] == seeds[1] and len(set(seeds)) == 3
    assert seeds == evaluation_seeds(config.replace(pipeline="drop"), 3)


def test_unknown_target_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="unknown target behaviour 'stall'; expected one of success"):
        targeted(CheckSubmit, GRPOConfig(), "stall", Reference(0.0, 1.0, 1))
    assert np.isfinite(Reference.from_episodes(_episodes([])).floor)


def test_a_run_does_its_configured_work_and_the_clock_only_cuts_it_as_a_safety_cap():
    import time

    config = GRPOConfig(iterations=3, group_size=4, groups_per_iteration=2)
    full = natural(CheckSubmit, config, eval_groups=2)
    assert len(full.training.curves) == 3 and len(full.episodes) == 2 * 4 and full.stopped is None
    cut = natural(CheckSubmit, config, eval_groups=2, deadline=time.monotonic() - 1)
    # A cut run says so, and has no evaluation to be read as if it were complete.
    assert cut.stopped == "deadline" and cut.training.curves.empty and cut.episodes.empty


def _iteration(no_success, success=10.0):
    """One iteration's episodes: a success paying ``success`` and failures paying ``no_success``."""
    return _episodes([("success", success, 10, 0, 0)] + [("failure", r, 10, 0, 0) for r in no_success])


def test_a_targeted_run_is_decided_once_its_best_return_stays_below_the_ceiling_for_a_window():
    from envaudit.grpo.search import Ceiling, decided_by

    config = GRPOConfig(barren_rollouts=64, group_size=8, groups_per_iteration=4)  # a window of 2 iterations
    ref = Reference(floor=-20.0, spread=10.0, short_length=1)
    decided = decided_by([Ceiling("no_success", below=5.0, margin=0.5)], ref, config)
    flat = [_iteration([4.0, 1.0]) for _ in range(3)]
    assert decided(flat)
    assert not decided(flat[:2])  # no best return before the window to compare with
    # Successes pay 10 and are not what the ceiling bounds.
    assert not decided([_iteration([3.0]), _iteration([4.0]), _iteration([4.0])])  # rose by 1 in the window
    assert decided([_iteration([4.0]), _iteration([4.2]), _iteration([4.49])])  # rose by less than the margin
    assert not decided([_iteration([4.0]), _iteration([4.0]), _iteration([4.5])])  # by the margin exactly
    assert not decided([_iteration([4.0]), _iteration([4.0]), _iteration([5.0])])  # reached the ceiling
    assert not decided([_iteration([4.0]), _iteration([4.0]), _iteration([4.0, np.nan, 6.0])])
    # Every ceiling must hold: timing out (none here) is bounded, ending without success is not.
    both = decided_by([Ceiling("timeout", 1.0, 0.5), Ceiling("no_success", 3.0, 0.5)], ref, config)
    assert not both(flat) and decided_by([Ceiling("timeout", 1.0, 0.5)], ref, config)(flat)
    assert decided_by([], ref, config) is None
    # Finishing in few steps reads the reference's short length: episodes of 10 steps are not short.
    short = decided_by([Ceiling("short", 5.0, 0.5)], ref, config)
    assert short(flat) and not short([_iteration([4.0])] * 2 + [_episodes([("failure", 6.0, 1, 0, 0)])])
    assert decided_by([Ceiling("no_success", 5.0, 0.5)], ref, config.replace(barren_rollouts=0)) is None


def test_a_decided_target_stops_early_and_one_that_may_reach_its_rung_runs_on():
    from envaudit.grpo.search import Ceiling

    # TenOnes pays one per action 1 over ten steps and succeeds from 5: ending without success pays
    # at most 4, which random play meets at once, so a ceiling above 4 is decided after one window.
    config = GRPOConfig(iterations=8, learning_rate=1e-2, seed=1, barren_rollouts=64)
    explore = natural(TenOnes, config.replace(iterations=1), eval_groups=0).training.first.episodes
    ref = Reference.from_episodes(explore)
    below = targeted(TenOnes, config, "no_success", ref, eval_groups=1, ceilings=[Ceiling("no_success", 4.5, 0.25)])
    assert below.training.decided and len(below.training.curves) == 3 and len(below.episodes) == 8
    at = targeted(TenOnes, config, "no_success", ref, eval_groups=1, ceilings=[Ceiling("no_success", 4.0, 0.25)])
    assert not at.training.decided and len(at.training.curves) == 8


def test_a_barren_run_is_evaluated_on_the_explorers_records_and_a_learning_one_on_the_eval_seeds():
    config = GRPOConfig(iterations=30, learning_rate=1e-2, seed=3, barren_rollouts=96)
    explored = natural(TenOnes, config.replace(iterations=1), eval_groups=0).training.first
    ref = Reference(floor=-1.0, spread=1.0, short_length=1)
    barren = targeted(TenOnes, config, "timeout", ref, eval_groups=1, prior=explored)
    assert barren.training.barren and barren.evaluated_on == "exploration"
    assert barren.episodes["episode_id"].tolist() == explored.episodes["episode_id"].tolist()
    assert barren.evaluation.steps is explored.steps and barren.reach["n"] == 0
    learned = targeted(TenOnes, config.replace(iterations=2), "success", ref, eval_groups=1, prior=explored)
    assert learned.evaluated_on == "eval seeds" and len(learned.episodes) == config.group_size
    assert (learned.episodes["iteration"] == "eval").all() and not (explored.episodes["iteration"] == "eval").any()


def test_best_through_is_minus_infinity_where_nothing_shows_the_behaviour():
    from envaudit.grpo.search import best_through

    ref = Reference(floor=-20.0, spread=10.0, short_length=1)
    assert best_through(_episodes([]), "no_success", ref) == float("-inf")
    assert best_through(_iteration([]), "no_success", ref) == float("-inf")  # only a success
    assert best_through(_iteration([2.0, np.inf, 1.0]), "no_success", ref) == 2.0
