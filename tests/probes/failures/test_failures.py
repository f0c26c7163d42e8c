"""The failures probe on envs whose failure incentives are known by construction.

``RetryTask`` (a ``ToolEnv``, tests/fixtures/exploit_envs.py): every failed call pays
``error_credit - failure_cost``; the honest oracle makes ``need * p / (1 - p)`` failed fetches on
average at failure rate ``p``, so it earns ``1 - failure_cost * need * p / (1 - p)`` while giving up
earns 0. ``TaskEnv`` (plain Gymnasium, tests/fixtures/protocol_envs.py): a failed search pays
``error_reward``. ``Booking`` / ``PlainBooking`` and ``Paperwork`` (tests/fixtures/failure_envs.py):
a handoff right after a failed search pays, and failures charged beyond their step, each with a
clean twin. Bundled variants carry their planted code and expected severity.
"""

from __future__ import annotations

import functools
import time

import gymnasium as gym
import pytest

from envaudit.envs import VARIANTS
from envaudit.findings import Severity
from envaudit.probes.failures import probe
from envaudit.probes.failures.sweep import SWEEP_RATES
from envaudit.probes.failures.topup import TOPUP_MAX_EPISODES
from envaudit.protocol import TOOL_ERROR, TOOL_TIMEOUT
from envaudit.stats import MIN_SAMPLES
from tests.fixtures import exploit_envs, failure_envs, protocol_envs
from tests.fixtures.context import run_probe

BAD = (Severity.WARN, Severity.FAIL)
CODES = ("failure-rewarded", "failure-shortcut")


@functools.cache
def _tool_fixture(name: str):
    """Findings and context of the probe on a RetryTask fixture (each fixture explored and probed once)."""
    return run_probe(probe, exploit_envs.FIXTURES[name].make(), episodes=96)


def _only(findings, code):
    return [f for f in findings if f.code == code]


def _bad(findings):
    return [f for f in findings if f.code in CODES and f.severity in BAD]


# -- failure-shortcut on a ToolEnv --------------------------------------------------------------------
def test_giving_up_pays_when_every_failure_costs_more_than_success_is_worth():
    fixture = exploit_envs.FIXTURES["giving_up_pays"]
    findings, ctx = _tool_fixture("giving_up_pays")
    (f,) = _only(findings, "failure-shortcut")
    p = fixture.params
    expected_persist = 1 - p["failure_cost"] * p["need"] * p["error_rate"] / (1 - p["error_rate"])  # -0.5
    ev = f.evidence
    assert f.severity == Severity.FAIL
    assert ev["short_mean_return"] == 0.0  # give up or submit empty-handed: both pay exactly 0
    assert ev["persist_mean_return"] == pytest.approx(expected_persist, abs=0.45)  # n=96, sd of a return ~1.2
    assert ev["p_value"] <= ctx.config.alpha and ev["crossover_rate"] == 0.0
    assert 0 < ev["natural_failure_rate"] < p["error_rate"]  # failed fetches among fetches + one submit
    assert "`give_up`" in f.summary or "`submit`" in f.summary


def test_quitting_after_a_failure_pays_under_costly_bursty_outages():
    fixture = exploit_envs.FIXTURES["outage_costs"]
    findings, ctx = _tool_fixture("outage_costs")
    (f,) = _only(findings, "failure-shortcut")
    p = fixture.params
    clean_run = (1 - p["error_rate"]) ** p["need"]  # no failure on the way: 0.857
    expected_quit = clean_run * 1.0 + (1 - clean_run) * -p["failure_cost"]  # first failure, then quit
    ev = f.evidence
    assert f.severity == Severity.WARN
    assert ev["quit_mean_return"] == pytest.approx(expected_quit, abs=0.2)
    assert ev["short_mean_return"] == 0.0 < ev["persist_mean_return"] < ev["quit_mean_return"]
    assert ev["p_value"] <= ctx.config.alpha


def test_a_failure_cost_that_never_bites_is_a_crossover_fact_only():
    fixture = exploit_envs.FIXTURES["costly_if_it_failed"]
    findings, ctx = _tool_fixture("costly_if_it_failed")
    (f,) = _only(findings, "failure-shortcut")
    p = fixture.params
    # Persisting earns 1 - c * need * r / (1 - r): it drops below giving up (0) only past r = 1 / (1 + c * need).
    break_even = 1 / (1 + p["failure_cost"] * p["need"])
    assert f.severity == Severity.INFO and "p_value" not in f.evidence
    assert break_even < f.evidence["crossover_rate"] <= max(SWEEP_RATES)
    assert f.evidence["natural_failure_rate"] == 0.0


