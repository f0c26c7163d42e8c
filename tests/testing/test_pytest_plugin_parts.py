"""The plugin's parts called directly, with stand-in reports and items: no scan, no child session."""

from types import SimpleNamespace

import pytest

from envaudit.testing import pytest_plugin as plugin
from envaudit.testing.pytest_plugin import DEFAULT_FAIL_ON, FAIL_ON, MARKER

LEVELS = ["info", "warn", "fail"]


class FakeReport:
    """Finding groups with a severity each; prints as one fixed line (what Rich renders for it)."""

    env_id = "toy/Env-v0"

    def __init__(self, *groups, incomplete=()):
        self.groups = list(groups)
        self.incomplete = list(incomplete)

    def finding_groups(self):
        return self.groups

    def reaches(self, level):
        if level is None:
            return []
        return [g for g in self.groups if LEVELS.index(g.severity) >= LEVELS.index(level)]

    def __str__(self):
        return "THE FINDINGS TABLE"


def group(code, severity, fix=""):
    return SimpleNamespace(code=code, severity=severity, headline=SimpleNamespace(fix=fix))


class Item:
    nodeid = "test_x.py::test_env"

    def __init__(self, mark=None):
        self.mark = mark
        self.stash = pytest.Stash()

    def get_closest_marker(self, name):
        return self.mark if name == MARKER else None


def mark(*args, **kwargs):
    return getattr(pytest.mark, MARKER)(*args, **kwargs).mark


def test_the_constants():
    assert MARKER == "envaudit_scan" and FAIL_ON == ("info", "warn", "fail", "never") and DEFAULT_FAIL_ON == "warn"


def test_the_marker_is_registered_with_its_signature():
    lines = []
    plugin.pytest_configure(SimpleNamespace(addinivalue_line=lambda key, line: lines.append((key, line))))
    assert len(lines) == 1 and lines[0][0] == "markers"
    assert lines[0][1].startswith("envaudit_scan(target, *, fail_on='warn', **scan_options): run `envaudit scan`")


# -- the message --------------------------------------------------------------------------------
def test_render_findings_counts_the_hits_and_lists_their_fixes_by_rank():
    report = FakeReport(group("timeout-rewarded", "fail", "stop paying timeouts"), group("length-bias", "info", "cap"),
                        group("failure-rewarded", "warn", "charge failures"), group("non-replayable", "warn"))
    assert plugin.render_findings(report, "warn") == "\n".join([
        "envaudit scan of toy/Env-v0: 3 incentives (finding groups) at or above warn", "",
        "THE FINDINGS TABLE", "",
        "fix #1 (timeout-rewarded): stop paying timeouts",
        "fix #3 (failure-rewarded): charge failures",
    ])
    one = plugin.render_findings(report, "fail")
    assert one.startswith("envaudit scan of toy/Env-v0: 1 incentive (finding groups) at or above fail\n")
    assert one.endswith("fix #1 (timeout-rewarded): stop paying timeouts")
    never = plugin.render_findings(report, "never")
    assert never.startswith("envaudit scan of toy/Env-v0: 0 incentives (finding groups) at or above never")
    assert "fix #" not in never


def test_the_table_is_rendered_plain_and_100_wide():
    class Wide(FakeReport):
        def __rich_console__(self, console, options):
            yield f"width={options.max_width} color={console.color_system}"

    assert "width=100 color=None" in plugin.render_findings(Wide(), "warn")


# -- the gate -----------------------------------------------------------------------------------
def test_gate_fails_when_a_group_reaches_fail_on():
    report = FakeReport(group("length-bias", "warn", "cap it"))
    with pytest.raises(pytest.fail.Exception) as info:
        plugin.gate(report, "warn")
    assert str(info.value.msg) == plugin.render_findings(report, "warn") and info.value.pytrace is False
    plugin.gate(report, "fail")  # below fail: passes
    plugin.gate(FakeReport(group("length-bias", "fail")), "never")  # never gates


