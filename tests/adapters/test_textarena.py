"""TextArena end to end: real shipped games through TextArena's own API (make, reset, step, close).

GuessTheNumber-v0 (one player, numbers 1-20, 10 turns): the reference guess wins at once with
TextArena's outcome 1; a number outside 1-20 is an invalid move (TextArena lets the player retry
once, so two in a row end the game); wrong guesses reach the turn limit (TextArena checks it before
counting the turn, so ``max_turns=10`` allows 11 guesses), where TextArena pays
the fraction of the range the last guess was close (0.05-0.95) -- a truncation, not a win.
TicTacToe-v0 (two players) runs against the adapter's seeded random legal opponent. TextArena's LLM
observation wrapper keeps every earlier game's transcript when an instance is reset (checked by
hand: the second reset of one instance shows the prompt twice), so the scan reports
``non-replayable`` (the adapter shows it once per instance, then plays fresh games:
test_textarena_episodes.py).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("textarena")

from envaudit.adapters.textarena import TextArenaEnv  # noqa: E402
from envaudit.rollout import Runner, SequencePolicy  # noqa: E402
from envaudit.scan import run_scan  # noqa: E402

SEEDS = list(range(8))


def _play(env_id: str, labels: list[str], seeds=SEEDS):
    env = TextArenaEnv(env_id)
    actions = [env.action_labels.index(label) for label in labels]
    runner = Runner(lambda: TextArenaEnv(env_id))
    return runner.run(SequencePolicy(actions, name="+".join(labels)), seeds, rng=np.random.default_rng(0)).records


def test_reference_guess_wins_at_once():
    records = _play("GuessTheNumber-v0", ["reference"])
    eps = records.episodes
    assert (eps["outcome"] == "success").all() and (eps["length"] == 1).all() and (eps["return"] == 1.0).all()


def test_illegal_moves_are_tool_errors_and_the_second_loses_the_game():
    records = _play("GuessTheNumber-v0", ["illegal"])
    steps = records.steps
    # The first is a rejected move (a retry); the second ends the game: TextArena's verdict, a loss.
    assert set(steps.loc[steps["step"] == 0, "tool_status"]) == {"error"}
    assert steps.loc[steps["step"] == 1, "tool_status"].isna().all()
    assert (records.episodes["length"] == 2).all()
    assert (records.episodes["outcome"] == "failure").all()


def test_the_turn_limit_is_a_timeout_with_a_closeness_payoff():
    # Fresh legal guesses (never the reference) on seeds where eleven of them miss the number
    # (checked by hand; on other seeds one of them hits it, which is a win).
    records = _play("GuessTheNumber-v0", ["legal_1"], seeds=[0, 5, 7, 9])
    for _, ep in records.episodes.iterrows():
        assert ep["end_reason"] == "truncated" and ep["outcome"] == "timeout" and ep["length"] == 11
        assert 0.0 < ep["return"] < 1.0 and not ep["success"]
    # The closest miss earns almost what the win does: 1 - 1/19 for a guess one off.
    assert records.episodes["return"].max() == pytest.approx(1 - 1 / 19)


def test_two_player_game_against_the_seeded_opponent():
    records = _play("TicTacToe-v0", ["legal_1"], seeds=[3, 4])
    eps = records.episodes
    assert set(eps["outcome"]) <= {"success", "failure"} and eps["success"].notna().all()
    assert (eps["return"].isin([-1.0, 0.0, 1.0])).all()
    # The same seed and actions give the same game (the opponent's generator is seeded by the seed).
    again = _play("TicTacToe-v0", ["legal_1"], seeds=[3, 4]).episodes
    assert list(again["return"]) == list(eps["return"]) and list(again["length"]) == list(eps["length"])


def test_quick_scan_reports_the_transcript_carried_across_resets():
    report = run_scan(lambda: TextArenaEnv("GuessTheNumber-v0"), env_id="textarena:GuessTheNumber-v0",
                      quick=True, seed=0, probes=["replay"])
    assert "non-replayable" in {f.code for f in report.findings}
    assert "global random" in report.fingerprint["adapter"]["replayability_risk"]
