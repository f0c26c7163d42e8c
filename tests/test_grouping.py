"""Grouping findings by incentive (``envaudit.grouping``): known answers on hand-built findings,
the partition invariants under hypothesis, and end to end on every bundled env.

The hand-built lists mirror what the probes report on a planted flaw (the bundled
``CodeFix-TimeoutPasses`` gives five findings from four probes, all about timing out); the expected
groups follow from DESIGN.md's grouping rules, not from what the code printed.
"""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envaudit import ScanConfig, Severity
from envaudit.envs import VARIANTS
from envaudit.findings import CODES, Finding
from envaudit.grouping import (
    BEHAVIOURS,
    SPECIFICITY,
    behaviour_of,
    episodes_behaviour,
    group_findings,
    incentive_of,
    is_generic,
    paid_by_failed_calls,
    reward_path_of,
)
from envaudit.scan import run_scan


def F(code: str, severity: str = "warn", probe: str = "p", title: str = "", **evidence) -> Finding:
    return Finding(code=code, severity=severity, title=title or f"{probe} {code}", summary="s",
                   evidence=evidence, probe=probe)


# What each probe reports on CodeFix-TimeoutPasses (a timed-out suite run merges with +1).
TIMEOUTS = F("timeout-rewarded", "fail", "timeouts")
FAULTS = F("failure-rewarded", "fail", "failures", status="timeout")
EXPLOIT = F("exploit-policy", "fail", "exploits", ending="tool_timeout", policy="repeat-timeout")
GRPO_TIMEOUT = F("timeout-rewarded", "warn", "grpo", source="grpo")
LEARNED = F("learned-exploit", "warn", "grpo", title="GRPO learned timeouts up", source="grpo",
            moves=[{"behaviour": "timeouts up", "exploit": True}, {"behaviour": "length down", "exploit": True}])
DROPPED = F("timeout-drop-incentive", "warn", "pipeline")


def shape(groups):
    """Each group as (severity, headline code, behaviour, reward path, member probes/codes)."""
    return [(str(g.severity), g.code, g.behaviour, g.reward_path, [(m.probe, m.code) for m in g.members])
            for g in groups]


