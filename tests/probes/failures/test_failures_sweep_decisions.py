"""The failures probe's sweep (``failures.shortcut_sweep``, ``_Runs``) on a fake desk whose returns
are known by construction.

The desk: action 0 ``search`` (the work; a failed search is charged ``CHARGE``, a working one pays
0), 1 ``answer`` (ends; pays 1 and succeeds when a search worked before it, else 0), 2 ``giveup``
(ends; pays ``GIVEUP``). How many times a seed's search fails before it works is the world's
``fails(seed, rate)``: the scenarios below choose it so that giving up at once, quitting at the first
failure, or neither, pays more than persisting at the env's own rate, or only at injected rates.
Every number asserted follows from that rule, the seeds the context hands out and the paired
t-test scipy computes on the same returns.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.policies import QuitOnFailurePolicy, RepeatPolicy
from envaudit.probes.failures import sweep as P
from envaudit.probes.failures import text as FT
from envaudit.probes.failures.plain import natural_failure_rate
from envaudit.protocol import FAILURE, SUCCESS, TOOL_ERROR, TOOL_OK
from envaudit.seeding import child_seed
from envaudit.stats import MIN_SAMPLES as MIN
from tests.fixtures.frames import FakeContext, episode, many, records

SEARCH, ANSWER, GIVEUP = 0, 1, 2
LABELS = ["search", "answer", "giveup"]
CHARGE = 2.0
FEE = {"charged": True, "step_reward_reference": 0.0, "charge_per_failure": {"search (error)": CHARGE}}


def step(action, status, reward):
    return {"action": action, "tool_name": LABELS[action], "tool_status": status, "reward": reward}


def play_policy(policy, n_fail, giveup, answer=1.0):
    """One episode of ``policy`` on a seed whose search fails ``n_fail`` times before it works."""
    if isinstance(policy, RepeatPolicy):
        if policy.action == GIVEUP:
            return [step(GIVEUP, TOOL_OK, giveup)], FAILURE
        return [step(ANSWER, TOOL_OK, 0.0)], FAILURE  # answering with nothing found
    rows = [step(SEARCH, TOOL_ERROR, -CHARGE) for _ in range(n_fail)]
    if isinstance(policy, QuitOnFailurePolicy) and n_fail:
        quit_row = rows[:1] + ([step(GIVEUP, TOOL_OK, giveup)] if policy.quit_action == GIVEUP
                               else [step(ANSWER, TOOL_OK, 0.0)])
        return quit_row, FAILURE
    return rows + [step(SEARCH, TOOL_OK, 0.0), step(ANSWER, TOOL_OK, answer)], SUCCESS


class Desk:
    catalogue = [type("Call", (), {"tool": t})() for t in LABELS]
    tools = tuple(LABELS)

    def __init__(self, oracle=True):
        self.has_oracle = oracle
        import gymnasium as gym

        self.action_space = gym.spaces.Discrete(3)

    @property
    def unwrapped(self):
        return self

    def __getattr__(self, name):
        if name == "oracle" and self.__dict__.get("has_oracle"):
            return lambda: [SEARCH, ANSWER]
        raise AttributeError(name)


class Ctx(FakeContext):
    """A context whose work cap is reached after ``cap_after`` runs (None: never)."""

    cap_after: int | None = None

    def over_cap(self, skipped: str) -> bool:
        if self.cap_after is not None and len(self.runs) >= self.cap_after:
            self.skipped.append(skipped)
            return True
        return super().over_cap(skipped)


EXPLORED = records(*many(4, SUCCESS, [step(SEARCH, TOOL_OK, 0.0), step(ANSWER, TOOL_OK, 1.0)], success=True),
                   *many(4, FAILURE, [step(GIVEUP, TOOL_OK, 0.6)]),
                   *many(2, SUCCESS, [step(SEARCH, TOOL_ERROR, -CHARGE), step(SEARCH, TOOL_OK, 0.0),
                                      step(ANSWER, TOOL_OK, 1.0)], success=True))


def desk(fails, giveup, *, answer=1.0, oracle=True, explored=EXPLORED, cap_after=None):
    ids = iter(range(10**6))

    def play(policy, seeds, kw):
        rate = kw["tags"]["fault_rate"]
        eps = []
        for s in seeds:
            rows, outcome = play_policy(policy, fails(s, rate), giveup, answer)
            eps.append(episode(outcome, rows, seed=s, success=outcome == SUCCESS))
        first = next(ids)
        for _ in range(len(eps) - 1):
            next(ids)
        return records(*eps, first_id=first)

    ctx = Ctx(explored, config=ScanConfig(seed=0, quick=True), env=Desk(oracle), play=play, labels=LABELS,
              is_tool_env=True)
    ctx.cap_after = cap_after
    return ctx


def returns_of(policy_kind, seeds, fails, rate, giveup, answer=1.0):
    """The design's return per seed (the same rule the fake plays, summed by hand)."""
    out = []
    for s in seeds:
        n = fails(s, rate)
        if policy_kind == "persist":
            out.append(-CHARGE * n + answer)
        elif policy_kind == "quit":
            out.append(-CHARGE + 0.0 if n else answer)  # quits by answering (the best-paying ender) with nothing
        else:
            out.append(giveup)
    return np.array(out)


