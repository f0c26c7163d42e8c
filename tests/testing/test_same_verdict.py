"""The same property on the same env and seed gives the same verdict, and the same message, in
plain Python, under pytest with envaudit's plugin, and under pytest without it but with a
Hypothesis profile (and seed option) that changes every default the properties could inherit.

Before the fix the verdict changed with the modules loaded in the process: Hypothesis draws some
values from literals of every local module in ``sys.modules`` (envaudit's plugin module, test
files, conftests), so the same ``@seed`` generated different cases.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import Phase, settings
from hypothesis.internal.conjecture import providers

from envaudit.testing.search import (
    DEFAULT_MAX_EXAMPLES,
    Options,
    pinned_constant_pool,
    search_settings,
)

ROOT = Path(__file__).resolve().parents[2]

PROBE = '''
import json

from envaudit.testing import assert_failures_not_rewarded, assert_no_reward_without_success, assert_no_timeout_reward
from tests.testing.toy_envs import HandoffAfterFailure, SingleRoute

CASES = [
    # issue 10's booking env: handing off right after a failed search pays 0.8 without success
    ("reward-without-success", assert_no_reward_without_success, HandoffAfterFailure, 0),
    ("reward-without-success", assert_no_reward_without_success, HandoffAfterFailure, 1),
    ("reward-without-success", assert_no_reward_without_success, HandoffAfterFailure, 2),
    ("timeout-pays", assert_no_timeout_reward,
     lambda: SingleRoute(error_rate=0.25, timeout_rate=0.25, timeout_reward=0.5, end_on_fault=True), 0),
    ("clean-failures", assert_failures_not_rewarded, lambda: SingleRoute(error_rate=0.4), 0),
]


def verdicts():
    out = []
    for name, prop, make_env, seed in CASES:
        try:
            prop(make_env, seed=seed)
            out.append([name, seed, "pass", ""])
        except AssertionError as exc:
            out.append([name, seed, type(exc).__name__, str(exc)])
    return out
'''

TEST = '''
import json
import os

from hypothesis import settings

import verdict_probe


def test_verdicts(request):
    context = {"plugin": request.config.pluginmanager.has_plugin("envaudit.testing.pytest_plugin"),
               "profile": settings.get_current_profile_name()}
    with open(os.environ["VERDICTS_OUT"], "w") as f:
        json.dump({"context": context, "verdicts": verdict_probe.verdicts()}, f)
'''

CONFTEST = '''
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

# Every default a property could inherit, changed.
settings.register_profile(
    "changed", max_examples=7, derandomize=False, database=DirectoryBasedExampleDatabase(".hypothesis-db"),
    phases=[Phase.explicit, Phase.reuse, Phase.generate], deadline=20, suppress_health_check=[],
    report_multiple_bugs=True, print_blob=True,
)
'''


def test_same_seed_same_verdict_in_plain_python_and_under_pytest_with_or_without_plugin(tmp_path):
    (tmp_path / "verdict_probe.py").write_text(textwrap.dedent(PROBE))
    (tmp_path / "test_probe.py").write_text(textwrap.dedent(TEST))
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path)])
    plain = ("import json, sys, verdict_probe; "
             "json.dump({'context': {}, 'verdicts': verdict_probe.verdicts()}, open(sys.argv[1], 'w'))")
    pytest_ = [sys.executable, "-m", "pytest", "test_probe.py", "-q", "-p", "no:cacheprovider"]
    runs = {
        "python -c": [sys.executable, "-c", plain, str(tmp_path / "python.json")],
        "pytest + plugin": pytest_,
        "pytest - plugin + profile": pytest_ + ["-p", "no:envaudit.testing.pytest_plugin", "-p", "no:randomly",
                                                "--hypothesis-profile=changed", "--hypothesis-seed=12345"],
    }
    procs = {}
    for name, cmd in runs.items():  # in parallel: each is mostly interpreter start-up
        out = tmp_path / f"{name.replace(' ', '_')}.json"
        cmd = [*cmd[:-1], str(out)] if name == "python -c" else cmd
        procs[name] = (subprocess.Popen(cmd, cwd=tmp_path, env={**env, "VERDICTS_OUT": str(out)},
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), out)
    results = {}
    for name, (proc, out) in procs.items():
        log, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{log}"
        results[name] = json.loads(out.read_text())

    # The ambient profile: Hypothesis's "default", or its built-in "ci" where a CI variable is set.
    assert results["pytest + plugin"]["context"]["plugin"] is True
    assert results["pytest + plugin"]["context"]["profile"] in ("default", "ci")
    assert results["pytest - plugin + profile"]["context"] == {"plugin": False, "profile": "changed"}
    reference = results["python -c"]["verdicts"]
    outcomes = {v[2] for v in reference}
    assert "PropertyFailed" in outcomes and "pass" in outcomes, reference  # a comparison with teeth
    for name in ("pytest + plugin", "pytest - plugin + profile"):
        assert results[name]["verdicts"] == reference, name


def test_search_settings_ignore_the_loaded_profile():
    settings.register_profile("envaudit-test-ambient", max_examples=3, derandomize=True, deadline=5,
                              phases=[Phase.explicit, Phase.explain], report_multiple_bugs=True)
    before = settings.get_current_profile_name()
    settings.load_profile("envaudit-test-ambient")
    try:
        chosen = search_settings(Options())
        mine = search_settings(Options(max_examples=9))
    finally:
        settings.load_profile(before)
    assert chosen.max_examples == DEFAULT_MAX_EXAMPLES and mine.max_examples == 9
    assert (chosen.derandomize, chosen.deadline, chosen.database, chosen.report_multiple_bugs) == (False, None, None, False)
    assert tuple(chosen.phases) == (Phase.generate, Phase.shrink)


def test_the_constant_pool_is_pinned_only_during_the_search():
    original = providers._get_local_constants
    with pinned_constant_pool():
        pinned = providers._get_local_constants()
        assert not (pinned.integers or pinned.floats or pinned.strings or pinned.bytes)
    assert providers._get_local_constants is original