def test_the_failure_sweep_table():
    _, ctx = _tool_fixture("giving_up_pays")
    sweep = ctx.tables["failure_sweep"]
    for column in ("rate", "policy", "mean_return", "ci_low", "ci_high", "success_rate", "mean_length"):
        assert column in sweep
    assert sorted(sweep["rate"].unique()) == list(SWEEP_RATES)
    per_rate = sweep.groupby("rate")["policy"].apply(set)
    assert all(s == per_rate.iloc[0] for s in per_rate) and {"oracle", "quit-on-failure"} <= per_rate.iloc[0]
    # Faults go into fetch only, never into the calls that end the episode: giving up pays 0 at every rate.
    give_up = sweep[sweep["policy"] == "short:give_up"]
    assert (give_up["mean_return"] == 0.0).all() and (give_up["mean_length"] == 1.0).all()
    oracle = sweep[sweep["policy"] == "oracle"].set_index("rate")
    assert oracle.loc[0.6, "mean_return"] < oracle.loc[0.0, "mean_return"]  # more failures, more cost
    assert (oracle["ci_low"] <= oracle["mean_return"]).all() and (oracle["mean_return"] <= oracle["ci_high"]).all()


@pytest.mark.parametrize("name", ["flaky", "outage", "reliable", "flaky_small"])
def test_clean_tool_env_twins_give_no_shortcut_and_no_warning(name):
    findings, _ = _tool_fixture(name)
    assert not _bad(findings), [(f.severity, f.summary) for f in findings]
    assert not _only(findings, "failure-shortcut")  # failures cost nothing: giving up never wins


# -- failure-rewarded ---------------------------------------------------------------------------------
def test_a_failed_call_that_pays_is_confirmed_by_fault_injection():
    fixture = exploit_envs.FIXTURES["attempt_credit"]
    findings, ctx = _tool_fixture("attempt_credit")
    rewarded = {f.evidence["tool"]: f for f in _only(findings, "failure-rewarded")}
    p = fixture.params
    # Every failed call pays error_credit, whatever the tool. fetch, give_up and check_status pay 0
    # when they work, so all three are caught; a working submit pays 1 whenever the task was done,
    # so whether its failure out-pays it depends on how many of the sampled replays had fetched
    # enough (seeds 0-5 of this scan catch it in three): it may be caught, nothing else may be.
    assert {"fetch", "give_up", "status"} <= set(rewarded) <= {"fetch", "submit", "give_up", "status"}
    f = rewarded["fetch"]
    ev = f.evidence
    assert ev["source"] == "fault injection" and ev["n"] >= 10
    assert ev["mean_reward_failed"] == pytest.approx(p["error_credit"]) and ev["mean_reward_ok"] == 0.0
    # Failing every call at will: error_credit on each of max_steps steps, more than a success (1).
    assert ev["farm_mean_return"] == pytest.approx(p["error_credit"] * p["max_steps"])
    assert f.severity == Severity.FAIL and ev["p_value"] <= ctx.config.alpha
    assert "exploration" in ev  # fetch also fails naturally, so exploration backs it up
    kept = {int(e) for r in ctx.kept for e in r.episodes["episode_id"]}
    assert f.examples and set(f.examples) <= kept and len(set(f.examples)) == len(f.examples)
    for e in f.examples:  # each example is a failed fetch that paid the credit
        steps = _steps_of(ctx, e)
        failed = steps[(steps["tool_name"] == "fetch") & steps["tool_status"].isin([TOOL_ERROR, TOOL_TIMEOUT])]
        assert any(r == pytest.approx(p["error_credit"]) for r in failed["reward"])


def test_a_failed_search_that_pays_on_a_plain_env_is_found_from_exploration():
    fixture = protocol_envs.FIXTURES["error_pays"]
    findings, ctx = run_probe(probe, fixture.make(), episodes=128)
    (f,) = _only(findings, "failure-rewarded")
    ev = f.evidence
    assert ev["source"] == "exploration" and ev["tool"] == "search" and ev["status"] == "error"
    assert ev["mean_reward_failed"] == pytest.approx(fixture.params["error_reward"]) and ev["mean_reward_ok"] == 0.0
    # Repeating search pays error_reward on the error_rate share of max_steps calls: 0.72 < success (1).
    p = {"max_steps": 8, **fixture.params}
    expected_farm = p["search_error_rate"] * p["error_reward"] * p["max_steps"]
    assert f.severity == Severity.WARN and ev["farm_mean_return"] == pytest.approx(expected_farm, abs=0.4)
    assert "`search`" in f.summary