@pytest.fixture(autouse=True)
def small_sweep(monkeypatch):
    """A smaller sweep than a scan's, so that the file runs in seconds: 16 episodes at rate 0 (the
    floor; a quick scan would ask for 40 // 4 = 10) and four rates. The decisions are the same code."""
    monkeypatch.setattr(P, "NATURAL_MIN_EPISODES", 16)
    monkeypatch.setattr(P, "NATURAL_EPISODES", 40)
    monkeypatch.setattr(P, "SWEEP_RATES", (0.0, 0.1, 0.3, 0.6))


def t_p(d):
    d = np.asarray(d, float)
    return st.ttest_1samp(d, 0.0, alternative="greater").pvalue


# -- fail: giving up at once beats persisting at the env's own failure rate -----------------------
GIVE = 0.9
"""Giving up pays 0.9: less than an answer (1), more than persisting through a charged failure (-1)."""


def half_fail(s, rate):
    return 1 if s % 2 == 0 else 0


def test_giving_up_beats_persisting_at_the_envs_own_rate():
    ctx = desk(half_fail, GIVE)
    runs = P._Runs(ctx)
    (f,) = P.shortcut_sweep(ctx, runs, FEE)
    natural = ctx.seeds(max(P.NATURAL_MIN_EPISODES, ctx.config.scaled(P.NATURAL_EPISODES)), "sweep")
    assert runs.natural_seeds == natural and len(natural) == P.NATURAL_MIN_EPISODES  # quick: never under the floor
    assert runs.sweep_seeds == natural[:ctx.config.scaled(P.SWEEP_EPISODES)]
    persist = returns_of("persist", natural, half_fail, 0.0, GIVE)
    d = GIVE - persist
    e = f.evidence
    assert f.code == "failure-shortcut" and f.severity == Severity.FAIL
    assert e["p_raw"] == pytest.approx(t_p(d)) and e["p_value"] == pytest.approx(min(1.0, 2 * t_p(d)))  # 2 shorts
    assert e["p_value"] <= 0.05 * P.DECISIVE_SHARE and "second_look" not in e  # decided: no second look
    assert e["diff"] == pytest.approx(d.mean()) and e["diff_ci"][0] > 0
    assert e["short_mean_return"] == pytest.approx(GIVE) and e["persist_mean_return"] == pytest.approx(persist.mean())
    n_fail = int(sum(s % 2 == 0 for s in natural))
    # persisting calls search (twice on a failing seed) and answer: failures over calls
    assert e["natural_failure_rate"] == pytest.approx(n_fail / (2 * len(natural) + n_fail))
    assert e["exploration_failure_rate"] == pytest.approx(natural_failure_rate(EXPLORED.episodes))
    assert e["persist_return_without_failures"] == 1.0 and e["persist_success_rate"] == 1.0
    assert e["short_success_rate"] == 0.0 and e["crossover_rate"] == 0.0
    assert e["rates"] == list(P.SWEEP_RATES) and e["injected_tools"] == ["search"]
    assert e["n_natural"] == len(natural) and e["n_per_injected_rate"] == len(runs.sweep_seeds)
    assert e["short_minus_persist_if_failures_cost_a_step"] == pytest.approx(GIVE - 1.0)  # refunded: persisting earns 1
    quit_d = returns_of("quit", natural, half_fail, 0.0, GIVE) - persist
    assert e["quit_mean_return"] == pytest.approx(returns_of("quit", natural, half_fail, 0.0, GIVE).mean())
    assert e["quit_minus_persist_if_failures_cost_a_step"] == pytest.approx(np.mean(
        [0.0 - 1.0 if s % 2 == 0 else 0.0 for s in natural]))
    assert quit_d.mean() < 0
    assert e["short_policy"] == "end the episode at once: always call `giveup`"
    assert e["persist_policy"] == ctx.runs[0][0].describe() and e["behaviour"] == "quit" and e["reward_path"] == "env"
    assert e["quit_policy"] == f"{ctx.runs[0][0].describe()}, but call `answer` at the first failed call"
    assert e["failure_charge"] == FEE and e["test"].endswith("Bonferroni over the 2 short strategies")
    sweep = e["sweep_best_short_vs_persist"]
    assert list(sweep) == [str(r) for r in P.SWEEP_RATES] and sweep["0.0"]["short"] == "short:giveup"
    assert sweep["0.0"]["p_bonferroni"] == e["p_value"] and sweep["0.1"]["short_mean"] == pytest.approx(GIVE)
    short_ids = [r for p, _, r in _runs_of(ctx) if p == "short:giveup@0"]
    assert f.examples == short_ids[0][:4] and ctx.kept[-1].episodes["episode_id"].tolist() == short_ids[0]
    assert "because each failed `search` call costs up to 2 beyond the step it takes" in f.summary
    assert f.fix == FT.FIX_SHORTCUT


