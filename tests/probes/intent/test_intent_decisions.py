"""The intent probe's decision functions on hand-built tables whose answers are known.

Which episodes are "ended without success", what each episode did (its final action, the actions
it used, the pay of its failed calls), which behaviour the regression singles out once length and
failed calls are held fixed, which ending lump stands out against a typical step, and how a
confirmed behaviour is placed on the ladder: each number follows from the table the test writes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.probes import intent as I
from envaudit.protocol import (
    END_ENV_EXCEPTION,
    END_TRUNCATED,
    ERROR,
    FAILURE,
    SUCCESS,
    TIMEOUT,
    TOOL_ERROR,
    TOOL_OK,
)
from envaudit.stats import MIN_SAMPLES
from tests.fixtures.claim_game import ANSWER, CLAIM, WORK, CapAfter, Claims, claims
from tests.fixtures.frames import FakeContext, episode, many, records


def claim_env(n: int = 20, claim_pay: float = 0.5) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``n`` unsuccessful episodes of 1-4 work steps; half end with CLAIM (paid ``claim_pay``), half
    with ANSWER (paid 0). Work steps pay 0.01 * (i % 3): noise unrelated to the ending or length."""
    eps = []
    for i in range(n):
        work = [(WORK, 0.01 * (i % 3))] + [(WORK, 0.0)] * (i % 4)
        end = (CLAIM, claim_pay) if i % 2 else (ANSWER, 0.0)
        eps.append(episode(FAILURE, [*work, end], success=False))
    recs = records(*eps)
    return I.behaviours(recs.episodes, recs.steps), recs.steps


def test_ended_unsuccessful_is_a_failure_the_env_flagged_false():
    eps = pd.DataFrame({"success": [False, None, True, False, False],
                        "outcome": [FAILURE, FAILURE, SUCCESS, TIMEOUT, FAILURE]})
    assert I.ended_unsuccessful(eps).tolist() == [True, False, False, False, True]


def test_behaviours_list_the_final_action_the_actions_used_and_failed_call_pay():
    recs = records(episode(FAILURE, [(0, 0.0), {"action": 1, "reward": 0.4, "tool_status": TOOL_ERROR}, (2, 1.0)],
                           success=False),
                   episode(FAILURE, [(2, 0.0), ("text", 0.0)], success=False),  # the text action is left out
                   episode(SUCCESS, [(3, 1.0)], success=True))
    table = I.behaviours(recs.episodes.iloc[:2], recs.steps).set_index("episode_id")
    assert table["final"].tolist() == [2, 2]
    assert table[["uses_0", "uses_1", "uses_2"]].to_numpy().tolist() == [[1, 1, 1], [0, 0, 1]]
    assert "uses_3" not in table  # only the non-success episodes' actions
    assert table["failed_call_pay"].tolist() == [0.4, 0.0]
    repeat = records(episode(FAILURE, [(1, 0.0), (1, 0.0), (1, 0.0)], success=False))
    assert I.behaviours(repeat.episodes, repeat.steps)["uses_1"].tolist() == [1]  # used, not counted


def test_the_regression_finds_the_action_that_pays_beyond_length():
    table, _ = claim_env()
    found = I.candidates(table, [WORK, ANSWER, CLAIM], 0.05, np.random.default_rng(0))
    # CLAIM's mask (end with it, use it) is the same: two candidates of effect 0.5; ANSWER pays less
    # than the rest, WORK is used by every episode (no contrast)
    assert [(c["action"], c["kind"]) for c in found] == [(CLAIM, "ends with"), (CLAIM, "uses")]
    c = found[0]
    assert c["effect"] == pytest.approx(0.5, abs=0.01) and c["p_value"] < 0.05
    assert c["n_with"] == 10 and c["n_without"] == 10 and c["mask"].tolist() == [i % 2 == 1 for i in range(20)]


def test_no_candidate_without_a_significant_positive_effect():
    table, _ = claim_env(claim_pay=0.0)
    assert I.candidates(table, [WORK, ANSWER, CLAIM], 0.05, np.random.default_rng(0)) == []
    table, _ = claim_env(claim_pay=0.5)
    assert I.candidates(table, [CLAIM], 1e-300, np.random.default_rng(0)) == []  # alpha: never significant