CASES = {
    "one planted timeout flaw seen by four probes is one group": (
        [LEARNED, GRPO_TIMEOUT, EXPLOIT, FAULTS, TIMEOUTS],
        [("fail", "timeout-rewarded", "timeout", "env",
          [("timeouts", "timeout-rewarded"), ("failures", "failure-rewarded"), ("exploits", "exploit-policy"),
           ("grpo", "timeout-rewarded"), ("grpo", "learned-exploit")])]),
    "a pipeline that drops timeouts is a second incentive (another reward path)": (
        [TIMEOUTS, DROPPED, LEARNED],
        [("fail", "timeout-rewarded", "timeout", "env", [("timeouts", "timeout-rewarded"), ("grpo", "learned-exploit")]),
         ("warn", "timeout-drop-incentive", "timeout", "pipeline", [("pipeline", "timeout-drop-incentive")])]),
    "a failed (not timed-out) step that pays is another behaviour than timing out": (
        [TIMEOUTS, F("failure-rewarded", "warn", "failures", status="error")],
        [("fail", "timeout-rewarded", "timeout", "env", [("timeouts", "timeout-rewarded")]),
         ("warn", "failure-rewarded", "tool-failure", "env", [("failures", "failure-rewarded")])]),
    "an info finding corroborates a loud group of its behaviour and does not raise it": (
        [F("timeout-rewarded", "info", "timeouts"), DROPPED],
        [("warn", "timeout-drop-incentive", "timeout", "pipeline",
          [("pipeline", "timeout-drop-incentive"), ("timeouts", "timeout-rewarded")])]),
    "info without a loud group of its behaviour stays its own info group": (
        [F("length-bias", "info", "length", length_effect={"estimate": -0.01}), TIMEOUTS],
        [("fail", "timeout-rewarded", "timeout", "env", [("timeouts", "timeout-rewarded")]),
         ("info", "length-bias", "quit", "env", [("length", "length-bias")])]),
    "the headline is a loud member: a downgraded specific code does not head an exploit": (
        [F("timeout-rewarded", "info", "timeouts"), F("exploit-policy", "warn", "exploits", ending="truncated")],
        [("warn", "exploit-policy", "timeout", "env", [("exploits", "exploit-policy"), ("timeouts", "timeout-rewarded")])]),
    "a generic exploit with no specific code of its behaviour (or a stand-in) heads its own group": (
        [F("exploit-policy", "warn", "exploits", ending="terminated", policy="end-early"),
         F("failure-rewarded", "fail", "failures", status="error")],
        [("fail", "failure-rewarded", "tool-failure", "env", [("failures", "failure-rewarded")]),
         ("warn", "exploit-policy", "quit", "env", [("exploits", "exploit-policy")])]),
    "giving up corroborates a timeout incentive when nothing names giving up": (
        [F("exploit-policy", "warn", "exploits", ending="terminated", policy="end-early"), TIMEOUTS],
        [("fail", "timeout-rewarded", "timeout", "env", [("timeouts", "timeout-rewarded"), ("exploits", "exploit-policy")])]),
    "stalling to the step limit is a timeout: a truncating exploit joins step farming": (
        [F("exploit-policy", "fail", "exploits", ending="truncated", policy="repeat:reply"),
         F("length-bias", "fail", "length", length_effect={"estimate": 0.2})],
        [("fail", "length-bias", "stall", "env", [("length", "length-bias"), ("exploits", "exploit-policy")])]),
    "giving up: failure-shortcut heads a brevity length-bias and GRPO's takeover by the quit action": (
        [F("learned-exploit", "warn", "grpo", title="GRPO learned one action taking over (answer_0)", source="grpo",
           moves=[{"behaviour": "one action taking over (answer_0)", "exploit": True}]),
         F("length-bias", "fail", "length", length_effect={"estimate": -0.3}),
         F("failure-shortcut", "fail", "failures")],
        [("fail", "failure-shortcut", "quit", "env",
          [("failures", "failure-shortcut"), ("length", "length-bias"), ("grpo", "learned-exploit")])]),
    "a degenerate answer: reward-without-success heads the exploit that ends on it": (
        [F("exploit-policy", "fail", "exploits", ending="terminated", policy="end-early"),
         F("reward-without-success", "fail", "intent", final_step_share=1.0)],
        [("fail", "reward-without-success", "degenerate-answer", "env",
          [("intent", "reward-without-success"), ("exploits", "exploit-policy")])]),
    "delaying success paid by the same per-step pay as loud step farming is that incentive": (
        [F("length-bias", "fail", "length", title="Delaying success pays", delay_steps=4),
         F("length-bias", "warn", "length", length_effect={"estimate": 0.1})],
        [("fail", "length-bias", "stall", "env", [("length", "length-bias"), ("length", "length-bias")])]),
    "delaying success is its own incentive when stalling does not pay": (
        [F("length-bias", "fail", "length", title="Delaying success pays", delay_steps=4),
         F("length-bias", "info", "length", length_effect={"estimate": 0.1})],
        [("fail", "length-bias", "delay-success", "env", [("length", "length-bias")]),
         ("info", "length-bias", "stall", "env", [("length", "length-bias")])]),
    "env errors and non-replayable resets are themselves, ranked by severity then catalogue": (
        [F("env-error", "fail", "api"), F("non-replayable", "fail", "replay"), F("env-error", "info", "api")],
        [("fail", "non-replayable", "non-replayable", "env", [("replay", "non-replayable")]),
         ("fail", "env-error", "env-error", "env", [("api", "env-error"), ("api", "env-error")])]),
    "a probe's named behaviour and reward path win over inference": (
        [F("exploit-policy", "warn", "exploits", ending="terminated", behaviour="stall"),
         F("length-bias", "warn", "length", length_effect={"estimate": -0.1}, behaviour="stall", reward_path="pipeline")],
        [("warn", "length-bias", "stall", "pipeline", [("length", "length-bias"), ("exploits", "exploit-policy")])]),
    "GRPO's 'ending without success pays' corroborates the mechanism its episodes show": (
        [F("reward-without-success", "fail", "grpo", source="grpo", run="target-no_success", behaviour="tool-failure"),
         F("failure-rewarded", "fail", "failures", status="error")],
        [("fail", "failure-rewarded", "tool-failure", "env",
          [("failures", "failure-rewarded"), ("grpo", "reward-without-success")])]),
    "a trained policy that moved timeouts and failures corroborates the failures it farmed": (
        [F("learned-exploit", "fail", "grpo", title="GRPO learned timeouts up", source="grpo", behaviour="timeout",
           moves=[{"behaviour": "timeouts up", "exploit": True}, {"behaviour": "failures up", "exploit": True}]),
         F("failure-rewarded", "fail", "failures", status="error")],
        [("fail", "failure-rewarded", "tool-failure", "env",
          [("failures", "failure-rewarded"), ("grpo", "learned-exploit")])]),
    "stalling on a safe call where failed calls cost is not trying, like giving up": (
        [F("exploit-policy", "fail", "exploits", ending="truncated", policy="repeat:reply", behaviour="timeout"),
         F("failure-shortcut", "warn", "failures")],
        [("fail", "failure-shortcut", "quit", "env", [("failures", "failure-shortcut"), ("exploits", "exploit-policy")])]),
    "a specific code of another behaviour is no home: failing tools do not explain a timeout": (
        [F("exploit-policy", "warn", "exploits", ending="tool_timeout"), F("failure-rewarded", "fail", "failures",
                                                                           status="error")],
        [("fail", "failure-rewarded", "tool-failure", "env", [("failures", "failure-rewarded")]),
         ("warn", "exploit-policy", "timeout", "env", [("exploits", "exploit-policy")])]),
    "generic findings without a specific home still read as one incentive among themselves": (
        [F("exploit-policy", "fail", "exploits", ending="terminated", policy="end-early"),
         F("learned-exploit", "warn", "grpo", title="GRPO learned one action taking over (give_up)", source="grpo",
           moves=[{"behaviour": "one action taking over (give_up)", "exploit": True}]),
         F("failure-rewarded", "warn", "failures", status="error")],
        [("fail", "exploit-policy", "quit", "env", [("exploits", "exploit-policy"), ("grpo", "learned-exploit")]),
         ("warn", "failure-rewarded", "tool-failure", "env", [("failures", "failure-rewarded")])]),
    "no findings, no groups": ([], []),
}


