import base64
import re

import pytest

from envaudit.findings import Severity
from envaudit.grouping import make_group
from envaudit.reporting.html import MAX_STEPS, assign_plots, render_html
from envaudit.reporting.load import load_report
from envaudit.reporting.plots import PLOTS, RenderedPlot
from tests.reporting import synthetic
from tests.reporting.conftest import PLANTED
from tests.reporting.dom import parse

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def flawed_page(flawed_folder):
    text = (flawed_folder / "report.html").read_text()
    root, problems = parse(text)
    return text, root, problems


def _findings(root):
    return root.find_all("section", class_="finding")


def test_flawed_env_page_shows_the_planted_finding_first_with_its_plot(flawed_page):
    _, root, problems = flawed_page
    assert problems == []
    findings = _findings(root)
    assert findings and findings[0].attrs["data-code"] == PLANTED
    assert findings[0].attrs["data-severity"] in ("warn", "fail")
    images = findings[0].find_all("img")
    assert len(images) == 1 and images[0].attrs["data-plot"] == "return_vs_length"
    src = images[0].attrs["src"]
    assert src.startswith("data:image/png;base64,")
    assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)


def test_page_is_self_contained(flawed_page):
    text, root, _ = flawed_page
    assert all(img.attrs["src"].startswith("data:image/png;base64,") for img in root.find_all("img"))
    assert not root.find_all("link") and all("src" not in s.attrs for s in root.find_all("script"))
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text)
    csp = [m for m in root.find_all("meta") if m.attrs.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0].attrs["content"]


def test_every_plot_is_on_the_page_once_drawn_or_named_as_missing(flawed_page, flawed_folder):
    _, root, _ = flawed_page
    drawn = [img.attrs["data-plot"] for img in root.find_all("img")]
    appendix = root.find_all("section", id="plots")[0]
    named = [li.attrs["data-plot"] for li in appendix.find_all("li")]
    assert len(drawn) == len(set(drawn)) and not set(drawn) & set(named)
    assert sorted(drawn + named) == sorted(PLOTS)
    # The length probe ran alone: the other probes' plots have no data and are named, not drawn.
    assert {"failure_sweep", "pipeline_advantages", "grpo_curves", "exploit_policies"} <= set(named)
    assert "did not run" in appendix.text()


def test_example_episodes_read_as_trajectories(flawed_page, flawed_folder):
    _, root, _ = flawed_page
    view = load_report(flawed_folder)
    finding = view.findings[0]
    episodes = _findings(root)[0].find_all("div", class_="episode")
    assert [int(d.attrs["data-episode"]) for d in episodes] == list(finding.examples[:len(episodes)])
    first = episodes[0]
    steps = view.episode(int(first.attrs["data-episode"]))
    rows = first.find_all("tr")[1:]
    assert len(rows) == min(len(steps), MAX_STEPS)
    for row, (_, step) in zip(rows, steps.iterrows(), strict=False):
        cells = [td.text() for td in row.find_all("td")]
        assert cells[0] == str(step["step"]) and cells[1] == step["action_label"]
        assert float(cells[4]) == pytest.approx(step["reward"], abs=1e-3)
    # The return so far on the last row is the episode's return.
    episode = view.episodes.set_index("episode_id").loc[int(first.attrs["data-episode"])]
    if len(steps) <= MAX_STEPS:
        assert float(rows[-1].find_all("td")[5].text()) == pytest.approx(episode["return"], rel=1e-3)


def test_every_string_from_the_env_is_escaped():
    evil = "<script>alert('x')</script>"
    finding = synthetic._finding("failure-rewarded", title=evil, summary=f"pays {evil}", fix=f"<img src=x onerror=1>{evil}",
                                 evidence={"p_value": 0.01, "policy": evil, evil: 1.0}, examples=[1])
    report = synthetic.full_report([finding])
    report.records.steps["action_label"] = "<b>reply</b>"
    text = render_html(report, plots={})
    root, problems = parse(text)
    assert problems == []
    assert "<script>alert" not in text and "<b>reply</b>" not in text and "<img src=x" not in text
    assert len(root.find_all("script")) == 1  # only the page's own image-load check
    section = _findings(root)[0]
    assert evil in section.find_all("h3")[0].text()
    assert "<b>reply</b>" in section.find_all("div", class_="episode")[0].text()
    assert "tool broke <badly>" in section.text()  # a tool's error message, escaped, in the note column