def test_a_behaviour_needs_two_episodes_with_and_two_without():
    table, _ = claim_env()
    only_one = table[(table["final"] != CLAIM) | (table["episode_id"] == 1)]
    assert I.candidates(only_one, [CLAIM], 0.05, np.random.default_rng(0)) == []
    two = table[(table["final"] != CLAIM) | table["episode_id"].isin([1, 3, 5])]
    assert [c["n_with"] for c in I.candidates(two, [CLAIM], 0.05, np.random.default_rng(0))] == [3, 3]


def test_pay_for_failed_calls_and_per_step_pay_are_not_a_behaviour():
    # the CLAIM ending's 0.5 is paid on a failed call: failure-rewarded's, not this probe's
    eps = [episode(FAILURE, [(WORK, 0.01 * (i % 3)), {"action": CLAIM, "reward": 0.5, "tool_status": TOOL_ERROR}]
                   if i % 2 else [(WORK, 0.01 * (i % 3)), (ANSWER, 0.0)], success=False) for i in range(20)]
    recs = records(*eps)
    assert I.candidates(I.behaviours(recs.episodes, recs.steps), [CLAIM], 0.05, np.random.default_rng(0)) == []
    # CLAIM episodes are longer and every step pays 0.1: length explains the return, not CLAIM
    eps = [episode(FAILURE, [(WORK, 0.1)] * (2 + i % 3 + 3 * (i % 2)) + [(CLAIM if i % 2 else ANSWER, 0.1)],
                   success=False) for i in range(20)]
    recs = records(*eps)
    table = I.behaviours(recs.episodes, recs.steps)
    found = I.candidates(table, [CLAIM], 0.05, np.random.default_rng(0))
    assert all(abs(c["effect"]) < 1e-6 for c in found)


def test_an_ending_lump_against_the_typical_ordinary_step():
    # every unsuccessful ending pays 0.3; mid-episode two failed calls charge 1 each, a work step pays 0
    eps = many(MIN_SAMPLES, FAILURE, [{"action": WORK, "reward": -1.0, "tool_status": TOOL_ERROR},
                                      {"action": WORK, "reward": -1.0, "tool_status": TOOL_ERROR},
                                      (WORK, 0.0), (ANSWER, 0.3)], success=False)
    recs = records(*eps)
    table = I.behaviours(recs.episodes, recs.steps)
    (c,) = I.ending_candidates(table, recs.steps)
    assert c["action"] == ANSWER and c["effect"] == pytest.approx(0.3) and c["typical_step_pay"] == 0.0
    assert c["alternative"].tolist() == pytest.approx([-2.0] * MIN_SAMPLES) and c["p_value"] is None
    assert c["n_with"] == MIN_SAMPLES and c["n_without"] == 0 and c["kind"] == "ends with"
    fewer = table.iloc[: MIN_SAMPLES - 1]
    assert I.ending_candidates(fewer, recs.steps) == []


def crashed_episode():
    """An episode the env ended by raising: the recorder writes NaN on the step that raised."""
    return episode(ERROR, [(WORK, -0.1), {"action": WORK, "reward": float("nan"), "terminated": False}],
                   end=END_ENV_EXCEPTION)


@pytest.mark.parametrize("answer_pay, lump", [(-0.1, None), (0.2, 0.3)])
def test_a_step_that_raised_is_no_typical_step(answer_pay, lump):
    # Every unsuccessful ending is an answer after two work steps of -0.1; beside them one episode
    # raised. Its NaN is no pay: an answer paid like a typical step is no candidate, one paid 0.2
    # stands 0.3 above a typical step with the crash present as without it.
    recs = records(*many(MIN_SAMPLES, FAILURE, [(WORK, -0.1), (WORK, -0.1), (ANSWER, answer_pay)], success=False),
                   crashed_episode())
    table = I.behaviours(recs.episodes.iloc[:MIN_SAMPLES], recs.steps)
    found = I.ending_candidates(table, recs.steps)
    if lump is None:
        assert found == []
    else:
        (c,) = found
        assert c["action"] == ANSWER and c["effect"] == pytest.approx(lump)
        assert c["typical_step_pay"] == pytest.approx(-0.1)


