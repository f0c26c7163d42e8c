import doctest

import pytest

import envaudit.testing as testing
from envaudit.testing import (
    baselines,
    incentives,
    oracles,
    properties,
    replay,
    strategies,
    success,
    trajectory,
)


@pytest.mark.parametrize("module", [baselines, incentives, oracles, properties, replay, strategies, success, trajectory], ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_public_names_are_exported_and_functions_carry_an_example():
    assert sorted(testing.__all__) == sorted(n for n in testing.__all__ if hasattr(testing, n))
    functions = [getattr(testing, n) for n in testing.__all__ if callable(getattr(testing, n))
                 and not isinstance(getattr(testing, n), type)]
    assert len(functions) == 15
    assert [f.__name__ for f in functions if ">>>" not in (f.__doc__ or "")] == []
