"""The pipeline probe on small Gymnasium envs whose outcome classes and rewards are known by design.

``StallEnv``: ``work`` three times and the task completes (success); ``submit`` ends the episode,
a success only after two ``work``; ``wait`` does nothing, so repeating it runs into the step limit
(a timeout the agent causes). A success pays ``1 + offset``; a failure and a timeout both pay
``offset``, so the env itself never pays a timeout more than a failure. ``NoStallEnv`` is its
clean twin: the task ends on the third step whatever the agent does, so no action can time out.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.pipeline import Pipeline, timeout_handling_pipeline
from envaudit.presets import get_preset
from envaudit.probe import ProbeContext, ProbeInputs, ScanShared, registered_probes
from envaudit.probes.pipeline import CODE, probe
from envaudit.protocol import FAILURE, SUCCESS, TIMEOUT
from tests.fixtures.context import SWEEP_SEEDS, explore, finding_keys

WORK, SUBMIT, WAIT = 0, 1, 2


class StallEnv(gym.Env):
    action_labels = ["work", "submit", "wait"]
    action_space = gym.spaces.Discrete(3)
    observation_space = gym.spaces.Box(0.0, 10.0, (2,), np.float32)

    def __init__(self, offset: float = 0.0, max_steps: int = 6, ends_after: int | None = None):
        self.offset, self.max_steps, self.ends_after = offset, max_steps, ends_after

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = self.progress = 0
        return self._obs(), {}

    def _obs(self):
        return np.array([self.t, self.progress], np.float32)

    def step(self, action):
        self.t += 1
        action = int(action)
        terminated, success = False, False
        if action == WORK:
            self.progress += 1
            terminated = success = self.progress >= 3
        elif action == SUBMIT:
            terminated, success = True, self.progress >= 2
        if self.ends_after is not None and self.t >= self.ends_after and not terminated:
            terminated, success = True, self.progress >= 2  # the clean twin ends every task here
        truncated = not terminated and self.t >= self.max_steps
        reward = 0.0
        info = {}
        if terminated or truncated:
            reward = self.offset + (1.0 if success else 0.0)
            info["success"] = bool(success)
        return self._obs(), reward, terminated, truncated, info


def no_stall_env():
    return StallEnv(max_steps=10, ends_after=3)


def design_rates(make_env) -> dict[str, float]:
    """Outcome-class probabilities under the uniform random policy, by enumerating every play."""
    env = make_env()
    counts: Counter = Counter()
    for seq in itertools.product(range(3), repeat=env.max_steps):
        env.reset(seed=0)
        for a in seq:  # every full-length sequence is equally likely; its tail may go unplayed
            _, _, term, trunc, info = env.step(a)
            if term or trunc:
                counts[TIMEOUT if trunc else (SUCCESS if info["success"] else FAILURE)] += 1
                break
    total = 3.0 ** env.max_steps
    return {k: v / total for k, v in counts.items()}


EPISODES, GROUP = 160, 8


@pytest.fixture(scope="module")
def stall_ctx():
    return explore(StallEnv, probe="pipeline", episodes=EPISODES, group_size=GROUP, seed=1)


@pytest.fixture(scope="module")
def penalty_style_ctx():
    return explore(lambda: StallEnv(offset=-1.0), probe="pipeline", episodes=EPISODES, group_size=GROUP, seed=2)


@pytest.fixture(scope="module")
def clean_ctx():
    return explore(no_stall_env, probe="pipeline", episodes=EPISODES, group_size=GROUP, seed=3)


def under(ctx: ProbeContext, pipeline: Pipeline) -> tuple[list, ProbeContext]:
    """Run the probe on the same exploration under another pipeline (a fresh context)."""
    fresh = ProbeContext(ProbeInputs(ctx.env_id, ctx.make_env, ctx.config, ctx.exploration, [], pipeline, "pipeline"),
                         ScanShared(deadline=time.monotonic() + 60, ids=itertools.count(10**6)))
    try:
        return list(probe.run(fresh)), fresh
    finally:
        fresh.close()


def table_row(ctx, role, outcome):
    t = ctx.tables["advantages"]
    rows = t[(t["role"] == role) & (t["outcome"] == outcome)]
    assert len(rows) == 1, f"expected one {role}/{outcome} row in\n{t}"
    return rows.iloc[0]


def design_failure_advantage(episodes) -> float:
    """Mean advantage of a failure when timeouts are dropped from loss and baseline (std scaling).

    With binary rewards and k successes among the m rollouts left in a group, a failure's
    advantage is -(k/m) / sqrt(k/m (1 - k/m)) = -sqrt(k / (m - k)); 0 when k = 0.
    """
    values = []
    for _, g in episodes.groupby("group"):
        kept = g[g["outcome"] != TIMEOUT]
        k, m = int((kept["outcome"] == SUCCESS).sum()), len(kept)
        adv = -np.sqrt(k / (m - k)) if 0 < k < m else 0.0
        values += [adv] * int((kept["outcome"] == FAILURE).sum())
    return float(np.mean(values))


def test_exploration_matches_the_designed_outcome_rates(stall_ctx):
    rates = design_rates(StallEnv)
    assert rates[TIMEOUT] == pytest.approx(22 / 729)  # six steps, never submit, at most two work
    observed = stall_ctx.exploration.episodes["outcome"].value_counts(normalize=True)
    for outcome, p in rates.items():
        se = np.sqrt(p * (1 - p) / EPISODES)
        assert abs(observed.get(outcome, 0.0) - p) < 4 * se, (outcome, observed.get(outcome), p)


def test_drop_flags_a_stall_the_agent_can_cause(stall_ctx):
    findings, ctx = under(stall_ctx, timeout_handling_pipeline("drop"))
    assert [f.code for f in findings] == ["timeout-drop-incentive"]
    f = findings[0]
    # A dropped timeout trains at 0, below a success (positive advantage): warn, not fail.
    assert f.severity == Severity.WARN
    assert f.evidence["p_value"] < 0.001 and f.evidence["n_groups"] == EPISODES // GROUP
    assert f.evidence["stall_action"] == "wait" and f.evidence["stall_timeout_rate"] == 1.0
    assert "`wait`" in f.summary and "removed from the loss (advantage 0)" in f.summary
    # Effective advantages from the env's design: a dropped timeout gets exactly 0, a failure
    # -sqrt(k/(m-k)) in a group with k successes among m kept rollouts.
    assert f.evidence["mean_switched"] == 0.0
    expected_failure = design_failure_advantage(stall_ctx.exploration.episodes)
    assert table_row(ctx, "configured", FAILURE)["mean_advantage"] == pytest.approx(expected_failure, abs=1e-4)
    observed_timeouts = table_row(ctx, "configured", TIMEOUT)
    assert observed_timeouts["mean_advantage"] == 0.0 and observed_timeouts["trained_share"] == 0.0
    assert f.evidence["mean_as_failure"] == pytest.approx(expected_failure, abs=1e-4)
    # Under keep a timeout pays what a failure pays, so switching changes nothing.
    assert f.evidence["gap_under_keep"] == pytest.approx(0.0, abs=1e-12)
    kept_t, kept_f = table_row(ctx, "keep", "timeout_if_failing"), table_row(ctx, "keep", FAILURE)
    assert kept_t["mean_advantage"] == pytest.approx(kept_f["mean_advantage"])
    lo, hi = table_row(ctx, "configured", FAILURE)[["ci_low", "ci_high"]]
    assert lo <= expected_failure <= hi < 0
    # The stall episodes are kept in the report and cited.
    stall_ids = set(ctx.kept[0].episodes["episode_id"])
    assert stall_ids & set(f.examples)


@pytest.mark.parametrize("pipeline", [timeout_handling_pipeline("keep"), timeout_handling_pipeline("penalty", -1.0),
                                      timeout_handling_pipeline("zero")])
def test_keep_penalty_and_zero_do_not_flag_when_timeouts_pay_like_failures(stall_ctx, pipeline):
    # Failures and timeouts both pay 0 here: zero and keep give a timeout a failure's advantage,
    # a penalty of -1 gives it less.
    findings, ctx = under(stall_ctx, pipeline)
    assert findings == []
    if pipeline.handling_of(TIMEOUT) != "keep":
        assert ctx.notes["timeouts"]["gap"] <= 1e-9


def test_presets_that_mask_or_drop_timeouts_flag_and_the_others_do_not(stall_ctx):
    for name in ("rllm", "skyrl", "trl"):
        findings, _ = under(stall_ctx, get_preset(name))
        assert [(f.code, f.severity) for f in findings] == [("timeout-drop-incentive", Severity.WARN)], name
    skyrl, _ = under(stall_ctx, get_preset("skyrl"))
    assert "masks its whole group" in skyrl[0].summary and "AgentTimeoutError" in skyrl[0].fix
    for name in ("keep", "prime-rl", "verl", "openrlhf", "dr-grpo"):
        findings, _ = under(stall_ctx, get_preset(name))
        assert findings == [], name


def test_zeroing_timeouts_in_a_penalty_style_env_makes_timing_out_as_good_as_success(penalty_style_ctx):
    # Success pays 0, failure and timeout -1: zeroing a timeout trains it like a success.
    findings, ctx = under(penalty_style_ctx, timeout_handling_pipeline("zero"))
    assert len(findings) == 1 and findings[0].severity == Severity.FAIL
    assert findings[0].evidence["switched_minus_success"] == pytest.approx(0.0, abs=1e-9)
    assert "as much as succeeding" in findings[0].summary
    assert table_row(ctx, "keep", "timeout_if_failing")["mean_advantage"] == pytest.approx(
        table_row(ctx, "keep", FAILURE)["mean_advantage"])


def test_no_finding_beyond_info_when_the_agent_cannot_cause_a_timeout(clean_ctx):
    assert design_rates(no_stall_env).get(TIMEOUT, 0.0) == 0.0
    findings, ctx = under(clean_ctx, timeout_handling_pipeline("drop"))
    assert all(f.severity == Severity.INFO for f in findings)
    # The incentive is there in the pipeline (a switched failure would escape), but latent.
    assert len(findings) == 1 and findings[0].evidence["reachable"] is False
    assert "latent" in findings[0].summary
    tried = ctx.notes["reachability"]["tried"]
    assert tried and all(t["timeout_rate"] == 0.0 for t in tried)


def test_prime_rl_error_escape_goes_to_notes(stall_ctx):
    findings, ctx = under(stall_ctx, get_preset("prime-rl"))
    assert findings == []
    note = ctx.notes["error_drop"]
    assert note["handling"] == "drop" and note["gap"] > 0 and note["exploration_errors"] == 0


def test_same_seed_same_tables(stall_ctx):
    a = under(stall_ctx, get_preset("rllm"))
    b = under(stall_ctx, get_preset("rllm"))
    assert a[0][0].to_dict() == b[0][0].to_dict()
    assert a[1].tables["advantages"].equals(b[1].tables["advantages"])


def test_registered_and_runs_in_a_scan(monkeypatch):
    import envaudit.scan as scan_module

    assert registered_probes(["pipeline"])["pipeline"] is probe
    monkeypatch.setattr(scan_module, "registered_probes", lambda names=None: {"pipeline": probe})
    report = scan_module.run_scan(StallEnv, ScanConfig(seed=5, episodes=96, pipeline="rllm"))
    codes = [(f.code, f.severity) for f in report.findings]
    assert codes == [("timeout-drop-incentive", Severity.WARN)]
    assert "pipeline_advantages" in report.tables


def test_bundled_codefix_slow_suite_is_flagged_under_drop_not_under_penalty():
    # CodeFix-v0 is clean in its own rewards: a truncated episode earns 0 like a wrong submit. But
    # run_full_suite overruns its deadline and never ends the episode, so repeating it stalls into
    # the step limit: under drop that escapes a failing attempt's negative advantage.
    from envaudit.envs import VARIANTS

    assert VARIANTS["envaudit/CodeFix-v0"].planted == ()
    ctx = explore(lambda: gym.make("envaudit/CodeFix-v0"), probe="pipeline", episodes=EPISODES,
                  group_size=GROUP, seed=0)
    findings, _ = under(ctx, timeout_handling_pipeline("drop"))
    assert [(f.code, f.severity) for f in findings] == [("timeout-drop-incentive", Severity.WARN)]
    assert findings[0].evidence["stall_action"] == "run_full_suite"
    assert "repeating `run_full_suite`" in findings[0].summary
    assert under(ctx, timeout_handling_pipeline("penalty", -1.0))[0] == []
    assert under(ctx, timeout_handling_pipeline("keep"))[0] == []


# -- rates over exploration seeds -----------------------------------------------------------------
SWEEP_EPISODES = 96
"""12 groups of 8: above MIN_SAMPLES groups, so the sign test can decide; ``--quick`` stall runs."""
SWEEP_CASES = {
    # env: (factory, {pipeline handling: the findings its design gives})
    # Timeouts pay what failures pay and `wait` stalls into them: dropping them lets a failing
    # rollout escape to advantage 0 (below a success's: warn); keeping them changes nothing.
    "stall": (StallEnv, {"drop": [(CODE, "warn", "pipeline")], "keep": []}),
    # Success 0, failure and timeout -1: zeroing a timeout trains it like a success (fail).
    "penalty-style": (lambda: StallEnv(offset=-1.0), {"zero": [(CODE, "fail", "pipeline")],
                                                       "penalty": []}),
    # No action can time out: the drop incentive is there but latent (one info), nothing else.
    "no-stall": (no_stall_env, {"drop": [(CODE, "info", "pipeline")], "keep": []}),
    # Clean rewards, but repeating the slow full suite stalls into the step limit: warn under drop.
    "CodeFix-v0": (lambda: gym.make("envaudit/CodeFix-v0"), {"drop": [(CODE, "warn", "pipeline")], "keep": []}),
}


@pytest.mark.parametrize("name", sorted(SWEEP_CASES))
def test_findings_follow_the_design_at_every_seed_and_pipeline(name):
    """Over 8 exploration seeds, each pipeline gives exactly the findings the env's design gives.
    Flagged pipelines must flag at >= 7/8 seeds (SWEEP_SEEDS' margin: a probe with 60% power passes
    with probability 0.11, one with 95% with 0.94); pipelines that must stay quiet (keep, a penalty
    at the failure's return) must give nothing at 8/8 (pooled over the four envs, 0 of 32 runs
    bounds the false-alarm rate below 9.4% at 95% confidence)."""
    make, design = SWEEP_CASES[name]
    pipelines = {h: timeout_handling_pipeline(h, -1.0) if h == "penalty" else timeout_handling_pipeline(h)
                 for h in design}
    off: dict[str, dict] = {h: {} for h in design}
    for seed in SWEEP_SEEDS:
        ctx = explore(make, probe="pipeline", episodes=SWEEP_EPISODES, group_size=GROUP, seed=seed, quick=True)
        for handling, pipeline in pipelines.items():
            found = finding_keys(under(ctx, pipeline)[0])
            if found != sorted(design[handling]):
                off[handling][seed] = found
    for handling, expected in design.items():
        allowed = 1 if any(sev in ("warn", "fail") for _, sev, _ in expected) else 0
        assert len(off[handling]) <= allowed, f"{name} under {handling}: off design at seeds {off[handling]}"
