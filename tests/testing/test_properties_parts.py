"""The pieces of ``envaudit.testing.properties`` one at a time, on toy envs whose rewards are
parameters: exact counterfactuals of a timed-out or failed call (forced or another action calling
the same tool), truncation against failing outright, and the messages of ``_judge``."""

from collections import Counter

import numpy as np
import pytest

from envaudit.testing import (
    PropertyFailed,
    PropertyNotExercised,
    assert_failures_not_rewarded,
    assert_no_timeout_reward,
)
from envaudit.testing import properties as pr
from envaudit.testing.explore import Explorer
from envaudit.testing.matched import MatchedPool
from envaudit.testing.trajectory import EnvSession, Plan
from tests.testing.test_incentives import Milestone
from tests.testing.test_matched_pool import SeedFault
from tests.testing.toy_envs import (
    CLAIM,
    FETCH,
    MIRROR,
    SUBMIT,
    WAIT,
    FetchTask,
    PingTool,
    SingleRoute,
)


def pool(session, subject="timeout"):
    return MatchedPool(session, seed=0, purpose="t", subject=subject, control_sets=[("ok",)])


def test_with_action_replaces_one_step():
    with EnvSession(FetchTask) as session:
        plan = Plan(1, (FETCH, WAIT, SUBMIT))
        ep = session.play(plan)
        assert pr._with_action(plan, ep, 1, MIRROR) == Plan(1, (FETCH, MIRROR, SUBMIT))
        repeated = Plan(1, (FETCH,), WAIT)  # a step of the repeated action: the rest keeps repeating
        ep = session.play(repeated)
        assert ep.actions == (FETCH,) + (WAIT,) * 5
        assert pr._with_action(repeated, ep, 3, MIRROR) == Plan(1, (FETCH, WAIT, WAIT, MIRROR), WAIT)
        assert pr._with_action(repeated, ep, 1, MIRROR) == Plan(1, (FETCH, MIRROR), WAIT)


def test_equal_action():
    assert pr._equal_action(np.array([1, 2]), [1, 2]) and not pr._equal_action(np.array([1, 2]), [1, 3])
    assert pr._equal_action(3, 3) and not pr._equal_action(3, 4)


def test_other_actions_calling_the_same_tool():
    with EnvSession(lambda: FetchTask(error_rate=1.0)) as session:
        plan = Plan(0, (WAIT, FETCH))
        ep = session.play(plan)
        step = ep.steps[1]
        assert step.status == "error"
        (caption, other), = pr._same_tool_alternatives(session, plan, ep, step, lambda s: s == "ok")
        assert caption == "step 1 playing fetch_mirror instead (fetch → ok)" and other.actions == (WAIT, MIRROR)
        assert pr._same_tool_alternatives(session, plan, ep, step, lambda s: s == "error") == []


def test_a_timeout_compared_with_another_action_calling_the_tool():
    with EnvSession(lambda: FetchTask(timeout_rate=1.0, timeout_reward=0.5)) as session:
        seen, p = pr._Seen(), pool(session)
        found = pr._timeout_counterexample(session, Plan(0, (FETCH,)), 1e-9, seen, p)
        assert found.summary == ("the fetch call at step 0 timed out and the episode returned +0.5, more than the same "
                                 "trajectory without the timeout (best +0).")
        assert [c for c, _ in found.compared] == ["step 0 playing fetch_mirror instead (fetch → ok)"]
        assert seen.faulted == Counter({"fetch": 1}) and seen.exact == 1 and not p.strata
        assert pr._timeout_counterexample(session, Plan(0, (FETCH,)), 0.5, pr._Seen(), p) is None


def test_a_forced_timeout_compared_with_the_call_running_and_failing():
    with EnvSession(lambda: PingTool(timeout_reward=0.5)) as session:
        seen = pr._Seen()
        found = pr._timeout_counterexample(session, Plan(0, (0,), None, None).with_fault(0, "timeout"), 1e-9, seen,
                                           pool(session))
        assert found.summary == ("tool call 0 timed out and the episode returned +0.5, more than the same trajectory "
                                 "without the timeout (best +0).")
        assert [c for c, _ in found.compared] == ["call 0 running normally", "call 0 failing outright"]
        assert [o.steps[0].status for _, o in found.compared] == ["ok", "error"] and seen.exact == 1
    with EnvSession(lambda: PingTool(error_reward=0.5, timeout_reward=0.5)) as session:
        # The best counterfactual is failing outright (+0.5): no more than the timeout.
        assert pr._timeout_counterexample(session, Plan(0, (0,)).with_fault(0, "timeout"), 1e-9, pr._Seen(),
                                          pool(session)) is None


