"""The generator: same seed, same envs; every code planted in equal shares; specs validated once."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from envaudit.config import ScanConfig
from envaudit.families import (
    CODE_ORDER,
    EXPECTED,
    FLAW_KINDS,
    TOLERATED,
    EnvSpec,
    Flaw,
    ToolSpec,
    flawed_case,
    make_cases,
    make_env,
    random_success_probability,
)
from envaudit.families.generate import KINDS_BY_CODE
from envaudit.findings import CODES

from .play import play, random_labels

CASES = make_cases(30, 34, seed=3)


def test_same_seed_gives_the_same_cases_and_another_seed_other_ones():
    again = make_cases(30, 34, seed=3)
    assert [c.spec for c in again] == [c.spec for c in CASES]
    assert [c.name for c in again] == [c.name for c in CASES]
    other = make_cases(30, 34, seed=4)
    assert sum(a.spec == b.spec for a, b in zip(other, CASES, strict=True)) == 0


def test_case_i_does_not_depend_on_how_many_cases_are_drawn():
    # A benchmark run of 40 and one of 100 share their first 40 envs.
    small = make_cases(5, 7, seed=3)
    assert [c.spec for c in small[:5]] == [c.spec for c in CASES[:5]]
    assert [c.spec for c in small[5:]] == [c.spec for c in CASES[30:37]]


def _trace(case, seed):
    try:
        episode = play(case, random_labels(case.spec, np.random.default_rng(seed)), seed)
    except RuntimeError as exc:  # raise-in-state: the same raise at the same point is a replay too
        return str(exc)
    return [(s.label, s.status, repr(s.reward), s.terminated, s.truncated, s.info, s.obs.tolist())
            for s in episode.steps]


@pytest.mark.parametrize("case", CASES[::5] + CASES[30::3], ids=lambda c: c.name)
def test_same_reset_seed_and_actions_replay_exactly(case):
    if case.kind.startswith("unseeded"):  # (a hashed answer replays within one process)
        pytest.skip("planted non-replayable")
    for seed in range(4):
        assert _trace(case, seed) == _trace(case, seed)


def test_every_code_of_the_catalogue_is_planted_in_equal_shares():
    assert set(FLAW_KINDS.values()) == set(CODES)
    flawed = [c for c in make_cases(0, 3 * len(CODE_ORDER), seed=0)]
    per_code = Counter(c.code for c in flawed)
    assert per_code == {code: 3 for code in CODE_ORDER}
    # Over enough cases every kind of every code appears.
    most = max(len(k) for k in KINDS_BY_CODE.values())
    assert most == 4  # length-bias: step-farming, brevity-bonus, delayed-success, oscillation
    kinds = Counter(c.kind for c in make_cases(0, len(CODE_ORDER) * most, seed=1))
    assert set(kinds) == {k for ks in KINDS_BY_CODE.values() for k in ks}


def test_expected_and_tolerated_codes_are_catalogue_codes_and_include_the_filed_one():
    for kind, code in FLAW_KINDS.items():
        assert code in EXPECTED[kind]
        assert EXPECTED[kind] <= set(CODES) and TOLERATED[kind] <= set(CODES)
        assert not EXPECTED[kind] & TOLERATED[kind]


def test_both_bases_regimes_and_clean_features_all_occur():
    clean = [c.spec for c in make_cases(60, 0, seed=0)]
    assert {s.base for s in clean} == {"toolenv", "gym"}
    assert {s.regime for s in clean} == {"rare", "common"}
    assert {s.shaping for s in clean} == {"none", "potential", "progress"}
    assert any(s.step_cost == 0 for s in clean) and any(0.005 <= s.step_cost <= 0.03 for s in clean)
    assert any(s.quit_action for s in clean) and any(not s.quit_action for s in clean)
    assert any(s.grader_false_negative > 0 for s in clean)
    assert any(not s.has_oracle for s in clean)
    assert {len(s.path) for s in clean} >= {1, 2, 4, 8}
    assert all(1 <= len(s.path) <= 8 and s.flaw is None for s in clean)


def test_the_toolenv_and_the_plain_env_of_one_spec_play_identically():
    for case in CASES[:30:3]:
        specs = [replace(case.spec, base=b) for b in ("toolenv", "gym")]
        for seed in range(3):
            a, b = (play(s, random_labels(s, np.random.default_rng(seed)), seed) for s in specs)
            assert [(s.label, s.status, s.reward, s.terminated, s.truncated) for s in a.steps] == \
                   [(s.label, s.status, s.reward, s.terminated, s.truncated) for s in b.steps]


def test_timeout_drop_cases_carry_a_dropping_pipeline_that_scan_config_accepts():
    drops = [flawed_case(0, i, kind="timeout-drop") for i in range(6)]
    for case in drops:
        assert case.spec.flaw is None and case.overrides()
        # Failing outright must be possible, or dropping timeouts lets no failure escape.
        spec = case.spec
        assert spec.wrong_answer_ends or spec.quit_action or spec.degenerate_action
        assert random_success_probability(spec) >= 0.1
        config = ScanConfig(**case.overrides())
        assert config.rollout_pipeline().handling.get("timeout") in ("drop",) or config.pipeline == "rllm"


def test_truncation_credit_is_planted_where_failing_outright_is_possible():
    # Seed 1's cases 2 and 3 were drawn with no ending but the step limit; the flaw "pays more than
    # failing" then needs a way to fail, which the generator adds (wrong answers end the episode).
    for seed in (0, 1, 2):
        for i in range(10):
            spec = flawed_case(seed, i, kind="truncation-credit").spec
            assert spec.wrong_answer_ends or spec.quit_action or spec.degenerate_action
    assert flawed_case(1, 2, kind="truncation-credit").spec.wrong_answer_ends


@pytest.mark.parametrize(("change", "message"), [
    ({"path": ()}, "1 to 8 steps"),
    ({"path": ("nope",)}, "unknown tools"),
    ({"max_steps": 1}, "leaves no room"),
    ({"step_cost": -0.1}, "must be >= 0"),
    ({"shaping": "curiosity"}, "shaping must be one of"),
    ({"flaw": Flaw("brevity-bonus", amount=1.0)}, "needs the give_up action"),
    ({"flaw": Flaw("truncation-credit", amount=1.0), "wrong_answer_ends": False}, "needs an outright failure"),
    ({"flaw": Flaw("sequence-exploit", amount=1.0, sequence=("a", "a"))}, "at least two different"),
])
def test_an_invalid_spec_says_what_to_change(change, message):
    base = dict(tools=(ToolSpec("a"), ToolSpec("b", error_rate=0.2)), path=("a",), max_steps=5)
    with pytest.raises(ValueError, match=message):
        EnvSpec(**{**base, **change})


def test_tool_rates_are_checked():
    with pytest.raises(ValueError, match="at most 1"):
        ToolSpec("x", error_rate=0.7, timeout_rate=0.5)
    with pytest.raises(ValueError, match="unknown flaw kind"):
        Flaw("made-up")


@pytest.mark.parametrize("base", ["toolenv", "gym"])
def test_an_action_outside_the_catalogue_names_the_valid_range(base):
    spec = replace(CASES[0].spec, base=base)
    env = make_env(spec)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=f"0..{len(spec.labels) - 1}"):
        env.step(len(spec.labels))
    with pytest.raises(ValueError, match="not an index"):
        env.step(1.5)
    env.close()