def test_no_ending_lump_when_the_ending_pays_a_typical_step_or_less():
    recs = records(*many(MIN_SAMPLES, FAILURE, [(WORK, -0.1), (WORK, -0.1), (ANSWER, -0.1)], success=False))
    assert I.ending_candidates(I.behaviours(recs.episodes, recs.steps), recs.steps) == []
    one_step = records(*many(MIN_SAMPLES, FAILURE, [(ANSWER, 0.2)], success=False),
                       *many(MIN_SAMPLES, FAILURE, [(CLAIM, 0.7)], success=False))
    found = I.ending_candidates(I.behaviours(one_step.episodes, one_step.steps), one_step.steps)
    # no step ends nothing: the typical step pays 0; strongest lump first
    assert [(c["action"], c["effect"]) for c in found] == [(CLAIM, pytest.approx(0.7)), (ANSWER, pytest.approx(0.2))]
    assert found[0]["alternative"].tolist() == [0.0] * MIN_SAMPLES


def test_prefix_policy_plays_k_random_actions_then_the_action():
    p = I.PrefixPolicy(CLAIM, "claim", 3, [WORK, ANSWER])
    p.reset(None, np.random.default_rng(0))
    played = [p(None, {}) for _ in range(6)]
    assert set(played[:3]) <= {WORK, ANSWER} and played[3:] == [CLAIM] * 3
    assert p.name == "3 random then claim" and p.describe() == "3 random actions, then 'claim'"


def confirm_ctx(claim_steps):
    """A context whose scripted runs all play ``claim_steps`` (unsuccessful) episodes."""
    def play(policy, seeds, kw):
        return records(*[episode(FAILURE, claim_steps, success=False) for _ in seeds])
    return FakeContext(records(), play=play, labels=["work", "answer", "claim"])


def test_confirm_places_the_scripted_behaviour_on_the_ladder():
    table, _ = claim_env(n=24)
    cand = {"action": CLAIM, "mask": (table["final"] == CLAIM).to_numpy(bool)}
    ctx = confirm_ctx([(WORK, 0.0), (CLAIM, 0.5)])
    best = I._confirm(ctx, cand, table, [WORK, ANSWER, CLAIM], np.ones(MIN_SAMPLES), np.random.default_rng(0))
    assert best["verdict"]["level"] == "above_alternative" and best["label"] == "claim"
    assert best["policy"] == "repeat 'claim'" and best["mean_exploit"] == pytest.approx(0.5)
    assert best["final_step_share"] == 1.0 and best["success_rate"] == 0.0
    assert best["mean_alternative"] == pytest.approx(0.02 * 4 / 12 + 0.01 * 4 / 12)  # ANSWER endings: work noise only
    assert len(ctx.runs) == 1  # a level on the first policy: no prefix run
    assert len(ctx.runs[0][1]) == I.sample_size(ctx, 24) and best["n_exploit"] == I.sample_size(ctx, 24)


def test_confirm_tries_the_prefix_policy_and_leaves_step_pay_to_length_bias():
    table, _ = claim_env(n=24)
    cand = {"action": CLAIM, "mask": (table["final"] == CLAIM).to_numpy(bool)}
    # claiming pays 0.5 over the steps, a fifth at the end: step farming
    ctx = confirm_ctx([(CLAIM, 0.1)] * 5)
    best = I._confirm(ctx, cand, table, [WORK, ANSWER, CLAIM], np.ones(MIN_SAMPLES), np.random.default_rng(0))
    assert best["verdict"]["level"] is None and best["verdict"]["attributed_to"] == "length-bias"
    assert best["verdict"]["level_before_attribution"] == "above_alternative"
    # CLAIM episodes are 3 or 5 steps long, six of each (median 4 with the ending): 3 random steps first
    assert [p.name for p, _, _ in ctx.runs] == ["repeat claim", "3 random then claim"]
    assert best["policy"] == "repeat 'claim'"  # neither reached a level: the first is kept


