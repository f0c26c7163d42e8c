"""Issue 25, class 4 in the generator: ``step_back`` with a forward bonus, clean (charged back) and
the ``oscillation`` flaw (not charged back), in an observation without a clock.

Every expected number comes from the spec: a forward step pays ``forward_bonus`` (plus the
potential difference and, the first time only, progress shaping's bonus), a step back charges
the bonus and the potential back unless the flaw leaves the charge out; each step costs
``step_cost``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from envaudit.families import flawed_case, make_cases, random_success_probability
from envaudit.families.analysis import honest_success_return
from envaudit.families.generate import PACING_SHARE
from envaudit.families.spec import EnvSpec, Flaw, ToolSpec

from .play import honest, play, random_labels, sequence

OSCILLATING = [flawed_case(7, i, kind="oscillation") for i in range(4)]
PACED = [c.spec for c in make_cases(60, 0, seed=11) if c.spec.step_back]


def _pace(spec: EnvSpec, seed: int = 0):
    """One step forward (retrying the first path tool until it works), then laps of (step_back, the
    same tool) until the step limit ends the episode."""
    first = f"call_{spec.path[0]}"

    def choose(t, obs, steps):
        if not any(s.label == first and s.status == "ok" for s in steps):
            return first
        return "step_back" if steps[-1].label == first else first

    return play(spec, choose, seed)


def test_clean_bases_draw_pacing_in_their_share_and_flawed_bases_do_not():
    clean = make_cases(200, 0, seed=3)
    share = np.mean([c.spec.step_back for c in clean])
    assert abs(share - PACING_SHARE) < 4 * np.sqrt(PACING_SHARE * (1 - PACING_SHARE) / 200)
    for c in clean:
        s = c.spec
        assert s.step_back == (s.forward_bonus > 0) == (not s.clock_observed)
        assert "step_back" in s.labels if s.step_back else "step_back" not in s.labels
    flawed = make_cases(0, 60, seed=3)
    assert all(c.spec.step_back == (c.kind == "oscillation") for c in flawed)


@pytest.mark.parametrize("spec", PACED[:4], ids=lambda s: s.label)
def test_a_clean_lap_nets_only_its_step_costs_and_comes_back_to_the_same_observation(spec):
    ep = _pace(spec)
    first_ok = next(i for i, s in enumerate(ep.steps) if s.label == f"call_{spec.path[0]}" and s.status == "ok")
    steps = ep.steps
    # a lap that steps back from progress 1 (the forward step before it worked) and forward again
    ok_pairs = [(steps[i], steps[i + 1]) for i in range(first_ok + 1, len(steps) - 1)
                if steps[i].label == "step_back" and steps[i - 1].status == "ok" and steps[i + 1].status == "ok"
                and not steps[i + 1].truncated]
    assert ok_pairs
    for back, forward in ok_pairs:
        assert back.label == "step_back" and back.reward + forward.reward == pytest.approx(-2 * spec.step_cost)
        assert np.array_equal(forward.obs, ep.steps[first_ok].obs)  # no clock: the same state looks the same
        assert forward.obs[-1] == 0.0


@pytest.mark.parametrize("case", OSCILLATING, ids=lambda c: c.name)
def test_the_oscillation_flaw_keeps_the_bonus_on_the_step_back(case):
    spec = case.spec
    twin = replace(spec, flaw=None)
    assert spec.flaw.amount == spec.forward_bonus > 0 and twin.forward_bonus == spec.forward_bonus
    for seed in range(3):
        flawed, clean = _pace(spec, seed), _pace(twin, seed)
        assert [s.label for s in flawed.steps] == [s.label for s in clean.steps]  # same statuses: same draws
        backs = [s for s in flawed.steps if s.label == "step_back"]
        moved = [i for i, s in enumerate(flawed.steps) if s.label == "step_back"
                 and flawed.steps[i - 1].status == "ok"]
        # the flawed step back pays the step cost only; the twin's charges the bonus back too
        for i in moved:
            assert flawed.steps[i].reward == pytest.approx(-spec.step_cost - (spec.potential(1) - spec.potential(0)))
            assert clean.steps[i].reward == pytest.approx(flawed.steps[i].reward - spec.forward_bonus)
        assert backs and flawed.ret - clean.ret == pytest.approx(spec.forward_bonus * len(moved))


@pytest.mark.parametrize("case", OSCILLATING, ids=lambda c: c.name)
def test_pacing_to_the_step_limit_out_earns_honest_success_only_on_the_flawed_env(case):
    spec, twin = case.spec, replace(case.spec, flaw=None)
    seeds = range(12)
    farm = np.mean([_pace(spec, s).ret for s in seeds])
    farm_twin = np.mean([_pace(twin, s).ret for s in seeds])
    walked = [play(spec, honest(spec), s) for s in seeds]
    assert np.mean([e.success for e in walked]) > 0.5
    honest_ret = np.mean([e.ret for e in walked])
    assert honest_ret == pytest.approx(honest_success_return(spec), abs=0.5 * spec.success_reward)
    # sized at 1.2-1.6 times the honest success for the worst failure rate on the path
    assert farm >= 1.2 * honest_ret
    assert farm_twin < honest_ret and farm_twin <= spec.forward_bonus + 1e-9


def test_progress_shaping_pays_each_path_step_once():
    spec = EnvSpec(tools=(ToolSpec("a"), ToolSpec("b")), path=("a", "b"), max_steps=12, shaping="progress",
                   shaping_scale=0.4, step_back=True, forward_bonus=0.05, clock_observed=False)
    ep = play(spec, sequence(["call_a", "step_back", "call_a", "call_b"], lambda t, o, s: "submit"), 0)
    assert [s.reward for s in ep.steps] == pytest.approx([0.25, -0.05, 0.05, 0.25, 1.0])
    assert ep.success


def test_the_clock_is_observed_unless_the_spec_says_not():
    base = EnvSpec(tools=(ToolSpec("a"),), path=("a",), max_steps=4)
    seen = play(base, sequence(["call_a"], lambda t, o, s: "submit"), 0)
    assert seen.steps[0].obs[-1] == pytest.approx(0.25)
    hidden = play(replace(base, clock_observed=False), sequence(["call_a"], lambda t, o, s: "submit"), 0)
    assert hidden.steps[0].obs[-1] == 0.0 and np.array_equal(hidden.steps[0].obs[:-1], seen.steps[0].obs[:-1])


def test_random_success_probability_counts_the_step_back():
    spec = EnvSpec(tools=(ToolSpec("a", error_rate=0.2), ToolSpec("b")), path=("a", "b"), max_steps=6,
                   step_back=True, forward_bonus=0.1, clock_observed=False, wrong_answer_ends=False)
    p = random_success_probability(spec)
    n = 4000
    wins = np.mean([play(spec, random_labels(spec, np.random.default_rng(50_000 + s)), s).success for s in range(n)])
    assert abs(wins - p) <= 4 * np.sqrt(p * (1 - p) / n)
    # without the step back the path is easier to finish
    assert random_success_probability(replace(spec, step_back=False)) != pytest.approx(p)


def test_an_oscillation_flaw_needs_the_step_back_and_a_bonus():
    base = EnvSpec(tools=(ToolSpec("a"),), path=("a",), max_steps=9)
    with pytest.raises(ValueError, match="needs the step_back action and a forward_bonus > 0"):
        replace(base, flaw=Flaw("oscillation", amount=0.1))
    with pytest.raises(ValueError, match="needs the step_back action and a forward_bonus > 0"):
        replace(base, step_back=True, flaw=Flaw("oscillation", amount=0.1))
    with pytest.raises(ValueError, match="forward_bonus is paid and must be >= 0"):
        replace(base, forward_bonus=-0.1)
    assert replace(base, step_back=True, forward_bonus=0.1, flaw=Flaw("oscillation", amount=0.1)).labels[-1] == "step_back"