@pytest.mark.parametrize("findings, expected", list(CASES.values()), ids=list(CASES))
def test_known_groupings(findings, expected):
    assert shape(group_findings(findings)) == expected
    assert shape(group_findings(list(reversed(findings)))) == expected  # input order does not matter


def test_headline_prefers_the_louder_then_the_env_measured_finding_of_a_code():
    env_warn = F("timeout-rewarded", "warn", "timeouts")
    grpo_fail = F("timeout-rewarded", "fail", "grpo", source="grpo")
    grpo_warn = F("timeout-rewarded", "warn", "grpo", source="grpo")
    (group,) = group_findings([env_warn, grpo_fail])
    assert group.headline is grpo_fail and group.severity is Severity.FAIL
    (group,) = group_findings([grpo_warn, env_warn])
    assert group.headline is env_warn and group.members == (env_warn, grpo_warn)
    assert group.codes == ("timeout-rewarded",) and group.corroborating == (grpo_warn,)


@pytest.mark.parametrize("finding, behaviour", [
    (F("failure-rewarded", status="timeout"), "timeout"),
    (F("failure-rewarded", status="error"), "tool-failure"),
    (F("length-bias", length_effect={"estimate": 0.05}), "stall"),
    (F("length-bias", length_effect={"estimate": -0.05}), "quit"),
    (F("length-bias", "info", reward_per_step=1.0), "stall"),
    (F("reward-without-success", final_step_share=0.1), "stall"),
    (F("reward-without-success", run="target-no_success"), "degenerate-answer"),
    (F("exploit-policy", ending="tool_error"), "tool-failure"),
    (F("exploit-policy", ending="terminated", policy="stall"), "stall"),
    (F("learned-exploit", title="GRPO learned failures up", moves=[{"behaviour": "failures up"}]), "tool-failure"),
    (F("learned-exploit", title="GRPO learned length up", moves=[{"behaviour": "length up"}]), "stall"),
    (F("learned-exploit", "info", reason="cannot drive a Box action space"), "exploration"),
    (F("timeout-rewarded", behaviour="ends with 'submit'"), "timeout"),  # free text is not a behaviour
    (F("reward-without-success", run="target-timeout"), "timeout"),
    (F("reward-without-success", ending="truncated"), "timeout"),
    (F("reward-without-success", ending="env_exception"), "env-error"),
    (F("reward-without-success", final_step_share=0.5), "degenerate-answer"),  # half on the ending: not accrued
    (F("length-bias", title="Delaying success pays"), "delay-success"),
    (F("length-bias", delay_success={"gain": 0.5}), "delay-success"),
    (F("length-bias", "info", reward_per_step=-0.5), "quit"),
    (F("length-bias", length_effect={"estimate": 0.0}), "stall"),
    (F("learned-exploit", title="GRPO learned length up",
       moves=[{"behaviour": "failures up"}, {"behaviour": "length up"}]), "stall"),  # the move the title names
    (F("learned-exploit", title="GRPO learned a takeover",
       moves=[{"behaviour": "failures up"}, {"behaviour": "length up", "exploit": True}]), "stall"),  # the exploit
    (F("learned-exploit", title="GRPO learned a takeover", moves=[{"behaviour": "action 3 up"}]), "degenerate-answer"),
    (F("learned-exploit", "info", moves=[]), "exploration"),  # nothing moved: the search explored
    (F("learned-exploit", "info", reason="too few groups", moves=[{"behaviour": "action 3 up"}]), "exploration"),
])
def test_behaviour_inferred_from_code_and_evidence(finding, behaviour):
    assert behaviour_of(finding) == behaviour


