"""Issue 25, class 4: oscillation farming, judged by the counterfactual engine.

``Pacing`` (length 5, bonus 0.1, step limit 50) pays 0.1 for each step forward and nothing for a
step back: one forward-back lap pays 0.1 and comes back to the cell it started from, so ``k`` more
laps then 'finish' pay ``0.1 k`` more than finishing at once from the same state. With about 23
laps that is over 2, more than the oracle's honest success (5 steps forward, then finish: 1.5):
``length-bias`` at ``fail``. The clean twin charges 0.1 for the step back: a lap nets 0, no
window pays, no cycle finding.
"""

from __future__ import annotations

import pytest

from envaudit.config import ScanConfig
from envaudit.scan import run_scan
from tests.fixtures.counterfactual_envs import Pacing


def _cycle_findings(back_cost: float) -> list:
    report = run_scan(lambda: Pacing(back_cost=back_cost), ScanConfig(seed=0, fail_on="never", probes=("length",)),
                      env_id="pacing")
    return [f for f in report.findings if f.code == "length-bias" and "cycle" in f.evidence]


def test_pacing_forward_and_back_for_a_bonus_is_farming_at_fail():
    (found,) = _cycle_findings(0.0)
    assert str(found.severity) == "fail"
    e = found.evidence
    assert sorted(e["cycle"]) == ["back", "forward"] and e["returns_to_same_observation"] == 1.0
    assert e["cycle_vs_end_now"]["mean"] == pytest.approx(0.1 * e["laps"])
    assert e["success_source"] == "the env's oracle on the same seeds" and e["mean_success"] == pytest.approx(1.5)
    assert e["replay_steps"] > 0 and found.examples


def test_a_step_back_that_costs_what_the_step_forward_paid_is_quiet():
    assert _cycle_findings(0.1) == []


# -- the screen: loops random play never walks twice ------------------------------------------------
def _cycle_report(back_cost: float, exits: int):
    report = run_scan(lambda: Pacing(back_cost=back_cost, exits=exits),
                      ScanConfig(seed=0, quick=True, fail_on="never", probes=("length",)), env_id="pacing-exits")
    (length,) = [p for p in report.probes if p.name == "length"]
    return [f for f in report.findings if f.code == "length-bias" and "cycle" in f.evidence], length.notes


def test_a_loop_that_random_play_ends_too_soon_to_walk_twice_is_found_by_the_screen():
    """With five more actions that end the episode, random play ends most episodes within a few
    steps: the (back, forward) window is never seen back to back, so exploration hands over no
    cycle. The screen starts where 'forward' paid and tries the other non-ending action ('back') as
    the way back: the lap comes back to the same cell and pays 0.1, so the loop is judged as on the
    plain Pacing env, at fail (23 laps pay 2.3 more than exiting at once, above the oracle's 1.5)."""
    (found,), notes = _cycle_report(0.0, 5)
    e = found.evidence
    assert e["cycle"] == ["back", "forward"] and e["windows_seen"] == 0  # from the screen, not exploration
    assert str(found.severity) == "fail" and e["returns_to_same_observation"] == 1.0
    assert e["cycle_vs_end_now"]["mean"] == pytest.approx(0.1 * e["laps"])
    assert e["honest_ending"].startswith("exit_") and e["mean_success"] == pytest.approx(1.5)
    assert notes["cycle"]["cycle"] == ["back", "forward"]


def test_the_screen_is_quiet_when_the_step_back_charges_the_bonus_back():
    found, notes = _cycle_report(0.1, 5)
    assert found == [] and "cycle" not in notes


def test_laps_return_when_most_lap_starts_are_the_first_ones_observation():
    from envaudit.probes.length.cycles import _laps_return

    # prefix of 4 steps whose last lap (2 steps) started at index 2; then 3 laps: starts 4, 6, 8
    same = ["r", "s", "A", "x", "A", "x", "A", "x", "A", "e"]
    assert _laps_return(same, 4, 2, 3)
    flaky = ["r", "s", "A", "x", "B", "x", "A", "x", "A", "e"]  # one lap's start shows a failed call
    assert _laps_return(flaky, 4, 2, 3)
    gone = ["r", "s", "A", "x", "B", "x", "C", "x", "A", "e"]  # two of three elsewhere
    assert not _laps_return(gone, 4, 2, 3)
    assert not _laps_return(same[:9], 4, 2, 3) and not _laps_return(None, 4, 2, 3) and not _laps_return([], 4, 2, 3)


