"""The grpo probe's targeted findings and its replay of what the searches met, on hand-built runs.

Which targeted reach climbs the ladder (timing out through its ending, ending without success
only when it pays like success), which episode a replay plays and on which seeds, and when
nothing is replayed: each expected number follows from the tables the test writes, the ladder's
boundaries (``MIN_SAMPLES``, ``MIN_EFFECT`` of the scale the test sets) and the module's constants.
"""

from __future__ import annotations

import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.grpo.config import GRPOConfig
from envaudit.grpo.search import SearchResult, evaluation_seeds
from envaudit.grpo.trainer import Met
from envaudit.probes.grpo import training as G
from envaudit.probes.grpo.lessons import MIN_EFFECT
from envaudit.probes.grpo.met import REPLAY, replay_met
from envaudit.protocol import (
    END_TRUNCATED,
    FAILURE,
    SUCCESS,
    TIMEOUT,
    TOOL_ERROR,
)
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.frames import episode, many, records
from tests.fixtures.grpo_runs import HONEST, REF, Ctx, Tiny, honest, result, timeout_world


# -- targeted runs on the ladder -----------------------------------------------------------------
def reached(run: SearchResult, behaviour: str) -> dict:
    from envaudit.grpo.search import reach_of

    return reach_of(run.episodes, behaviour, REF)


def degenerate_run(n: int, answer: float) -> SearchResult:
    """The ending-without-success search: ``n`` failures that end on an answer paid ``answer``."""
    return result("target-no_success", records(*many(n, FAILURE, [(0, 0.0), (1, answer)], success=False),
                                               first_id=300), behaviour="no_success")


def test_timing_out_that_pays_like_success_through_its_ending_is_a_fail():
    ctx, run, ids = timeout_world(1.0)  # returns 1.0: what honest success pays
    reach = {"timeout": reached(run, "timeout")}
    (f,) = G._target_findings(ctx, reach, HONEST, {"target-timeout": run})
    assert f.code == "timeout-rewarded" and f.severity == Severity.FAIL and f.probe == "grpo"
    ev = f.evidence
    assert ev["run"] == "target-timeout" and ev["behaviour"] == "timeout" and ev["reward_path"] == "env"
    assert ev["ladder"]["level"] == "at_least_success" and ev["p_value"] == ev["ladder"]["p_value"] < 0.05
    assert ev["ending_premium"]["holds"] and ev["ending_premium"]["diff"] == pytest.approx(1.0)
    assert ev["reach"] == {"timeout": {"behaviour": "timeout", "n": MIN_SAMPLES, "rate": 1.0, "mean_return": 1.0,
                                       "max_return": 1.0}}
    assert f.examples == ids[:5]
    assert "as much as honest success" in f.title and "(best seen, n=8)" in f.summary  # no success search ran
    # half of success's pay, all of it on the ending: clearly above failing (0), not as much as success
    ctx, run, ids = timeout_world(0.5)
    (f,) = G._target_findings(ctx, {"timeout": reached(run, "timeout")}, HONEST, {"target-timeout": run})
    assert f.severity == Severity.WARN and f.evidence["ladder"]["level"] == "above_alternative"


def test_timing_out_paid_along_the_way_is_not_rewarded_timing_out():
    # the same return, earned on a first step the timed-out episodes take; the ending pays a work step
    explore = records(*many(MIN_SAMPLES, FAILURE, [(0, 0.0), (0, 0.0), (1, 0.0)], success=False))
    run = result("target-timeout", records(*many(MIN_SAMPLES, TIMEOUT, [(2, 1.0), (0, 0.0), (0, 0.0)], success=False,
                                                 end=END_TRUNCATED), first_id=100), behaviour="timeout")
    reach = {"timeout": reached(run, "timeout")}
    assert G._target_findings(Ctx(explore), reach, HONEST, {"target-timeout": run}) == []
    # without the run's steps the ending cannot be read: the ladder alone decides
    (f,) = G._target_findings(Ctx(explore), reach, HONEST, {})
    assert f.severity == Severity.FAIL and f.evidence["ending_premium"] is None


