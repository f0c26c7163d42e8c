"""Checks of the LM engine on a real vLLM engine, run in a child process by ``test_lm_engine.py``.

vLLM turns ``torch.set_num_threads`` into a no-op for the rest of the process (so the embedded
engine's one-thread determinism would no longer hold there), so the tests that start it run here,
apart from the rest of the suite:
``python -m tests.grpo.lm_checks CHECK [CHECK ...]`` prints one JSON object with what each check
measured, by name.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

ENV_ID = "envaudit/CodeFix-TimeoutPasses-Text-v0"
ADAPTER_ITERATIONS = 4
"""Natural GRPO iterations of the adapter check (the probe's quick LM run has 12): it checks the
path from the probe through the text view to vLLM and back, not what training learns."""


def _make():
    import gymnasium as gym

    import envaudit  # noqa: F401  (registers the bundled envs)

    return gym.make(ENV_ID)


def sync() -> dict[str, Any]:
    """vLLM's log-probs against the trainer's before any update, a broken sync against a working
    one, and what one update + weight push changes in what vLLM generates for the same seeds."""
    import numpy as np
    import torch

    from envaudit.grpo.config import GRPOConfig, LMSettings
    from envaudit.grpo.engine import Trajectory
    from envaudit.grpo.lm_engine import LMEngine
    from envaudit.grpo.lm_model import collect_turns

    start = time.perf_counter()
    config = GRPOConfig(group_size=4, groups_per_iteration=2, seed=0, update_epochs=4, num_minibatches=1,
                        ent_coef=0.0)
    settings = LMSettings(learning_rate=1e-3)  # four clear Adam steps: the change must show in samples
    engine = LMEngine.for_env(_make, config, settings)
    ready_s = time.perf_counter() - start
    env = _make().unwrapped
    observations = [o for o, _ in collect_turns(_make, 8, seed=11)][:32]
    fractions = [0.0] * len(observations)

    def sample():
        return engine.sample(observations, fractions, np.random.default_rng(1))

    def gap(states) -> float:
        with torch.no_grad():
            trainer = engine._score(states)[0]
        sampled = torch.tensor([x for s in states for x in s.logprobs])
        return float((trainer - sampled).abs().max())

    first, again = sample(), sample()
    out: dict[str, Any] = {"ready_s": ready_s, "n": len(observations)}
    out["same_seeds_same_completions"] = [s.completion_ids for s in first.states] == \
        [s.completion_ids for s in again.states]
    out["gap_before"] = gap(first.states)
    out["sum_matches_action_logprob"] = bool(np.allclose(first.logprobs, [sum(s.logprobs) for s in first.states]))
    # A broken sync: the trainer's weights move, vLLM's do not.
    saved = {k: v.clone() for k, v in engine.model.state_dict().items()}
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for p in engine.model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    out["gap_broken_sync"] = gap(first.states)
    engine.model.load_state_dict(saved)
    # One update that favours "submit" and disfavours everything else, then the push.
    labels = [env.label_of(a) for a in first.actions]
    trajectories = [Trajectory([s], np.array([a], dtype=object), np.array([lp]), 1.0 if lab == "submit" else -0.3)
                    for s, a, lp, lab in zip(first.states, first.actions, first.logprobs, labels, strict=True)]
    stats = engine.update(trajectories)
    after = sample()
    out["update_stats"] = stats
    out["changed_fraction"] = float(np.mean([a.completion_ids != b.completion_ids
                                             for a, b in zip(first.states, after.states, strict=True)]))
    out["submit_before"] = labels.count("submit")
    out["submit_after"] = [env.label_of(a) for a in after.actions].count("submit")
    out["gap_after"] = gap(after.states)
    # A new engine for the next run pushes the initial weights back into the same vLLM engine.
    fresh = LMEngine.for_env(_make, config, settings)
    out["same_backend"] = fresh.backend is engine.backend
    engine = fresh
    out["restored_same_completions"] = [s.completion_ids for s in sample().states] == \
        [s.completion_ids for s in first.states]
    out["total_s"] = time.perf_counter() - start
    return out


def learn() -> dict[str, Any]:
    """The grpo probe's natural run with the LM engine on the text env, under drop and penalty."""
    from envaudit.probes.grpo.training import run
    from tests.fixtures.context import explore

    out: dict[str, Any] = {}
    for handling in ("drop", "penalty"):
        start = time.perf_counter()
        ctx = explore(_make, probe="grpo", seed=0, episodes=64, timeout_handling=handling, engine="vllm",
                      env_id=ENV_ID)
        findings = run(ctx, only=("natural",))
        curves = ctx.tables["curves"]
        out[handling] = {
            "findings": [{"code": f.code, "severity": str(f.severity), "summary": f.summary,
                          "evidence": {k: v for k, v in f.evidence.items() if isinstance(v, (int, float, str))}}
                         for f in findings],
            "explore_timeout_rate": float((ctx.exploration.episodes["outcome"] == "timeout").mean()),
            "timeout_rate": curves["timeout_rate"].tolist(),
            "logprob_gap": curves["logprob_gap"].tolist() if "logprob_gap" in curves else [],
            "iterations": len(curves),
            "seconds": time.perf_counter() - start,
        }
    return out


def adapter() -> dict[str, Any]:
    """The grpo probe with ``--engine vllm`` on an ecosystem adapter env (reasoning-gym's
    leg_counting): the text view, the ecosystem's system prompt, ``max_new_tokens``."""
    import pandas as pd

    from envaudit.adapters import resolve_adapter
    from envaudit.adapters.base import text_factory
    from envaudit.grpo.config import GRPOConfig
    from envaudit.grpo.lm_engine import LMEngine
    from envaudit.probes.grpo import training as grpo
    from envaudit.probes.grpo.training import run
    from tests.fixtures.context import explore

    grpo.QUICK_LM_ITERATIONS = {**grpo.QUICK_LM_ITERATIONS, "natural": ADAPTER_ITERATIONS}  # this process only
    start = time.perf_counter()
    env_id, make = resolve_adapter("reasoning-gym:leg_counting")
    ctx = explore(make, probe="grpo", seed=0, episodes=32, quick=True, engine="vllm", max_new_tokens=24,
                  env_id=env_id)
    findings = run(ctx, only=("natural",))
    config = GRPOConfig.from_scan(ctx.config)
    engine = LMEngine.for_env(text_factory(make), config, config.lm_settings())  # the shared, built model
    env = make()
    steps = pd.concat([r.steps for r in ctx.kept]) if ctx.kept else pd.DataFrame()
    labels = steps["action_label"].tolist() if len(steps) else []
    return {
        "iterations": len(ctx.tables.get("curves", [])),
        "findings": [f.code for f in findings],
        "system_is_the_ecosystems": engine.system == env.unwrapped.system_prompt != "",
        "max_new_tokens": engine.max_new_tokens,
        "steps": len(labels),
        "text_actions": all(isinstance(a, str) for a in steps["action"]) if len(steps) else False,
        "catalogue_label_fraction": (sum(lab not in (None, "(text)") for lab in labels) / len(labels)
                                     if labels else 0.0),
        # The grader reads <answer>...</answer>: the form the warm-up corpus (the catalogue) taught.
        # Either tag counts: after a few updates the tiny model often opens its reply inside the
        # answer ("48</answer> I am confident ...", the catalogue's trailing-text entry), which is
        # still the catalogue's form and not text it could have written untaught.
        "answer_tag_fraction": (float(steps["action"].astype(str).str.contains("<answer>|</answer>").mean())
                                if len(steps) else 0.0),
        "some_actions": steps["action"].astype(str).head(6).tolist() if len(steps) else [],
        "seconds": time.perf_counter() - start,
    }


CHECKS = {"sync": sync, "learn": learn, "adapter": adapter}


def main(argv: list[str]) -> int:
    """Run the named checks in order in this one process (one vLLM engine start serves checks on the
    same model: each new engine pushes the initial weights back, which ``sync`` itself checks)."""
    if not argv or any(name not in CHECKS for name in argv):
        print(f"usage: python -m tests.grpo.lm_checks {{{','.join(CHECKS)}}} [...]", file=sys.stderr)
        return 2
    results = {name: CHECKS[name]() for name in argv}
    print("LM_CHECKS " + json.dumps(results, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