def test_paying_prefixes_end_where_the_action_first_paid_and_cover_the_other_seeds():
    import pandas as pd

    from envaudit.probes.length.cycles import _paying_prefixes

    steps = pd.DataFrame([
        # episode 0, seed 10: action 1 pays at step 2 (and again at 3: the first time counts)
        *({"episode_id": 0, "step": t, "action": a, "reward": r} for t, (a, r) in enumerate([(0, 0.0), (2, 0.0), (1, 0.5), (1, 0.5)])),
        # episode 1, seed 11: pays at step 0
        {"episode_id": 1, "step": 0, "action": 1, "reward": 0.5}, {"episode_id": 1, "step": 1, "action": 3, "reward": 0.0},
        # episode 2, seed 10 again: pays at step 1 (a second episode of seed 10 is not kept)
        {"episode_id": 2, "step": 0, "action": 0, "reward": 0.0}, {"episode_id": 2, "step": 1, "action": 1, "reward": 0.5},
        # episode 3, seed 12: action 1 never pays
        {"episode_id": 3, "step": 0, "action": 1, "reward": 0.0},
    ])
    episodes = pd.DataFrame({"episode_id": [0, 1, 2, 3], "seed": [10, 11, 10, 12]})
    prefixes = _paying_prefixes(steps, episodes, 1)
    by_seed = {p.seed: p for p in prefixes}
    assert [p.seed for p in prefixes] == [11, 10, 12]  # the earliest paying step first
    assert by_seed[11].actions == (1,) and by_seed[11].source == 1
    assert by_seed[10].actions == (0, 1) and by_seed[10].source == 2
    assert by_seed[12].actions == (1,) and by_seed[12].source is None  # the shortest, on a seed it never paid on
    assert _paying_prefixes(steps, episodes, 7) == []


def test_a_cycle_and_its_rotations_share_one_name():
    from envaudit.probes.length.cycles import _rotation

    assert _rotation((3, 1)) == _rotation((1, 3)) == (1, 3)
    assert _rotation((2, 0, 1)) == _rotation((0, 1, 2)) == _rotation((1, 2, 0)) == (0, 1, 2)
    assert _rotation((2, 1, 0)) == (0, 2, 1) != _rotation((0, 1, 2))  # the other direction is another cycle


def test_one_candidate_per_cycle_the_one_with_more_prefixes():
    from envaudit.counterfactual import Cycle, Prefix
    from envaudit.probes.length.cycles import one_per_cycle

    seen = Cycle((4, 0), 0.2, 9, [Prefix(s, (0, 4, 0)) for s in range(4)])  # random play, 4 seeds
    screened = Cycle((4, 0), 0.3, 0, [Prefix(s, (0, 4, 0)) for s in range(8)])  # the screen, every seed
    turned = Cycle((0, 4), 0.2, 12, [Prefix(s, (4, 0, 4)) for s in range(8)])  # the same loop, other start
    other = Cycle((1, 2), 0.1, 8, [Prefix(s, (1, 2)) for s in range(3)])
    assert one_per_cycle([seen, other, screened]) == [screened, other]
    assert one_per_cycle([turned, screened]) == [turned]  # a tie keeps the first
    assert one_per_cycle([seen, turned]) == [turned]
    assert one_per_cycle([]) == []