def test_ending_without_success_is_reported_only_when_it_pays_like_success():
    ctx = Ctx(records())
    run = degenerate_run(MIN_SAMPLES, 1.0)
    (f,) = G._target_findings(ctx, {"no_success": reached(run, "no_success")}, HONEST, {"target-no_success": run})
    assert f.code == "reward-without-success" and f.severity == Severity.FAIL
    assert f.evidence["run"] == "target-no_success" and f.evidence["ending_premium"] is None
    assert f.evidence["behaviour"] == "degenerate-answer" and f.examples == [300, 301, 302, 303, 304]
    # above failing but below success: failure-shortcut's and timeout-rewarded's to name, not this code
    half = degenerate_run(MIN_SAMPLES, 0.5)
    assert G._target_findings(ctx, {"no_success": reached(half, "no_success")}, HONEST,
                              {"target-no_success": half}) == []


def test_targeted_findings_need_min_samples_reached_and_failures_seen():
    ctx = Ctx(records())
    few = degenerate_run(MIN_SAMPLES - 1, 1.0)
    assert G._target_findings(ctx, {"no_success": reached(few, "no_success")}, HONEST, {"target-no_success": few}) == []
    run = degenerate_run(MIN_SAMPLES, 1.0)
    reach = {"no_success": reached(run, "no_success")}
    few_failures = honest([1.0] * MIN_SAMPLES, [0.0] * (MIN_SAMPLES - 1))
    assert G._target_findings(ctx, reach, few_failures, {"target-no_success": run}) == []
    strict = Ctx(records(), config=ScanConfig(seed=0, alpha=1e-9))  # the ladder's alpha: never significant
    assert G._target_findings(strict, reach, HONEST, {"target-no_success": run}) == []
    assert len(G._target_findings(ctx, reach, HONEST, {"target-no_success": run})) == 1


def test_a_success_search_that_succeeded_is_quoted_instead_of_the_best_success_seen():
    run = degenerate_run(MIN_SAMPLES, 1.0)
    wins = result("target-success", records(*many(4, SUCCESS, [(1, 1.25)], success=True), first_id=400))
    reach = {"no_success": reached(run, "no_success"), "success": reached(wins, "success")}
    (f,) = G._target_findings(Ctx(records()), reach, HONEST, {"target-no_success": run, "target-success": wins})
    assert "1.25 (n=4" in f.summary and "best seen" not in f.summary
    assert set(f.evidence["reach"]) == {"no_success", "success"}


def test_a_replayed_sequence_is_judged_on_its_own_episodes():
    err = {"action": 1, "reward": 1.0, "tool_status": TOOL_ERROR}
    replay = records(*many(MIN_SAMPLES, FAILURE, [{"action": 0, "reward": 0.0, "tool_status": TOOL_ERROR}, err],
                           success=False), first_id=500)
    replay_reach = reached(result(REPLAY, replay), "no_success")
    target = degenerate_run(MIN_SAMPLES, 0.5)
    replayed = {"reach": replay_reach, "records": replay, "run": "exploration", "actions": "`look`, `claim`"}
    (f,) = G._target_findings(Ctx(records()), {"no_success": replay_reach}, HONEST, {"target-no_success": target},
                              replayed)
    # every call of the replay failed: its episodes show hitting tool failures, not the target's answer
    assert f.evidence["run"] == REPLAY and f.evidence["behaviour"] == "tool-failure"
    assert f.examples == [500, 501, 502, 503, 504]
    assert f.summary.startswith("Replaying a sequence of calls that exploration met (`look`, `claim`)")
    # a replay that is not what reached the target leaves the target's run named
    own = degenerate_run(MIN_SAMPLES, 1.0)
    (f,) = G._target_findings(Ctx(records()), {"no_success": reached(own, "no_success")}, HONEST,
                              {"target-no_success": own}, replayed)
    assert f.evidence["run"] == "target-no_success" and f.evidence["behaviour"] == "degenerate-answer"