def test_confirm_against_the_typical_step_alternative_of_an_ending_lump():
    table, _ = claim_env(n=24)
    cand = {"action": CLAIM, "mask": (table["final"] == CLAIM).to_numpy(bool), "alternative": np.zeros(12)}
    ctx = confirm_ctx([(CLAIM, 1.0)])
    best = I._confirm(ctx, cand, table, [CLAIM], np.ones(MIN_SAMPLES), np.random.default_rng(0))
    assert best["verdict"]["level"] == "at_least_success" and best["mean_alternative"] == 0.0


def test_high_return_fact_needs_min_samples_rich_episodes():
    success = np.array([0.0] * 4 + [1.0] * 5)  # median 1
    rich = pd.DataFrame({"episode_id": range(10), "return": [1.0] * MIN_SAMPLES + [0.5, 0.9]})
    (f,) = I.high_return_fact(success, rich)
    assert f.severity == Severity.INFO and f.evidence["n_rich_non_success"] == MIN_SAMPLES
    assert f.evidence["median_success"] == 1.0 and f.evidence["n_non_success"] == 10
    assert list(f.examples) == [0, 1, 2, 3, 4]
    assert I.high_return_fact(success, rich.iloc[1:]) == []  # 7 rich
    assert I.high_return_fact(success[:MIN_SAMPLES - 1], rich) == []


def test_no_flag_finding():
    f = I.decide_reward_without_success("no-flag")
    assert f.severity == Severity.INFO and f.evidence == {"episodes_with_flag": 0} and f.probe == "intent"


def test_a_timeout_success_arg_is_not_read_as_failure():
    recs = records(episode(TIMEOUT, [(0, 1.0)], success=False, end=END_TRUNCATED),
                   episode(FAILURE, [{"action": 0, "reward": 0.0, "tool_status": TOOL_OK}], success=False))
    assert I.ended_unsuccessful(recs.episodes).tolist() == [False, True]


# -- second pass (mutation survivors): boundaries, the scripted runs, run() and the finding ----------
def test_behaviours_fill_what_an_episode_lacks_and_count_a_failed_ending_call():
    recs = records(episode(FAILURE, [(0, 0.0), {"action": 1, "reward": 0.4, "tool_status": TOOL_ERROR}],
                           success=False),  # a failed call that ended the episode still paid
                   episode(FAILURE, [("text", 0.0), ("more text", 0.3)], success=False))  # no catalogue action
    table = I.behaviours(recs.episodes, recs.steps).set_index("episode_id")
    assert table["failed_call_pay"].tolist() == [0.4, 0.0]
    assert table.loc[1, ["uses_0", "uses_1"]].tolist() == [0, 0] and np.isnan(table.loc[1, "final"])
    # an episode none of whose steps were recorded: nothing used, nothing paid for failed calls
    first = I.behaviours(recs.episodes, recs.steps[recs.steps["episode_id"] == 0]).set_index("episode_id")
    assert first.loc[1, "failed_call_pay"] == 0.0 and first.loc[1, ["uses_0", "uses_1"]].tolist() == [0, 0]


def test_failed_call_pay_is_taken_out_even_when_only_the_behaviours_calls_pay():
    # every episode makes one failed call; only the claiming episodes' failed call pays 1
    eps = [episode(FAILURE, [{"action": WORK, "reward": 1.0 if i % 2 else 0.0, "tool_status": TOOL_ERROR},
                             (WORK, 0.001 * i), (CLAIM if i % 2 else ANSWER, 0.0)], success=False) for i in range(20)]
    recs = records(*eps)
    table = I.behaviours(recs.episodes, recs.steps)
    assert table["failed_call_pay"].tolist() == [float(i % 2) for i in range(20)]
    assert I.candidates(table, [WORK, ANSWER, CLAIM], 0.05, np.random.default_rng(0)) == []