def _runs_of(ctx):
    """(policy@rate, seeds, episode ids) of every run, in order (ids as the fake handed them out)."""
    out, start = [], 0
    for _, seeds, kw in ctx.runs:
        out.append((kw["rng_name"], seeds, list(range(start, start + len(seeds)))))
        start += len(seeds)
    return out


def test_the_sweep_runs_each_policy_once_per_rate_on_its_seeds():
    ctx = desk(half_fail, 0.6)
    runs = P._Runs(ctx)
    P.shortcut_sweep(ctx, runs, FEE)
    names = [kw["rng_name"] for _, _, kw in ctx.runs]
    shorts = ["short:answer", "short:giveup"]  # exploration: answering pays 1 on average, giving up 0.6
    # giving up (0.6) against persisting (-1 or 1) wins at p = 0.035 on 16 seeds: not decided well inside
    # alpha, so a second look on fresh seeds follows the sweep
    assert names == [f"{n}@{r:g}" for r in P.SWEEP_RATES for n in ("oracle", "quit-on-failure", *shorts)] + [
        "short:giveup@second-look", "oracle@second-look"]
    for _, seeds, kw in ctx.runs[:-2]:
        rate = kw["tags"]["fault_rate"]
        assert kw["tags"] == {"fault_rate": rate}
        assert seeds == (runs.natural_seeds if rate == 0 else runs.sweep_seeds)
        if rate == 0:
            assert kw["wrappers"] == ()
        else:
            (w,) = kw["wrappers"]
            assert w.keywords == {"error_rate": rate, "tools": ["search"],
                                  "seed": child_seed(0, "failures", "sweep", round(rate * 1000))}
    table = ctx.tables["failure_sweep"]
    assert len(table) == 4 * len(P.SWEEP_RATES) and table["policy"].tolist()[:4] == ["oracle", "quit-on-failure", *shorts]
    first = len(ctx.runs)
    assert runs.get(ctx.runs[0][0], 0.0) is runs.cache[("oracle", 0.0)] and len(ctx.runs) == first  # cached


