import base64
import re

import pytest

from envaudit.reporting.html import MAX_STEPS, render_html
from envaudit.reporting.load import load_report
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
    # Every plot is in the gallery, each once.
    gallery = [img.attrs["data-plot"] for img in root.find_all("section", id="plots")[0].find_all("img")]
    assert gallery == ["return_vs_length", "return_sources", "failure_sweep", "pipeline_advantages",
                       "grpo_curves", "exploit_policies"]


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
    assert len(root.find_all("img")) == 6

