"""Plots of a report: each a function that takes a report and returns a matplotlib ``Figure``.

Every function accepts a report folder, a ``Report`` or an ``AuditReport``. When the data a plot
needs is missing (a plain Gymnasium env with no tool info and no success flag, or a probe that
did not run) the figure says so in its body, and why, instead of failing. Figures are built on
``matplotlib.figure.Figure`` directly, never through ``pyplot``: no display, no global figure
registry to leak into, nothing to close; ``figure_png`` renders one with the Agg canvas.
"""

from __future__ import annotations

import functools
import io
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from envaudit.protocol import ERROR, FAILURE, SUCCESS, TIMEOUT, TOOL_ERROR, TOOL_TIMEOUT, UNKNOWN
from envaudit.reporting.load import AuditReport, load_report

MISSING = "envaudit-missing-data"
"""The ``gid`` of a figure that says its data is missing instead of plotting it."""
DPI = 100
OUTCOME_COLORS = {SUCCESS: "#2e7d32", FAILURE: "#c62828", TIMEOUT: "#ef6c00", ERROR: "#6a1b9a", UNKNOWN: "#757575"}
OUTCOME_ORDER = (SUCCESS, FAILURE, TIMEOUT, ERROR, UNKNOWN)


# -- helpers -----------------------------------------------------------------------------------
def _figure(width: float = 7.5, height: float = 4.2) -> Figure:
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def missing(title: str, reason: str) -> Figure:
    """A figure whose body says which data is missing and why."""
    fig = _figure(7.5, 2.6)
    fig.set_gid(MISSING)
    fig.set_label(reason)  # so a page can say why in words instead of showing the placeholder
    fig.envaudit_missing = (title, reason)  # what the picture depends on: see rendered_png
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title, loc="left", fontsize=11)
    ax.text(0.5, 0.5, textwrap.fill(f"Not available: {reason}", 80), ha="center", va="center",
            fontsize=10, color="0.3", transform=ax.transAxes, wrap=True)
    return fig


def is_missing(fig: Figure) -> bool:
    """True for a figure that reports missing data rather than plotting it."""
    return fig.get_gid() == MISSING


def figure_png(fig: Figure) -> bytes:
    """The figure as PNG bytes (Agg canvas; no display needed)."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


@functools.lru_cache(maxsize=64)
def _missing_png(title: str, reason: str) -> bytes:
    return figure_png(missing(title, reason))


def rendered_png(fig: Figure) -> bytes:
    """``figure_png(fig)``; a placeholder (``missing``) is rendered once per title and reason. A
    suite of reports (or a test run) draws the same few placeholders again and again, and
    rendering one costs as much as a small plot; the picture depends on nothing else."""
    key = getattr(fig, "envaudit_missing", None)
    return _missing_png(*key) if key is not None else figure_png(fig)


def why_missing(view: AuditReport, probe: str, table: str) -> str:
    """Why the ``<probe>_<table>`` table is absent, in the user's words."""
    status = view.probe_status(probe)
    if status is None:
        return (f"the {probe} probe did not run in this scan (not selected with --probes, or not "
                f"installed), so there is no {table.replace('_', ' ')} table")
    if status.status != "ok":
        return f"the {probe} probe {status.status}: {status.error or 'no details'}"
    notes = [f"{v}" for v in status.notes.values() if isinstance(v, str)]
    reason = f"the {probe} probe ran but kept no {table.replace('_', ' ')} table"
    return reason + (f" ({'; '.join(notes)})" if notes else "")