# -- failure-rewarded on a plain env whose calls rarely fail ------------------------------------------
RARE_CREDIT = {"search_error_rate": 0.06, "error_reward": 0.3}
"""A failed search pays 0.3, a working one 0, but searches fail only 6% of the time: a --quick scan's
64 exploration episodes (8 reset seeds, each played by a GRPO group of 8) make about 60 searches,
so about 3.6 failures, fewer distinct draws, and fewer than MIN_SAMPLES to compare."""


def _failed_searches_explored(ctx) -> int:
    from envaudit.probes.failures.topup import samples_of

    return int((samples_of(ctx.exploration, protocol_envs.SEARCH)["tool_status"] == TOOL_ERROR).sum())


@pytest.mark.parametrize("seed", [0, 1])
def test_failed_calls_that_pay_but_rarely_happen_on_a_plain_env_are_found_by_repeating_the_call(seed):
    findings, ctx = run_probe(probe, lambda: protocol_envs.TaskEnv(**RARE_CREDIT), seed=seed, quick=True,
                              episodes=64)
    assert 0 < _failed_searches_explored(ctx) < MIN_SAMPLES  # exploration alone cannot tell
    (f,) = _only(findings, "failure-rewarded")
    ev = f.evidence
    assert ev["source"] == "targeted episodes" and ev["tool"] == "search" and ev["status"] == TOOL_ERROR
    assert ev["mean_reward_failed"] == pytest.approx(RARE_CREDIT["error_reward"]) and ev["mean_reward_ok"] == 0.0
    assert ev["n"] >= MIN_SAMPLES and ev["n_ok_same_history"] >= MIN_SAMPLES and ev["p_holm_in_probe"] <= 0.05
    assert ev["topup"]["stopped"] == "enough" and 0 < ev["topup"]["episodes"] <= TOPUP_MAX_EPISODES
    # Searching all 8 steps pays 0.3 on 6% of them (about 0.14), far below a success (1): warn.
    assert f.severity == Severity.WARN and ev["farm_mean_return"] < 1.0
    kept = {e for r in ctx.kept for e in r.episodes["episode_id"]} | set(ctx.exploration.episodes["episode_id"])
    assert f.examples and set(f.examples) <= kept
    for e in f.examples[:2]:  # the first examples are failed searches that paid (the rest farm episodes)
        steps = _steps_of(ctx, e)
        paid = steps[(steps["tool_status"] == TOOL_ERROR) & (steps["reward"] == RARE_CREDIT["error_reward"])]
        assert len(paid)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_clean_twin_of_the_rarely_failing_plain_env_is_silent(seed):
    twin = {**RARE_CREDIT, "error_reward": 0.0}
    findings, ctx = run_probe(probe, lambda: protocol_envs.TaskEnv(**twin), seed=seed, quick=True, episodes=64)
    assert 0 < _failed_searches_explored(ctx) < MIN_SAMPLES
    assert not _bad(findings), [(f.severity, f.summary) for f in findings]


def test_a_top_up_that_hits_its_episode_cap_says_so_and_claims_nothing(monkeypatch):
    from envaudit.probes.failures import topup as failure_topup

    monkeypatch.setattr(failure_topup, "TOPUP_MAX_EPISODES", 8)  # about half a failure at 6%
    findings, ctx = run_probe(probe, lambda: protocol_envs.TaskEnv(**RARE_CREDIT), seed=0, quick=True, episodes=64)
    assert not _only(findings, "failure-rewarded")
    note = ctx.notes["failure_rewarded_topup"]["search"]
    assert "after 8 top-up episodes (cap of 8 episodes reached)" in note and "stays open" in note


# -- failure-shortcut on a plain env ------------------------------------------------------------------
COSTLY = {"search_error_rate": 0.6, "error_reward": -0.5}
"""Searches fail 60% of the time and each failure costs 0.5: for need=2, persisting earns about
1 - 0.5 * 2 * 0.6 / 0.4 = -0.5, so ending the episode after a failure pays more."""