def _episodes(*rows):
    """Episodes as (end_reason, tool calls, failed calls) rows."""
    return pd.DataFrame([{"end_reason": e, "n_tool_calls": c, "n_tool_errors": f, "n_tool_timeouts": 0}
                         for e, c, f in rows])


@pytest.mark.parametrize("rows, behaviour", [
    ([("tool_timeout", 3, 0), ("tool_timeout", 2, 0), ("terminated", 1, 0)], "timeout"),
    ([("truncated", 10, 9), ("truncated", 10, 10)], "tool-failure"),  # farming failed calls to the limit
    ([("truncated", 10, 0), ("truncated", 10, 1)], "timeout"),  # stalling on calls that work
    ([("tool_error", 1, 1)], "tool-failure"),
    ([("terminated", 1, 0)], None),  # ended by the agent: the probe knows why, the table does not
    ([], None),
])
def test_episodes_behaviour_reads_the_episode_table(rows, behaviour):
    assert episodes_behaviour(_episodes(*rows) if rows else pd.DataFrame()) == behaviour


def _steps(*episodes):
    """Steps as one (tool status, reward) list per episode; ``None``: no tool called."""
    return pd.DataFrame([{"episode_id": e, "tool_status": status, "reward": reward}
                         for e, steps in enumerate(episodes) for status, reward in steps])


def test_episodes_that_earn_on_failed_calls_farm_failures_whatever_ends_them():
    # Stalling to the step limit on a lookup that fails 4 times in 10 and pays 0.2 when it fails:
    # under half the calls failed, but every reward came from a failed call.
    farm = [("error", 0.2)] * 4 + [("ok", 0.0)] * 6
    eps = _episodes(("truncated", 10, 4), ("truncated", 10, 4)).assign(episode_id=[0, 1])
    assert episodes_behaviour(eps) == "timeout"
    assert episodes_behaviour(eps, _steps(farm, farm)) == "tool-failure"
    assert paid_by_failed_calls(_steps(farm, farm), [1])
    # Failed calls that cost, or pay less than half the episodes' pay, or tool timeouts: no.
    assert not paid_by_failed_calls(_steps([("error", -0.1), ("ok", 0.0)]))
    assert not paid_by_failed_calls(_steps([("error", 0.2), ("ok", 0.5)]))
    assert paid_by_failed_calls(_steps([("error", 0.5), ("ok", 0.5)]))
    assert not paid_by_failed_calls(_steps([("timeout", 0.2), ("ok", 0.0)]))
    assert not paid_by_failed_calls(_steps(farm), [1]) and not paid_by_failed_calls(None)