def test_the_two_episode_boundaries_of_a_contrast():
    recs = records(*claims(20, 0.5))
    table = I.behaviours(recs.episodes, recs.steps)
    claimed = table["final"] == CLAIM
    keep = lambda n_claim: table[~claimed | table["episode_id"].isin(table.loc[claimed, "episode_id"][:n_claim])]  # noqa: E731
    found = I.candidates(keep(2), [CLAIM], 0.05, np.random.default_rng(0))
    assert [(c["kind"], c["n_with"], c["n_without"]) for c in found] == [("ends with", 2, 10), ("uses", 2, 10)]
    answered = table["final"] == ANSWER
    few = lambda n_answer: table[~answered | table["episode_id"].isin(table.loc[answered, "episode_id"][:n_answer])]  # noqa: E731
    found = I.candidates(few(2), [CLAIM], 0.05, np.random.default_rng(0))
    assert [(c["n_with"], c["n_without"]) for c in found] == [(10, 2), (10, 2)]
    assert I.candidates(few(1), [CLAIM], 0.05, np.random.default_rng(0)) == []


def test_an_action_that_pays_on_the_way_is_a_uses_candidate_ranked_by_effect():
    # LOOK (3) pays 1 when used mid-episode, in every third episode; CLAIM endings pay 0.5; an
    # action no episode used (7) has nothing to contrast
    LOOK = 3
    eps = [episode(FAILURE, [(WORK, 0.001 * i)] + ([(LOOK, 1.0)] if i % 3 == 0 else [(WORK, 0.0)])
                   + [(CLAIM, 0.5) if i % 2 else (ANSWER, 0.0)], success=False) for i in range(24)]
    recs = records(*eps)
    found = I.candidates(I.behaviours(recs.episodes, recs.steps), [WORK, ANSWER, CLAIM, LOOK, 7], 0.05,
                         np.random.default_rng(0))
    assert [(c["action"], c["kind"]) for c in found] == [(LOOK, "uses"), (CLAIM, "ends with"), (CLAIM, "uses")]
    # LOOK's episodes are half claiming, half answering (every third of 24): its effect is its pay
    assert found[0]["effect"] == pytest.approx(1.0, abs=0.01) and found[0]["n_with"] == 8
    assert found[0]["n_without"] == 16


def test_an_ending_lump_is_found_whatever_ending_comes_first():
    # the first ending seen (ANSWER) has too few episodes; CLAIM after it has MIN_SAMPLES, each paid 0.4
    recs = records(*many(MIN_SAMPLES - 1, FAILURE, [(WORK, 0.0), (ANSWER, 0.9)], success=False),
                   *many(MIN_SAMPLES, FAILURE, [(WORK, 0.0), (CLAIM, 0.4)], success=False))
    (c,) = I.ending_candidates(I.behaviours(recs.episodes, recs.steps), recs.steps)
    assert c["action"] == CLAIM and c["effect"] == pytest.approx(0.4)
    assert c["mask"].tolist() == [False] * (MIN_SAMPLES - 1) + [True] * MIN_SAMPLES
    assert c["n_without"] == MIN_SAMPLES - 1


def claim_cand(n: int = 24):
    recs = records(*claims(n, 0.5))
    table = I.behaviours(recs.episodes, recs.steps)
    return table, {"action": CLAIM, "mask": (table["final"] == CLAIM).to_numpy(bool)}


def test_confirm_plays_the_candidates_action_on_its_own_seeds():
    table, cand = claim_cand()
    ctx = FakeContext(records(), play=Claims(1.0), labels=["work", "answer", "claim"])
    best = I._confirm(ctx, cand, table, [WORK, ANSWER, CLAIM], np.ones(MIN_SAMPLES), np.random.default_rng(0))
    (policy, seeds, _), = ctx.runs
    assert seeds == ctx.seeds(I.sample_size(ctx, 24), "confirm", policy.name)
    assert best["verdict"]["level"] == "at_least_success" and best["mean_exploit"] == 1.0
    assert best["records"].episodes["episode_id"].tolist() == list(range(1000, 1000 + len(seeds)))


