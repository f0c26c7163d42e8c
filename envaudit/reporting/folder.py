"""Writing the visual parts of a report folder: ``<plot>.png`` for every plot and ``report.html``.

``Report.write`` calls ``write_visuals`` (so every scan's folder has them); ``envaudit report DIR``
calls ``rerender`` to rebuild ``report.md``, the plots and ``report.html`` from ``report.json`` and
the tables. Every file goes through ``atomic_write``: no half-written PNG or page.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envaudit.atomic import atomic_write
from envaudit.reporting.html import render_html
from envaudit.reporting.load import load_report
from envaudit.reporting.plots import render_plots

HTML_NAME = "report.html"


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
    atomic_write(folder / "report.md", view.report.to_markdown())
    return [folder / "report.md", *write_visuals(view, folder)]


__all__ = ["HTML_NAME", "rerender", "write_visuals"]