def test_a_timeout_with_no_counterfactual_goes_to_the_matched_pool():
    with EnvSession(lambda: SingleRoute(timeout_rate=1.0, timeout_reward=0.5)) as session:
        seen, p = pr._Seen(), pool(session)
        assert pr._timeout_counterexample(session, Plan(0, (0, 0)), 1e-9, seen, p) is None
        assert seen.faulted == Counter({"fetch": 2}) and seen.exact == 0 and seen.truncated == 0
        assert sorted(k[1] for k in p.strata) == [0, 1]


def test_truncation_against_failing_outright_at_the_last_step():
    with EnvSession(lambda: FetchTask(truncation_reward=0.5, claim_reward=0.25)) as session:
        seen = pr._Seen()
        plan = Plan(0, (), WAIT)
        ep = session.play(plan)
        found = pr._truncation_counterexample(session, plan, ep, 1e-9, seen)
        assert found.summary == ("the episode was truncated at the step limit and returned +0.5, more than ending the "
                                 "same trajectory by failing outright at its last step (+0.25).")
        (caption, best), = found.compared
        assert caption == "the same prefix ending in claim (an outright failure)"
        assert best.actions == (WAIT,) * 5 + (CLAIM,) and seen.exact == 1
        assert pr._truncation_counterexample(session, plan, ep, 0.25, pr._Seen()) is None
        # Through the timeout check of a generated plan: the truncation is counted and compared.
        seen = pr._Seen()
        assert pr._timeout_counterexample(session, plan, 1e-9, seen, pool(session)) is not None
        assert seen.truncated == 1
    with EnvSession(lambda: FetchTask(truncation_reward=0.5)) as session:
        ex = Explorer(session, depth=1)
        found = pr._repeated_truncations(session, ex, 1e-9, pr._Seen())
        assert found.episode.seed == 0 and found.episode.actions == (FETCH,) * 6
        assert found.compared[0][1].episode_return == 0.0  # submit or claim with nothing fetched


def test_progress_on_the_last_step_is_not_truncation_credit():
    # Each fact pays 0.3 whenever it is gained. Six mirrored fetches reach the step limit with 1.8;
    # the same five then a claim end with 1.5. The last fact is progress, paid mid-episode too:
    # the least of the truncated endings (five facts, then wait: 1.5) is what the state pays idle.
    with EnvSession(lambda: FetchTask(fact_reward=0.3)) as session:
        plan = Plan(0, (), MIRROR)
        ep = session.play(plan)
        assert ep.end_reason == "truncated" and ep.episode_return == pytest.approx(1.8)
        seen = pr._Seen()
        assert pr._truncation_counterexample(session, plan, ep, 1e-9, seen) is None and seen.exact == 1
    # Its twin pays 0.5 for being cut off: even the idle ending out-earns the claim.
    with EnvSession(lambda: FetchTask(fact_reward=0.3, truncation_reward=0.5)) as session:
        plan = Plan(0, (), MIRROR)
        found = pr._truncation_counterexample(session, plan, session.play(plan), 1e-9, pr._Seen())
        assert found.summary == ("the episode was truncated at the step limit and returned +2 (the least of every way "
                                 "to reach it from the same prefix: ending in wait), more than ending the same "
                                 "trajectory by failing outright at its last step (+1.5).")
        assert found.episode.actions == (MIRROR,) * 5 + (WAIT,)
        assert found.compared[0][1].actions == (MIRROR,) * 5 + (CLAIM,)


def test_truncation_compares_the_plans_own_reset_seed_and_counts_each_comparison():
    # Fetches fail half the time, by the reset seed's draws: the outright failure compared must
    # replay the same prefix from the same seed (its facts, hence its return, depend on it).
    with EnvSession(lambda: FetchTask(error_rate=0.5, fact_reward=0.3, truncation_reward=0.5)) as session:
        seen = pr._Seen()
        for _ in range(2):
            plan = Plan(3, (), FETCH)
            found = pr._truncation_counterexample(session, plan, session.play(plan), 1e-9, seen)
            (_, best), = found.compared
            assert best.seed == 3 and found.episode.seed == 3
            assert best.episode_return == session.play(Plan(3, (FETCH,) * 5 + (CLAIM,))).episode_return
        assert seen.exact == 2
        for _ in range(2):
            assert pr._timeout_counterexample(session, plan, 1e-9, seen, pool(session)) is not None
        assert seen.truncated == 2 and seen.exact == 4
    with EnvSession(Milestone) as session:
        seen = pr._Seen()
        for _ in range(2):
            pr._truncation_counterexample(session, Plan(0, (), 0), session.play(Plan(0, (), 0)), 1e-9, seen)
        assert seen.no_failure_action == 2