def test_plain_env_failure_cost_makes_ending_after_a_failure_pay():
    findings, ctx = run_probe(probe, lambda: protocol_envs.TaskEnv(**COSTLY), episodes=256)
    (f,) = _only(findings, "failure-shortcut")
    ev = f.evidence
    assert f.severity in BAD and ev["p_value"] <= ctx.config.alpha
    # Return is exactly success + error_reward * failures here, so the regression recovers the cost.
    assert ev["failure_cost"] == pytest.approx(COSTLY["error_reward"], abs=1e-6)
    assert ev["mean_after_failure_short"] > ev["mean_after_failure_persist"]


@pytest.mark.parametrize("params", [{"search_error_rate": 0.6}, {"search_error_rate": 0.6, "step_reward": -0.05},
                                    protocol_envs.FIXTURES["flaky"].params])
def test_plain_env_failures_that_cost_nothing_extra_give_no_shortcut(params):
    # The step cost makes short episodes pay better whatever happens, but failures cost nothing extra.
    findings, _ = run_probe(probe, lambda: protocol_envs.TaskEnv(**params), episodes=256)
    assert not _only(findings, "failure-shortcut") and not _bad(findings)


# -- bundled envs, Gymnasium classics, budget ---------------------------------------------------------
PLANTED = [v for v in VARIANTS.values() if set(v.planted) & set(CODES)]
CLEAN = [v for v in VARIANTS.values() if v.is_clean]


@pytest.mark.parametrize("variant", PLANTED, ids=[v.id for v in PLANTED])
def test_bundled_variants_yield_their_planted_code(variant):
    findings, _ = run_probe(probe, lambda: gym.make(variant.id), episodes=128)
    for code in set(variant.planted) & set(CODES):
        hits = [f for f in _only(findings, code) if f.severity in BAD]
        assert hits, f"{variant.id}: {variant.description}; got {[(f.code, f.severity) for f in findings]}"
        if variant.severity:
            assert str(max(f.severity for f in hits)) == variant.severity


@pytest.mark.parametrize("variant", CLEAN, ids=[v.id for v in CLEAN])
def test_bundled_clean_envs_give_no_warning(variant):
    findings, _ = run_probe(probe, lambda: gym.make(variant.id), episodes=128)
    assert not _bad(findings), [(f.severity, f.summary) for f in findings]


@pytest.mark.parametrize("env_id", ["CartPole-v1", "FrozenLake-v1"])
def test_gymnasium_classics_have_no_tools_and_no_findings(env_id):
    findings, _ = run_probe(probe, lambda: gym.make(env_id), episodes=32)
    assert findings == []


def test_an_expired_budget_stops_the_probe_quietly():
    start = time.monotonic()
    findings, ctx = run_probe(probe, exploit_envs.FIXTURES["giving_up_pays"].make(), episodes=32, budget_s=1e-3)
    assert not _bad(findings) and time.monotonic() - start < 5


def test_same_seed_same_findings():
    make = exploit_envs.FIXTURES["giving_up_pays"].make()
    a, _ = run_probe(probe, make, episodes=32, seed=3)
    b, _ = run_probe(probe, make, episodes=32, seed=3)
    assert a and [f.to_dict() for f in a] == [f.to_dict() for f in b]


# -- user-written envs, seeds 0-4 (detection on every flawed seed, no false alarm on any clean one) --
SEEDS = range(5)


@functools.cache
def _user_env(kind: str, flawed: bool, seed: int, **extra):
    """Findings and context on one of tests/fixtures/failure_envs.py's envs, as a --quick scan does."""
    fe = failure_envs
    cls, params, episodes = {
        "booking": (fe.Booking, fe.BOOKING_HANDOFF_PAYS if flawed else fe.BOOKING, 96),
        "booking-oracle": (fe.BookingWithOracle, fe.BOOKING_HANDOFF_PAYS if flawed else fe.BOOKING, 96),
        # A plain env cannot be fault-injected: the probe reads exploration, so it needs more of it
        # (a failed search followed by a handoff is ~1 in 40 random episodes).
        "plain-booking": (fe.PlainBooking, fe.BOOKING_HANDOFF_PAYS if flawed else fe.BOOKING, 512),
        "paperwork": (fe.Paperwork, fe.PAPERWORK_FAILURE_COST if flawed else fe.PAPERWORK, 96),
        "paperwork-no-oracle": (_PaperworkNoOracle, fe.PAPERWORK_FAILURE_COST if flawed else fe.PAPERWORK, 96),
    }[kind]
    return run_probe(probe, lambda: cls(**{**params, **extra}), seed=seed, quick=True, episodes=episodes)