def test_gate_fails_an_incomplete_audit_even_when_clean():
    report = FakeReport(incomplete=[{"probe": "replay", "skipped": "all", "reason": "budget"}])
    with pytest.raises(pytest.fail.Exception) as info:
        plugin.gate(report, "never")
    assert info.value.msg == plugin.render_findings(report, "never") + "\nThe audit is incomplete: raise budget_s."
    assert info.value.pytrace is False
    plugin.gate(FakeReport(), "info")


# -- scan: argument errors ----------------------------------------------------------------------
def test_scan_names_bad_arguments_as_usage_errors():
    with pytest.raises(pytest.UsageError) as info:
        plugin.scan("envaudit/FlakySearch-v0", fail_on="always")
    assert str(info.value) == "envaudit_scan: fail_on must be one of info, warn, fail, never, got 'always'"
    with pytest.raises(pytest.UsageError) as info:
        plugin.scan("envaudit/FlakySearch-v0", bogus=1)
    assert str(info.value).startswith("envaudit_scan: bad scan option: ") and "bogus" in str(info.value)
    with pytest.raises(pytest.UsageError) as info:
        plugin.scan("envaudit/Nope-v0", quick=True)
    assert str(info.value).startswith("envaudit_scan: no Gymnasium env 'envaudit/Nope-v0'")
    assert info.value.__cause__ is None and info.value.__suppress_context__


# -- the marker ---------------------------------------------------------------------------------
def test_marker_args_split_target_fail_on_and_scan_options():
    assert plugin._marker_args(Item()) is None
    assert plugin._marker_args(Item(mark("env/A-v0", fail_on="fail", quick=True))) == ("env/A-v0", "fail",
                                                                                          {"quick": True})
    assert plugin._marker_args(Item(mark(target="env/A-v0", seed=3))) == ("env/A-v0", "warn", {"seed": 3})


@pytest.mark.parametrize("args,kwargs,text", [
    (("a", "b"), {}, "test_x.py::test_env: @pytest.mark.envaudit_scan takes one target (an env id or a factory), "
                     "got ('a', 'b') and []"),
    (("a",), {"target": "b", "quick": True}, "test_x.py::test_env: @pytest.mark.envaudit_scan takes one target "
                                             "(an env id or a factory), got ('a',) and ['quick', 'target']"),
    ((), {"quick": True}, "test_x.py::test_env: @pytest.mark.envaudit_scan needs a target, e.g. "
                          "@pytest.mark.envaudit_scan('envaudit/FlakySearch-v0', fail_on='warn')"),
    ((), {"target": None}, "test_x.py::test_env: @pytest.mark.envaudit_scan needs a target, e.g. "
                           "@pytest.mark.envaudit_scan('envaudit/FlakySearch-v0', fail_on='warn')"),
])
def test_bad_markers_are_usage_errors(args, kwargs, text):
    with pytest.raises(pytest.UsageError) as info:
        plugin._marker_args(Item(mark(*args, **kwargs)))
    assert str(info.value) == text


def test_the_marked_scan_runs_once_per_test_and_gates_before_the_body(monkeypatch):
    calls = []
    flawed = FakeReport(group("length-bias", "warn", "cap it"))

    def fake_scan(target, *, fail_on, **options):
        calls.append((target, fail_on, options))
        return flawed

    monkeypatch.setattr(plugin, "scan", fake_scan)
    item = Item(mark("env/A-v0", fail_on="fail", quick=True))
    assert plugin._marked_report(item) == (flawed, "fail")
    assert plugin._marked_report(item) == (flawed, "fail") and len(calls) == 1  # cached in the item's stash
    assert calls == [("env/A-v0", "fail", {"quick": True})]
    plugin.pytest_runtest_call(item)  # warn is below fail: the body may run
    assert len(calls) == 1

    gated = Item(mark("env/B-v0"))
    with pytest.raises(pytest.fail.Exception, match="1 incentive \\(finding groups\\) at or above warn"):
        plugin.pytest_runtest_call(gated)
    assert calls[-1] == ("env/B-v0", "warn", {})

    plugin.pytest_runtest_call(Item())  # unmarked: nothing happens
    assert len(calls) == 2
