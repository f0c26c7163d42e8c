"""Writing report folders: ``write_folder`` (the whole folder), ``write_visuals`` and ``rerender``.

``write_folder`` writes a scan's folder whole or not at all: the report's tables, ``report.md``,
``<plot>.png`` for every plot and ``report.html`` (``write_visuals``), then ``report.json``, all in
a staging folder renamed into place (``atomic.atomic_folder``). ``envaudit report DIR`` calls
``rerender`` to rebuild ``report.md``, the plots and ``report.html`` from ``report.json`` and the
tables. Every file goes through ``atomic_write``: no half-written PNG or page.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envaudit.atomic import atomic_folder, atomic_write
from envaudit.report import Report
from envaudit.reporting.html import render_html
from envaudit.reporting.load import load_report
from envaudit.reporting.markdown import render_markdown
from envaudit.reporting.plots import render_plots

HTML_NAME = "report.html"


def write_folder(report: Report, folder: str | os.PathLike, *, replace: bool = False) -> Path:
    """Write the report folder whole or not at all (``atomic.atomic_folder``): the tables,
    ``report.md``, the plots and ``report.html``, then ``report.json``. An existing report folder
    is replaced only with ``replace=True``; anything else there is never touched."""

    def fill(staging: Path) -> None:
        report.write_tables(staging)
        atomic_write(staging / "report.md", render_markdown(report))
        write_visuals(report, staging)
        report.write_json(staging)  # last: its presence means the folder is complete

    return atomic_folder(folder, fill, replace=replace)


def write_visuals(report: Any, folder: str | os.PathLike) -> list[Path]:
    """Write every plot as ``<name>.png`` and ``report.html`` into ``folder``; return the paths."""
    folder = Path(folder)
    view = load_report(report)
    plots = render_plots(view)
    written = []
    for name, rendered in plots.items():
        atomic_write(folder / f"{name}.png", rendered.png)
        written.append(folder / f"{name}.png")
    atomic_write(folder / HTML_NAME, render_html(view, plots))
    written.append(folder / HTML_NAME)
    return written


def rerender(folder: str | os.PathLike) -> list[Path]:
    """Rebuild ``report.md``, the plots and ``report.html`` of a report folder from its ``report.json``."""
    view = load_report(folder)
    folder = Path(view.folder or folder)
    atomic_write(folder / "report.md", render_markdown(view.report))
    return [folder / "report.md", *write_visuals(view, folder)]


__all__ = ["HTML_NAME", "rerender", "write_folder", "write_visuals"]