def _short(text: Any, width: int = 38) -> str:
    text = str(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _outcomes(values: pd.Series) -> list[str]:
    present = [str(v) for v in pd.unique(values)]
    return [o for o in OUTCOME_ORDER if o in present] + sorted(o for o in present if o not in OUTCOME_ORDER)


def _note(fig: Figure, text: str) -> None:
    """A footnote under the plot (laid out by the constrained layout, so it never overlaps)."""
    fig.supxlabel(text, x=0.01, ha="left", fontsize=8, color="0.35")


def _color(outcome: str) -> str:
    return OUTCOME_COLORS.get(outcome, "#455a64")


# -- return vs length ---------------------------------------------------------------------------
def return_vs_length(report: Any) -> Figure:
    """Return against episode length, one colour per outcome class (exploration episodes)."""
    view = load_report(report)
    title = "Return vs length by outcome class"
    eps = view.exploration_episodes
    eps = eps[np.isfinite(eps["return"].astype(float))] if len(eps) else eps
    if eps.empty:
        return missing(title, "no exploration episodes were recorded (the env could not be made, "
                              "or exploration stopped at once)")
    fig = _figure()
    ax = fig.add_subplot()
    outcomes = _outcomes(eps["outcome"])
    # Few distinct lengths: shift each class a little sideways so classes at one point stay visible.
    dodge = 0.5 / len(outcomes) if eps["length"].nunique() <= 60 else 0.0
    for i, outcome in enumerate(outcomes):
        part = eps[eps["outcome"] == outcome]
        # Identical (length, return) points are drawn once, sized by how many episodes share them.
        dots = part.groupby(["length", "return"]).size().reset_index(name="n")
        sizes = 18 + 80 * np.sqrt(dots["n"] / dots["n"].max())
        ax.scatter(dots["length"] + (i - (len(outcomes) - 1) / 2) * dodge, dots["return"], s=sizes,
                   color=_color(outcome), alpha=0.7, edgecolors="none", label=f"{outcome} ({len(part)})")
    means = eps.groupby("length")["return"].mean()
    if len(means) > 1:
        ax.plot(means.index, means.to_numpy(), color="0.25", lw=1, label="mean return at that length")
    ax.set_xlabel("episode length (steps)")
    ax.set_ylabel("return")
    ax.set_title(f"{title} ({len(eps)} exploration episodes)", loc="left", fontsize=11)
    ax.legend(fontsize=8, loc="best", title="outcome (episodes)", title_fontsize=8)
    ax.grid(alpha=0.3)
    if set(eps["outcome"]) <= {UNKNOWN, TIMEOUT, ERROR}:
        _note(fig, "no success/failure split: the env reports no info['success'] and no "
                   "--success-threshold was set")
    return fig


# -- where the return comes from ----------------------------------------------------------------
SOURCE_LABELS = {
    f"end:{SUCCESS}": "last step of successful episodes",
    f"end:{FAILURE}": "last step of failed episodes",
    f"end:{TIMEOUT}": "last step of timed-out episodes",
    f"end:{ERROR}": "last step of errored episodes",
    f"end:{UNKNOWN}": "last step (outcome unknown)",
    "failed_calls": "failed tool calls (before the end)",
    "per_step": "other steps (per-step rewards)",
}
SOURCE_COLORS = {f"end:{o}": c for o, c in OUTCOME_COLORS.items()} | {"failed_calls": "#ad1457", "per_step": "#1565c0"}


def reward_sources(view: AuditReport) -> pd.DataFrame:
    """Every exploration step with its ``source`` (where its reward is booked) and its episode's outcome."""
    eps = view.exploration_episodes
    steps = view.steps
    if eps.empty or steps.empty:
        return pd.DataFrame(columns=["episode_id", "reward", "source", "outcome"])
    merged = steps.merge(eps[["episode_id", "outcome", "length"]], on="episode_id", how="inner")
    final = merged["step"].to_numpy() == merged["length"].to_numpy() - 1
    failed = merged["tool_status"].isin([TOOL_ERROR, TOOL_TIMEOUT]).to_numpy()
    source = np.where(final, "end:" + merged["outcome"].astype(str), np.where(failed, "failed_calls", "per_step"))
    return merged.assign(reward=merged["reward"].astype(float).fillna(0.0), source=source)


def return_sources(report: Any) -> Figure:
    """Where the return comes from: per-episode reward by source, overall and per outcome class."""
    view = load_report(report)
    title = "Where the return comes from"
    rows = reward_sources(view)
    if rows.empty:
        return missing(title, "no exploration steps were recorded")
    n_eps = rows["episode_id"].nunique()
    sources = [s for s in SOURCE_LABELS if s in set(rows["source"])]
    fig = _figure(10, 4.4)
    left, right = fig.subplots(1, 2, width_ratios=[1, 1.2])
    per_episode = rows.groupby("source")["reward"].sum() / n_eps
    y = np.arange(len(sources))
    values = [float(per_episode.get(s, 0.0)) for s in sources]
    left.barh(y, values, color=[SOURCE_COLORS[s] for s in sources])
    left.set_yticks(y, [SOURCE_LABELS[s] for s in sources], fontsize=8)
    left.invert_yaxis()
    left.axvline(0, color="0.3", lw=0.8)
    for yi, v in zip(y, values, strict=True):
        left.annotate(f"{v:+.3g}", (v, yi), xytext=(3 if v >= 0 else -3, 0), textcoords="offset points",
                      ha="left" if v >= 0 else "right", va="center", fontsize=8)
    left.set_xlabel("mean reward per episode from this source")
    left.margins(x=0.2)
    left.set_title("all exploration episodes", loc="left", fontsize=10)
    fig.suptitle(f"{title} ({n_eps} exploration episodes)", x=0.01, ha="left", fontsize=11)

    outcomes = _outcomes(rows["outcome"])
    per_outcome = rows.groupby(["outcome", "source"])["reward"].sum().unstack(fill_value=0.0)
    counts = rows.groupby("outcome")["episode_id"].nunique()
    x = np.arange(len(outcomes))
    up, down = np.zeros(len(outcomes)), np.zeros(len(outcomes))
    for s in sources:
        vals = np.array([per_outcome.loc[o, s] / counts[o] if s in per_outcome.columns else 0.0 for o in outcomes])
        base = np.where(vals >= 0, up, down)
        right.bar(x, vals, bottom=base, color=SOURCE_COLORS[s], label=SOURCE_LABELS[s], width=0.6)
        up, down = up + np.clip(vals, 0, None), down + np.clip(vals, None, 0)
    right.set_xticks(x, [f"{o}\n({counts[o]} eps)" for o in outcomes], fontsize=8)
    right.axhline(0, color="0.3", lw=0.8)
    right.set_ylabel("mean return per episode, by source")
    right.set_title("by outcome class", loc="left", fontsize=10)
    right.legend(fontsize=7, loc="best")
    notes = []
    if not rows["tool_status"].notna().any():
        notes.append("no info['tool'] in this env: failed tool calls cannot be told apart")
    if not np.any(rows["reward"].to_numpy()):
        notes.append("every reward in exploration was 0")
    if notes:
        _note(fig, "; ".join(notes))
    return fig


# -- the failure-rate sweep ---------------------------------------------------------------------
SWEEP_TABLE = "failures_failure_sweep"


def failure_sweep(report: Any) -> Figure:
    """Expected return of persisting vs giving up as injected tool failures rise (failures probe)."""
    view = load_report(report)
    title = "Injected failure rate: persisting vs giving up"
    table = view.table(SWEEP_TABLE)
    if table is None:
        return missing(title, why_missing(view, "failures", "failure_sweep"))
    fig = _figure(7.5, 5.2)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[2, 1])
    for i, (policy, part) in enumerate(table.groupby("policy", sort=False)):
        part = part.sort_values("rate")
        style = {"lw": 2.2, "ls": "-"} if i == 0 else {"lw": 1.2, "ls": "--"}
        line, = top.plot(part["rate"], part["mean_return"], marker="o", ms=4, label=_short(policy), **style)
        if {"ci_low", "ci_high"} <= set(part.columns):
            top.fill_between(part["rate"], part["ci_low"], part["ci_high"], color=line.get_color(), alpha=0.12)
        if "success_rate" in part.columns:
            bottom.plot(part["rate"], part["success_rate"], marker="o", ms=3, color=line.get_color(), **style)
    top.set_ylabel("mean return (95% CI)")
    top.set_title(title, loc="left", fontsize=11)
    top.legend(fontsize=7, loc="best")
    top.grid(alpha=0.3)
    bottom.set_ylabel("success rate")
    bottom.set_xlabel("injected tool failure rate (0 = the env as it is)")
    bottom.set_ylim(-0.05, 1.05)
    bottom.grid(alpha=0.3)
    return fig


