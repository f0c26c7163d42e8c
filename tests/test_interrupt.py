"""SIGINT during a scan: exit 130 and no report folder, whole or partial, at any moment.

Ten interruption points are reached deterministically by making one function raise
``KeyboardInterrupt`` (what Python's SIGINT handler does); one more test sends a real SIGINT to an
``envaudit scan`` process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import envaudit.atomic as atomic
import envaudit.conclusion as conclusion
import envaudit.recording as recording
import envaudit.report as report_module
import envaudit.reporting.folder as folder_module
import envaudit.scan as scan_module
from envaudit.cli import main

ROOT = Path(__file__).parents[1]
ENV = "tests.fixtures.user_envs:CoinEnv"


def _interrupt_on_call(monkeypatch, owner, name, nth=1):
    original = getattr(owner, name)
    calls = {"n": 0}

    def wrapped(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == nth:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapped)


POINTS = {
    "resolving the env": (scan_module, "resolve_env", 1),
    "exploring": (scan_module, "_explore", 1),
    "the first probe": (scan_module, "_run_probe", 1),
    "a later probe": (scan_module, "_run_probe", 3),
    "Holm correction": (conclusion, "holm_correct", 1),
    "saving the step tables": (recording.Records, "save", 1),
    "writing report.md": (folder_module, "render_markdown", 1),
    "writing the plots": (folder_module, "render_plots", 1),
    "writing report.json": (report_module, "atomic_write", 1),
    "renaming the folder": (atomic, "_rename_folder", 1),
}


@pytest.mark.parametrize("point", sorted(POINTS))
def test_sigint_at_any_point_leaves_no_folder(point, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    _interrupt_on_call(monkeypatch, *POINTS[point])
    rc = main(["scan", ENV, "--episodes", "16", "--quick", "--probes", "api,length,timeouts",
               "--out", "out", "--no-progress"])
    assert rc == 130
    assert "interrupted" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [], f"left behind at {point}: {list(tmp_path.iterdir())}"


def test_a_swallowed_interrupt_still_ends_with_130(tmp_path, monkeypatch, capsys):
    """An interrupt raised inside a finalizer is swallowed by Python; the flag set by the handler
    still stops the run before a report folder appears."""
    import envaudit.cli as cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    original = scan_module.run_scan

    def run_scan_then_swallowed_sigint(*args, **kwargs):
        report = original(*args, **kwargs)
        try:
            cli._on_sigint(signal.SIGINT, None)
        except KeyboardInterrupt:
            pass  # what "Exception ignored in: <function WeakSet...>" amounts to
        return report

    monkeypatch.setattr(scan_module, "run_scan", run_scan_then_swallowed_sigint)
    rc = main(["scan", ENV, "--episodes", "16", "--quick", "--probes", "api", "--out", "out", "--no-progress"])
    assert rc == 130 and list(tmp_path.iterdir()) == []


def test_a_real_sigint_to_the_command(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "envaudit.cli", "scan", ENV, "--quick", "--out", "out",
                             "--no-progress"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)  # mid-scan on any machine: a quick scan does seconds of work after imports
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    if proc.returncode in (130, -signal.SIGINT):
        # -SIGINT: the signal landed during interpreter start-up, before envaudit's handler was
        # installed (imports take seconds on a loaded machine); Python then ends by the signal itself.
        assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == [], err
    else:  # the scan finished before the signal: then the folder is whole
        assert proc.returncode in (0, 1) and (tmp_path / "out" / "report.json").exists(), (proc.returncode, err)


# Runs ``envaudit`` with GRPO's training thread made to raise SIGINT and then keep doing torch work:
# the interrupted process must still leave by exit code 130, not abort while finalizing under a
# daemon thread inside native code ("terminate called without an active exception", rc -6).
# Inline: under the process executor the GRPO probe trains in a worker process of its own, which
# ignores SIGINT and is ended by the scanning process (test_a_real_sigint_to_the_command).
BUSY_IN_TORCH = """
import os, signal, sys
import torch
import envaudit.grpo.trainer as trainer
from envaudit.cli import run

def interrupt_then_keep_training(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    x = torch.randn(256, 256)
    while True:
        x = torch.tanh(x @ x)

trainer.with_advantages = interrupt_then_keep_training
sys.argv = ["envaudit", "scan", sys.argv[1], "--quick", "--probes", "grpo", "--out", "out", "--no-progress",
            "--executor", "inline"]
run()
"""


def test_sigint_while_a_probe_thread_is_inside_torch(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", BUSY_IN_TORCH, ENV], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-2000:])
    assert "interrupted" in proc.stderr and "terminate called" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_out_reuse_needs_force_and_replaces_whole(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    argv = ["scan", ENV, "--episodes", "16", "--quick", "--probes", "api", "--out", "out", "--no-progress"]
    assert main(argv) == 0
    (tmp_path / "out" / "stale.parquet").write_text("from another env")
    assert main(argv) == 2
    assert "already holds a report; pass --force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    assert not (tmp_path / "out" / "stale.parquet").exists() and (tmp_path / "out" / "report.json").exists()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    assert main([*argv[:-3], "--out", "notes", "--force", "--no-progress"]) == 2
    assert "not a report folder" in capsys.readouterr().err and (tmp_path / "notes" / "todo.txt").exists()


def _fork_server_of(pid: int) -> bool:
    """Whether process ``pid`` has started multiprocessing's fork server (Linux /proc)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid and b"forkserver" in command:
            return True
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the fork server through Linux /proc")
def test_ctrl_c_to_the_process_group_in_the_first_seconds_prints_no_worker_traceback(tmp_path):
    """A terminal's Ctrl-C goes to the whole process group: the fork server importing its preload
    (seconds) and the workers must not print a KeyboardInterrupt traceback; the scan exits 130.
    The signal goes a second after the fork server started: inside its imports."""
    after_s = 1.0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "envaudit.cli", "scan", ENV, "--quick", "--out", "out",
                             "--no-progress"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not _fork_server_of(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(after_s)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    if proc.returncode in (0, 1):  # the scan finished first: then its folder is whole
        assert (tmp_path / "out" / "report.json").exists(), err
        return
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    assert err.strip() == "envaudit: interrupted; no report folder was written"
    assert list(tmp_path.iterdir()) == []
