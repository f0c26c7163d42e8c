"""A Ctrl-C while the envaudit command is still importing: exit 130 with one line, no traceback;
a program that only imports envaudit keeps Python's own KeyboardInterrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from envaudit.startup import EXIT_INTERRUPTED, is_command

ROOT = Path(__file__).parents[1]

# The child sends itself SIGINT from inside the package's import of pandas (after quiet_start ran,
# long before the CLI's handler exists): the moment a user's Ctrl-C lands in the first second.
INTERRUPT_DURING_IMPORT = """
import builtins, os, signal, sys
sys.argv = [sys.argv[1], "scan", "envaudit/FlakySearch-v0"]
real = builtins.__import__
def interrupting(name, *args, **kwargs):
    if name == "pandas" and "pandas" not in sys.modules:
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, *args, **kwargs)
builtins.__import__ = interrupting
import envaudit.cli
print("imported")
"""


def _as_a_fresh_shell_starts_it() -> None:
    """SIGINT at its default and unblocked in the child, as a terminal starts a command: an ignored or
    blocked SIGINT is inherited across fork and exec, and the test process's own may not be the
    default (a test before this one in the same worker may have left it otherwise)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _child(argv0: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", INTERRUPT_DURING_IMPORT, argv0], env=env, capture_output=True,
                          text=True, timeout=120, preexec_fn=_as_a_fresh_shell_starts_it)


def test_the_command_interrupted_while_importing_exits_130_without_a_traceback():
    proc = _child("/opt/venv/bin/envaudit")
    assert proc.returncode == EXIT_INTERRUPTED, proc.stderr[-2000:]
    assert proc.stderr == "envaudit: interrupted while starting; nothing was written\n"
    assert "imported" not in proc.stdout


def test_a_program_importing_envaudit_keeps_pythons_interrupt():
    proc = _child("my_training_script.py")
    assert proc.returncode == -signal.SIGINT and "KeyboardInterrupt" in proc.stderr and "imported" not in proc.stdout


@pytest.mark.parametrize(("argv", "orig", "expected"), [
    (["/venv/bin/envaudit", "scan"], ["/venv/bin/python", "/venv/bin/envaudit", "scan"], True),
    (["envaudit"], ["envaudit"], True),
    (["-m", "scan"], ["python", "-m", "envaudit.cli", "scan"], True),
    (["-m"], ["python", "-m", "envaudit.cli"], True),
    (["-m"], ["python", "-m", "pytest", "tests"], False),
    (["-m"], ["python", "-X", "dev", "-u", "-m", "envaudit.cli"], True),
    (["train.py"], ["python", "train.py", "-m", "envaudit.cli"], False),  # the script's own arguments
    (["-c"], ["python", "-c", "import envaudit", "-m", "envaudit.cli"], False),
    (["train.py"], ["python", "train.py"], False),
    (["/home/u/envaudit_runner.py"], ["python", "/home/u/envaudit_runner.py"], False),
    ([], [], False),
    (["x"], ["python", "-m"], False),
])
def test_what_counts_as_the_command(argv, orig, expected):
    assert is_command(argv, orig) is expected


def test_an_ignored_sigint_stays_ignored(monkeypatch):
    import envaudit.startup as startup

    monkeypatch.setattr(sys, "argv", ["/venv/bin/envaudit"])
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert startup.quiet_start() is False and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
        assert startup.quiet_start() is True and signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        monkeypatch.setattr(sys, "argv", ["train.py"])
        monkeypatch.setattr(sys, "orig_argv", ["python", "train.py"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        assert startup.quiet_start() is False and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