# -- replaying what the searches met -------------------------------------------------------------
CONFIG = GRPOConfig(group_size=2)
LABELS = ["look", "wait", "claim"]


def replay_ctx(env=None, **kw) -> Ctx:
    """Replays play one failure per seed, its last action paid 1.0; the oracle one 2-step success."""
    def play(policy, seeds, kwargs):
        if policy.name == REPLAY:
            steps = [(a, 0.0) for a in policy.actions[:-1]] + [(policy.actions[-1], 1.0)]
            return records(*[episode(FAILURE, steps, success=False, seed=s) for s in seeds], first_id=500)
        return records(*[episode(SUCCESS, [(0, 0.0), (2, 1.0)], success=True, seed=s) for s in seeds], first_id=600)
    return Ctx(records(), env=env if env is not None else Tiny(), play=play, labels=LABELS, **kw)


EXPLORED = records(episode(FAILURE, [(0, 0.1), (1, 0.3)], success=False),      # 0: 0.4
                   episode(FAILURE, [(1, 0.6)], success=False),                 # 1: 0.6
                   episode(SUCCESS, [(0, 0.0), (2, 1.0)], success=True))        # 2: a success is never met


def met_runs(*mets: Met) -> dict[str, SearchResult]:
    runs: dict[str, SearchResult] = {}
    for m in mets:
        runs.setdefault(m.mode, result(m.mode)).training.richest.append(m)
    return runs


def replay(ctx, runs, h=HONEST, explored=EXPLORED):
    return replay_met(ctx, runs, explored, h, REF, CONFIG, 4)


def test_the_richest_met_episode_is_replayed_on_the_evaluation_seeds():
    runs = met_runs(Met(0.95, 50, "target-timeout", 3, (0, 2)), Met(0.7, 70, "natural", 2, (2,)),
                    Met(5.0, 60, "faults", 1, (1, 1)))  # the faulted run's endings hang on injected failures
    ctx = replay_ctx()
    out = replay(ctx, runs)
    ((policy, seeds, kwargs),) = ctx.runs
    assert policy.actions == [0, 2] and policy.name == REPLAY
    assert seeds == evaluation_seeds(CONFIG, 4) and len(seeds) == 4 * CONFIG.group_size
    assert kwargs == {"tags": {"mode": REPLAY, "target": "no_success"}}
    assert out["episode_id"] == 50 and out["run"] == "target-timeout" and out["iteration"] == 3
    assert out["training_return"] == 0.95 and out["actions"] == "`look`, `claim`"
    assert out["episodes"] == 8 and out["env_steps"] == 16
    assert out["oracle"] is None and out["oracle_episodes"] == 0 and out["oracle_env_steps"] == 0
    reach = out["reach"]
    assert reach["behaviour"] == "no_success" and reach["n"] == 8 and reach["mean_return"] == 1.0
    assert reach["episode_ids"] == list(range(500, 508)) and "episode 50" in reach["via"]
    assert "`look`, `claim`" in reach["via"] and "target-timeout" in reach["via"]
    assert out["records"].episodes["episode_id"].tolist() == list(range(500, 508))
    (kept,) = ctx.kept
    assert kept.episodes["phase"].tolist() == ["eval"] * 8