def test_every_enumerated_timeout_of_a_plain_env_is_compared_once():
    # Every fetch times out (paying 0.5) and fetch_mirror reaches the same tool working: each plan
    # whose last step is a timed-out fetch is one exact comparison. Within the tolerance none is a
    # counterexample, so all are made; beyond it, the first is returned.
    with EnvSession(lambda: FetchTask(timeout_rate=1.0, timeout_reward=0.5)) as session:
        ex = Explorer(session, depth=2)
        timed_out = [n for n in ex.tree() if len(n.episode.steps) == n.depth and n.episode.steps[-1].status == "timeout"]
        assert len(timed_out) > 2
        seen = pr._Seen()
        assert pr._enumerated_timeouts(session, ex, 0.5, seen, pool(session)) is None
        assert seen.exact == len(timed_out) and seen.faulted == Counter({"fetch": len(timed_out)})
        found = pr._enumerated_timeouts(session, ex, 1e-9, pr._Seen(), pool(session))
        assert found.episode.actions == timed_out[0].episode.actions and found.compared[0][1].episode_return == 0.0


def test_truncation_with_no_way_to_fail_outright():
    with EnvSession(Milestone) as session:
        seen = pr._Seen()
        ep = session.play(Plan(0, (), 0))
        assert pr._truncation_counterexample(session, Plan(0, (), 0), ep, 1e-9, seen) is None
        assert seen.no_failure_action == 1 and seen.exact == 0


def test_a_failed_call_compared_with_the_same_call_succeeding():
    with EnvSession(lambda: PingTool(error_reward=0.5)) as session:
        seen = pr._Seen()
        found = pr._failure_counterexample(session, Plan(0, (0,)).with_fault(0, "error"), 1e-9, seen, pool(session))
        assert found.summary == ("the ping call at step 0 failed and the step paid +0.5, more than the same step "
                                 "succeeding (+0).")
        assert [c for c, _ in found.compared] == ["call 0 succeeding"] and seen.exact == 1
        assert seen.faulted == Counter({"ping": 1})
    with EnvSession(lambda: FetchTask(error_rate=1.0, error_reward=0.5)) as session:
        found = pr._failure_counterexample(session, Plan(0, (FETCH,)), 1e-9, pr._Seen(), pool(session))
        assert found.compared[0][0] == "step 0 playing fetch_mirror instead (fetch → ok)"
        ep = session.play(Plan(0, (WAIT,)))  # an episode given is read instead of playing the plan
        assert pr._failure_counterexample(session, Plan(0, (FETCH,)), 1e-9, pr._Seen(), pool(session), episode=ep) is None
        assert pr._failure_counterexample(session, Plan(0, (FETCH,)), 0.5, pr._Seen(), pool(session)) is None


def test_paired_calls_count_the_forced_plans():
    with EnvSession(PingTool) as session:
        ex = Explorer(session)
        assert pr._paired_calls(ex) == len(ex.tree()) == 24  # every plan ends in a tool call
    with EnvSession(FetchTask) as session:
        assert pr._paired_calls(Explorer(session, depth=1)) == 0  # nothing is forced on a plain env


def test_words_of_the_evidence():
    assert pr._by_tool(Counter({"b": 2, "a": 1})) == "a ×1, b ×2"
    ev = {"n_error": 3, "n_control": 4, "diff": 0.5, "diff_ci": [0.125, 0.875], "p_value": 0.001, "mean_error": None,
          "other": 1}
    assert pr._evidence_text(ev) == "n_error=3, n_control=4, diff=0.5, diff_ci=[0.125, 0.875], p_value=0.001"


def test_a_plain_env_that_never_fails_says_so():
    with pytest.raises(PropertyNotExercised) as info:
        assert_failures_not_rewarded(FetchTask, max_examples=3, depth=1)
    text = str(info.value)
    assert text.startswith("assert_failures_not_rewarded could not exercise its subject on FetchTask: in 3 generated "
                           "cases (max_examples=3, seed=0), no failure ever happened (0 tool calls failed). It fails "
                           "rather than passing vacuously. To make it testable: make the env an envaudit.ToolEnv so "
                           "faults can be injected into the same call; raise max_examples; report every tool call as "
                           "info['tool'] = ")
    assert text.endswith("If FetchTask can never have a failed tool call, this property does not apply to it.")
    assert info.value.seen == {"cases": 3, "faulted": {}, "truncated": 0, "exact": 0, "matched": (0, 0), "replays": 0}