def test_confirm_tries_a_random_prefix_as_long_as_the_episodes_that_showed_it():
    # the claiming episodes are 3 or 5 steps long (median 4, with the ending): 3 random steps, then claim
    table, cand = claim_cand()
    game = Claims(0.0, work=0.5)  # claiming pays nothing: the repeat policy reaches no level
    ctx = FakeContext(records(), play=game, labels=["work", "answer", "claim"])
    I._confirm(ctx, cand, table, [WORK], np.ones(MIN_SAMPLES), np.random.default_rng(0))
    (repeat, s1, _), (prefix, s2, _) = ctx.runs
    assert prefix.name == "3 random then claim" and prefix.k == 3 and s1 != s2
    assert s2 == ctx.seeds(I.sample_size(ctx, 24), "confirm", prefix.name)
    # a claim that pays only after some work: the prefix policy, not the repeat one, shows it
    ctx = FakeContext(records(), play=Claims(1.0, claim_after=3), labels=["work", "answer", "claim"])
    best = I._confirm(ctx, cand, table, [WORK], np.ones(MIN_SAMPLES), np.random.default_rng(0))
    assert best["policy"] == "3 random actions, then 'claim'" and best["mean_exploit"] == 1.0
    assert best["verdict"]["level"] == "at_least_success" and len(ctx.runs) == 2
    # the claiming episodes of one step (median length 1): no prefix to play
    short = records(*many(6, FAILURE, [(CLAIM, 0.5)], success=False), *many(6, FAILURE, [(ANSWER, 0.0)], success=False))
    table = I.behaviours(short.episodes, short.steps)
    ctx = FakeContext(records(), play=Claims(0.0), labels=["work", "answer", "claim"])
    I._confirm(ctx, {"action": CLAIM, "mask": (table["final"] == CLAIM).to_numpy(bool)}, table, [WORK],
               np.ones(MIN_SAMPLES), np.random.default_rng(0))
    assert [p.name for p, _, _ in ctx.runs] == ["repeat claim"]
    # two steps (median 2): one random step first
    two = records(*many(6, FAILURE, [(WORK, 0.0), (CLAIM, 0.5)], success=False),
                  *many(6, FAILURE, [(ANSWER, 0.0)], success=False))
    table = I.behaviours(two.episodes, two.steps)
    ctx = FakeContext(records(), play=Claims(0.0), labels=["work", "answer", "claim"])
    I._confirm(ctx, {"action": CLAIM, "mask": (table["final"] == CLAIM).to_numpy(bool)}, table, [WORK],
               np.ones(MIN_SAMPLES), np.random.default_rng(0))
    assert [p.name for p, _, _ in ctx.runs] == ["repeat claim", "1 random then claim"]


def test_confirm_reports_the_scripted_runs_numbers():
    table, cand = claim_cand()
    game = Claims(1.0, work=0.25, success_on=4)  # a quarter of the seeds count as success
    ctx = FakeContext(records(), play=game, labels=["work", "answer", "claim"])
    best = I._confirm(ctx, cand, table, [WORK], np.ones(MIN_SAMPLES), np.random.default_rng(0))
    eps = best["records"].episodes
    rest = eps[eps["success"].eq(False)]
    assert best["success_rate"] == pytest.approx(eps["success"].eq(True).mean()) and 0 < best["success_rate"] < 1
    assert best["n_exploit"] == len(rest)
    # the examples: the richest unsuccessful episodes, at most 5
    top = rest.sort_values("return", ascending=False)["return"].tolist()[:5]
    assert len(best["examples"]) == 5 and eps.set_index("episode_id").loc[best["examples"], "return"].tolist() == top


def test_confirm_when_the_scripted_policy_always_succeeds_or_plays_nothing():
    table, cand = claim_cand()
    ctx = FakeContext(records(), play=Claims(1.0, success_on=1), labels=["work", "answer", "claim"])
    best = I._confirm(ctx, cand, table, [WORK], np.ones(MIN_SAMPLES), np.random.default_rng(0))
    assert best["mean_exploit"] is None and best["n_exploit"] == 0 and best["examples"] == []
    assert best["success_rate"] == 1.0 and best["verdict"]["level"] is None
    nothing = FakeContext(records(), play=lambda p, s, k: records(), labels=["work", "answer", "claim"])
    best = I._confirm(nothing, {**cand, "alternative": np.zeros(0)}, table, [WORK], np.ones(MIN_SAMPLES),
                      np.random.default_rng(0))
    assert best["success_rate"] is None and best["mean_alternative"] is None and best["mean_exploit"] is None