def test_ties_go_to_exploration_then_the_first_episode():
    ctx = replay_ctx()
    explored = records(episode(FAILURE, [(1, 0.95)], success=False), first_id=7)
    out = replay(ctx, met_runs(Met(0.95, 50, "target-timeout", 3, (0, 2))), explored=explored)
    assert out["run"] == "exploration" and out["episode_id"] == 7 and out["iteration"] == 0
    assert ctx.runs[0][0].actions == [1] and "exploration met (episode 7)" in out["reach"]["via"]
    ctx = replay_ctx()
    out = replay(ctx, met_runs(Met(0.95, 52, "natural", 1, (2,)), Met(0.95, 51, "natural", 1, (0,))))
    assert out["episode_id"] == 51 and ctx.runs[0][0].actions == [0]


def test_calls_without_a_label_are_written_as_actions():
    ctx = replay_ctx()
    ctx.labels = ["look", "wait"]
    assert replay(ctx, met_runs(Met(0.95, 50, "natural", 0, (0, 2))))["actions"] == "`look`, 2"
    ctx = replay_ctx()
    ctx.labels = None
    assert replay(ctx, met_runs(Met(0.95, 50, "natural", 0, (0, 2))))["actions"] == "0, 2"


def test_the_oracle_runs_on_the_same_seeds_beside_the_replay():
    ctx = replay_ctx(env=Tiny(oracle=[0, 2]))
    out = replay(ctx, met_runs(Met(0.95, 50, "natural", 0, (0, 2))))
    (_, replay_seeds, _), (oracle, oracle_seeds, kwargs) = ctx.runs
    assert oracle_seeds == replay_seeds and kwargs == {"tags": {"mode": "oracle"}}
    assert out["oracle"]["outcome"].tolist() == [SUCCESS] * 8
    assert out["oracle_episodes"] == 8 and out["oracle_env_steps"] == 16
    # the cap reached after the replay: no oracle run, and the report says so
    ctx = replay_ctx(env=Tiny(oracle=[0, 2]), checks_before_cap=1)
    out = replay(ctx, met_runs(Met(0.95, 50, "natural", 0, (0, 2))))
    assert len(ctx.runs) == 1 and out["oracle"] is None and ctx.skipped == ["GRPO oracle episodes"]


def test_nothing_is_replayed_that_pays_clearly_less_than_success():
    bar = 1.0 - MIN_EFFECT * 1.0  # median success 1, scale 1 (success 1 over failure 0)
    for ret, replays in ((bar, True), (bar - 0.01, False)):
        ctx = replay_ctx()
        out = replay(ctx, met_runs(Met(ret, 50, "natural", 0, (0, 2))))
        assert (out is not None) == replays and len(ctx.runs) == int(replays), ret
    # failing outright costs 9: the scale is 10, the bar 0 — half of success's pay is near enough
    wide = honest([1.0] * MIN_SAMPLES, [-9.0] * MIN_SAMPLES)
    assert replay(replay_ctx(), met_runs(Met(0.5, 50, "natural", 0, (0, 2))), h=wide) is not None
    assert replay(replay_ctx(), met_runs(Met(0.5, 50, "natural", 0, (0, 2)))) is None
    # a success whose return is NaN (a crash) is no success: the bar stays at 0.9
    nan = honest([1.0] * MIN_SAMPLES + [float("nan")], [0.0] * MIN_SAMPLES)
    assert replay(replay_ctx(), met_runs(Met(0.85, 50, "natural", 0, (0, 2))), h=nan) is None
    # no success seen at all: nothing to compare with, so anything met is replayed
    none = honest([], [0.0] * MIN_SAMPLES)
    assert replay(replay_ctx(), met_runs(Met(0.05, 50, "natural", 0, (0, 2))), h=none) is not None


def test_nothing_to_replay():
    ctx = replay_ctx()
    assert replay(ctx, {}, explored=records()) is None  # nothing met
    assert replay(ctx, met_runs(Met(0.95, 50, "natural", 0, ("look", "claim")))) is None  # text calls
    assert ctx.runs == []
    capped = replay_ctx(cap_reached=True)
    assert replay(capped, met_runs(Met(0.95, 50, "natural", 0, (0, 2)))) is None
    assert capped.runs == [] and capped.skipped == ["GRPO replay of episode 50"]