# -- a failure-conditioned reward ---------------------------------------------------------------
def conditioned(finding: Any) -> bool:
    """Whether a finding is failure-conditioned: a move that pays more right after a failed call."""
    return {"condition", "mean_reward_after_failed", "mean_reward_after_ok"} <= set(finding.evidence)


def failure_condition(report: Any) -> Figure:
    """The move's reward right after the call failed against right after the same call worked, one
    pair of bars per failure-conditioned finding (failures probe), with the episode that does it
    against an honest success."""
    view = load_report(report)
    title = "Right after a failed call vs after the same call worked"
    found = [f for f in view.findings if conditioned(f)]
    if not found:
        return missing(title, "no failure-conditioned finding in this report: no move paid more right after "
                              "a failed call than after the same call worked")
    fig = _figure(7.5, max(2.8, 1.2 * len(found) + 1.5))
    ax = fig.add_subplot()
    for i, f in enumerate(found):
        e = f.evidence
        pair = [("right after the call failed", e["mean_reward_after_failed"], OUTCOME_COLORS[FAILURE], 0.0),
                ("right after the same call worked", e["mean_reward_after_ok"], "#1565c0", 0.34)]
        for label, value, color, dy in pair:
            value = float(value)
            ax.barh(i + dy, value, height=0.3, color=color, label=label if i == 0 else None)
            ax.annotate(f"{value:+.3g}", (value, i + dy), xytext=(3 if value >= 0 else -3, 0),
                        textcoords="offset points", ha="left" if value >= 0 else "right", va="center", fontsize=8)
        words = f"`{e.get('next_action')}` {e['condition']} (n={e.get('n')})"
        path, honest = e.get("conditioned_path_return"), e.get("honest_success_return")
        if path is not None and honest is not None:
            words += f"; its episode earns {path:.3g}, honest success {honest:.3g}"
        ax.text(0.0, i - 0.22, _short(words, 130), transform=ax.get_yaxis_transform(), fontsize=8, va="bottom")
    ax.set_yticks([])
    ax.set_ylim(len(found) - 0.45, -0.5)
    ax.axvline(0, color="0.3", lw=0.8)
    ax.margins(x=0.2)
    ax.set_xlabel("mean reward of the move (same seed and prefix)")
    ax.set_title(title, loc="left", fontsize=11)
    ax.legend(fontsize=8, loc="lower right")
    return fig