# -- a close first look: a second, larger look on fresh seeds --------------------------------------
def third_fail(s, rate):
    return 1 if s % 3 == 0 else 0


def test_a_first_look_that_wins_but_not_well_inside_alpha_gets_a_second_look():
    """Giving up pays 0.9; a third of the seeds meet one failure (persisting earns 1 - 2 = -1 there).
    On the 16 first-look seeds that wins at p = 0.044 (Bonferroni over the two short strategies):
    below alpha, but the scan's Holm over its other findings could demote it. The second look runs
    on seeds of its own, sized by the power formula, and the smaller p-value (doubled) stands."""
    ctx = desk(third_fail, 0.9)
    runs = P._Runs(ctx)
    (f,) = P.shortcut_sweep(ctx, runs, FEE)
    natural = runs.natural_seeds
    first = min(1.0, 2 * t_p(0.9 - returns_of("persist", natural, third_fail, 0.0, 0.9)))
    assert 0.05 * P.DECISIVE_SHARE < first <= 0.05
    e = f.evidence
    look = e["second_look"]
    n = look["second_look"]["n_pairs"]
    fresh = ctx.seeds(n, "sweep", "second-look")
    assert [kw["rng_name"] for _, _, kw in ctx.runs[-2:]] == ["short:giveup@second-look", "oracle@second-look"]
    assert [seeds for _, seeds, _ in ctx.runs[-2:]] == [fresh, fresh] and not set(fresh) & set(natural)
    persist2 = returns_of("persist", fresh, third_fail, 0.0, 0.9)
    d2 = 0.9 - persist2
    assert look["first_look_p"] == pytest.approx(first) and look["p_value"] == pytest.approx(t_p(d2))
    assert e["p_value"] == pytest.approx(2 * t_p(d2)) and e["p_value"] < first and f.severity == Severity.FAIL
    assert e["persist_mean_return"] == pytest.approx(persist2.mean()) and e["short_mean_return"] == pytest.approx(0.9)
    assert "a second, larger look" in e["test"]


def test_a_second_look_that_says_less_leaves_the_first_standing():
    """The same first look; on the fresh seeds no search fails, so giving up (0.9) loses to
    persisting (1) on every pair: the first look's p-value stands, the second is in the evidence."""
    ctx = desk(lambda s, rate: 0, 0.9)
    natural = P._Runs(ctx).natural_seeds
    ctx = desk(lambda s, rate, first=set(natural): third_fail(s, rate) if s in first else 0, 0.9)
    (f,) = P.shortcut_sweep(ctx, P._Runs(ctx), FEE)
    first = min(1.0, 2 * t_p(0.9 - returns_of("persist", natural, third_fail, 0.0, 0.9)))
    e = f.evidence
    assert e["p_value"] == pytest.approx(first) and f.severity == Severity.FAIL
    assert e["second_look"]["mean_short"] < e["second_look"]["mean_persist"] and e["second_look"]["p_value"] > 0.5
    assert e["test"].endswith("Bonferroni over the 2 short strategies")


# -- warn: only quitting after a failure beats persisting -----------------------------------------
def half_thrice(s, rate):
    return 3 if s % 2 == 0 else 0


ANSWER_PAY = 3.5
"""Persisting earns 3.5 when nothing fails and 3.5 - 3 x 2 = -2.5 after three failures: more than
ending at once (0) on average, less than quitting at the first failure (-2) on a failing seed."""


