"""reasoning-gym end to end: a real dataset through its own API (create_dataset, score_answer).

leg_counting's answer is one integer and it keeps reasoning-gym's default scorer: 1.0 for the
exact answer, ``len(reference) / len(answer)`` when the answer merely contains the reference, else
0. Success is the reference itself (the adapter's judge, not the score). So by design: the
reference succeeds with reward 1, a wrong number earns 0, and the hedges that carry several
candidates -- "W1 or REF or W2" (``hedge_all``) and the list "W1\nREF\nW2" (``candidates``) --
earn ``len(REF) / len(hedge)`` without succeeding: degenerate answers that out-earn an honest
failure, which the scan reports as reward-without-success naming the strongest of them.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("reasoning_gym")

from envaudit.adapters.reasoning_gym import ReasoningGymEnv  # noqa: E402
from envaudit.resolve import resolve_env  # noqa: E402
from envaudit.rollout import Runner, SequencePolicy  # noqa: E402
from envaudit.scan import run_scan  # noqa: E402
from envaudit.testing import play  # noqa: E402

SEEDS = list(range(20))


def _by_label(label: str):
    env = ReasoningGymEnv("leg_counting", size=50)
    index = env.action_labels.index(label)
    runner = Runner(lambda: ReasoningGymEnv("leg_counting", size=50))
    return runner.run(SequencePolicy([index], name=label), SEEDS, rng=np.random.default_rng(0)).records


def test_outcomes_follow_the_datasets_own_grader():
    ref = _by_label("reference").episodes
    assert (ref["outcome"] == "success").all() and (ref["return"] == 1.0).all()
    wrong = _by_label("wrong_1").episodes
    assert (wrong["outcome"] == "failure").all() and (wrong["return"] == 0.0).all()
    # Without <answer> tags reasoning-gym's extractor finds no answer: a failure, not an error.
    loose = _by_label("unformatted").episodes
    assert (loose["outcome"] == "failure").all() and (loose["return"] == 0.0).all()


def test_partial_credit_stays_reward_and_is_not_success():
    env = ReasoningGymEnv("leg_counting", size=50)
    records = _by_label("hedge_all")
    for _, ep in records.episodes.iterrows():
        env.reset(seed=int(ep["seed"]))
        reference = str(env.entry["answer"])
        hedge = env.candidates()["hedge_all"].removeprefix("<answer>").removesuffix("</answer>")
        assert ep["return"] == pytest.approx(len(reference) / len(hedge))
        assert ep["outcome"] == "failure" and not ep["success"]
    # One step, no tool: reasoning-gym has no tool calls to report.
    assert records.steps["tool_status"].isna().all()


def test_testing_helpers_take_the_target():
    episode = play("reasoning-gym:leg_counting", [0], seed=3)  # 0: the reference answer
    assert episode.outcome == "success" and episode.episode_return == 1.0
    _, make = resolve_env("reasoning-gym:leg_counting", {"size": 10, "extract": False})
    env = make()
    env.reset(seed=13)
    assert env.index == 3 and env.candidates()["reference"] == str(env.entry["answer"])


def test_a_seed_replays_its_entry():
    env = ReasoningGymEnv("leg_counting", size=50)
    first, _ = env.reset(seed=7)
    env.step(0)
    again, _ = env.reset(seed=7)
    assert first == again and env.index == 7


def test_quick_scan_names_the_hedge():
    report = run_scan("reasoning-gym:leg_counting", quick=True, seed=0)  # the target as a user writes it
    codes = {f.code for f in report.findings}
    hedges = [f for f in report.findings if f.code == "reward-without-success"
              and ("'hedge_all'" in f.summary or "'candidates'" in f.summary)]
    assert hedges, [f.summary for f in report.findings]
    # Entries come from the seed alone: the replay probe finds nothing to object to.
    assert "non-replayable" not in codes
    assert "exploit-policy" not in {f.code for f in report.findings if f.probe == "explore"}
    assert report.fingerprint["adapter"]["dataset"] == "leg_counting"