# -- effective advantage under the pipeline -----------------------------------------------------
ADVANTAGE_TABLE = "pipeline_advantages"
_SWITCHED = {"timeout_if_failing": "failing rollout\nswitched to timeout"}


def pipeline_advantages(report: Any) -> Figure:
    """The effective GRPO advantage each outcome class gets under the pipeline (and under keep)."""
    view = load_report(report)
    title = "Effective advantage per outcome class under the pipeline"
    table = view.table(ADVANTAGE_TABLE)
    if table is None:
        return missing(title, why_missing(view, "pipeline", "advantages"))
    if not {"outcome", "mean_advantage"} <= set(table.columns):
        return missing(title, f"the {ADVANTAGE_TABLE} table has no outcome/mean_advantage columns "
                              f"(it has {', '.join(map(str, table.columns))})")
    table = table.assign(series=[_series_name(r) for r in table.to_dict("records")])
    series = list(pd.unique(table["series"]))
    outcomes = _outcomes(table["outcome"])
    fig = _figure()
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    x = np.arange(len(outcomes))
    for i, name in enumerate(series):
        part = table[table["series"] == name].set_index("outcome")
        vals = np.array([part["mean_advantage"].get(o, np.nan) for o in outcomes], dtype=float)
        err = None
        if {"ci_low", "ci_high"} <= set(part.columns):
            lo = np.array([part["ci_low"].get(o, np.nan) for o in outcomes], dtype=float)
            hi = np.array([part["ci_high"].get(o, np.nan) for o in outcomes], dtype=float)
            err = np.nan_to_num(np.vstack([vals - lo, hi - vals]).clip(min=0))
        ax.bar(x + (i - (len(series) - 1) / 2) * width, np.nan_to_num(vals), width=width * 0.95,
               yerr=err, capsize=3, label=name, color=f"C{i}", alpha=0.85 if i == 0 else 0.55)
    ax.set_xticks(x, [_SWITCHED.get(o, o) for o in outcomes], fontsize=8)
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_ylabel("mean group-relative advantage (95% CI)")
    ax.set_title(title, loc="left", fontsize=11)
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3, axis="y")
    return fig


def _series_name(row: dict) -> str:
    name = str(row.get("pipeline") or row.get("role") or "pipeline")
    return f"{name} (configured)" if row.get("role") == "configured" else name


# -- GRPO behaviour curves ----------------------------------------------------------------------
CURVE_METRICS = (("return", "return"), ("success_rate", "success rate"), ("timeout_rate", "timeout rate"),
                 ("failure_rate", "tool failure rate"), ("mean_length", "mean length"),
                 ("training_reward", "training reward (after the pipeline)"))


