"""GEM end to end: shipped games through GEM's own API (gem.make, reset(seed), step(str)).

gem-llm 0.1.0 pins reasoning-gym==0.1.23, so it lives in the second venv; this module skips
where gem is not installed. To run it for real (``.ci/run`` does, and fails if it skips there)::

    scripts/setup --alt-only && .venv-alt/bin/python -m pytest tests/adapters/test_gem.py

game:GuessTheNumber-v0-easy: numbers 1-10, 4 turns. By GEM's source: the right guess ends the
game with GEM's win message and reward 1; a reply without ``\\boxed{}`` ends it with the format
error reward -0.1; a guess outside the range or repeated pays 0 and the game goes on; at the turn
limit GEM returns terminated *and* truncated and pays ``1 - |guess - target| / 9`` for the last
guess (0 when it was out of range) -- a timeout that pays up to 0.89 without success.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gem")

import gem  # noqa: E402

from envaudit.adapters.gem import GemEnv  # noqa: E402
from envaudit.rollout import Runner, SequencePolicy  # noqa: E402
from envaudit.scan import run_scan  # noqa: E402

GAME = "game:GuessTheNumber-v0-easy"
SEEDS = list(range(8))


def _run(labels: list[str], seeds=SEEDS):
    env = GemEnv(GAME)
    actions = [env.action_labels.index(label) for label in labels]
    runner = Runner(lambda: GemEnv(GAME))
    return runner.run(SequencePolicy(actions, name="+".join(labels)), seeds, rng=np.random.default_rng(0)).records


def test_the_reference_guess_wins_with_gems_own_message():
    records = _run(["legal_1", "reference"])
    eps = records.episodes
    assert (eps["outcome"] == "success").all() and (eps["return"] == 1.0).all()
    # A legal guess the game goes on after is an ok move (unless it hit the number at once).
    assert set(records.steps.loc[records.steps["step"] == 0, "tool_status"].dropna()) <= {"ok"}


def test_a_format_error_loses_the_game_at_gems_format_penalty():
    records = _run(["unformatted"])
    assert (records.episodes["return"] == -0.1).all() and (records.episodes["length"] == 1).all()
    assert (records.episodes["outcome"] == "failure").all()


def test_an_out_of_range_guess_is_a_failed_move_and_the_game_goes_on():
    records = _run(["illegal", "reference"])
    steps = records.steps
    assert set(steps.loc[steps["step"] == 0, "tool_status"]) == {"error"}
    assert (records.episodes["outcome"] == "success").all() and (records.episodes["length"] == 2).all()


def test_the_turn_limit_is_a_timeout_that_pays_for_closeness():
    records = _run(["legal_1", "repeat_last"])  # one fresh guess, then repeats of it (invalid, 0)
    env = GemEnv(GAME)
    timeouts = 0
    for _, ep in records.episodes.iterrows():
        env.reset(seed=int(ep["seed"]))
        target, guess = env.inner.game_number, int(env.candidates()["legal_1"][len("\\boxed{"):-1])
        if guess == target:
            assert ep["outcome"] == "success" and ep["length"] == 1
            continue
        timeouts += 1
        # GEM said terminated=True and truncated=True at its limit: a timeout, not a failure.
        assert ep["end_reason"] == "truncated" and ep["outcome"] == "timeout" and ep["length"] == 4
        assert ep["return"] == pytest.approx(1 - abs(guess - target) / 9)
    assert timeouts > 0
    middle = records.steps[(records.steps["step"] > 0) & (records.steps["step"] < 3)]
    assert set(middle["tool_status"]) == {"error"}  # repeated guesses are invalid moves


def test_catalogue_draws_leave_the_games_random_stream_alone():
    plain = gem.make(GAME)
    for seed in SEEDS:
        plain.reset(seed=seed)
        env = GemEnv(GAME)
        env.reset(seed=seed)
        assert env.inner.game_number == plain.game_number
        env.step(env.action_labels.index("legal_1"))  # draws legal moves for the next turn
        assert env.inner.game_number == plain.game_number


def test_quick_scan_reports_the_paying_timeout():
    report = run_scan(lambda: GemEnv(GAME), env_id=f"gem:{GAME}", quick=True, seed=0)
    codes = {f.code for f in report.findings}
    assert "timeout-rewarded" in codes, [(f.code, f.summary) for f in report.findings]
    assert "set_seed" in report.fingerprint["adapter"]["replayability_risk"]