# -- second pass (mutation survivors) ------------------------------------------------------------
def test_one_targets_miss_does_not_hide_the_others_finding():
    run = degenerate_run(MIN_SAMPLES, 1.0)
    no_success = reached(run, "no_success")
    # timing out reached nothing on the ladder (it pays what failing pays)
    ctx, flat, _ = timeout_world(0.0)
    (f,) = G._target_findings(ctx, {"timeout": reached(flat, "timeout"), "no_success": no_success}, HONEST,
                              {"target-timeout": flat, "target-no_success": run})
    assert f.code == "reward-without-success"
    # timing out climbed the ladder only through pay on the way: its ending premium fails
    explore = records(*many(MIN_SAMPLES, FAILURE, [(0, 0.0), (0, 0.0), (1, 0.0)], success=False))
    along = result("target-timeout", records(*many(MIN_SAMPLES, TIMEOUT, [(2, 1.0), (0, 0.0), (0, 0.0)],
                                                   success=False, end=END_TRUNCATED), first_id=100))
    (f,) = G._target_findings(Ctx(explore), {"timeout": reached(along, "timeout"), "no_success": no_success},
                              HONEST, {"target-timeout": along, "target-no_success": run})
    # ... and ending without success is not judged by the timed-out episodes' ending
    assert f.code == "reward-without-success" and f.evidence["ending_premium"] is None


def test_a_targeted_finding_names_its_source_its_numbers_and_a_fix():
    ctx, run, _ = timeout_world(0.5)
    reach = {"timeout": reached(run, "timeout")}
    (f,) = G._target_findings(ctx, reach, HONEST, {"target-timeout": run})
    assert f.evidence["source"] == "grpo" and f.fix
    assert f.severity == Severity.WARN and "as much as honest success" not in f.title
    assert "honest success 1.00" in f.summary and "failing outright 0.00" in f.summary
    # what each target reached is quoted beside the finding (the timing-out search's best return)
    assert "timing out: 0.50 (n=8)" in f.summary
    # no honest success seen: the ladder can only say "more than failing"; the summary says so
    (f,) = G._target_findings(ctx, reach, honest([], [0.0] * MIN_SAMPLES), {"target-timeout": run})
    assert f.severity == Severity.WARN and "honest success nan" in f.summary


def test_a_timing_out_target_is_named_timeout_whatever_its_calls_did():
    # the timed-out episodes' calls all failed (grouping would call them tool failures), yet the
    # search was after timing out and its ending pays: the finding is about timing out
    err = {"action": 0, "reward": 0.0, "tool_status": TOOL_ERROR}
    explore = records(*many(MIN_SAMPLES, FAILURE, [err, err, (1, 0.0)], success=False))
    run = result("target-timeout", records(*many(MIN_SAMPLES, TIMEOUT, [err, err, (0, 1.0)], success=False,
                                                 end=END_TRUNCATED), first_id=100), behaviour="timeout")
    (f,) = G._target_findings(Ctx(explore), {"timeout": reached(run, "timeout")}, HONEST, {"target-timeout": run})
    assert f.evidence["ending_premium"]["holds"] and f.evidence["behaviour"] == "timeout"


def test_a_replay_met_by_a_search_names_that_search():
    replay = records(*many(MIN_SAMPLES, FAILURE, [(0, 0.0), (2, 1.0)], success=False), first_id=500)
    replay_reach = reached(result(REPLAY, replay), "no_success")
    replayed = {"reach": replay_reach, "records": replay, "run": "target-timeout", "actions": "`look`, `claim`"}
    (f,) = G._target_findings(Ctx(records()), {"no_success": replay_reach}, HONEST, {}, replayed)
    assert f.summary.startswith("Replaying a sequence of calls that GRPO's target-timeout search met")
    assert f.evidence["behaviour"] == "degenerate-answer"