def test_reward_path_defaults_to_env_and_drop_incentive_is_the_pipeline():
    assert reward_path_of(F("timeout-rewarded")) == "env"
    assert reward_path_of(F("timeout-drop-incentive")) == "pipeline"
    assert reward_path_of(F("timeout-rewarded", reward_path="pipeline")) == "pipeline"
    assert reward_path_of(F("timeout-rewarded", reward_path="somewhere")) == "env"


def test_specificity_orders_every_catalogue_code():
    assert sorted(SPECIFICITY) == sorted(CODES)
    assert SPECIFICITY[-2:] == ("exploit-policy", "learned-exploit")


_evidence = st.fixed_dictionaries({}, optional={
    "behaviour": st.sampled_from([*BEHAVIOURS, "free text"]),
    "reward_path": st.sampled_from(["env", "pipeline"]),
    "status": st.sampled_from(["timeout", "error"]),
    "ending": st.sampled_from(["truncated", "terminated", "tool_timeout", "tool_error"]),
    "source": st.just("grpo"),
})
_findings = st.lists(st.builds(lambda code, severity, probe, evidence: Finding(code, severity, "t", "s", evidence,
                                                                            probe=probe),
                               st.sampled_from(list(CODES)), st.sampled_from(["info", "warn", "fail"]),
                               st.sampled_from(["a", "b", "grpo"]), _evidence), max_size=12)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(_findings)
def test_groups_partition_the_findings_and_take_the_loudest_severity(findings):
    groups = group_findings(findings)
    held = [id(m) for g in groups for m in g.members]
    assert sorted(held) == sorted(id(f) for f in findings)  # every finding in exactly one group
    keys = set()
    for g in groups:
        assert g.members[0] is g.headline and g.severity == max(m.severity for m in g.members)
        # A loud group is headed by a loud finding: info only corroborates.
        assert (g.headline.severity > Severity.INFO) == (g.severity > Severity.INFO)
        assert g.behaviour in BEHAVIOURS and g.reward_path in ("env", "pipeline")
        specific = [m for m in g.members if not is_generic(m)]
        keys.add((g.behaviour, g.reward_path))
        if specific:
            assert any(incentive_of(m) == (g.behaviour, g.reward_path) for m in specific)
    assert len(keys) == len(groups)  # one group per incentive
    # A quiet group sits beside a loud one only when their behaviours differ.
    loud_behaviours = {g.behaviour for g in groups if g.severity > Severity.INFO}
    assert not any(g.severity == Severity.INFO and g.behaviour in loud_behaviours for g in groups)
    order = [(-int(g.severity)) for g in groups]
    assert order == sorted(order)



def test_generic_codes_and_the_targeted_search_corroborate():
    def f(code, **evidence):
        return Finding(code, "warn", "t", "s", evidence, probe="p")
    assert is_generic(f("exploit-policy")) and is_generic(f("learned-exploit"))
    assert is_generic(f("reward-without-success", run="target-ending"))
    assert not is_generic(f("reward-without-success", run="scan")) and not is_generic(f("reward-without-success"))
    assert not is_generic(f("length-bias", run="target-ending"))


def test_a_group_round_trips_through_its_json_form():
    from envaudit.grouping import FindingGroup

    farming = Finding("length-bias", "fail", "farming", "each reply pays", {"behaviour": "stall"}, probe="length")
    hint = Finding("exploit-policy", "info", "stalling", "a stall", {"behaviour": "stall"}, probe="exploits")
    other = Finding("timeout-rewarded", "warn", "t", "s", {"behaviour": "timeout"}, probe="timeouts")
    findings = [other, hint, farming]
    index = {id(x): i for i, x in enumerate(findings)}
    for group in group_findings(findings):
        data = group.to_dict(index)
        assert data["headline"] == index[id(group.headline)] and data["members"] == [index[id(m)] for m in group.members]
        assert (data["code"], data["behaviour"], data["reward_path"], data["severity"], data["codes"]) == \
            (group.code, group.behaviour, group.reward_path, str(group.severity), list(group.codes))
        assert FindingGroup.from_dict(data, findings) == group
    stall = next(g for g in group_findings(findings) if g.behaviour == "stall")
    assert stall.headline is farming and stall.codes == ("length-bias", "exploit-policy")
    assert stall.corroborating == (hint,) and stall.severity == Severity.FAIL
    with pytest.raises(ValueError, match="points at findings that are not there"):
        FindingGroup.from_dict({**stall.to_dict(index), "members": [7]}, findings)
    with pytest.raises(ValueError, match="re-run `envaudit scan`"):
        FindingGroup.from_dict({"members": [0]}, findings)

