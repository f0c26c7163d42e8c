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