def test_a_report_with_no_findings_and_no_data_still_renders():
    root, problems = parse(render_html(synthetic.empty_report()))
    assert problems == []
    assert "No findings." in root.find_all("section", id="findings")[0].text()
    assert "NO WARN OR FAIL" in root.find_all("section", id="summary")[0].text()
    # No data for any plot: six lines that say why, no six placeholder images.
    assert root.find_all("img") == []
    assert len(root.find_all("ul", class_="missing-plots")[0].find_all("li")) == len(PLOTS)


F = synthetic._finding
DRAWN = {name: RenderedPlot(plot, PNG, missing=False) for name, plot in PLOTS.items()}


def _group(code, behaviour, *members, **evidence):
    head = F(code, evidence={"p_value": 0.01, "behaviour": behaviour, **evidence})
    return make_group(head, (head, *members), behaviour, "pipeline" if code == "timeout-drop-incentive" else "env")


@pytest.mark.parametrize(("group", "plot"), [
    (_group("reward-without-success", "stall", source="grpo", run="target-stall"), "grpo_curves"),
    (_group("learned-exploit", "timeout"), "grpo_curves"),
    (_group("failure-shortcut", "quit"), "failure_sweep"),
    (_group("timeout-drop-incentive", "timeout"), "pipeline_advantages"),
    (_group("length-bias", "stall"), "return_vs_length"),
    (_group("length-bias", "delay-success"), "return_vs_length"),
    (_group("reward-without-success", "degenerate-answer"), "return_sources"),
    (_group("failure-rewarded", "tool-failure"), "return_sources"),
    (_group("timeout-rewarded", "timeout"), "return_sources"),
    (_group("exploit-policy", "quit"), "exploit_policies"),
])
def test_each_group_shows_the_plot_of_its_evidence(group, plot):
    assert assign_plots([group], DRAWN) == [(plot, None)]


def test_a_plot_is_shown_once_a_later_group_takes_its_next_one_or_links_back():
    timeout = _group("timeout-rewarded", "timeout")
    failure = _group("failure-rewarded", "tool-failure")  # wants return_sources too
    drop = _group("timeout-drop-incentive", "timeout")
    again = _group("timeout-drop-incentive", "quit")  # only pipeline_advantages shows it
    assert assign_plots([timeout, failure, drop, again], DRAWN) == [
        ("return_sources", None), ("failure_sweep", None), ("pipeline_advantages", None), (None, 3)]
    # A plot without data is never chosen: the group falls back to one that has data.
    sparse = {**DRAWN, "return_sources": RenderedPlot(PLOTS["return_sources"], PNG, missing=True)}
    assert assign_plots([timeout], sparse) == [("return_vs_length", None)]
    assert assign_plots([timeout], {}) == [(None, None)]


def test_page_of_several_groups_draws_each_plot_once_with_links():
    findings = [F("timeout-rewarded", "fail", evidence={"p_value": 0.001, "behaviour": "timeout"}),
                F("timeout-drop-incentive", "warn", evidence={"p_value": 0.001}),
                F("failure-shortcut", "warn", evidence={"p_value": 0.001, "behaviour": "quit"}),
                F("timeout-drop-incentive", "warn", evidence={"p_value": 0.01, "behaviour": "quit"})]
    report = synthetic.full_report(findings)
    root, problems = parse(render_html(report))
    assert problems == []
    sections = _findings(root)
    shown = {(s.attrs["data-code"], s.attrs["data-behaviour"]): [i.attrs["data-plot"] for i in s.find_all("img")]
             for s in sections}
    assert shown == {("timeout-rewarded", "timeout"): ["return_sources"],
                     ("timeout-drop-incentive", "timeout"): ["pipeline_advantages"],
                     ("failure-shortcut", "quit"): ["failure_sweep"], ("timeout-drop-incentive", "quit"): []}
    # The second pipeline group's plot is the first one's: a link to it, not a second copy.
    first, second = [s for s in sections if s.attrs["data-code"] == "timeout-drop-incentive"]
    assert second.find_all("a")[0].attrs["href"] == f"#{first.attrs['id']}"
    assert "Its plot is shown with" in second.text()
    drawn = [img.attrs["data-plot"] for img in root.find_all("img")]
    # The synthetic report has data for every plot but the failure-conditioned one (no such finding
    # here); each is drawn once.
    assert sorted(drawn) == sorted(set(PLOTS) - {"failure_condition"})
    overview = root.find_all("section", id="summary")[0]
    assert len(overview.find_all("li")) == 4 and report.worst() == Severity.FAIL

