"""The pytest plugin, run in a child pytest session (pytester) with only this plugin loaded."""

import pytest

pytest_plugins = ["pytester"]

# Only the replay probe, on the quick budget: it catches the non-replayable variant with `fail`
# and is silent on its clean twin, which keeps each child session to about a second.
SCAN = 'quick=True, probes=["replay"]'


@pytest.fixture(scope="module")
def warm():
    # pytester's in-process runs drop the modules they imported afterwards, and numpy's C modules
    # cannot be imported twice: import everything a scan needs here first, so it stays loaded.
    from envaudit import ScanConfig
    from envaudit.scan import run_scan
    from envaudit.testing import pytest_plugin

    pytest_plugin.render_findings(run_scan("envaudit/FlakySearch-Unseeded-v0", ScanConfig(quick=True, probes=("replay",))), "warn")


@pytest.fixture
def run(pytester, monkeypatch, warm):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def go(source: str, *args: str):
        pytester.makepyfile(source)
        return pytester.runpytest_inprocess("-p", "envaudit.testing.pytest_plugin", "-p", "no:cacheprovider", *args)

    return go


def test_marker_passes_a_clean_env_and_hands_over_the_report(run):
    result = run(f"""
        import pytest

        @pytest.mark.envaudit_scan("envaudit/FlakySearch-v0", fail_on="warn", {SCAN})
        def test_clean(envaudit_report):
            assert envaudit_report.env_id == "envaudit/FlakySearch-v0"
            assert envaudit_report.worst() is None
    """)
    result.assert_outcomes(passed=1)


def test_marker_fails_with_the_findings_table(run):
    result = run(f"""
        import pytest

        @pytest.mark.envaudit_scan("envaudit/FlakySearch-Unseeded-v0", {SCAN})
        def test_flawed():
            raise RuntimeError("the body must not run when the gate fails")
    """)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "envaudit scan of envaudit/FlakySearch-Unseeded-v0: 1 incentive (finding groups) at or above warn" in out
    assert "non-replayable" in out and "fix #1 (non-replayable): " in out
    assert "the body must not run" not in out


def test_fail_on_never_and_factories(run):
    result = run(f"""
        import gymnasium as gym
        import pytest

        def make_env():
            return gym.make("envaudit/FlakySearch-Unseeded-v0")

        @pytest.mark.envaudit_scan(make_env, fail_on="never", {SCAN})
        def test_reported_not_gated(envaudit_report):
            assert [f.code for f in envaudit_report.findings] == ["non-replayable"]
    """)
    result.assert_outcomes(passed=1)


def test_fixture_scans_and_gates(run, tmp_path):
    out = tmp_path / "report"
    result = run(f"""
        def test_clean(envaudit_scan):
            report = envaudit_scan("envaudit/FlakySearch-v0", {SCAN}, out={str(out)!r})
            assert report.findings == []

        def test_flawed(envaudit_scan):
            envaudit_scan("envaudit/FlakySearch-Unseeded-v0", fail_on="fail", {SCAN})
    """)
    result.assert_outcomes(passed=1, failed=1)
    assert "1 incentive (finding groups) at or above fail" in result.stdout.str()
    assert (out / "report.json").exists()


def test_usage_errors_name_the_fix(run):
    result = run("""
        import pytest

        @pytest.mark.envaudit_scan("envaudit/FlakySearch-v0", fail_on="sometimes")
        def test_bad_fail_on():
            pass

        @pytest.mark.envaudit_scan(fail_on="warn")
        def test_no_target():
            pass

        def test_report_without_marker(envaudit_report):
            pass

        def test_bad_option(envaudit_scan):
            envaudit_scan("envaudit/FlakySearch-v0", episodes=0)
    """)
    out = result.stdout.str()
    assert "fail_on must be one of info, warn, fail, never, got 'sometimes'" in out
    assert "needs a target" in out
    assert "the envaudit_report fixture needs @pytest.mark.envaudit_scan" in out
    assert "bad scan option: episodes must be at least 1, got 0" in out


def test_marker_is_registered(run):
    result = run("def test_nothing_here():\n    pass\n", "--markers")
    assert "@pytest.mark.envaudit_scan(target" in result.stdout.str()
