"""A real SIGINT in the middle of a suite: exit 130 with the finished envs kept and the summary
marked incomplete; the same command then scans only the envs that had not finished.

The signal is sent at a known point: the second env's factory sends SIGINT to the scanning
process the first time it is called (``tests.fixtures.suite_envs.interrupt_once``), so the first
env is always finished and the other two never are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
SUITE = """
[defaults]
episodes = 8
quick = true
probes = ["api"]

[[env]]
target = "tests.fixtures.suite_envs:logged"
env_args = { tag = "a" }

[[env]]
target = "tests.fixtures.suite_envs:interrupt_once"
env_args = { tag = "b" }

[[env]]
target = "tests.fixtures.suite_envs:logged"
env_args = { tag = "c" }
"""


def _run(tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ENVAUDIT_TEST_MAKE_LOG": str(tmp_path / "made.log")}
    return subprocess.run([sys.executable, "-m", "envaudit.cli", "scan", "--suite", "suite.toml", "--out", "s",
                           "--no-progress"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def _made(tmp_path: Path) -> set[str]:
    return set((tmp_path / "made.log").read_text().split())


def test_a_real_sigint_then_the_same_command_resumes(tmp_path):
    (tmp_path / "suite.toml").write_text(SUITE)
    first = _run(tmp_path)
    assert first.returncode == 130, first.stderr[-2000:]
    assert "rerun the same command" in first.stderr
    suite = json.loads((tmp_path / "s" / "suite.json").read_text())
    assert not suite["complete"]
    status = {r["env_args"]["tag"]: r["status"] for r in suite["envs"]}
    assert status == {"a": "done", "b": "pending", "c": "pending"}
    a_folder = tmp_path / "s" / "tests.fixtures.suite_envs-logged"
    created = json.loads((a_folder / "report.json").read_text())["created"]
    assert "c" not in _made(tmp_path)
    # Nothing half-written: the env folders there are whole, and no temporary folder is left.
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if p.is_dir()) == [a_folder.name]
    (tmp_path / "made.log").unlink()

    second = _run(tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    assert _made(tmp_path) == {"b", "c"}  # a was not scanned again
    assert json.loads((a_folder / "report.json").read_text())["created"] == created
    suite = json.loads((tmp_path / "s" / "suite.json").read_text())
    assert suite["complete"] and [r["status"] for r in suite["envs"]] == ["done"] * 3