class _PaperworkNoOracle(failure_envs.Paperwork):
    oracle = None  # as most users' envs: the probe derives a persisting policy from exploration


def _steps_of(ctx, episode_id):
    """The recorded steps of one example episode, from the probe's kept records or exploration."""
    for records in [*ctx.kept, ctx.exploration]:
        steps = records.steps[records.steps["episode_id"] == episode_id]
        if len(steps):
            return steps.sort_values("step").reset_index(drop=True)
    raise AssertionError(f"example episode {episode_id} is in no record the report keeps")


def _handoff_after_failed_search(steps) -> bool:
    """Does the episode hand off right after a failed search, and is that handoff paid?"""
    p = failure_envs.BOOKING_HANDOFF_PAYS
    paid = p["handoff_after_failure"] - p["step_cost"]
    return any(steps.loc[i, "tool_name"] == "search" and steps.loc[i, "tool_status"] in (TOOL_ERROR, TOOL_TIMEOUT)
               and steps.loc[i + 1, "action_label"] == "handoff" and steps.loc[i + 1, "reward"] == pytest.approx(paid)
               for i in range(len(steps) - 1))


@pytest.mark.parametrize("kind", ["booking", "plain-booking"])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_handoff_that_pays_right_after_a_failed_search_is_found_with_its_condition_named(kind, seed):
    findings, ctx = _user_env(kind, True, seed)
    # Handing off ends the episode: the failure makes a short trajectory pay, a failure shortcut
    # (and the only one: failures cost only their step, so the sweep has nothing to say).
    (f,) = [f for f in findings if f.code == "failure-shortcut"]
    assert not [g for g in findings if g.code == "failure-rewarded"]
    p = failure_envs.BOOKING_HANDOFF_PAYS
    ev = f.evidence
    # By design: a handoff pays 0.8 - 0.01 right after a failed search and -0.01 after a working one;
    # the episode that does it earns at most 0.78, an honest booking about 0.96: warn, not fail.
    assert f.severity == Severity.WARN and ev["next_action_ends_episode"]
    assert ev["mean_reward_after_failed"] == pytest.approx(p["handoff_after_failure"] - p["step_cost"])
    assert ev["mean_reward_after_ok"] == pytest.approx(-p["step_cost"])
    assert ev["conditioned_path_return"] <= p["handoff_after_failure"] - 2 * p["step_cost"] + 1e-9
    # Without an oracle, honest success is what exploration's successes earned (when it saw any).
    if ev["honest_success_return"] is not None:
        assert ev["conditioned_path_return"] < ev["honest_success_return"]
        assert "less than an honest success" in f.summary
    assert ev["tool"] == "search" and ev["next_action"] == "handoff" and ev["behaviour"] == "tool-failure"
    assert ev["condition"].startswith("right after a failed") and ev["condition"].endswith("`search` call")
    for text in (f.title, f.summary):
        assert "handing off" in text.lower() and "failed" in text and "`search`" in text
    assert "`handoff`" in f.fix and "`search`" in f.fix
    assert f.examples and len(set(f.examples)) == len(f.examples)
    assert all(_handoff_after_failed_search(_steps_of(ctx, e)) for e in f.examples)


@pytest.mark.parametrize("kind", ["booking", "plain-booking"])
@pytest.mark.parametrize("seed", SEEDS)
def test_the_booking_twin_whose_handoff_never_pays_gives_no_warning(kind, seed):
    findings, _ = _user_env(kind, False, seed)
    assert not _bad(findings), [(f.severity, f.summary) for f in findings]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_handoff_after_failure_that_beats_booking_is_a_fail(seed):
    # 1.2 - 0.01 for the handoff (and 0.01 for the failed search) beats an honest booking (~0.96),
    # which the env's oracle measures from the same starts.
    findings, _ = _user_env("booking-oracle", True, seed, handoff_after_failure=1.2)
    (f,) = [f for f in findings if f.code == "failure-shortcut"]
    ev = f.evidence
    assert f.severity == Severity.FAIL and ev["honest_success_source"] == "the env's oracle, from the same starts"
    assert ev["honest_success_return"] == pytest.approx(1 - 3 * 0.01, abs=0.02)  # 3 calls, a few retries
    assert ev["conditioned_path_return"] >= ev["honest_success_return"]
    assert "at least an honest success" in f.summary