def test_quitting_after_a_failure_beats_persisting_when_giving_up_at_once_does_not():
    ctx = desk(half_thrice, 0.0, answer=ANSWER_PAY)
    (f,) = P.shortcut_sweep(ctx, P._Runs(ctx), FEE)
    natural = ctx.seeds(P.NATURAL_MIN_EPISODES, "sweep")
    persist = returns_of("persist", natural, half_thrice, 0.0, 0.0, ANSWER_PAY)
    d = returns_of("quit", natural, half_thrice, 0.0, 0.0, ANSWER_PAY) - persist
    assert (0.0 - persist).mean() < 0  # ending at once loses on average
    assert f.severity == Severity.WARN and f.code == "failure-shortcut"
    e = f.evidence
    assert e["p_value"] == pytest.approx(t_p(d)) and e["diff"] == pytest.approx(d.mean())
    assert e["test"] == "paired t-test on returns, quit-on-failure vs persisting, same seeds, one-sided"
    assert e["crossover_rate"] is None and "second_look" not in e  # giving up at once never favoured
    quit_ids = [ids for name, _, ids in _runs_of(ctx) if name == "quit-on-failure@0"][0]
    failing = [i for i, s in zip(quit_ids, natural, strict=True) if s % 2 == 0]
    assert f.examples == failing[:3] and ctx.kept == [ctx.kept[0]]
    assert ctx.kept[0].episodes["episode_id"].tolist() == quit_ids


# -- info: giving up overtakes persisting only at an injected rate ---------------------------------
def injected_from_0_3(s, rate):
    return 3 if rate >= 0.3 else 0


def test_giving_up_overtakes_persisting_only_at_injected_rates():
    ctx = desk(injected_from_0_3, 0.6)
    runs = P._Runs(ctx)
    (f,) = P.shortcut_sweep(ctx, runs, FEE)
    assert f.severity == Severity.INFO and f.evidence["crossover_rate"] == 0.3
    d = np.full(len(runs.sweep_seeds), 0.6 - (1.0 - 3 * CHARGE))
    # every pair differs by the same amount: exact signed ranks, all positive
    assert f.evidence["p_at_crossover"] == pytest.approx(min(1.0, 2 * 2.0 ** -len(d)))
    assert f.evidence["diff_at_crossover"] == pytest.approx(d.mean())
    ids = [ids for name, _, ids in _runs_of(ctx) if name == "short:giveup@0.3"][0]
    assert f.examples == ids[:3] and ctx.kept[-1].episodes["episode_id"].tolist() == ids
    assert f.title == "giving up overtakes persisting at an injected failure rate of 30%"


def test_nothing_when_persisting_pays_at_every_rate():
    ctx = desk(lambda s, r: 0, 0.6)
    assert P.shortcut_sweep(ctx, P._Runs(ctx), FEE) == []


# -- when there is nothing to sweep ----------------------------------------------------------------
def test_no_sweep_without_a_charge_a_persisting_policy_or_an_ending_call():
    ctx = desk(half_fail, 0.6)
    assert P.shortcut_sweep(ctx, P._Runs(ctx), {"charged": False, "step_reward_reference": -0.1}) == []
    assert ctx.runs == [] and "-0.1" in ctx.notes["failure_shortcut"]
    lost = desk(half_fail, 0.6, oracle=False, explored=records())
    assert P.shortcut_sweep(lost, P._Runs(lost), FEE) == [] and lost.runs == []
    assert lost.notes["failure_shortcut"] == "no oracle() and no persisting policy could be derived from exploration"
    endless = records(*many(3, FAILURE, [step(SEARCH, TOOL_OK, 0.0)] * 2, end="truncated"))
    never = desk(half_fail, 0.6, explored=endless)
    assert P.shortcut_sweep(never, P._Runs(never), FEE) == [] and never.runs == []
    assert never.notes["failure_shortcut"] == "no call ended episodes in exploration, so there is no short strategy"


def test_no_claim_when_persisting_succeeds_no_more_often_than_ending_at_once():
    ctx = desk(half_fail, 0.6)
    real = ctx.play

    def play(policy, seeds, kw):
        recs = real(policy, seeds, kw)
        recs.episodes["outcome"] = SUCCESS  # every policy "succeeds": no honest yardstick
        return recs

    ctx.play = play
    assert P.shortcut_sweep(ctx, P._Runs(ctx), FEE) == []
    assert ctx.notes["failure_shortcut"].startswith("the persisting policy (")