def test_repeats_pay_when_every_repeat_pays_and_the_state_stays_put():
    """A call that pays every time without moving (step farming) is no cycle's second half; one that
    moves the state, or stops paying, is."""
    import pandas as pd

    from envaudit.counterfactual import Played, Prefix
    from envaudit.counterfactual.engine import Episode
    from envaudit.probes.length.cycles import _repeats_pay

    def played(rewards, digests):
        steps = pd.DataFrame({"reward": [0.0, 0.0] + rewards})  # a 2-step prefix, then the repeats and the ending
        ep = Episode(7, float(sum(rewards)), False, len(steps), True, False, steps, start=2)
        return Played([Prefix(0, (1, 1))], episodes={"alone": {0: ep}}, observations={"alone": {0: digests}})

    farm = played([0.2, 0.2, 0.2, 0.2, 0.0], ["r", "a", "P", "P", "P", "P", "P"])
    assert _repeats_pay(farm, "alone", 0, 2)
    assert not _repeats_pay(played([0.2, 0.0, 0.2, 0.2, 0.0], ["r", "a", "P", "P", "P", "P", "P"]), "alone", 0, 2)
    assert not _repeats_pay(played([0.2, 0.2, 0.2, 0.2, 0.0], ["r", "a", "P", "Q", "R", "S", "T"]), "alone", 0, 2)
    assert not _repeats_pay(played([0.2, 0.2, 0.2, 0.2, 0.0], ["r", "a", "P", "P", "P", "P", "Q"]), "alone", 0, 2)
    assert not _repeats_pay(farm, "alone", 1, 2) and not _repeats_pay(farm, "other", 0, 2)
    assert not _repeats_pay(played([0.2], ["r", "a", "P"]), "alone", 0, 2)  # nothing repeated


def _pacing_exploration(seeds, paying_seeds):
    """Exploration steps of ``Pacing(exits=5)`` by hand: on ``paying_seeds`` an episode that steps
    forward (pays 0.1) then exits; on the others one that steps back (nothing to undo) then exits.
    Actions: 0 back, 1 forward, 2 finish, 3.. exits."""
    import pandas as pd

    steps, episodes = [], []
    for eid, seed in enumerate(seeds):
        acts = [(1, 0.1), (3, 0.0)] if seed in paying_seeds else [(0, 0.0), (3, 0.0)]
        steps += [{"episode_id": eid, "step": t, "action": a, "reward": r} for t, (a, r) in enumerate(acts)]
        episodes.append({"episode_id": eid, "seed": seed})
    return pd.DataFrame(steps), pd.DataFrame(episodes)


@pytest.mark.parametrize("back_cost, found", [(0.0, True), (0.1, False)])
def test_the_screen_names_the_way_back_and_hands_every_seed_a_lap(back_cost, found):
    from envaudit.counterfactual import Counterfactuals, from_runner
    from envaudit.probes.length.cycles import screened_cycles
    from envaudit.rollout import Runner

    engine = Counterfactuals(from_runner(Runner(lambda: Pacing(back_cost=back_cost, exits=5))), tag="test")
    seeds = list(range(100, 110))
    steps, episodes = _pacing_exploration(seeds, paying_seeds={101, 104})
    cycles = screened_cycles(engine, steps, episodes, {2, 3, 4, 5, 6, 7}, 3, 50)
    if not found:  # the step back charges the bonus back: a lap nets 0
        assert cycles == []
        return
    (cycle,) = cycles
    assert cycle.actions == (0, 1) and cycle.pay == pytest.approx(0.1) and cycle.count == 0
    # every exploration seed, the two where 'forward' paid first (their own prefixes), one lap appended
    assert [p.seed for p in cycle.prefixes] == [101, 104, 100, 102, 103, 105, 106, 107, 108, 109]
    assert all(p.actions == (1, 0, 1) for p in cycle.prefixes)
    assert [p.source for p in cycle.prefixes[:2]] == [1, 4] and cycle.prefixes[2].source is None


def test_the_screen_needs_enough_seeds_room_and_a_paying_action():
    from envaudit.counterfactual import Counterfactuals, from_runner
    from envaudit.probes.length.cycles import screened_cycles
    from envaudit.rollout import Runner

    engine = Counterfactuals(from_runner(Runner(lambda: Pacing(exits=5))), tag="test")
    enders = {2, 3, 4, 5, 6, 7}
    steps, episodes = _pacing_exploration(list(range(100, 107)), paying_seeds={101})  # 7 seeds < 8
    assert screened_cycles(engine, steps, episodes, enders, 3, 50) == []
    steps, episodes = _pacing_exploration(list(range(100, 110)), paying_seeds={101})
    assert screened_cycles(engine, steps, episodes, enders, 3, 7) == []  # the prefix, 3 laps and an ending: 8 steps
    assert len(screened_cycles(engine, steps, episodes, enders, 3, 8)) == 1
    nothing_paid = steps.assign(reward=0.0)
    assert screened_cycles(engine, nothing_paid, episodes, enders, 3, 50) == []
    assert screened_cycles(engine, steps.iloc[0:0], episodes, enders, 3, 50) == []
