"""Reports people would rather look at: ``load_report``, plots, ``report.md``, ``report.html``, the
report folder and ``envaudit diff``.

- ``envaudit.reporting.load``: ``load_report`` / ``AuditReport``, the one way to read a report folder;
- ``envaudit.reporting.plots``: one function per plot (report in, ``Figure`` out) and the ``PLOTS`` registry;
- ``envaudit.reporting.markdown``: ``render_markdown``, ``report.md``;
- ``envaudit.reporting.html``: ``render_html``, the self-contained page;
- ``envaudit.reporting.folder``: ``write_folder`` (a report's whole folder, atomically), ``write_visuals``
  (PNGs + HTML into a folder) and ``rerender``;
- ``envaudit.reporting.diff``: ``diff_reports``, what changed between two reports of one env;
- ``envaudit.reporting.examples``: regenerates the example folders in ``reports/``.

Importing this package loads no matplotlib; the plotting modules load it when first used.
"""

from __future__ import annotations

import importlib
from typing import Any

from envaudit.reporting.load import AuditReport, load_report

_LAZY = {
    "PLOTS": "plots", "render_plots": "plots", "figure_png": "plots",
    "render_html": "html", "render_markdown": "markdown",
    "write_folder": "folder", "write_visuals": "folder", "rerender": "folder",
    "diff_reports": "diff", "ReportDiff": "diff",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"envaudit.reporting.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'envaudit.reporting' has no attribute {name!r}")


__all__ = ["AuditReport", "load_report", *sorted(_LAZY)]
