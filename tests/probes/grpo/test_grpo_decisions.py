"""The grpo probe's decision functions on hand-built runs whose answers are known.

The training lives in ``envaudit.grpo`` and is driven by the scan tests (``test_grpo.py``); here
every ``SearchResult`` is built by hand from episode tables (``tests/fixtures/frames.py``) and a
``TrainResult`` that holds only what the decision functions read. What counts as honest success,
failure and persisting; which findings merge; which episodes the report keeps; whether a later
success out-earns the fastest one from the same start; what the probe cannot drive (the targeted
findings and the replay are in ``test_grpo_decisions_targets.py``): each expected number follows
from the tables the test writes, the ladder's boundaries and the module's constants.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Finding, Severity
from envaudit.grpo.search import BEHAVIOURS, Reference
from envaudit.grpo.trainer import RICHEST_KEPT, Met
from envaudit.pipeline import Pipeline
from envaudit.probe import cap_reason
from envaudit.probes.grpo import training as G
from envaudit.probes.grpo.lessons import MIN_EFFECT
from envaudit.probes.grpo.met import explored_failures, kept
from envaudit.protocol import (
    END_TRUNCATED,
    FAILURE,
    SUCCESS,
    TIMEOUT,
    TOOL_ERROR,
    TOOL_OK,
    TOOL_TIMEOUT,
)
from envaudit.recording import Records
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.frames import episode, many, records
from tests.fixtures.grpo_runs import HONEST, REF, Ctx, Tiny, grouped, honest, result, timeout_world


# -- honest rungs --------------------------------------------------------------------------------
def test_honest_pools_successes_takes_failures_from_exploration_and_finds_persisting():
    err = {"action": 0, "reward": 0.0, "tool_status": TOOL_ERROR}
    tmo = {"action": 0, "reward": 0.0, "tool_status": TOOL_TIMEOUT}
    explore = records(
        episode(SUCCESS, [(0, 0.5), (1, 0.5)], success=True),                 # 0: success 1.0
        episode(FAILURE, [(0, 0.1)], success=False),                           # 1: failure 0.1
        episode(FAILURE, [err, (0, 0.0), (2, 0.2)], success=False),            # 2: failure 0.2, persisting (3 > 2)
        episode(TIMEOUT, [(0, 0.3)] * 3, success=False, end=END_TRUNCATED),    # 3: a timeout is no failure
        episode(FAILURE, [err, (2, -0.5)], success=False),                     # 4: failed call, 2 steps: quit early
    ).episodes
    runs = {
        "target-success": result("target-success", records(episode(SUCCESS, [(1, 2.0)], success=True),
                                                           first_id=10)),
        "natural": result("natural", records(episode(SUCCESS, [(1, 1.5)], success=True),
                                             episode(FAILURE, [(2, -1.0)], success=False),  # not exploration's
                                             episode(FAILURE, [tmo, (0, 0.0), (2, 0.0)], success=False),  # persisting
                                             first_id=20)),
        # another target's successes are not honest: they were trained toward something else
        "target-timeout": result("target-timeout", records(episode(SUCCESS, [(1, 9.0)], success=True),
                                                           episode(FAILURE, [err, err, err], success=False),
                                                           first_id=30)),
    }
    h = G._honest(explore, runs, REF)
    assert sorted(h.success) == [1.0, 1.5, 2.0]
    assert sorted(h.failure) == [-0.5, 0.1, 0.2]
    assert h.persist["episode_id"].tolist() == [2, 22]
    assert list(h.persist.columns) == ["episode_id", "return", "length", "n_tool_errors", "n_tool_timeouts", "outcome"]
    assert h.persist.index.tolist() == [0, 1]
    oracle = records(episode(SUCCESS, [(0, 0.0), (1, 3.0)], success=True),
                     episode(FAILURE, [err, err, (1, 0.0)], success=False), first_id=40).episodes
    h = G._honest(explore, runs, REF, oracle)
    assert sorted(h.success) == [1.0, 1.5, 2.0, 3.0] and sorted(h.failure) == [-0.5, 0.1, 0.2]
    assert h.persist["episode_id"].tolist() == [2, 22, 41]
    # a longer short-length bar leaves 3-step episodes short: nothing persisted
    long = Reference(floor=-2.0, spread=1.0, short_length=3)
    assert G._honest(explore, runs, long, oracle).persist.empty


def test_honest_without_anything_seen_is_empty():
    empty = records().episodes
    h = G._honest(empty, {}, REF, None)
    assert len(h.success) == 0 and len(h.failure) == 0 and h.persist.empty
    assert list(h.persist.columns) == ["episode_id", "return", "length", "n_tool_errors", "n_tool_timeouts", "outcome"]
    h = G._honest(empty, {}, REF, empty)  # an oracle run that played nothing
    assert len(h.success) == 0 and h.persist.empty


# -- merging -------------------------------------------------------------------------------------
def finding(code: str, severity: Severity, title: str, **evidence) -> Finding:
    return Finding(code, severity, title, f"{title}.", evidence, [1], "fix", probe="grpo")


def test_merge_keeps_one_finding_per_code_the_most_severe_with_the_others_attached():
    warn = finding("failure-shortcut", Severity.WARN, "quits", run="natural", rate=0.4)
    learned_a = finding("learned-exploit", Severity.INFO, "a", run="natural")
    fail = finding("failure-shortcut", Severity.FAIL, "quits under faults", run="faults", rate=0.7)
    learned_b = finding("learned-exploit", Severity.WARN, "b", run="faults")
    info = finding("length-bias", Severity.INFO, "delay")
    out = G._merge([warn, learned_a, fail, learned_b, info])
    # learned-exploit findings are each their own; the shortcut keeps its first place
    assert [(f.code, f.title) for f in out] == [("failure-shortcut", "quits under faults"), ("learned-exploit", "a"),
                                                ("learned-exploit", "b"), ("length-bias", "delay")]
    merged = out[0]
    assert merged.severity == Severity.FAIL and merged.summary == "quits under faults."
    assert merged.evidence["run"] == "faults" and merged.evidence["rate"] == 0.7
    assert merged.evidence["also"] == [{"title": "quits", "run": "natural", "rate": 0.4}]
    assert merged.examples == [1] and merged.fix == "fix" and merged.probe == "grpo"
    assert out[1] is learned_a and out[3] is info


def test_merge_keeps_the_first_of_equal_severity_and_collects_every_other():
    first = finding("timeout-rewarded", Severity.WARN, "first", n=1)
    second = finding("timeout-rewarded", Severity.WARN, "second", n=2)
    third = finding("timeout-rewarded", Severity.INFO, "third", n=3)
    (out,) = G._merge([first, second, third])
    assert out.title == "first" and out.evidence["n"] == 1
    assert out.evidence["also"] == [{"title": "second", "n": 2}, {"title": "third", "n": 3}]
    assert G._merge([]) == []
    (alone,) = G._merge([first])
    assert alone is first


# -- kept records ----------------------------------------------------------------------------
def test_kept_episodes_are_the_report_columns_tagged_as_evaluation():
    recs = records(episode(FAILURE, [(0, 0.5)], success=False), episode(SUCCESS, [(1, 1.0)], success=True))
    eps = recs.episodes.assign(probe="grpo", policy="grpo-natural", mode="natural", group=[0, 0], target=None,
                               advantage=[0.5, -0.5], iteration="eval")
    out = kept(Records(recs.steps, eps))
    assert list(out.episodes.columns) == [
        "episode_id", "seed", "length", "return", "end_reason", "outcome", "success", "n_tool_calls",
        "n_tool_errors", "n_tool_timeouts", "n_injected", "probe", "policy", "mode", "group", "target", "phase"]
    assert out.episodes["phase"].tolist() == ["eval", "eval"] and out.steps is recs.steps
    assert out.episodes["return"].tolist() == [0.5, 1.0]


def test_kept_ids_are_exploration_and_every_kept_record():
    ctx = Ctx(records(*many(3, FAILURE, [(0, 0.0)], success=False)))
    assert G._kept_ids(ctx) == {0, 1, 2}
    ctx.keep(records(*many(2, FAILURE, [(0, 0.0)], success=False), first_id=10))
    ctx.keep(records(episode(SUCCESS, [(0, 1.0)], success=True), first_id=20))
    assert G._kept_ids(ctx) == {0, 1, 2, 10, 11, 20}


def test_with_pipeline_adds_the_pipelines_group_advantages():
    recs = grouped([episode(SUCCESS, [(0, 1.0)], success=True), episode(FAILURE, [(0, 0.0)], success=False),
                    episode(TIMEOUT, [(0, 0.5)], success=False, end=END_TRUNCATED)],
                   [episode(FAILURE, [(0, 0.2)], success=False), episode(FAILURE, [(0, 0.4)], success=False)])
    drop = Pipeline(name="drop", handling={TIMEOUT: "drop"}, advantage_scaling="none")
    out = G._with_pipeline(recs, drop)
    # Dr. GRPO: r - mean of the trained rollouts; the dropped timeout gets no advantage, no reward
    assert out["advantage"].tolist() == pytest.approx([0.5, -0.5, 0.0, -0.1, 0.1])
    assert out["trained"].tolist() == [True, True, False, True, True]
    assert out["training_return"].tolist() == [1.0, 0.0, 0.5, 0.2, 0.4]
    assert np.isnan(out["training_reward"].iloc[2]) and out["training_reward"].iloc[0] == 1.0
    ungrouped = records(episode(FAILURE, [(0, 1.0)], success=False))
    assert G._with_pipeline(ungrouped, drop) is ungrouped.episodes
    empty = Records(recs.steps.iloc[0:0], recs.episodes.iloc[0:0])
    assert G._with_pipeline(empty, drop) is empty.episodes


def test_targets_table_has_one_row_per_reached_behaviour_in_its_words():
    reach = {"timeout": {"behaviour": "timeout", "n": 6, "rate": 0.75, "mean_return": 0.5, "max_return": 0.9,
                         "returns": [0.5] * 6, "episode_ids": list(range(6))},
             "no_success": {"behaviour": "no_success", "n": 0, "rate": 0.0, "mean_return": None, "max_return": None,
                            "returns": [], "episode_ids": []}}
    table = G._targets_table(reach)
    # a behaviour never reached has no return: NaN in the table (pandas' None in a float column)
    assert table.astype(object).where(table.notna(), None).to_dict("records") == [
        {"behaviour": "timeout", "words": BEHAVIOURS["timeout"].words, "n": 6, "rate": 0.75, "mean_return": 0.5,
         "max_return": 0.9},
        {"behaviour": "no_success", "words": BEHAVIOURS["no_success"].words, "n": 0, "rate": 0.0,
         "mean_return": None, "max_return": None}]


# -- what exploration met ------------------------------------------------------------------------
def test_explored_failures_are_the_richest_finite_failures_with_their_actions_in_order():
    recs = records(
        episode(FAILURE, [(0, 0.5)], success=False),                          # 0: 0.5
        episode(FAILURE, [(0, 0.2), (2, 0.3), (1, 0.4)], success=False),      # 1: 0.9
        episode(FAILURE, [(1, 0.9)], success=False),                          # 2: 0.9, ties 1: lower id first
        episode(FAILURE, [(2, 0.7)], success=False),                          # 3: 0.7
        episode(FAILURE, [(0, float("nan"))], success=False),                 # 4: NaN, not finite
        episode(SUCCESS, [(1, 2.0)], success=True),                           # 5: a success
        episode(TIMEOUT, [(0, 3.0)], success=False, end=END_TRUNCATED),       # 6: a timeout
    )
    shuffled = Records(recs.steps.iloc[::-1], recs.episodes)  # the steps table in no particular order
    met = explored_failures(shuffled)
    richest = [Met(0.9, 1, "exploration", 0, (0, 2, 1)), Met(0.9, 2, "exploration", 0, (1,)),
               Met(0.7, 3, "exploration", 0, (2,)), Met(0.5, 0, "exploration", 0, (0,))]
    assert met == richest[:RICHEST_KEPT]
    assert explored_failures(records()) == []


# -- the reached behaviour's word ----------------------------------------------------------------
def test_reached_behaviour_is_timeout_or_what_the_reached_episodes_did():
    err = {"action": 0, "reward": 0.0, "tool_status": TOOL_ERROR}
    ok = {"action": 0, "reward": 0.0, "tool_status": TOOL_OK}
    eps = records(*many(3, FAILURE, [err, err, ok], success=False),   # 0-2: two of three calls failed
                  *many(4, FAILURE, [ok, (1, 1.0)], success=False),   # 3-6: ended by the agent
                  *many(5, TIMEOUT, [ok] * 3, success=False, end=END_TRUNCATED)).episodes  # 7-11
    r_fail = {"episode_ids": [0, 1, 2]}
    assert G._reached_behaviour("no_success", eps, r_fail) == "tool-failure"
    assert G._reached_behaviour("no_success", eps, {"episode_ids": [3, 4, 5]}) == "degenerate-answer"
    assert G._reached_behaviour("no_success", eps, {"episode_ids": [7, 8]}) == "timeout"
    assert G._reached_behaviour("no_success", eps, {"episode_ids": []}) == "degenerate-answer"
    assert G._reached_behaviour("timeout", eps, r_fail) == "timeout"
    assert G._reached_behaviour("no_success", None, r_fail) == "timeout"


# -- the ending premium of timed-out episodes ----------------------------------------------------
def test_timeout_ending_premium_against_an_honest_failures_ending():
    ctx, run, ids = timeout_world(1.0)
    premium = G._timeout_ending(ctx, run, {"episode_ids": ids}, {"scale": 1.0})
    assert premium["holds"] and premium["diff"] == pytest.approx(1.0)
    # the same premium measured in a reward scale ten times as large is below MIN_EFFECT of it
    assert not G._timeout_ending(ctx, run, {"episode_ids": ids}, {"scale": 1.0 / MIN_EFFECT * 1.01})["holds"]
    ctx, run, ids = timeout_world(0.0)  # the timeout's ending pays what a work step pays
    assert not G._timeout_ending(ctx, run, {"episode_ids": ids}, {"scale": 1.0})["holds"]
    assert G._timeout_ending(ctx, None, {"episode_ids": ids}, {"scale": 1.0}) is None
    stepless = result("target-timeout", Records(run.evaluation.steps.iloc[0:0], run.episodes))
    assert G._timeout_ending(ctx, stepless, {"episode_ids": ids}, {"scale": 1.0}) is None


# -- what the probe cannot drive -----------------------------------------------------------------
def test_cannot_drive_names_the_space_it_cannot_read():
    from envaudit.grpo.torch_engine import UnsupportedSpace, action_count

    assert G._cannot_drive(Ctx(records(), env=Tiny())) is None
    box = gym.spaces.Box(-1.0, 1.0, (2,))
    for env in (Tiny(action_space=box), Tiny(action_space=gym.spaces.Discrete(3, start=1))):
        f = G._cannot_drive(Ctx(records(), env=env))
        with pytest.raises(UnsupportedSpace) as exc:
            action_count(env.action_space)
        assert f.code == "learned-exploit" and f.severity == Severity.INFO and f.probe == "grpo"
        assert f.title and f.summary and f.fix  # what was skipped, why, and that nothing needs fixing
        assert f.evidence == {"source": "grpo", "reason": str(exc.value), "action_space": repr(env.action_space),
                              "behaviour": "exploration"}
    # a Discrete catalogue over an observation the featurizer cannot read
    odd = Tiny(observation_space=gym.spaces.Graph(gym.spaces.Box(0.0, 1.0, (1,)), None))
    f = G._cannot_drive(Ctx(records(), env=odd))
    assert f is not None and f.evidence["behaviour"] == "exploration"


def test_cannot_drive_a_discrete_env_with_the_language_model_engine():
    vllm = ScanConfig(seed=0, engine="vllm")
    f = G._cannot_drive(Ctx(records(), env=Tiny(), config=vllm))
    assert f is not None and "Text action space" in f.evidence["reason"] and "Discrete" in f.evidence["reason"]
    from envaudit.grpo.vllm_backend import vllm_available

    ok, why = vllm_available()
    text = G._cannot_drive(Ctx(records(), env=Tiny(action_space=gym.spaces.Text(8)), config=vllm))
    if ok:
        assert text is None
    else:  # the text env is drivable, vLLM is what is missing here
        assert text is not None and text.evidence["reason"] == why


def test_incomplete_names_the_runs_the_cap_cut_and_when():
    ctx = Ctx(records(), config=ScanConfig(seed=0, budget_s=60.0))
    G._incomplete(ctx, ["natural", "target-timeout"], "before natural started")
    assert ctx.gaps == [{"probe": "grpo", "skipped": "GRPO runs natural, target-timeout",
                         "reason": f"{cap_reason(60.0)}, before natural started"}]


# -- delaying success ----------------------------------------------------------------------------
def delay_groups(n: int, gain: float, *, step: float = 0.1, first_id: int = 0, training: bool = False) -> Records:
    """``n`` GRPO groups, each with the fastest success (2 steps, paid 1) and a success 2 steps
    later earning ``gain + step * g`` more in group g (so the later ones rank by group; with the
    default step the mean gain is ``gain + 0.35`` over 8 groups), and a failure (id 3g + 2)."""
    groups = [[episode(SUCCESS, [(0, 0.0), (1, 1.0)], success=True),
               episode(SUCCESS, [(0, 0.0)] * 3 + [(1, 1.0 + gain + step * g)], success=True),
               episode(FAILURE, [(2, 0.0)], success=False)] for g in range(n)]
    recs = grouped(*groups, first_id=first_id)
    if training:
        recs = Records(recs.steps, recs.episodes.assign(iteration=0))
    return recs


EXPLORE = records(*many(MIN_SAMPLES, SUCCESS, [(0, 0.0), (1, 1.0)], success=True),
                  *many(MIN_SAMPLES, FAILURE, [(2, 0.0)], success=False)).episodes


def test_a_later_success_that_pays_more_from_the_same_start_is_a_fail():
    evaluated = delay_groups(MIN_SAMPLES, 0.5, first_id=100)
    searched = records(episode(SUCCESS, [(0, 0.0)] * 2 + [(1, 3.0)], success=True),   # 200: 3 steps, 3.0
                       episode(FAILURE, [(1, 5.0)], success=False), first_id=200)     # 201: richer, no success
    runs = {"natural": result("natural", evaluated), "target-success": result("target-success", searched)}
    ctx = Ctx(records())
    ctx.keep(evaluated)
    ctx.keep(searched)
    f = G._delayed_success(ctx, EXPLORE, runs, HONEST)
    assert f.code == "length-bias" and f.severity == Severity.FAIL and f.probe == "grpo"
    ev = f.evidence
    assert ev["behaviour"] == "delay-success" and ev["reward_path"] == "env" and ev["source"] == "grpo"
    assert ev["n_groups"] == MIN_SAMPLES and ev["extra_steps"] == pytest.approx(2.0)
    assert ev["margin"] == pytest.approx(MIN_EFFECT * 1.0)
    assert ev["fastest_success"] == {"length": 2, "return": 1.0}
    assert ev["best_searched_success"] == {"return": 3.0, "length": 3, "episode_id": 200}
    assert ev["p_value"] == pytest.approx(0.5 ** MIN_SAMPLES)  # every one of the sets gains: exact signed rank
    assert ev["delayed_vs_fastest"]["p_value"] == ev["p_value"]
    # examples: later, richer evaluated successes, richest first (200, then group 7's, 6's, ...)
    later = [100 + 3 * g + 1 for g in reversed(range(MIN_SAMPLES))]
    assert f.examples == [200, *later[:4]]


def test_examples_are_only_episodes_the_report_keeps():
    evaluated = delay_groups(MIN_SAMPLES, 0.5, first_id=100)
    runs = {"natural": result("natural", evaluated)}
    f = G._delayed_success(Ctx(records()), EXPLORE, runs, HONEST)
    assert f.examples == [] and f.evidence["best_searched_success"] is None


@pytest.mark.parametrize("where", ["target-success", "natural"])
def test_delays_are_read_from_each_runs_training_and_evaluation(where):
    for kind in ("training", "evaluation"):
        recs = delay_groups(MIN_SAMPLES, 0.5, first_id=100, training=kind == "training")
        run = result(where, training=recs.episodes) if kind == "training" else result(where, recs)
        f = G._delayed_success(Ctx(records()), EXPLORE, {where: run}, HONEST)
        assert f is not None and f.evidence["n_groups"] == MIN_SAMPLES, (where, kind)
    other = result("target-timeout", delay_groups(MIN_SAMPLES, 0.5, first_id=100))
    assert G._delayed_success(Ctx(records()), EXPLORE, {"target-timeout": other}, HONEST) is None


def test_a_delay_in_exploration_alone_needs_no_trained_run():
    recs = delay_groups(MIN_SAMPLES, 0.5)
    ctx = Ctx(recs)
    f = G._delayed_success(ctx, recs.episodes, {}, HONEST)
    assert f is not None and f.evidence["best_searched_success"] is None
    # the later successes of exploration (kept in the report), group by group
    assert f.examples == [3 * g + 1 for g in range(5)]


def test_no_delay_finding_below_the_margin_alpha_or_sample_size():
    runs = {"natural": result("natural", delay_groups(MIN_SAMPLES, 0.5, first_id=100))}
    ctx = Ctx(records())
    # success pays 10 over failing: the margin is MIN_EFFECT * 10 = 1.0 > the mean gain 0.85
    assert G._delayed_success(ctx, EXPLORE, runs, honest([10.0] * MIN_SAMPLES, [0.0] * MIN_SAMPLES)) is None
    # p = 0.5 ** MIN_SAMPLES is not below an alpha of half of it
    strict = Ctx(records(), config=ScanConfig(seed=0, alpha=0.5 ** (MIN_SAMPLES + 1)))
    assert G._delayed_success(strict, EXPLORE, runs, HONEST) is None
    few = {"natural": result("natural", delay_groups(MIN_SAMPLES - 1, 0.5, first_id=100))}
    assert G._delayed_success(ctx, EXPLORE, few, HONEST) is None
    same = {"natural": result("natural", delay_groups(MIN_SAMPLES, 0.0, step=0.0, first_id=100))}
    assert G._delayed_success(ctx, EXPLORE, same, HONEST) is None  # later, but paid the same


def test_without_failures_the_margin_is_the_spread_of_every_return():
    """No outright failure seen: the scale is the spread of success and exploration's returns
    together, never that of the (equal) successes alone."""
    runs = {"natural": result("natural", delay_groups(MIN_SAMPLES, 0.2, first_id=100))}  # mean gain 0.55
    only_success = honest([1.0] * MIN_SAMPLES, [])
    # successes 1.0 (8) and exploration's 0 and 20: std 5.74, margin 0.574 > 0.55
    wide = records(episode(FAILURE, [(0, 0.0)], success=False), episode(TIMEOUT, [(0, 20.0)], success=False)).episodes
    assert G._delayed_success(Ctx(records()), wide, runs, only_success) is None
    # exploration's 0 and 1: std 0.3, margin 0.03: every gain counts
    narrow = records(episode(FAILURE, [(0, 0.0)], success=False), episode(TIMEOUT, [(0, 1.0)], success=False)).episodes
    f = G._delayed_success(Ctx(records()), narrow, runs, only_success)
    assert f is not None and f.evidence["margin"] == pytest.approx(MIN_EFFECT * 0.3)
    empty = records().episodes  # nothing explored: the successes alone have no spread, scale 1
    f = G._delayed_success(Ctx(records()), empty, runs, only_success)
    assert f is not None and f.evidence["margin"] == pytest.approx(MIN_EFFECT)


def test_delay_examples_are_later_richer_successes_only():
    """Examples come from the evaluated runs: successes longer than the fastest success and
    richer than it; not a success at the fastest length, not one paid only as much, not a failure."""
    searched = records(episode(SUCCESS, [(0, 0.0)] * 2 + [(1, 3.0)], success=True),   # 200: later, richer
                       episode(FAILURE, [(1, 5.0)], success=False),                   # 201: no success
                       episode(SUCCESS, [(0, 0.0), (1, 2.9)], success=True),          # 202: at the fastest length
                       episode(SUCCESS, [(0, 0.0)] * 3 + [(1, 1.0)], success=True),   # 203: later, paid the same
                       episode(FAILURE, [(0, 0.0)] * 2 + [(1, 5.0)], success=False),  # 204: later, richer, failed
                       first_id=200)
    training = delay_groups(MIN_SAMPLES, 0.5, first_id=100, training=True)  # the delay, seen in training
    runs = {"natural": result("natural", training=training.episodes),
            "target-success": result("target-success", searched)}
    ctx = Ctx(records())
    ctx.keep(searched)  # training episodes are not kept in the report
    f = G._delayed_success(ctx, EXPLORE, runs, HONEST)
    assert f.examples == [200] and f.title and f.summary and f.fix
