"""The failures probe on envs whose failure incentives are known by construction.

``RetryTask`` (a ``ToolEnv``, tests/fixtures/exploit_envs.py): every failed call pays
``error_credit - failure_cost``; the honest oracle makes ``need * p / (1 - p)`` failed fetches on
average at failure rate ``p``, so it earns ``1 - failure_cost * need * p / (1 - p)`` while giving up
earns 0. ``TaskEnv`` (plain Gymnasium, tests/fixtures/protocol_envs.py): a failed search pays
``error_reward``. Bundled variants carry their planted code and expected severity.
"""

from __future__ import annotations

import functools
import time

import gymnasium as gym
import pytest

from envaudit.envs import VARIANTS
from envaudit.findings import Severity
from envaudit.probes.failures import SWEEP_RATES, probe
from tests.fixtures import exploit_envs, protocol_envs
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
    # Every failed call pays error_credit, whatever the tool: all four tools are caught.
    assert set(rewarded) == {"fetch", "submit", "give_up", "status"}
    f = rewarded["fetch"]
    ev = f.evidence
    assert ev["source"] == "fault injection" and ev["n"] >= 10
    assert ev["mean_reward_failed"] == pytest.approx(p["error_credit"]) and ev["mean_reward_ok"] == 0.0
    # Failing every call at will: error_credit on each of max_steps steps, more than a success (1).
    assert ev["farm_mean_return"] == pytest.approx(p["error_credit"] * p["max_steps"])
    assert f.severity == Severity.FAIL and ev["p_value"] <= ctx.config.alpha
    assert "exploration" in ev  # fetch also fails naturally, so exploration backs it up
    kept = {int(e) for r in ctx.kept for e in r.episodes["episode_id"]}
    assert f.examples and set(f.examples) <= kept


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