def test_the_sweep_stops_at_the_cap_and_decides_on_what_ran():
    ctx = desk(injected_from_0_3, 0.6, cap_after=4 * 2 + 1)  # rates 0 and 0.1, then one run of 0.3
    found = P.shortcut_sweep(ctx, P._Runs(ctx), FEE)
    assert found == [] and ctx.notes["sweep_stopped_for_time_at_rate"] == 0.3
    assert len(ctx.tables["failure_sweep"]) == 4 * 2
    none = desk(half_fail, 0.6, cap_after=0)
    assert P.shortcut_sweep(none, P._Runs(none), FEE) == [] and "failure_sweep" not in none.tables
    assert none.notes["sweep_stopped_for_time_at_rate"] == 0.0
    assert none.skipped == [f"policy {n!r} at fault rate 0" for n in ("oracle", "quit-on-failure", "short:answer",
                                                                     "short:giveup")]


# -- the small helpers ------------------------------------------------------------------------------
def test_charge_words_take_each_calls_largest_charge_and_name_three():
    # the timeout's 0.9 comes first: a later, smaller charge of the same call must not replace it
    fee = {"charge_per_failure": {"search (timeout)": 0.9, "search (error)": 0.5, "fetch (error)": 0.7,
                                  "rank (error)": 0.1}}
    assert FT.charge_words(fee) == "each failed `search`, `fetch`, `rank` call costs up to 0.9 beyond the step it takes"


def test_quitting_examples_read_each_episodes_last_step_only():
    # episode 0 quits (action 9) right after a failure but does not end there: its last step is 2
    recs = records(episode(FAILURE, [step(SEARCH, TOOL_ERROR, 0.0), (9, 0.0), (2, 0.0)]),
                   episode(FAILURE, [step(SEARCH, TOOL_ERROR, 0.0), (9, 0.0)]))
    assert P._quit_after_failure(recs, 9) == [1]


# -- run: which evidence goes where (the heavy parts stubbed, the charges computed for real) --------
class Streams(Ctx):
    """Records which named random streams were asked for."""

    def rng(self, *names):
        self.__dict__.setdefault("streams", []).append(names)
        return np.random.default_rng(0)


# 10 of 12 injected failures fall 1 short of the cheapest step, 2 pay 1 over: exact signed-rank
# p = (C(12,10) + C(12,11) + 1) / 2^12 = 0.019, a charge at alpha 0.05 but not at 0.01
PAIRS = {(SEARCH, TOOL_ERROR): ([-1.0] * 10 + [1.0] * 2, [(-1.0, 0.0)] * 12)}


def stub_probe(monkeypatch, seen):
    def record(name, result):
        def f(*args):
            seen[name] = args
            return result
        return f

    monkeypatch.setattr(P, "injection_tests", record("injection", ("INJ", "ARMS", PAIRS)))
    monkeypatch.setattr(P, "topup_tests", record("topup", "TOPUP"))
    monkeypatch.setattr(P, "failure_rewarded", record("rewarded", ["rewarded"]))
    monkeypatch.setattr(P, "shortcut_sweep", record("sweep", ["sweep"]))
    monkeypatch.setattr(P, "shortcut_exploration", record("plain", ["plain"]))


@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_run_on_a_tool_env_injects_faults_and_sweeps_with_the_injected_charges(monkeypatch, alpha):
    seen = {}
    stub_probe(monkeypatch, seen)
    ctx = Streams(EXPLORED, config=ScanConfig(seed=0, quick=True, alpha=alpha), env=Desk(), labels=LABELS,
                  is_tool_env=True)
    assert P.run(ctx) == ["rewarded", "sweep"]
    assert ctx.streams == [("injection",), ("charge",)] and set(seen) == {"injection", "rewarded", "sweep"}
    assert len(seen["injection"]) == 2 and seen["injection"][0] is ctx
    assert seen["rewarded"][0] is ctx and seen["sweep"][0] is ctx
    _, runs, injected, arms = seen["rewarded"]
    assert isinstance(runs, P._Runs) and runs.ctx is ctx and (injected, arms) == ("INJ", "ARMS")
    assert seen["sweep"][1] is runs
    fee = seen["sweep"][2]
    assert fee["source"] == "fault injection" and fee["step_reward_reference"] == 0.0  # EXPLORED's working search
    assert set(fee["tests"]) == {"search (error)"}  # labelled
    p = (math.comb(12, 10) + 12 + 1) / 2**12
    assert fee["tests"]["search (error)"]["p_value"] == pytest.approx(p) and fee["charged"] is (p <= alpha)