def grpo_curves(report: Any) -> Figure:
    """What the GRPO-trained policy learned, iteration by iteration: return, success, timeouts, ..."""
    view = load_report(report)
    title = "GRPO probe: behaviour per iteration"
    curves = view.curves
    if curves is None:
        return missing(title, why_missing(view, "grpo", "curves"))
    if "iteration" not in curves.columns:
        return missing(title, "the grpo_curves table has no iteration column")
    if "mode" in curves.columns and (curves["mode"] == "logged run").all():
        title = "Logged training run: behaviour per iteration"  # envaudit logs keeps its curves here
    fig = _figure(10, 5.4)
    axes = fig.subplots(2, 3, sharex=True).ravel()
    groups = list(curves.groupby("mode", sort=False)) if "mode" in curves.columns else [("run", curves)]
    for ax, (column, label) in zip(axes, CURVE_METRICS, strict=True):
        ax.set_title(label, fontsize=9, loc="left")
        ax.grid(alpha=0.3)
        if column not in curves.columns or not curves[column].notna().any():
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", color="0.4", transform=ax.transAxes)
            continue
        for i, (mode, part) in enumerate(groups):
            part = part.sort_values("iteration")
            ax.plot(part["iteration"], part[column], color=f"C{i}", lw=2.0 if i == 0 else 1.1,
                    alpha=1.0 if i == 0 else 0.8, label=_short(mode, 24))
    for ax in axes[3:]:
        ax.set_xlabel("iteration")
    handles, labels = next(((h, lab) for ax in axes for h, lab in [ax.get_legend_handles_labels()] if h), ([], []))
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=8, title="mode", title_fontsize=8)
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    return fig


# -- scripted exploit policies ------------------------------------------------------------------
POLICIES_TABLE = "exploits_policies"


def exploit_policies(report: Any) -> Figure:
    """Mean return of each scripted policy (exploits, the random baseline, the oracle) with its success rate."""
    view = load_report(report)
    title = "Scripted policies: return and success"
    table = view.table(POLICIES_TABLE)
    if table is None:
        return missing(title, why_missing(view, "exploits", "policies"))
    value = "return_mean" if "return_mean" in table.columns else "mean_return"
    if value not in table.columns or "policy" not in table.columns:
        return missing(title, f"the {POLICIES_TABLE} table has no policy/return_mean columns")
    table = table.sort_values(value, ascending=False, kind="stable")
    fig = _figure(7.5, max(2.6, 0.45 * len(table) + 1.4))
    ax = fig.add_subplot()
    y = np.arange(len(table))
    vals = table[value].to_numpy(float)
    err = None
    if {"return_ci_low", "return_ci_high"} <= set(table.columns):
        err = np.nan_to_num(np.vstack([vals - table["return_ci_low"].to_numpy(float),
                                       table["return_ci_high"].to_numpy(float) - vals]).clip(min=0))
    ax.barh(y, np.nan_to_num(vals), xerr=err, capsize=3, color="#1565c0", alpha=0.8)
    ax.set_yticks(y, [_short(p, 32) for p in table["policy"]], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="0.3", lw=0.8)
    if "success_rate" in table.columns:
        ends = np.nan_to_num(vals) + (err[1] if err is not None else 0.0)  # right of the error bar
        for yi, end, s in zip(y, ends, table["success_rate"], strict=True):
            text = "success n/a" if pd.isna(s) else f"success {s:.0%}"
            ax.annotate(text, (end, yi), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=7, color="0.25")
        ax.margins(x=0.15)
    ax.set_xlabel("mean return (95% CI)")
    ax.set_title(title, loc="left", fontsize=11)
    return fig


# -- the registry -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plot:
    """One plot of the report: its file name (``<name>.png``), function and what to look for."""

    name: str
    draw: Callable[[Any], Figure]
    title: str
    look_for: str


