import matplotlib.text
import numpy as np
import pytest

from envaudit.config import ScanConfig
from envaudit.envs import VARIANTS
from envaudit.report import ProbeStatus
from envaudit.reporting import plots
from envaudit.reporting.load import load_report
from envaudit.reporting.plots import PLOTS, figure_png, is_missing, render_plots, reward_sources
from envaudit.scan import run_scan
from tests.reporting import synthetic

PNG = b"\x89PNG\r\n\x1a\n"


def _texts(fig) -> str:
    return " ".join(" ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text)).split())


@pytest.fixture(scope="module")
def full():
    return load_report(synthetic.full_report())


@pytest.mark.parametrize("name", list(PLOTS))
def test_every_plot_draws_its_data_for_a_full_report(full, name):
    fig = PLOTS[name].draw(full)
    assert not is_missing(fig), _texts(fig)
    assert "Not available" not in _texts(fig)
    assert figure_png(fig).startswith(PNG)


@pytest.mark.parametrize("name", list(PLOTS))
def test_every_plot_says_what_is_missing_for_an_empty_report(name):
    fig = PLOTS[name].draw(synthetic.empty_report())
    assert is_missing(fig)
    assert "Not available:" in _texts(fig)


def test_missing_probe_tables_name_the_probe_and_why(full):
    empty = load_report(synthetic.empty_report())
    assert "the failures probe did not run" in _texts(plots.failure_sweep(empty))
    assert "the grpo probe did not run" in _texts(plots.grpo_curves(empty))
    crashed = synthetic.full_report()
    crashed.tables.pop("pipeline_advantages")
    crashed.probes = [ProbeStatus("pipeline", "crashed", 0.1, error="ValueError: boom")]
    assert "the pipeline probe crashed: ValueError: boom" in _texts(plots.pipeline_advantages(crashed))
    quiet = synthetic.full_report()
    quiet.tables.pop("exploits_policies")
    quiet.probes = [ProbeStatus("exploits", "ok", 0.1, notes={"no_baseline": "the random baseline produced no episodes"})]
    assert "ran but kept no policies table (the random baseline produced no episodes)" in _texts(plots.exploit_policies(quiet))


def test_reward_sources_book_every_reward_to_its_designed_source(full):
    rows = reward_sources(full)
    totals = rows.groupby("source")["reward"].sum().to_dict()
    assert totals == pytest.approx(synthetic.SOURCE_TOTALS)
    # The figure's left panel shows each source's reward per episode (4 episodes).
    fig = plots.return_sources(full)
    left = fig.axes[0]
    widths = sorted(round(p.get_width(), 6) for p in left.patches)
    assert widths == sorted(round(v / 4, 6) for v in synthetic.SOURCE_TOTALS.values())


def test_sweep_and_advantage_plots_draw_the_table_numbers(full):
    sweep = plots.failure_sweep(full)
    lines = {line.get_label(): line.get_ydata() for line in sweep.axes[0].get_lines()}
    for policy, part in synthetic.SWEEP.groupby("policy"):
        assert np.allclose(lines[policy], part.sort_values("rate")["mean_return"])
    adv = plots.pipeline_advantages(full)
    heights = sorted(round(p.get_height(), 6) for p in adv.axes[0].patches if p.get_height() != 0)
    expected = sorted(round(v, 6) for v in synthetic.ADVANTAGES["mean_advantage"] if v != 0)
    assert heights == expected


def test_grpo_curves_draw_one_line_per_mode_and_metric(full):
    fig = plots.grpo_curves(full)
    timeout_ax = next(ax for ax in fig.axes if ax.get_title(loc="left") == "timeout rate")
    natural = next(line for line in timeout_ax.get_lines() if line.get_label() == "natural")
    assert np.allclose(natural.get_ydata(), [0.1 + 0.15 * i for i in range(5)])
    assert all(len(ax.get_lines()) == 2 for ax in fig.axes)


def test_plain_gymnasium_env_plots_what_it_has_and_says_what_it_lacks(plain_folder):
    view = load_report(plain_folder)
    assert set(view.episodes["outcome"]) <= {"unknown", "timeout"}
    rvl = plots.return_vs_length(view)
    assert not is_missing(rvl) and "no success/failure split" in _texts(rvl)
    sources = plots.return_sources(view)
    assert not is_missing(sources) and "no info['tool']" in _texts(sources)
    for name in ("failure_sweep", "grpo_curves", "exploit_policies"):
        assert is_missing(PLOTS[name].draw(view))


def test_render_plots_turns_a_crashing_plot_into_a_figure_that_says_so(monkeypatch, full):
    def broken(report):
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(plots, "PLOTS", {"return_vs_length": plots.Plot("return_vs_length", broken, "t", "l"),
                                         "return_sources": PLOTS["return_sources"]})
    rendered = render_plots(full)
    assert rendered["return_vs_length"].missing and rendered["return_vs_length"].error == "ZeroDivisionError: oops"
    assert rendered["return_sources"].png.startswith(PNG) and not rendered["return_sources"].missing


def test_every_finding_code_with_a_plot_names_registered_plots():
    assert all(name in PLOTS for names in plots.FINDING_PLOTS.values() for name in names)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", sorted(VARIANTS))
def test_every_plot_renders_for_every_bundled_env(env_id):
    report = run_scan(env_id, ScanConfig(seed=0, quick=True))
    for plot in PLOTS.values():
        fig = plot.draw(report)
        assert figure_png(fig).startswith(PNG)
    # Bundled envs report tool calls and success: the exploration plots always have their data.
    assert not is_missing(plots.return_vs_length(report)) and not is_missing(plots.return_sources(report))
    assert "no info['tool']" not in _texts(plots.return_sources(report))


def test_a_placeholder_is_rendered_once_and_is_the_picture_drawn_afresh():
    # A placeholder depends only on its title and reason: the cached PNG is byte for byte the one a
    # fresh drawing gives, and a second report with the same missing data does not draw it again.
    plots._missing_png.cache_clear()
    empty = load_report(synthetic.empty_report())
    first = render_plots(empty)
    drawn = plots._missing_png.cache_info()
    again = render_plots(empty)
    assert plots._missing_png.cache_info().misses == drawn.misses >= 1
    assert plots._missing_png.cache_info().hits >= drawn.misses
    for name, plot in PLOTS.items():
        fig = plot.draw(empty)
        assert is_missing(fig) and first[name].missing
        assert again[name].png == first[name].png == figure_png(fig)


def test_a_failure_conditioned_finding_is_shown_by_its_condition(full):
    """Handing off right after a failed search pays 1, after a working one 0 (``synthetic.CONDITIONED``):
    its group shows that pair first, not where the return comes from on average."""
    [group] = [g for g in full.groups if g.code == "failure-shortcut"]
    assert plots.group_plots(group)[0] == "failure_condition"
    text = _texts(plots.failure_condition(full))
    assert "`handoff` right after a failed `search` call (n=16); its episode earns 0.95, honest success 0.9" in text
    assert "+1" in text and "+0" in text and "right after the call failed" in text
    plain = synthetic.full_report([synthetic._finding("failure-shortcut")])  # a sweep's, no condition
    assert "failure_condition" not in plots.group_plots(plain.finding_groups()[0])
    assert "no failure-conditioned finding in this report" in _texts(plots.failure_condition(plain))