def test_a_tool_env_searched_without_faults_is_told_to_inject_them():
    with pytest.raises(PropertyNotExercised) as info:
        assert_no_timeout_reward(lambda: PingTool(max_steps=60), faults=False, max_examples=3, depth=1)
    text = str(info.value)
    assert "no timeout ever happened (0 tool calls timed out and 0 episodes were truncated at the step limit" in text
    assert "To make it testable: pass faults=True so faults are injected into the same call; raise max_examples; " \
           "give the env a step limit the generated actions reach" in text
    assert text.endswith("can never time out, this property does not apply to it.")


def test_timeouts_with_no_counterfactual_say_what_was_matched():
    with pytest.raises(PropertyNotExercised) as info:
        assert_no_timeout_reward(lambda: SingleRoute(timeout_rate=1.0, end_on_fault=True), max_examples=3, depth=1)
    text = str(info.value)
    assert "could not decide on SingleRoute: in 3 generated cases (max_examples=3, seed=0), " in text
    assert "tool calls timed out (fetch ×" in text
    assert ("no timed-out call had an exact counterfactual (another action calling the same tool without timing out "
            "at the same step)") in text
    assert "replaying their action prefixes under 96 other reset seeds (" in text
    assert "matched 0 timed-out calls with 0 outright failures (status 'error') of the same tool" in text


def test_failures_only_the_seed_decides_are_judged_across_seeds():
    # SeedFault: the api call fails from seeds 1 and 3 mod 4 and no other action calls it, so no
    # exact counterfactual exists; a failed call pays 0.5, a working one 0.
    with pytest.raises(PropertyFailed) as info:
        assert_failures_not_rewarded(lambda: SeedFault(error_pay=0.5), max_examples=5, depth=1)
    ce, text = info.value.counterexample, str(info.value)
    assert ce.summary.startswith("failed api calls paid on the step +0.5 on average, more than successful calls "
                                 "(status 'ok') of the same tool from comparable states (+0): ")
    assert " groups matched across reset seeds by the same action prefix and observation before the call; mean " \
           "difference +0.5 (95% CI +0.5 to +0.5), one-sided stratified Mann-Whitney (van Elteren) p=" in ce.summary
    assert ce.summary.endswith(" < 0.01.")  # one measure: no Holm adjustment named
    assert ce.details.startswith("No action could force this failure on the same call, so the same action prefixes "
                                 "were replayed under 24 other reset seeds (")
    assert "Evidence: n_error=" in ce.details and "diff=0.5, diff_ci=[0.5, 0.5]" in ce.details
    (caption, control), = ce.compared
    assert caption.startswith("the same actions under reset seed ") and caption.endswith(" (api → ok)")
    assert ce.episode.steps[0].status == "error" and control.steps[0].status == "ok"
    assert f"Counterexample (not shrunk: of {ce.evidence['n_error']} matched failed calls, the one that out-earned " \
           "its group most)" in text


def test_timeouts_only_the_seed_decides_are_judged_on_two_measures_after_more_seeds():
    # Timed-out calls (seeds 3 mod 4) pay 0.5, failed ones (1 mod 4) 0: compared with outright
    # failures first. Too few at first (no exact comparison at all), so the pool is extended once.
    with pytest.raises(PropertyFailed) as info:
        assert_no_timeout_reward(lambda: SeedFault(timeouts=True, timeout_pay=0.5), max_examples=5, depth=1)
    ce = info.value.counterexample
    assert ce.summary.startswith("timed-out api calls paid on the step +0.5 on average, more than outright failures "
                                 "(status 'error') of the same tool from comparable states (+0): ")
    assert ce.summary.endswith(" < 0.01 (Holm-adjusted over 2 measures).")
    assert "replayed under 24+72 other reset seeds (" in ce.details
    assert ce.evidence["p_value_holm"] == pytest.approx(2 * ce.evidence["p_value"])
    assert ce.compared[0][0].endswith(" (api → error)")
    assert_failures_not_rewarded(lambda: SeedFault(timeouts=True, timeout_pay=0.5), max_examples=5, depth=1)