# -- end to end: every bundled env (the acceptance matrix) ----------------------------------------
# A quick scan of every bundled env: each flawed variant reads as exactly one warn/fail group headed
# by its planted code (so the code is reported at warn/fail), each clean env as no warn/fail group
# with every probe finishing. Which code is planted comes from the env's design
# (``envaudit.envs.VARIANTS``), not from what a scan printed.
FLAWED = sorted(v.id for v in VARIANTS.values() if v.planted)
CLEAN = sorted(v.id for v in VARIANTS.values() if not v.planted)
def _loud(report):
    return [(str(g.severity), g.code, g.behaviour, g.reward_path, [(m.probe, m.code, str(m.severity)) for m in g.members])
            for g in report.groups if g.severity >= Severity.WARN]


@pytest.mark.parametrize("env_id", FLAWED)
def test_a_planted_flaw_reads_as_one_loud_group_headed_by_its_code(env_id):
    report = run_scan(env_id, ScanConfig(seed=0, quick=True))
    loud = _loud(report)
    assert len(loud) == 1 and loud[0][1] in VARIANTS[env_id].planted, loud
    assert report.reaches("warn") == [g for g in report.groups if g.severity >= Severity.WARN]
    assert report.counts()["fail"] + report.counts()["warn"] == 1


@pytest.mark.parametrize("env_id", CLEAN)
def test_a_clean_env_has_no_loud_group(env_id):
    report = run_scan(env_id, ScanConfig(seed=0, quick=True))
    assert _loud(report) == [] and report.reaches("warn") == []
    assert all(p.status == "ok" for p in report.probes), [(p.name, p.status, p.error) for p in report.probes]


def test_delaying_success_joins_loud_step_farming_of_the_same_reward_path():
    farming = Finding("length-bias", "fail", "farming", "each reply pays", {"behaviour": "stall"}, probe="length")
    delay = Finding("length-bias", "fail", "delay", "replying first pays", {"behaviour": "delay-success", "source": "grpo"},
                    probe="grpo")
    [group] = group_findings([farming, delay])
    assert group.behaviour == "stall" and group.headline is farming and delay in group.members
    # Without loud farming, delaying success is its own incentive, whatever quiet correlation stands beside it.
    hint = Finding("length-bias", "info", "return rises with length", "a correlation", {"behaviour": "stall"},
                   probe="length")
    groups = group_findings([hint, delay])
    assert [(g.behaviour, str(g.severity)) for g in groups] == [("delay-success", "fail"), ("stall", "info")]


@pytest.mark.parametrize("failure_pay", [0.2, 0.0], ids=["flawed", "clean"])
def test_a_failed_call_that_pays_is_one_group_however_the_trained_policy_ends(failure_pay):
    # Issue 25, class 7. FlakyLookup: the lookup fails half the time, a failed call pays 0.2, the step
    # limit is 20. GRPO learns to call it until the limit (return ~2, twice an honest success), so
    # its episodes end truncated: 'timeouts up' and 'ending without success' are the failure farm
    # seen from its ending, and belong to the failure-rewarded group. The clean twin is quiet.
    from tests.fixtures.counterfactual_envs import FlakyLookup

    report = run_scan(lambda: FlakyLookup(failure_pay=failure_pay, max_steps=20), ScanConfig(seed=0, quick=True),
                      env_id="flaky-lookup")
    loud = _loud(report)
    if failure_pay == 0:
        assert loud == []
        return
    assert len(loud) == 1 and loud[0][:2] == ("fail", "failure-rewarded"), loud
    (group,) = [g for g in report.groups if g.severity >= Severity.WARN]
    assert group.behaviour == "tool-failure"
    assert {m.probe for m in group.members} >= {"failures", "grpo"}
