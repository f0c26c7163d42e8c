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
from tests.grpo.envs import CheckSubmit


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
