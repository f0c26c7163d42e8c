"""run_search: seeded, counted, shrunk; flaky cases reported unshrunk; other errors left alone."""

import pytest
from hypothesis import strategies as st
from hypothesis.internal.conjecture import providers

from envaudit.testing import play
from envaudit.testing.search import Counterexample, Options, PropertyFailed, run_search
from tests.testing.toy_envs import FetchTask

EPISODE = play(FetchTask, ["claim"], seed=0)


def test_a_holding_property_returns_how_many_cases_ran():
    seen = []
    assert run_search("p", FetchTask, st.integers(0, 10**9), lambda c: seen.append(c), Options(max_examples=7)) == 7
    assert len(seen) == 7


def test_the_search_seed_decides_the_cases():
    def cases(seed):
        seen = []
        run_search("p", FetchTask, st.integers(0, 10**9), seen.append, Options(max_examples=5, seed=seed))
        return seen

    assert cases(0) == cases(0)
    assert cases(0) != cases(1)


def test_a_counterexample_is_shrunk_and_raised_as_property_failed():
    seen = []

    def check(case):
        seen.append(case)
        return Counterexample(f"case {case} is too big", EPISODE) if case >= 10 else None

    with pytest.raises(PropertyFailed) as info:
        run_search("prop_x", "envaudit/FlakySearch-v0", st.integers(0, 1000), check, Options(max_examples=50))
    exc = info.value
    assert exc.property == "prop_x" and exc.counterexample.summary == "case 10 is too big"
    text = str(exc)
    assert text.startswith("prop_x failed on FetchTask: case 10 is too big\n")
    assert f"Counterexample (shrunk, after {len(seen)} generated cases):" in text  # shrinking steps count
    assert text.endswith("Replay it: envaudit.testing.play('envaudit/FlakySearch-v0', ['claim'], seed=0)")
    assert exc.__cause__ is None and exc.__suppress_context__


def test_a_case_that_fails_once_only_is_reported_not_shrunk():
    calls = []

    def check(case):
        calls.append(case)
        return Counterexample("once", EPISODE) if len(calls) == 3 else None

    with pytest.raises(PropertyFailed) as info:
        run_search("prop_y", FetchTask, st.integers(0, 1000), check, Options(max_examples=20))
    text = str(info.value)
    assert info.value.counterexample.summary == "once" and info.value.property == "prop_y"
    assert text.startswith("prop_y failed on FetchTask: once\n")
    assert ("not shrunk: it did not fail again when replayed, so the env is nondeterministic; found after "
            f"{len(calls)} generated cases") in text
    assert "Replay it: envaudit.testing.play(FetchTask, " in text


def test_other_errors_pass_through():
    def check(case):
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        run_search("p", FetchTask, st.integers(0, 5), check, Options(max_examples=3))

    def grouped(case):
        raise ExceptionGroup("several", [ValueError("a")])

    with pytest.raises(ExceptionGroup, match="several"):
        run_search("p", FetchTask, st.integers(0, 5), grouped, Options(max_examples=3))


def test_the_constant_pool_is_empty_during_the_search():
    pools = []

    def check(case):
        pool = providers._get_local_constants()
        pools.append(bool(pool.integers or pool.floats or pool.strings or pool.bytes))

    run_search("p", FetchTask, st.integers(0, 5), check, Options(max_examples=2))
    assert pools and not any(pools)