def test_run_on_a_plain_env_tops_up_and_reads_the_charges_from_exploration(monkeypatch):
    seen = {}
    stub_probe(monkeypatch, seen)
    explored = records(*many(MIN, FAILURE, [step(SEARCH, TOOL_ERROR, -1.0), step(SEARCH, TOOL_OK, 0.0),
                                             step(GIVEUP, TOOL_OK, 0.0)]))
    ctx = Streams(explored, config=ScanConfig(seed=0, alpha=0.01), env=Desk(), labels=LABELS, is_tool_env=False)
    assert P.run(ctx) == ["rewarded", "plain"]
    assert ctx.streams == [("topup",), ("charge",)] and set(seen) == {"topup", "rewarded", "plain"}
    assert seen["rewarded"] == (ctx, None, "TOPUP", {}) and seen["plain"][0] is ctx
    assert len(seen["topup"]) == 2 and seen["topup"][0] is ctx
    fee = seen["plain"][1]
    # every failed search pays 1 less than the cheapest ordinary step (0) and than a working search
    assert fee["source"] == "exploration" and fee["step_reward_reference"] == 0.0
    assert fee["charged"] and fee["charge_per_failure"] == {"search (error)": pytest.approx(1.0)}
    assert fee["tests"]["search (error)"]["p_value"] == pytest.approx(2.0 ** -MIN)


def test_run_treats_a_tool_env_without_a_discrete_action_space_as_plain(monkeypatch):
    import gymnasium as gym

    seen = {}
    stub_probe(monkeypatch, seen)
    env = Desk()
    env.action_space = gym.spaces.Box(0.0, 1.0, (1,))
    ctx = Streams(EXPLORED, config=ScanConfig(seed=0), env=env, labels=LABELS, is_tool_env=True)
    assert P.run(ctx) == ["rewarded", "plain"] and "injection" not in seen


def test_no_sweep_note_does_not_contradict_a_failure_conditioned_shortcut_in_the_report():
    """An uncharged failure runs no sweep, and the report's appendix says why; the same report may
    hold a failure-shortcut fail from the failure-conditioned check (handing off right after a failed
    call). The note must not say there is no failure shortcut, and that group shows its condition."""
    from envaudit.report import ProbeStatus
    from envaudit.reporting.html import render_html
    from tests.reporting import synthetic
    from tests.reporting.dom import parse

    ctx = desk(half_fail, 0.6)
    assert P.shortcut_sweep(ctx, P._Runs(ctx), {"charged": False, "step_reward_reference": -0.05}) == []
    note = ctx.notes["failure_shortcut"]
    assert note.startswith("no failure-rate sweep: tool failures cost only the step they take")
    report = synthetic.full_report([synthetic._finding("failure-shortcut", "fail", evidence=synthetic.CONDITIONED)])
    report.tables.pop("failures_failure_sweep")
    report.probes = [ProbeStatus("failures", "ok", 0.1, findings=1, notes={"failure_shortcut": note})]
    root, problems = parse(render_html(report))
    assert problems == []
    [group] = root.find_all("section", class_="finding")
    assert group.attrs["data-code"] == "failure-shortcut"
    assert [img.attrs["data-plot"] for img in group.find_all("img")] == ["failure_condition"]
    [absent] = [li for li in root.find_all("li") if li.attrs.get("data-plot") == "failure_sweep"]
    assert "no failure-rate sweep" in absent.text()
    assert "not a failure shortcut" not in root.text()
