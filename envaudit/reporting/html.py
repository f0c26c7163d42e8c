"""``report.html``: one self-contained page per report.

A compact overview first (the verdict, one line per incentive), then one section per finding
group: the headline finding's evidence, its fix, the ONE plot that shows that evidence (each plot
appears once on the page: a group whose plot another group already shows links to it), a
drill-down into its example episodes as readable trajectories, and the corroborating findings of
the other probes. Plots no group uses go in one appendix, once; plots whose data is missing are
named there in a line each, not drawn. Then the probes and the config. Images are inlined as
``data:`` URIs and the CSS is inline; a Content-Security-Policy forbids any network fetch. Every string that can come from the env (finding text, action labels, tool errors,
tags) goes through ``html.escape``. The one inline script only records how many images decoded
(``data-images-loaded`` on ``<body>``), which the browser test reads.
"""

from __future__ import annotations

import base64
import html
import json
import math
from typing import Any

import pandas as pd

from envaudit.findings import Finding
from envaudit.grouping import FindingGroup
from envaudit.reporting.load import AuditReport, load_report
from envaudit.reporting.markdown import is_long, summary_of
from envaudit.reporting.plots import RenderedPlot, group_plots, render_plots

MAX_EXAMPLES = 3
"""Example episodes shown per finding."""
MAX_STEPS = 60
"""Steps shown per example episode (the rest are counted)."""
MAX_ROWS = 12
"""Rows shown of a list of records inside the evidence."""
EVIDENCE_PAIRS = 2
"""Scalar evidence items per table row (key, value, key, value): half the height of one per row."""

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2327;background:#f6f7f8}
main{max-width:1100px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d5da;padding-bottom:4px}
h3{font-size:16px;margin:0 0 6px}code{background:#eef0f2;padding:0 3px;border-radius:3px}
.badge{display:inline-block;padding:1px 7px;border-radius:10px;font-size:12px;font-weight:600;color:#fff}
.sev-fail .badge,.badge.fail{background:#c62828}.sev-warn .badge,.badge.warn{background:#e09500}
.sev-info .badge,.badge.info{background:#1e88a8}.badge.clean{background:#2e7d32}
.finding{background:#fff;border:1px solid #d0d5da;border-left:6px solid #1e88a8;border-radius:4px;padding:12px 16px;margin:12px 0}
.finding.sev-fail{border-left-color:#c62828}.finding.sev-warn{border-left-color:#e09500}
.fix{background:#eef7ee;border-radius:4px;padding:6px 10px;margin:8px 0}
table{border-collapse:collapse;margin:6px 0;font-size:13px}td,th{border:1px solid #d8dde2;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#eef0f2}table.kv td:first-child{color:#455a64;white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums}
img.plot{max-width:100%;height:auto;border:1px solid #e0e4e8;background:#fff;margin:6px 0}
.gallery{display:grid;grid-template-columns:1fr 1fr;gap:12px}.gallery figure{margin:0}
figure{margin:12px 0}figcaption{font-size:13px;color:#455a64}
details{margin:6px 0}summary{cursor:pointer;color:#0d47a1}
tr.failed td{background:#fdecea}tr.last td{font-weight:600}
.muted{color:#607d8b}.summary-line{font-size:15px}
.corroboration{border-top:1px dashed #d0d5da;margin-top:10px;padding-top:6px}
.corroboration ul{margin:4px 0;padding-left:20px}
"""

SCRIPT = """
window.addEventListener("load", function () {
  var ok = 0, imgs = document.images;
  for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) { ok++; } }
  document.body.setAttribute("data-images-loaded", ok + "/" + imgs.length);
});
"""
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return esc(value)
    if isinstance(value, float):
        return esc(value) if not math.isfinite(value) else f"{value:.4g}"
    return esc(value)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def value_html(value: Any) -> str:
    """Evidence values: numbers to 4 significant digits, mappings and record lists as small tables."""
    if _is_scalar(value):
        return _number(value)
    if isinstance(value, dict):
        rows = "".join(f"<tr><td>{esc(k)}</td><td>{value_html(v)}</td></tr>" for k, v in value.items())
        inner = f'<table class="kv">{rows}</table>'
        return inner if len(value) <= 4 else f"<details><summary>{esc(summary_of(value))}</summary>{inner}</details>"
    if isinstance(value, (list, tuple)):
        items = list(value)
        if all(_is_scalar(v) for v in items):
            shown = ", ".join(_number(v) for v in items[:20])
            return "[" + shown + (f", … ({len(items) - 20} more)" if len(items) > 20 else "") + "]"
        if all(isinstance(v, dict) for v in items):
            columns = list(dict.fromkeys(k for v in items for k in v))
            head = "".join(f"<th>{esc(c)}</th>" for c in columns)
            body = "".join("<tr>" + "".join(f"<td>{value_html(v.get(c, ''))}</td>" for c in columns) + "</tr>"
                           for v in items[:MAX_ROWS])
            more = f'<p class="muted">… {len(items) - MAX_ROWS} more</p>' if len(items) > MAX_ROWS else ""
            return (f"<details><summary>{esc(summary_of(items))}</summary><table><tr>{head}</tr>{body}</table>"
                    f"{more}</details>")
        return ", ".join(value_html(v) for v in items)
    return esc(value)


def _img(rendered: RenderedPlot, alt: str) -> str:
    data = base64.b64encode(rendered.png).decode("ascii")
    return (f'<img class="plot" data-plot="{esc(rendered.plot.name)}" alt="{esc(alt)}" '
            f'src="data:image/png;base64,{data}">')


def assign_plots(groups: list[FindingGroup], plots: dict[str, RenderedPlot]) -> list[tuple[str | None, int | None]]:
    """For each group (in rank order): the plot it shows, or the 1-based rank of the group that
    already shows the plot it would have shown. A plot with data goes to the first group it
    shows; a later group takes its next plot with data, else points at the earlier one."""
    owner: dict[str, int] = {}
    chosen: list[tuple[str | None, int | None]] = []
    for i, g in enumerate(groups, 1):
        drawn = [n for n in group_plots(g) if n in plots and not plots[n].missing]
        free = next((n for n in drawn if n not in owner), None)
        if free is not None:
            owner[free] = i
            chosen.append((free, None))
        else:
            chosen.append((None, owner[drawn[0]]) if drawn else (None, None))
    return chosen


# -- trajectories ------------------------------------------------------------------------------
def _episode_row(view: AuditReport, episode_id: int) -> dict[str, Any] | None:
    eps = view.episodes
    rows = eps[eps["episode_id"] == episode_id]
    return None if rows.empty else rows.iloc[0].to_dict()


def trajectory_html(view: AuditReport, episode_id: int) -> str:
    """One episode as a readable table: step, action, tool call and status, reward, return so far."""
    steps = view.episode(episode_id)
    meta = _episode_row(view, episode_id)
    if steps.empty and meta is None:
        return f'<p class="muted">Episode {esc(episode_id)} is not in this report\'s tables.</p>'
    facts = []
    if meta is not None:
        for key in ("probe", "policy", "arm", "mode", "group", "seed"):
            if key in meta and _present(meta[key]):
                facts.append(f"{key} <code>{esc(_plain(meta[key]))}</code>")
        facts += [f"outcome <b>{esc(meta.get('outcome'))}</b>", f"ended: {esc(meta.get('end_reason'))}",
                  f"return {_number(float(meta.get('return', float('nan'))))}", f"{esc(meta.get('length'))} steps"]
        if _present(meta.get("success")):
            facts.append(f"success flag {esc(bool(meta['success']))}")
    head = f"<p><b>Episode {esc(episode_id)}</b> — " + ", ".join(facts) + "</p>"
    rows, total = [], 0.0
    for _, s in steps.head(MAX_STEPS).iterrows():
        reward = float(s["reward"]) if _present(s["reward"]) else float("nan")
        total += reward if math.isfinite(reward) else 0.0
        label = s["action_label"] if _present(s.get("action_label")) else s["action"]
        status = s.get("tool_status")
        klass = ' class="failed"' if status in ("error", "timeout") else ""
        if meta is not None and int(s["step"]) == int(meta.get("length", -1)) - 1:
            klass = ' class="last failed"' if klass else ' class="last"'
        note = s.get("error") if _present(s.get("error")) else ("injected fault" if s.get("injected") else "")
        rows.append(
            f"<tr{klass}><td class=num>{esc(int(s['step']))}</td><td><code>{esc(_plain(label))}</code></td>"
            f"<td>{esc(_plain(s.get('tool_name')) if _present(s.get('tool_name')) else '—')}</td>"
            f"<td>{esc(status) if _present(status) else '—'}</td><td class=num>{_number(reward)}</td>"
            f"<td class=num>{_number(total)}</td><td>{esc(_clip(note))}</td></tr>")
    more = len(steps) - MAX_STEPS
    tail = f'<p class="muted">… {more} more steps</p>' if more > 0 else ""
    table = ("<table class=trajectory><tr><th>step</th><th>action</th><th>tool</th><th>status</th>"
             "<th>reward</th><th>return so far</th><th>note</th></tr>" + "".join(rows) + "</table>")
    return f'<div class="episode" data-episode="{esc(episode_id)}">{head}{table}{tail}</div>'


def _present(value: Any) -> bool:
    if value is None:
        return False
    try:
        return not bool(pd.isna(value))
    except (TypeError, ValueError):
        return True


def _plain(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _clip(text: Any, width: int = 120) -> str:
    text = str(text)
    return text if len(text) <= width else text[: width - 1] + "…"


# -- the page ----------------------------------------------------------------------------------
def _evidence_html(f: Finding) -> str:
    """The scalars two to a row (they are short), then one row per nested structure: its one-line
    summary, unfolding into the whole of it."""
    flat = [(k, v) for k, v in f.evidence.items() if not is_long(v)]
    nested = [(k, v) for k, v in f.evidence.items() if is_long(v)]
    pairs = [flat[i:i + EVIDENCE_PAIRS] for i in range(0, len(flat), EVIDENCE_PAIRS)]
    rows = ["<tr>" + "".join(f"<td>{esc(k)}</td><td>{value_html(v)}</td>" for k, v in row)
            + "<td></td><td></td>" * (EVIDENCE_PAIRS - len(row)) + "</tr>" for row in pairs]
    rows += [f'<tr><td>{esc(k)}</td><td colspan="{2 * EVIDENCE_PAIRS - 1}">{_folded(v)}</td></tr>' for k, v in nested]
    return f'<table class="kv evidence">{"".join(rows)}</table>'


def _folded(value: Any) -> str:
    """A nested structure as its one-line summary that unfolds into the whole of it."""
    inner = value_html(value)
    return inner if inner.startswith("<details>") else f"<details><summary>{esc(summary_of(value))}</summary>{inner}</details>"


def _corroboration_html(g: FindingGroup) -> str:
    """The other probes' findings of the same incentive: one line each, their evidence folded."""
    items = []
    for m in g.corroborating:
        sev = str(m.severity)
        detail = (f"<details><summary>evidence</summary><p>{esc(m.summary)}</p>{_evidence_html(m)}"
                  + (f'<p class="muted">Example episodes: {esc(", ".join(map(str, list(m.examples)[:10])))}</p>'
                     if m.examples else "") + "</details>")
        items.append(f'<li class="member" data-code="{esc(m.code)}" data-severity="{sev}" data-probe="{esc(m.probe)}">'
                     f'<code>{esc(m.probe or "?")}</code> (<code>{esc(m.code)}</code>, '
                     f'<span class="badge {sev}">{sev.upper()}</span>): {esc(m.title)}{detail}</li>')
    return (f'<div class="corroboration"><b>Corroborated by</b> {len(items)} other finding'
            f'{"s" if len(items) != 1 else ""}:<ul>{"".join(items)}</ul></div>')


def _group_html(i: int, g: FindingGroup, view: AuditReport, plots: dict[str, RenderedPlot],
                choice: tuple[str | None, int | None] = (None, None)) -> str:
    """One incentive: the headline finding in full, at the group's severity, then its corroboration."""
    f = g.headline
    sev = str(g.severity)
    paid = "the training pipeline" if g.reward_path == "pipeline" else "the env's reward"
    parts = [f'<section class="finding sev-{sev}" id="finding-{i}" data-code="{esc(f.code)}" data-severity="{sev}" '
             f'data-behaviour="{esc(g.behaviour)}" data-reward-path="{esc(g.reward_path)}" '
             f'data-members="{len(g.members)}">',
             f'<h3>{i}. <span class="badge">{sev.upper()}</span> <code>{esc(f.code)}</code> — {esc(f.title)}</h3>',
             f"<p>{esc(f.summary)}</p>",
             f'<p class="muted">probe <code>{esc(f.probe or "?")}</code>; incentive: <code>{esc(g.behaviour)}</code>, '
             f"paid by {paid}</p>"]
    if f.evidence:
        parts.append(_evidence_html(f))
    if f.fix:
        parts.append(f'<div class="fix"><b>Fix:</b> {esc(f.fix)}</div>')
    name, shown_in = choice
    if name is not None:
        plot = plots[name]
        parts.append(f'<figure id="plot-{esc(name)}">{_img(plot, plot.plot.title)}<figcaption><b>{esc(plot.plot.title)}.'
                     f"</b> {esc(plot.plot.look_for)}</figcaption></figure>")
    elif shown_in is not None:
        parts.append(f'<p class="muted">Its plot is shown with <a href="#finding-{shown_in}">incentive {shown_in}</a>.</p>')
    if f.examples:
        shown = list(f.examples)[:MAX_EXAMPLES]
        episodes = "".join(trajectory_html(view, int(e)) for e in shown)
        rest = len(f.examples) - len(shown)
        extra = f'<p class="muted">More example episodes: {esc(", ".join(map(str, list(f.examples)[MAX_EXAMPLES:MAX_EXAMPLES + 20])))}{" …" if rest > 20 else ""}</p>' if rest > 0 else ""
        parts.append(f'<details class="examples"><summary>Example episodes ({len(f.examples)}): '
                     f"step-by-step trajectories</summary>{episodes}{extra}</details>")
    if g.corroborating:
        parts.append(_corroboration_html(g))
    parts.append("</section>")
    return "\n".join(parts)


def _summary_html(view: AuditReport) -> str:
    c = view.counts()
    worst = view.worst()
    verdict = (f'<span class="badge {worst}">{str(worst).upper()}</span>' if worst is not None and str(worst) != "info"
               else '<span class="badge clean">NO WARN OR FAIL</span>')
    ex = view.exploration
    n = len(view.findings)
    parts = [f'<p class="summary-line">{verdict} {c["fail"]} fail, {c["warn"]} warn, {c["info"]} info '
             f"(incentives; {n} finding{'s' if n != 1 else ''}) — "
             f"seed {esc(view.config.get('seed'))}, {esc(ex.get('episodes', 0))} exploration episodes, "
             f"{view.report.seconds:.1f} s, envaudit {esc(view.report.envaudit_version)}, {esc(view.report.created)}</p>"]
    if ex.get("episodes"):
        outcomes = ", ".join(f"{esc(k)} {esc(v)}" for k, v in ex.get("outcomes", {}).items())
        parts.append(f"<p>Random exploration: mean return {_number(ex.get('mean_return'))}, mean length "
                     f"{_number(ex.get('mean_length'))}; outcomes: {outcomes}"
                     + ("" if ex.get("success_flag") else " (the env reports no <code>info['success']</code>)") + "</p>")
    if view.groups:
        items = "".join(f'<li><a href="#finding-{i}"><span class="badge {g.severity}">{str(g.severity).upper()}</span> '
                        f"<code>{esc(g.code)}</code> {esc(g.headline.title)}</a>"
                        + (f' <span class="muted">(+{len(g.corroborating)} corroborating)</span>' if g.corroborating else "")
                        + "</li>" for i, g in enumerate(view.groups, 1))
        parts.append(f"<ol>{items}</ol>")
    return "\n".join(parts)


def _probes_html(view: AuditReport) -> str:
    rows = "".join(f"<tr><td>{esc(p.name)}</td><td>{esc(p.status)}</td><td class=num>{p.seconds:.2f}</td>"
                   f"<td class=num>{esc(p.findings)}</td><td>{esc(p.error or '')}</td></tr>" for p in view.probes)
    return ("<table><tr><th>probe</th><th>status</th><th>seconds</th><th>findings</th><th>note</th></tr>"
            f"{rows}</table>")


def _appendix_html(plots: dict[str, RenderedPlot], shown: set[str]) -> str:
    """The plots no group shows, each once; the ones whose data is missing named in a line each."""
    drawn = [f'<figure id="plot-{esc(name)}">{_img(p, p.plot.title)}<figcaption><b>{esc(p.plot.title)}.</b> '
             f"{esc(p.plot.look_for)}</figcaption></figure>"
             for name, p in plots.items() if name not in shown and not p.missing]
    absent = [f'<li data-plot="{esc(name)}"><b>{esc(p.plot.title)}</b>: {esc(p.reason or "its data is missing")}</li>'
              for name, p in plots.items() if p.missing]
    text = (f'<div class="gallery">{"".join(drawn)}</div>' if drawn
            else '<p class="muted">Every plot with data is shown with the incentive it belongs to.</p>')
    if absent:
        text += f'\n<p class="muted">Not drawn (no data):</p><ul class="missing-plots muted">{"".join(absent)}</ul>'
    return text


def render_html(report: Any, plots: dict[str, RenderedPlot] | None = None) -> str:
    """The report as one self-contained HTML page. ``plots`` (from ``render_plots``) are drawn when not given."""
    view = load_report(report)
    plots = plots if plots is not None else render_plots(view)
    title = f"envaudit report: {view.env_id}"
    groups = view.groups
    choices = assign_plots(groups, plots)
    findings = ("\n".join(_group_html(i, g, view, plots, c) for i, (g, c) in enumerate(zip(groups, choices, strict=True), 1))
                or "<p>No findings.</p>")
    gallery = _appendix_html(plots, {name for name, _ in choices if name is not None})
    config = esc(json.dumps(view.config, indent=2, default=str))
    fingerprint = esc(json.dumps(view.fingerprint, indent=2, default=str))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<style>{CSS}</style>
</head>
<body>
<main>
<h1>envaudit report: <code>{esc(view.env_id)}</code></h1>
<section id="summary">
{_summary_html(view)}
</section>
<h2>Findings</h2>
<section id="findings">
{findings}
</section>
<h2>More plots</h2>
<section id="plots">
{gallery}
</section>
<h2>Probes</h2>
<section id="probes">
{_probes_html(view)}
</section>
<h2>Config</h2>
<details><summary>scan config and env fingerprint</summary><pre>{config}</pre><pre>{fingerprint}</pre></details>
</main>
<script>{SCRIPT}</script>
</body>
</html>
"""


__all__ = ["assign_plots", "render_html", "trajectory_html", "value_html"]
