"""``benchmarks/ecosystems.py``'s judgement of one env, on real shipped games and hand-made failures.

- A game that loses every single-label line from the labels' two seeds (Kuhn Poker: three rounds
  against the random legal opponent) shows two outcomes under exploration's random catalogue play,
  which the benchmark adds for games; the same seed gives the same outcomes.
- An env that loops for ever is an ``env-error`` at its own line, not a stopped table (the hang cap
  interrupts it where it is); one whose opponent is a hosted LLM is ``unavailable``.
"""

from __future__ import annotations

import time

import pytest

from tests.fixtures.benchmark_scripts import load_benchmark

E = load_benchmark("ecosystems")


def _spin_for_ever() -> None:
    while True:
        time.sleep(0.01)


def test_a_hung_env_is_an_env_error_at_its_own_line():
    with pytest.raises(E.EnvHung) as caught, E.hang_cap(0.2):
        _spin_for_ever()
    status, where = E.blame(caught.value)
    assert status == "env-error"
    assert "did not finish within 0.2 s" in where and "test_ecosystems_benchmark.py" in where
    assert "(_spin_for_ever)" in where  # the env's frame, never the benchmark's own handler


def test_the_hang_cap_is_lifted_after_the_check_and_an_outer_timer_runs_on():
    import signal

    kept = signal.setitimer(signal.ITIMER_REAL, 0)  # pytest-timeout's own, if it set one
    try:
        with E.hang_cap(0.2):
            pass
        time.sleep(0.4)  # an alarm left armed would raise here
        signal.setitimer(signal.ITIMER_REAL, 50.0)
        with E.hang_cap(0.2):
            time.sleep(0.05)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 49.0 < left < 50.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, *kept)


def test_an_env_that_needs_a_hosted_llm_key_is_unavailable():
    try:
        raise ValueError("OpenRouter API key not found. Please set the OPENROUTER_API_KEY environment variable.")
    except ValueError as exc:
        status, where = E.blame(exc)
    assert status == "unavailable" and "hosted LLM" in where


def test_random_catalogue_play_sees_what_single_labels_do_not():
    pytest.importorskip("textarena")
    from envaudit.adapters.textarena import TextArenaEnv

    env = TextArenaEnv("KuhnPoker-v0")
    labels = E.Row("textarena", "KuhnPoker-v0")
    single = E.play(env, E.GAME_LABELS, [0, 1], 60, labels)
    assert {won for _, won, _ in single} == {False}  # every label alone loses from seeds 0 and 1
    mixed = E.Row("textarena", "KuhnPoker-v0")
    outcomes = E.play_random(env, 0, 60, mixed)
    assert {won for _, won, _ in outcomes} == {True, False}
    assert mixed.episodes == E.RANDOM_EPISODES and mixed.success_defined
    assert E.play_random(env, 0, 60, E.Row("textarena", "KuhnPoker-v0")) == outcomes  # same seed, same outcomes


def _lines(game: str, *needles: str) -> list[str]:
    """``textarena/envs/<game>/env.py:N`` of the lines holding each needle (read from the installed file)."""
    import importlib

    path = importlib.import_module(f"textarena.envs.{game}.env").__file__
    text = open(path).read().splitlines()
    return [f"textarena/envs/{game}/env.py:{next(i for i, t in enumerate(text, 1) if n in t)}" for n in needles]


def test_a_game_that_crashes_on_some_moves_is_played_by_the_others():
    """ThreeCardMonte passes its reason where the reward belongs on a bad format (line 43) and on an index
    out of range (line 45): ``illegal``, ``forfeit`` and ``empty`` crash from both seeds, 6 episodes; the
    reference wins and the legal guesses lose, so it is playable, with the crashes as evidence."""
    pytest.importorskip("textarena")
    row = E.check_env("textarena", "ThreeCardMonte-v0", "textarena:ThreeCardMonte-v0", {}, 0, 2, 60, ())
    assert row.status == "playable" and row.outcomes >= 2 and row.success_defined
    bad_format, out_of_range = _lines("ThreeCardMonte", 'set_invalid_move(0.0, "Bad action', "Index out of range")
    where = {w.rsplit(" at ", 1)[1]: n for w, n in row.env_errors.items()}
    assert where[f"{bad_format} (step)"] >= 4 and where[f"{out_of_range} (step)"] >= 2
    assert sum(row.env_errors.values()) < row.episodes
    assert any(e.startswith("env-error in ") and bad_format in e for e in row.evidence)


def test_a_game_whose_every_episode_crashes_is_an_env_error_with_each_line():
    """Countdown crashes on every invalid move (lines 48 and 55 pass a reason as the reward), and every
    label and random line of play makes one before the game ends: nothing is played."""
    pytest.importorskip("textarena")
    row = E.check_env("textarena", "Countdown-v0", "textarena:Countdown-v0", {}, 0, 2, 60, ())
    assert row.status == "env-error" and row.outcomes == 0
    assert sum(row.env_errors.values()) == row.episodes > 0
    assert all(any(line in r for r in row.reasons) for line in _lines("Countdown", "Invalid indices", "Invalid action format"))


def test_a_game_that_stalls_is_the_envs_error_not_the_adapters():
    pytest.importorskip("textarena")
    from envaudit.adapters.textarena import TextArenaEnv

    row = E.Row("textarena", "SpiteAndMalice-v0")
    E.play(TextArenaEnv("SpiteAndMalice-v0"), ("legal_1",), [1], 60, row)
    (where,) = row.env_errors
    assert where.startswith("GameStalled: ") and "textarena/envs/SpiteAndMalice/env.py:" in where and "(step)" in where


def test_an_exception_from_envaudit_itself_is_never_counted_as_the_envs():
    class Broken:
        action_labels = ("a",)

        def reset(self, seed=None):
            from envaudit.errors import user_frame
            user_frame(None)  # an AttributeError raised in envaudit's own frame

    with pytest.raises(AttributeError):
        E.episode(Broken(), 0, lambda: 0, 5, E.Row("x", "y"))
