"""pytest plugin: gate a test on an ``envaudit scan``, so CI fails the day an incentive comes back.

Registered under the ``pytest11`` entry point, so it is active wherever envaudit is installed.
Two ways to use it:

- the marker runs the scan before the test body and fails the test with the findings table
  when a finding reaches ``fail_on``; the body can look at the report through the
  ``envaudit_report`` fixture::

      @pytest.mark.envaudit_scan("envaudit/FlakySearch-v0", fail_on="warn", quick=True)
      def test_flaky_search_is_clean(envaudit_report):
          assert envaudit_report.exploration["episodes"] > 0

- the ``envaudit_scan`` fixture is a function, for targets built at run time or several scans::

      def test_my_env(envaudit_scan):
          report = envaudit_scan(make_env, fail_on="fail", budget_s=20)

``fail_on`` is ``info``, ``warn`` (the default: a clean env has no warn or fail), ``fail`` or
``never``; every other keyword is a ``ScanConfig`` field (``quick``, ``seed``, ``probes``,
``budget_s``, ``timeout_handling``...). With ``out=...`` the report folder is written there.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest

MARKER = "envaudit_scan"
FAIL_ON = ("info", "warn", "fail", "never")
DEFAULT_FAIL_ON = "warn"
_REPORT = pytest.StashKey[Any]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(target, *, fail_on='{DEFAULT_FAIL_ON}', **scan_options): run `envaudit scan` on target "
        "(an env id or a zero-argument factory) before the test; fail it with the findings table when a "
        "finding reaches fail_on (info, warn, fail, never). Other keywords are ScanConfig fields.",
    )


def render_findings(report: Any, fail_on: str) -> str:
    """The failure message: which findings reached ``fail_on``, the findings table, and each fix."""
    from rich.console import Console

    hits = report.reaches(None if fail_on == "never" else fail_on)
    buffer = io.StringIO()
    Console(file=buffer, width=100, color_system=None).print(report)
    lines = [f"envaudit scan of {report.env_id}: {len(hits)} incentive{'s' if len(hits) != 1 else ''} "
             f"(finding groups) at or above {fail_on}", "", buffer.getvalue().rstrip(), ""]
    for i, g in enumerate(report.finding_groups(), 1):  # hits are finding groups, one per incentive
        if g in hits and g.headline.fix:
            lines.append(f"fix #{i} ({g.code}): {g.headline.fix}")
    return "\n".join(lines)


def scan(target: Any, *, fail_on: str = DEFAULT_FAIL_ON, **options: Any) -> Any:
    """Run the scan and return its report, without gating. Bad options raise ``pytest.UsageError``."""
    from envaudit.config import ScanConfig
    from envaudit.errors import UsageError
    from envaudit.reporting import write_folder
    from envaudit.scan import run_scan

    if fail_on not in FAIL_ON:
        raise pytest.UsageError(f"{MARKER}: fail_on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    try:
        config = ScanConfig(**options)
    except (TypeError, ValueError) as exc:
        raise pytest.UsageError(f"{MARKER}: bad scan option: {exc}") from None
    try:
        report = run_scan(target, config)
    except UsageError as exc:
        raise pytest.UsageError(f"{MARKER}: {exc}") from None
    if config.out:
        write_folder(report, config.out, replace=True)
    return report


def gate(report: Any, fail_on: str) -> None:
    """Fail the current test with the findings table when a finding reaches ``fail_on``, or when
    the wall-clock cap cut the audit (it may have missed findings; the CLI exits 4)."""
    if fail_on != "never" and report.reaches(fail_on):
        pytest.fail(render_findings(report, fail_on), pytrace=False)
    if report.incomplete:
        pytest.fail(render_findings(report, fail_on) + "\nThe audit is incomplete: raise budget_s.", pytrace=False)


def _marker_args(item: pytest.Item) -> tuple[Any, str, dict[str, Any]] | None:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    kwargs = dict(marker.kwargs)
    if len(marker.args) > 1 or (marker.args and "target" in kwargs):
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER} takes one target (an env id or a factory), "
                                f"got {marker.args!r} and {sorted(kwargs)}")
    target = marker.args[0] if marker.args else kwargs.pop("target", None)
    if target is None:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER} needs a target, e.g. "
                                f"@pytest.mark.{MARKER}('envaudit/FlakySearch-v0', fail_on='warn')")
    return target, kwargs.pop("fail_on", DEFAULT_FAIL_ON), kwargs


def _marked_report(item: pytest.Item) -> Any:
    if _REPORT not in item.stash:
        args = _marker_args(item)
        assert args is not None
        target, fail_on, options = args
        item.stash[_REPORT] = (scan(target, fail_on=fail_on, **options), fail_on)
    return item.stash[_REPORT]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """For a marked test: scan (unless the report fixture already did), gate, then run the body."""
    if item.get_closest_marker(MARKER) is None:
        return
    report, fail_on = _marked_report(item)
    gate(report, fail_on)


@pytest.fixture
def envaudit_report(request: pytest.FixtureRequest) -> Any:
    """The ``envaudit.report.Report`` of the test's ``@pytest.mark.envaudit_scan`` scan."""
    if request.node.get_closest_marker(MARKER) is None:
        raise pytest.UsageError(f"{request.node.nodeid}: the envaudit_report fixture needs "
                                f"@pytest.mark.{MARKER}(target, ...) on the test")
    report, _ = _marked_report(request.node)
    return report


@pytest.fixture
def envaudit_scan() -> Callable[..., Any]:
    """``envaudit_scan(target, *, fail_on="warn", **scan_options) -> Report``: scan and gate.

    Fails the test with the findings table when a finding reaches ``fail_on``; returns the report.
    """

    def run(target: Any, *, fail_on: str = DEFAULT_FAIL_ON, **options: Any) -> Any:
        report = scan(target, fail_on=fail_on, **options)
        gate(report, fail_on)
        return report

    return run
