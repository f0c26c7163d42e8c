"""Suite-wide set-up."""

# pandas registers its Arrow extension types ("pandas.period", ...) with pyarrow the first time a
# parquet file is written. pytester's in-process runs (tests/testing/test_pytest_plugin.py) restore
# sys.modules afterwards: if that first write happened inside one, the module is forgotten while the
# registration stays, and the next parquet write re-imports it and fails with "A type extension
# with name pandas.period already defined". Importing it once here keeps every test order working.
import pandas.core.arrays.arrow.extension_types  # noqa: F401
import pytest

# -- scheduling: the longest modules start first ---------------------------------------------------
# The suite runs as `pytest -n auto --dist loadfile`: each module runs whole on one worker, and
# xdist hands the next module to whichever worker frees up first. By default it orders modules by
# how many tests they hold, which sends the few-test, long modules (a suite through Ray, a real vLLM
# engine, a default scan of a dying env) last: the run then ends with one worker busy on them and
# the other idle. Starting them first (longest-processing-time-first) lets the many short modules
# fill in around them. The list is ordered longest first by `--durations` runs on 2 cores (refresh it
# when a module's work changes); modules not listed follow in xdist's own order (most tests first).
LONG_MODULES = (
    "tests/grpo/test_lm_engine.py",
    "tests/test_suite_ray.py",
    "tests/test_grouping.py",
    "tests/families/test_detection_fast.py",
    "tests/execution/test_ray_exec.py",
    "tests/test_notebook.py",
    "tests/execution/test_isolation.py",
)


def pytest_configure(config):
    # xdist >= 3.8 would otherwise re-sort the modules by test count and undo the order below;
    # without xdist (the second venv of .ci/run) there is no such option and nothing to do.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)  # after `-m 'not slow'` has deselected: count what runs
def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONG_MODULES)}
    counts: dict[str, int] = {}
    for item in items:
        counts[item.nodeid.split("::")[0]] = counts.get(item.nodeid.split("::")[0], 0) + 1
    # Stable sort: a module's tests keep their order, and every worker computes the same order.
    items.sort(key=lambda item: (rank.get(module := item.nodeid.split("::")[0], len(rank)), -counts[module]))
