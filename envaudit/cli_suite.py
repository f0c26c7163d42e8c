"""``envaudit scan`` for suites: the part of the command that drives ``envaudit.suite`` and prints.

One rich progress display for the whole suite: a bar of envs done out of the total, and one line
per env being scanned with its current probe. The display goes to stderr and only when it is a
terminal; the ranked summary table goes to stdout at the end.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from envaudit.suite import check_out, default_suite_out, run_suite, validate
from envaudit.suite_file import build_entries, read_suite_file


class SuiteProgress:
    """Turns ``run_suite`` events into one rich display: the suite's bar and a line per running env."""

    def __init__(self, bar: Progress, total: int) -> None:
        self.bar = bar
        self.total = total
        self.suite = bar.add_task(f"envs 0/{total}", total=total)
        self.running: dict[str, TaskID] = {}

    def __call__(self, event: dict[str, Any]) -> None:
        name = event["name"]
        if event["kind"] == "progress":
            if name not in self.running:
                self.running[name] = self.bar.add_task(name, total=1.0)
            self.bar.update(self.running[name], description=f"  {name}: {event['message']}",
                            completed=event["fraction"])
        else:
            if name in self.running:
                self.bar.remove_task(self.running.pop(name))
        running = f" ({len(self.running)} running)" if self.running else ""
        self.bar.update(self.suite, completed=event["done"], description=f"envs {event['done']}/{self.total}{running}")


def scan_suite(args: argparse.Namespace, console: Console, err: Console, *,
               options: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
               interrupted: Callable[[], None]) -> int:
    base, flags, env_args = options
    suite_file = read_suite_file(args.suite) if args.suite else None
    entries = build_entries(args.env, suite_file, base, flags, env_args)
    validate(entries)
    out = Path(args.out or (suite_file.out if suite_file and suite_file.out else None)
               or default_suite_out(args.env, args.suite))
    check_out(out, force=args.force, resume=args.resume)
    show = not args.no_progress and err.is_terminal
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                      console=err, transient=True, disable=not show) as bar:
            summary = run_suite(entries, out, executor=args.executor, workers=args.workers,
                                ray_address=args.ray_address, force=args.force,
                                on_event=SuiteProgress(bar, len(entries)))
        interrupted()
    except KeyboardInterrupt:
        print(f"envaudit: interrupted; the envs finished so far are in {out}/ (summary marked incomplete); "
              "rerun the same command to scan the rest", file=sys.stderr)
        return 130
    console.print(summary)
    console.print(f"suite written to {out}/ (summary.md, summary.html, suite.json; a report folder per env)")
    return summary.exit_code