@pytest.mark.parametrize("kind", ["paperwork", "paperwork-no-oracle"])
@pytest.mark.parametrize("seed", SEEDS)
def test_giving_up_that_beats_failing_slowly_under_a_step_cost_is_no_flaw(kind, seed):
    # Quitting at once earns -0.02, persisting 0.3 - 0.02 * 5.29 = 0.19: failures cost only their step.
    findings, _ = _user_env(kind, False, seed)
    assert not _bad(findings), [(f.severity, f.summary) for f in findings]


@pytest.mark.parametrize("seed", SEEDS)
def test_failures_charged_beyond_their_step_make_giving_up_a_fail(seed):
    findings, ctx = _user_env("paperwork", True, seed)
    (f,) = [f for f in findings if f.code == "failure-shortcut"]
    p = failure_envs.PAPERWORK_FAILURE_COST
    failures = 3 * p["error_rate"] / (1 - p["error_rate"])  # 1.29 failed calls on the honest path
    expected_persist = p["success_reward"] - p["step_cost"] * (4 + failures) - p["failure_cost"] * failures
    ev = f.evidence
    # Persisting (about -0.45) earns less than quitting or submitting at once (-0.02): never trying pays.
    assert f.severity == Severity.FAIL and ev["short_mean_return"] == pytest.approx(-p["step_cost"])
    assert ev["persist_mean_return"] == pytest.approx(expected_persist, abs=0.3)  # n=64, sd of a return ~0.7
    assert ev["failure_charge"]["max_charge"] == pytest.approx(p["failure_cost"])
    assert ev["short_minus_persist_if_failures_cost_a_step"] <= 0  # the charges are why
    assert "0.5 beyond the step" in f.summary
    assert f.examples and len(set(f.examples)) == len(f.examples)
    for e in f.examples:  # episodes of giving up at once: one step, no success
        steps = _steps_of(ctx, e)
        assert len(steps) == 1 and steps.loc[0, "action_label"] in ("quit", "submit")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_retry_that_pays_only_after_a_failure_is_found(seed):
    # A search that works right after a failed one pays 0.3 more; after a working one it does not.
    findings, _ = _user_env("booking", False, seed, retry_after_failure=0.3)
    (f,) = [f for f in findings if f.code == "failure-rewarded"]
    assert f.severity == Severity.WARN and f.evidence["next_action"] == "search"
    assert f.evidence["diff"] == pytest.approx(0.3) and "right after a failed" in f.summary


@pytest.mark.parametrize("seed", SEEDS)
def test_progress_shaping_that_a_failure_only_delays_is_not_a_failure_condition(seed):
    # The first search that works pays 0.1: after a failed search the retry earns it, after a working
    # one it was already paid. The two steps together pay the same either way.
    findings, _ = _user_env("booking", False, seed, first_find_bonus=0.1)
    assert not _bad(findings), [(f.severity, f.summary) for f in findings]


def _some_slow(values, fast):
    """``values`` as parameters, those not in ``fast`` marked slow (the default run stays small)."""
    return [v if v in fast else pytest.param(v, marks=pytest.mark.slow) for v in values]


# Seed 3: exploration never saw the search fail (a group's episodes share their seed), so only the
# pilot round can tell that it fails.
@pytest.mark.parametrize("seed", _some_slow(SEEDS, fast=(0, 3)))
def test_plain_env_hand_off_is_found_from_targeted_episodes_when_exploration_is_short(seed):
    # 64 random episodes (a --quick scan's exploration) hold about 1.6 failed searches followed by a
    # handoff: too few to test. The probe plays search-then-end from fresh resets itself, as many as
    # the search's own failure rate (30%) needs for MIN_PAIRS failures before each ending action.
    findings, ctx = run_probe(probe, lambda: failure_envs.PlainBooking(**failure_envs.BOOKING_HANDOFF_PAYS),
                              seed=seed, quick=True, episodes=64)
    (f,) = [f for f in findings if f.code == "failure-shortcut"]
    p = failure_envs.BOOKING_HANDOFF_PAYS
    assert f.severity == Severity.WARN and f.evidence["source"] == "targeted episodes"
    assert f.evidence["mean_reward_after_failed"] == pytest.approx(p["handoff_after_failure"] - p["step_cost"])
    assert f.evidence["next_action"] == "handoff" and "`search`" in f.evidence["condition"]
    assert f.examples and all(_handoff_after_failed_search(_steps_of(ctx, e)) for e in f.examples)
    clean, _ = run_probe(probe, lambda: failure_envs.PlainBooking(**failure_envs.BOOKING), seed=seed, quick=True,
                         episodes=64)
    assert not _bad(clean), [(g.severity, g.summary) for g in clean]