PLOTS: dict[str, Plot] = {p.name: p for p in (
    Plot("return_vs_length", return_vs_length, "Return vs length by outcome class",
         "Return rising with length beyond what success explains is step farming; timed-out (orange) "
         "episodes above failed (red) ones mean timing out pays more than failing."),
    Plot("return_sources", return_sources, "Where the return comes from",
         "Honest envs earn most of their return on the last step of successful episodes. Reward booked "
         "on failed tool calls, on timed-out endings, or on non-success outcomes is an incentive."),
    Plot("failure_condition", failure_condition, "Right after a failed call vs after the same call worked",
         "A move (hand off, give up, answer, retry) that pays more right after a failed call than after the "
         "same call worked rewards the failure: an agent learns to wait for failures, or to cause them."),
    Plot("failure_sweep", failure_sweep, "Injected failure rate: persisting vs giving up",
         "Where a giving-up line crosses above the persisting line, an agent under that failure rate "
         "learns to quit instead of retrying."),
    Plot("pipeline_advantages", pipeline_advantages, "Effective advantage per outcome class",
         "A timeout (or a failing rollout switched to one) getting a higher advantage than a failure "
         "means the pipeline teaches the agent to stall when it is losing."),
    Plot("grpo_curves", grpo_curves, "GRPO probe: behaviour per iteration",
         "Return going up while success stays flat, and timeouts, failures or length moving, is what a "
         "real training run would learn to exploit."),
    Plot("exploit_policies", exploit_policies, "Scripted policies",
         "A scripted exploit out-earning the random baseline (or the oracle) while succeeding less."),
)}

FINDING_PLOTS: dict[str, tuple[str, ...]] = {
    "timeout-rewarded": ("return_sources", "return_vs_length"),
    "timeout-drop-incentive": ("pipeline_advantages",),
    "failure-shortcut": ("failure_sweep", "return_sources"),
    "failure-rewarded": ("return_sources",),
    "length-bias": ("return_vs_length",),
    "reward-without-success": ("return_sources", "exploit_policies"),
    "exploit-policy": ("exploit_policies", "return_sources"),
    "learned-exploit": ("grpo_curves",),
}
"""The plots that show each finding code, best first."""
BEHAVIOUR_PLOTS: dict[str, tuple[str, ...]] = {
    "stall": ("return_vs_length",),
    "delay-success": ("return_vs_length",),
    "tool-failure": ("failure_sweep", "return_sources"),
}
"""Plots that show a behaviour whatever code heads its group (a stall is seen in return vs length)."""


def group_plots(group: Any) -> tuple[str, ...]:
    """The plots that show a finding group's evidence, best first: what a GRPO run learned is seen
    in its curves; otherwise the headline code's plots, then the behaviour's, then the members'."""
    f = group.headline
    learned = f.code == "learned-exploit" or f.evidence.get("source") == "grpo"
    # A failure-conditioned finding is seen in its condition, failed against worked, not in where
    # the return comes from on average.
    names = [*(("grpo_curves",) if learned else ()), *(("failure_condition",) if conditioned(f) else ()),
             *FINDING_PLOTS.get(f.code, ()),
             *BEHAVIOUR_PLOTS.get(group.behaviour, ()),
             *(n for m in group.corroborating for n in FINDING_PLOTS.get(m.code, ()))]
    return tuple(dict.fromkeys(names))



# -- rendering every plot, guarded --------------------------------------------------------------
@dataclass(frozen=True)
class RenderedPlot:
    """One plot as PNG bytes; ``missing`` when it says its data is absent (``reason`` says why),
    ``error`` when it raised."""

    plot: Plot
    png: bytes
    missing: bool
    error: str | None = None
    reason: str | None = None


def render_plots(report: Any) -> dict[str, RenderedPlot]:
    """Every plot of ``PLOTS`` as PNG. A plot that raises becomes a figure saying so: writing a
    report folder never fails because of one plot (the plot functions themselves do raise)."""
    view = load_report(report)
    out = {}
    for name, plot in PLOTS.items():
        try:
            fig, error = plot.draw(view), None
        except Exception as exc:  # a bug in one plot must not lose the report
            error = f"{type(exc).__name__}: {exc}"
            fig = missing(plot.title, f"drawing this plot failed ({error}); please report it")
        gone = is_missing(fig)
        out[name] = RenderedPlot(plot, rendered_png(fig), gone, error, fig.get_label() if gone else None)
    return out


__all__ = ["FINDING_PLOTS", "PLOTS", "Plot", "RenderedPlot", "conditioned", "exploit_policies", "failure_condition",
           "failure_sweep", "figure_png", "group_plots", "grpo_curves",
           "is_missing", "missing", "pipeline_advantages", "render_plots", "return_sources", "return_vs_length", "why_missing"]