def test_confirm_falls_back_to_every_failure_when_too_few_lack_the_behaviour():
    # MIN_SAMPLES + 4 claim, the rest answer: the honest failures are the answering ones when there are
    # MIN_SAMPLES of them, else every failure (the claiming ones too)
    for n_answer, expected in ((MIN_SAMPLES, 0.0), (MIN_SAMPLES - 1, 0.5 * 12 / (12 + MIN_SAMPLES - 1))):
        recs = records(*many(12, FAILURE, [(CLAIM, 0.5)], success=False),
                       *many(n_answer, FAILURE, [(ANSWER, 0.0)], success=False))
        table = I.behaviours(recs.episodes, recs.steps)
        ctx = FakeContext(records(), play=Claims(1.0), labels=["work", "answer", "claim"])
        best = I._confirm(ctx, {"action": CLAIM, "mask": (table["final"] == CLAIM).to_numpy(bool)}, table, [WORK],
                          np.ones(MIN_SAMPLES), np.random.default_rng(0))
        assert best["mean_alternative"] == pytest.approx(expected), n_answer


def test_confirm_half_paid_at_the_end_is_still_this_probes():
    # claiming pays 0.5 on the way (one work step) and 0.5 at the end: a final share of exactly 0.5
    table, cand = claim_cand()
    ctx = FakeContext(records(), play=lambda p, s, k: records(*[episode(FAILURE, [(WORK, 0.5), (CLAIM, 0.5)],
                                                                        success=False) for _ in s]),
                      labels=["work", "answer", "claim"])
    best = I._confirm(ctx, cand, table, [WORK], np.ones(MIN_SAMPLES), np.random.default_rng(0))
    assert best["final_step_share"] == 0.5 and best["verdict"]["level"] == "at_least_success"


def test_confirm_uses_the_scans_alpha():
    table, cand = claim_cand()
    ctx = FakeContext(records(), config=ScanConfig(seed=0, alpha=1e-12), play=Claims(1.0),
                      labels=["work", "answer", "claim"])
    best = I._confirm(ctx, cand, table, [WORK], np.ones(MIN_SAMPLES), np.random.default_rng(0))
    assert best["verdict"]["level"] is None


def test_confirm_stops_at_the_cap():
    table, cand = claim_cand()
    ctx = CapAfter(records(), play=Claims(0.0, work=0.5), labels=["work", "answer", "claim"], checks=0)
    assert I._confirm(ctx, cand, table, [WORK], np.ones(MIN_SAMPLES), np.random.default_rng(0)) == {}
    assert ctx.runs == [] and ctx.skipped == ["confirming candidate 'claim' with policy 'repeat claim'"]
    # the cap reached after the first policy: its result is kept
    ctx = CapAfter(records(), play=Claims(0.0, work=0.5), labels=["work", "answer", "claim"], checks=1)
    best = I._confirm(ctx, cand, table, [WORK], np.ones(MIN_SAMPLES), np.random.default_rng(0))
    assert best["policy"] == "repeat 'claim'" and len(ctx.runs) == 1
    assert ctx.skipped == ["confirming candidate 'claim' with policy '3 random then claim'"]


def test_high_return_fact_at_exactly_min_samples_successes():
    success = np.ones(MIN_SAMPLES)
    rich = pd.DataFrame({"episode_id": range(10), "return": [1.0, 1.5, 1.2, 1.0, 1.1, 1.3, 1.0, 1.4, 0.5, 0.9]})
    (f,) = I.high_return_fact(success, rich)
    assert f.probe == "intent" and f.evidence["n_rich_non_success"] == MIN_SAMPLES
    assert f.evidence["mean_rich_non_success"] == pytest.approx(9.5 / MIN_SAMPLES)
    assert list(f.examples) == [1, 7, 5, 2, 4]  # richest first
    assert f.title and f.fix and f.summary.startswith(f"{MIN_SAMPLES} of 10 ") and "(1)" in f.summary


def test_every_finding_says_what_it_is_and_how_to_fix_it():
    f = I.decide_reward_without_success("no-flag")
    assert f.title and f.summary and f.fix and f.code == I.CODE