@pytest.mark.parametrize("seed", _some_slow(range(4), fast=(0,)))
def test_the_grpo_ladder_hand_off_is_named_by_fault_injection_whatever_grpo_learns(seed):
    # tests/grpo/ladder_envs.Booking: a handoff right after a failed search pays 0.8 - 0.01, after a
    # working one -0.01. Retrying the search and booking (about 0.97) beats handing off (0.78), so a
    # trained policy may well never keep the handoff; the paired fault injection names it anyway.
    from tests.grpo.ladder_envs import Booking as LadderBooking

    findings, _ = run_probe(probe, LadderBooking, seed=seed, quick=True, episodes=128)
    (f,) = [f for f in findings if f.code == "failure-shortcut"]
    assert f.severity == Severity.WARN and f.evidence["source"] == "fault injection"
    assert f.evidence["diff"] == pytest.approx(0.8) and f.evidence["next_action"] == "handoff"
    assert f.evidence["tool"] == "search" and f.evidence["behaviour"] == "tool-failure"
    clean, _ = run_probe(probe, lambda: LadderBooking(handoff_pay=0.0), seed=seed, quick=True, episodes=128)
    assert not _bad(clean), [(g.severity, g.summary) for g in clean]


def _generated(kind, i):
    from dataclasses import replace

    from envaudit.families import flawed_case
    from envaudit.families.case import Case

    case = flawed_case(7, i, kind=kind)
    return case, Case(f"{case.name}-twin", replace(case.spec, flaw=None))


# Instances 2, 6 and 7 are ToolEnvs (fault injection), the others plain Gymnasium envs (targeted episodes).
@pytest.mark.parametrize("i", _some_slow(range(8), fast=(1, 2, 4)))
def test_generated_quit_right_after_a_failure_is_a_failure_shortcut_naming_the_condition(i):
    # envaudit.families' failure-conditioned-quit: give_up right after a failed or timed-out call pays
    # 60-90% of a success; the twin pays nothing for it. ToolEnv bases are fault-injected, plain
    # Gymnasium bases get targeted episodes; a --quick scan's 64 exploration episodes either way.
    case, twin = _generated("failure-conditioned-quit", i)
    findings, ctx = run_probe(probe, case.make_env, quick=True, episodes=64)
    (f,) = [f for f in _bad(findings) if f.code == "failure-shortcut"]
    assert f.evidence["next_action"] == "give_up" and f.evidence["next_action_ends_episode"]
    assert f.evidence["condition"].startswith("right after a") and "giving up right after a" in f.title.lower()
    # The step after the failure pays the planted amount less the step cost (and any potential the
    # ending hands back); after a working call it pays at most the step cost.
    assert f.evidence["mean_reward_after_failed"] > f.evidence["mean_reward_after_ok"]
    assert f.evidence["mean_reward_after_failed"] <= case.spec.flaw.amount + 1e-9
    clean, _ = run_probe(probe, twin.make_env, quick=True, episodes=64)
    assert not _bad(clean), [(g.severity, g.summary) for g in clean]


def test_a_plain_env_where_nothing_ends_an_episode_gets_no_targeted_episodes():
    # envaudit.families' clean-0-3: a plain env whose answers never end the episode and that has no
    # quit action; no action ended an exploration episode, so there is no ending to condition.
    from envaudit.families import clean_case
    from envaudit.probes.failures.conditioned import targeted_tests

    case = clean_case(0, 3)
    assert case.spec.base == "gym" and not case.spec.quit_action and not case.spec.wrong_answer_ends
    findings, ctx = run_probe(probe, case.make_env, quick=True, episodes=64)
    assert not _bad(findings) and targeted_tests(ctx, ctx.rng("t")) == {}
