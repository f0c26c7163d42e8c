"""``summary.html``: a suite's ranked table on one self-contained page, each row linking to its env's
``report.html``. Every string that can come from an env or a user's file goes through ``html.escape``;
the page fetches nothing (the same Content-Security-Policy as ``report.html``, without scripts)."""

from __future__ import annotations

from typing import Any

from envaudit.reporting.html import CSS, esc

CSP = "default-src 'none'; style-src 'unsafe-inline'"
EXTRA_CSS = "tr.pending td{color:#90a4ae}tr.error td{background:#fdecea}.banner{background:#fff3e0;padding:8px 12px;border-radius:4px}"


def _row(i: int, row: dict[str, Any]) -> str:
    status, worst = row["status"], row["worst"] or "clean"
    if status == "pending":
        cells = [esc(i), esc(row["name"]), '<span class="muted">pending</span>', "", "", ""]
    elif status == "error":
        cells = [esc(i), esc(row["name"]), '<span class="badge fail">error</span>', esc(row.get("error", "")), "", esc(row["exit_code"])]
    else:
        h = row["headline"]
        about = "" if not h or h["behaviour"] == h["code"] else f" ({esc(h['behaviour'])})"
        headline = (f"<code>{esc(h['code'])}</code>{about}: {esc(h['title'])}"
                    if h else '<span class="muted">no findings</span>')
        if row.get("broken"):
            headline = f"<strong>env broken</strong>: {headline}"
        if row.get("incomplete"):
            headline += f' <span class="muted">(incomplete: {esc(row["incomplete"])} skipped)</span>'
        c = row.get("counts") or {}
        link = f'<a href="{esc(row["folder"])}/report.html">{esc(row["name"])}</a>'
        cells = [esc(i), link, f'<span class="badge {esc(worst)}">{esc(worst)}</span>', headline,
                 f"{esc(c.get('fail', 0))}/{esc(c.get('warn', 0))}/{esc(c.get('info', 0))}", esc(row["exit_code"])]
    return f'<tr class="{esc(status)}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def render_suite_html(summary: Any) -> str:
    rows = "\n".join(_row(i, r) for i, r in enumerate(summary.ranked(), 1))
    banner = ("" if summary.complete else '<p class="banner"><strong>Incomplete</strong>: the suite was '
              "interrupted or is still running; rerun the same command to scan the pending envs.</p>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<title>envaudit suite</title><style>{CSS}{EXTRA_CSS}</style></head>
<body><main>
<h1>envaudit suite</h1>
{banner}
<p class="summary-line">{esc(summary.headline_counts())}; suite exit code {esc(summary.exit_code)}.</p>
<table>
<tr><th>#</th><th>env</th><th>worst</th><th>headline finding group</th><th>groups fail/warn/info</th><th>exit</th></tr>
{rows}
</table>
<p class="muted">Exit codes per env are <code>envaudit scan</code>'s: 3 broken, 1 a group reached --fail-on,
4 incomplete, 0 clean; 2: the env's target or options were rejected; 3 also when the process scanning
an env died (--resume retries it). envaudit {esc(summary.envaudit_version)},
written {esc(summary.created)}, executor {esc(summary.executor)}.</p>
</main></body></html>
"""


__all__ = ["render_suite_html"]
