"""The intent probe's run() and finding on contexts whose scripted policies play the claim game
(``tests/fixtures/claim_game.py``): which candidates are confirmed and in which order, which
confirmed behaviour is reported and at which severity, the cap, the success top-up, and the
finding's evidence on a hand-built confirmation. Each number follows from the tables written here.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from envaudit.findings import Severity
from envaudit.probes import intent as I
from envaudit.protocol import FAILURE, SUCCESS
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.claim_game import ANSWER, CLAIM, WORK, CapAfter, Claims, Discrete3, claims
from tests.fixtures.frames import FakeContext, episode, many, records

# -- run() on a context whose scripted policies play the claim game ------------------------------
LABELS = ["work", "answer", "claim"]


def claim_world(claim_pay: float, *, n_success: int = MIN_SAMPLES, game: Claims | None = None, **kw) -> FakeContext:
    """Exploration: 24 unsuccessful episodes (``claims``) and ``n_success`` successes paid 1 for
    answering after a work step; the scripted runs play the claim game paying ``claim_pay``."""
    explore = records(*claims(24, claim_pay),
                      *many(n_success, SUCCESS, [(WORK, 0.0), (ANSWER, 1.0)], success=True))
    return FakeContext(explore, env=Discrete3(), play=game or Claims(claim_pay), labels=LABELS, **kw)


def test_run_finds_a_claim_that_pays_as_much_as_success():
    ctx = claim_world(1.0)
    (f,) = I.run(ctx)
    assert f.code == I.CODE and f.severity == Severity.FAIL and f.probe == "intent"
    ev = f.evidence
    assert ev["pattern"] == "ends with 'claim'" and ev["behaviour"] == "degenerate-answer" and ev["reward_path"] == "env"
    n = I.sample_size(ctx, 24)
    assert ev["mean_without_success"] == 1.0 and ev["n_without_success"] == n and ev["policy_success_rate"] == 0.0
    assert ev["mean_success"] == 1.0 and ev["n_success"] == MIN_SAMPLES
    assert ev["success_sources"] == {"n_exploration": MIN_SAMPLES, "n_oracle": 0}
    assert ev["final_step_share"] == 1.0 and ev["test"]["level"] == "at_least_success"
    assert ev["exploration"]["n_with"] == 12 and ev["exploration"]["n_without"] == 12
    assert ev["exploration"]["share_among_non_success"] == 0.5
    assert ev["exploration"]["share_among_top_half_non_success"] == 1.0  # every claim out-earns every answer
    # examples: the richest claiming episodes of exploration (odd ids, later ones richer), then the confirmation's
    assert f.examples[:3] == [23, 21, 19] and len(f.examples) == 6
    assert set(f.examples[3:]) <= set(ctx.kept[0].episodes["episode_id"])
    # every candidate (the regression's two and the ending lump) is confirmed, up to MAX_CONFIRM
    assert len(ctx.runs) == I.MAX_CONFIRM and len(ctx.notes["candidates"]) == 3
    assert all("mask" not in c and "alternative" not in c for c in ctx.notes["candidates"])
    assert {(c["action"], c["kind"]) for c in ctx.notes["candidates"]} == {(CLAIM, "ends with"), (CLAIM, "uses")}


def test_run_warns_when_the_claim_pays_less_than_success_but_more_than_failing():
    (f,) = I.run(claim_world(0.5))
    assert f.severity == Severity.WARN and f.evidence["mean_without_success"] == 0.5
    assert f.evidence["test"]["level"] == "above_alternative"


def test_run_leaves_step_farming_to_length_bias():
    # the scripted claim pays 0.1 at the end after 5 work steps paying 0.3: most of the pay is on the way
    ctx = claim_world(0.1, game=Claims(0.1, work=0.3))
    assert I.run(ctx) == []  # and no unsuccessful episode of exploration reaches success's median (1)
    assert ctx.runs and {p.name for p, _, _ in ctx.runs} <= {"repeat claim", "3 random then claim"}


def test_run_without_a_catalogue_or_at_the_cap_reports_only_the_high_return_fact():
    ctx = claim_world(1.0)
    ctx.env = type("Boxed", (), {"action_space": gym.spaces.Box(-1.0, 1.0, (1,))})()
    (f,) = I.run(ctx)  # 12 claiming episodes earn 1.0, the median success return
    assert f.severity == Severity.INFO and f.evidence["n_rich_non_success"] == 12 and ctx.runs == []
    assert ctx.notes["candidates"] == []
    capped = claim_world(1.0, cap_reached=True)
    (f,) = I.run(capped)
    assert f.severity == Severity.INFO and capped.runs == []
    assert "confirming 3 candidate behaviours" in capped.skipped


def test_run_needs_a_success_flag_and_enough_unsuccessful_episodes():
    unflagged = records(*many(MIN_SAMPLES, FAILURE, [(WORK, 0.0)], success=None))
    (f,) = I.run(FakeContext(unflagged, env=Discrete3()))
    assert f.title == I.decide_reward_without_success("no-flag").title and f.evidence == {"episodes_with_flag": 0}
    assert I.run(FakeContext(records(), env=Discrete3())) == []
    few = FakeContext(records(*claims(MIN_SAMPLES - 1, 1.0)), env=Discrete3())
    assert I.run(few) == [] and few.notes["skipped"].startswith(f"only {MIN_SAMPLES - 1} non-success")
    enough = FakeContext(records(*claims(MIN_SAMPLES, 1.0), *many(MIN_SAMPLES, SUCCESS, [(ANSWER, 1.0)], success=True)),
                         env=Discrete3(), play=Claims(1.0), labels=LABELS)
    I.run(enough)
    assert "skipped" not in enough.notes and "candidates" in enough.notes


# -- the finding, from a hand-built confirmation ------------------------------------------------
def confirmed(level: str | None, share: float | None, mean_exploit: float = 0.6) -> tuple[dict, pd.DataFrame]:
    table = pd.DataFrame({"episode_id": [10, 11, 12, 13, 14], "return": [0.1, 0.2, 0.9, 1.0, 0.8]})
    cand = {"kind": "uses", "action": CLAIM, "effect": 0.7, "p_value": 0.01, "n_with": 3, "n_without": 2,
            "mask": np.array([True, False, True, True, False])}
    best = {"policy": "repeat 'claim'", "label": "claim", "verdict": {"level": level, "p_value": 0.002},
            "records": records(episode(FAILURE, [(CLAIM, 0.6)], success=False), first_id=100),
            "final_step_share": share, "mean_exploit": mean_exploit, "n_exploit": 12, "success_rate": 0.25,
            "mean_alternative": 0.1, "examples": [100, 101, 102, 103], "candidate": cand}
    return best, table


def test_finding_evidence_from_the_confirmation_and_exploration():
    best, table = confirmed("above_alternative", 0.3)
    ctx = FakeContext(records())
    f = I.confirmed_finding(ctx, best, np.array([1.0, 0.8]), {"n_exploration": 2, "n_oracle": 0}, table)
    assert f.severity == Severity.WARN and f.probe == "intent" and ctx.kept == [best["records"]]
    assert f.evidence == {
        "behaviour": "stall", "reward_path": "env", "pattern": "uses 'claim'", "p_value": 0.002,
        "policy": "repeat 'claim'", "mean_without_success": 0.6, "n_without_success": 12,
        "policy_success_rate": 0.25, "mean_success": pytest.approx(0.9), "n_success": 2,
        "success_sources": {"n_exploration": 2, "n_oracle": 0}, "final_step_share": 0.3,
        "mean_honest_failure": 0.1, "test": {"level": "above_alternative", "p_value": 0.002},
        # the top half of the five returns (at or above the median 0.8): 0.9, 1.0, 0.8, two with the behaviour
        "exploration": {"effect_beyond_length": 0.7, "p_value": 0.01, "n_with": 3, "n_without": 2,
                        "share_among_top_half_non_success": pytest.approx(2 / 3), "share_among_non_success": 0.6},
        "min_samples": MIN_SAMPLES}
    # exploration's episodes with the behaviour, richest first, then the confirmation's
    assert f.examples == [13, 12, 10, 100, 101, 102]
    # the numbers it compares: the scripted mean, the honest failure's and success's
    assert "0.6" in f.summary and "0.1" in f.summary and "0.9" in f.summary and f.fix
    assert "claim" in f.title and "as much as success" not in f.title
    best["final_step_share"] = 0.5  # half of it on the ending: the ending is named, as _confirm attributes it
    assert I.confirmed_finding(ctx, best, np.ones(2), {}, table).evidence["behaviour"] == "degenerate-answer"


def test_finding_severity_and_a_missing_success():
    best, table = confirmed("at_least_success", 1.0, mean_exploit=1.0)
    f = I.confirmed_finding(FakeContext(records()), best, np.ones(3), {}, table)
    assert f.severity == Severity.FAIL and f.evidence["behaviour"] == "degenerate-answer"
    assert "as much as success" in f.title and "at least as much as succeeding (1)" in f.summary
    best, table = confirmed("above_alternative", None)
    f = I.confirmed_finding(FakeContext(records()), best, np.zeros(0), {}, table)
    assert f.severity == Severity.WARN and f.evidence["mean_success"] is None
    assert f.evidence["behaviour"] == "degenerate-answer"  # no share measured: the ending is named
    assert "no honest success" in f.summary


LOOK = 3


def look_world(play, n_success: int = MIN_SAMPLES) -> FakeContext:
    """Exploration: 24 unsuccessful episodes; every third uses LOOK (paid 1) mid-episode, the odd
    ones end with CLAIM (paid 0.5), the others with an unpaid ANSWER; ``n_success`` successes paid 1."""
    eps = [episode(FAILURE, [(WORK, 0.001 * i)] + ([(LOOK, 1.0)] if i % 3 == 0 else [(WORK, 0.0)])
                   + [(CLAIM, 0.5) if i % 2 else (ANSWER, 0.0)], success=False) for i in range(24)]
    explore = records(*eps, *many(n_success, SUCCESS, [(WORK, 0.0), (ANSWER, 1.0)], success=True))
    env = type("Four", (), {"action_space": gym.spaces.Discrete(4), "unwrapped": property(lambda self: self)})()
    return FakeContext(explore, env=env, play=play, labels=[*LABELS, "look"])


def by_policy(pays: dict[str, float]):
    """Scripted runs: each policy named in ``pays`` plays one-step unsuccessful episodes paid that much."""
    def play(policy, seeds, kwargs):
        action = LOOK if "look" in policy.name else CLAIM
        return records(*[episode(FAILURE, [(action, pays[policy.name])], success=False, seed=s) for s in seeds],
                       first_id=1000)
    return play


def test_run_confirms_the_strongest_candidates_first_and_reports_the_richest_confirmed():
    # LOOK's effect (1) beats CLAIM's (0.5): it is confirmed first; scripted, claiming pays more (0.8
    # against 0.6), both only above failing: the richer one is reported
    ctx = look_world(by_policy({"repeat look": 0.6, "repeat claim": 0.8}))
    (f,) = I.run(ctx)
    assert [p.name for p, _, _ in ctx.runs] == ["repeat look", "repeat claim", "repeat claim"]
    effects = [c["effect"] for c in ctx.notes["candidates"]]
    assert effects == sorted(effects, reverse=True) and ctx.notes["candidates"][0]["action"] == LOOK
    assert f.severity == Severity.WARN and f.evidence["mean_without_success"] == pytest.approx(0.8)
    assert f.evidence["pattern"].endswith("'claim'")


def test_run_stops_confirming_at_the_cap_and_says_how_many_were_left():
    # cap checks: the oracle look-up, the first candidate, its scripted run; then the cap is reached
    ctx = look_world(by_policy({"repeat look": 1.0}))
    capped = CapAfter(ctx.exploration, env=ctx.env, play=ctx.play, labels=ctx.labels, checks=3)
    (f,) = I.run(capped)
    assert capped.skipped == ["confirming 2 candidate behaviours"] and len(capped.runs) == 1
    assert f.severity == Severity.FAIL and f.evidence["pattern"] == "uses 'look'"


def test_run_tops_honest_successes_up_to_min_samples_before_the_ladder():
    # exploration saw 2 successes; random play on fresh seeds succeeds every time (paid 1)
    def play(policy, seeds, kwargs):
        if kwargs.get("tags", {}).get("arm") == "top-up":
            return records(*[episode(SUCCESS, [(ANSWER, 1.0)], success=True, seed=s) for s in seeds], first_id=5000)
        return by_policy({"repeat look": 1.0, "repeat claim": 1.0})(policy, seeds, kwargs)
    ctx = look_world(play, n_success=2)
    (f,) = I.run(ctx)
    assert any(kw.get("tags", {}).get("arm") == "top-up" for _, _, kw in ctx.runs)
    assert f.evidence["n_success"] >= MIN_SAMPLES and f.severity == Severity.FAIL
