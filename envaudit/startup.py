"""The ``envaudit`` command's first moments: a Ctrl-C while the package is still importing.

Importing envaudit (Gymnasium, pandas, torch for some probes) takes a second or more, and the
CLI's own SIGINT handler (``envaudit.cli.main``) exists only afterwards. A Ctrl-C in that window
used to end the command with a ``KeyboardInterrupt`` traceback through some library's import.
Nothing has been written then, so when this process is the command (the ``envaudit`` console
script or ``python -m envaudit.cli``) the package's first import installs
a handler that says so in one line and exits 130, the status of a command ended by Ctrl-C. A
program that merely imports envaudit keeps Python's own handling.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

EXIT_INTERRUPTED = 130
COMMAND_MODULES = ("envaudit.cli",)


def is_command(argv: list[str], orig_argv: list[str]) -> bool:
    """Whether these arguments start the envaudit command (``sys.argv`` and ``sys.orig_argv``)."""
    if argv and os.path.basename(argv[0]) == "envaudit":
        return True
    args = iter(orig_argv[1:])
    for arg in args:  # the interpreter's own options, up to what it runs
        if arg == "-m":
            return next(args, None) in COMMAND_MODULES
        if arg in ("-X", "-W"):
            next(args, None)  # their value
        elif arg == "-c" or not arg.startswith("-"):
            return False
    return False


def _leave(signum: int, frame: object) -> None:
    os.write(2, b"envaudit: interrupted while starting; nothing was written\n")
    os._exit(EXIT_INTERRUPTED)


def quiet_start() -> bool:
    """Install the start-up handler when this process is the command and SIGINT still has
    Python's default handler (an ignored SIGINT, as in a background job, stays ignored). The CLI
    replaces it with its own once it runs. Returns whether it was installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if not is_command(sys.argv, list(getattr(sys, "orig_argv", []))):
        return False
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False
    signal.signal(signal.SIGINT, _leave)
    return True


__all__ = ["EXIT_INTERRUPTED", "is_command", "quiet_start"]
