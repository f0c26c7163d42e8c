"""report.html in a real browser: headless Chromium opens it, every image decodes, and the first
screen shows the headline finding before any other.

Skipped where no Chromium is installed, except in CI (``CI=true``) or when asked
(``ENVAUDIT_BROWSER=1``): there a missing browser fails, so the test cannot silently not run.
``.ci/run`` installs Debian's chromium in those cases.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from matplotlib import image as mpimg

from tests.reporting.browser import Page, chromium
from tests.reporting.conftest import PLANTED
from tests.reporting.dom import parse

REQUIRED = os.environ.get("CI") == "true" or os.environ.get("ENVAUDIT_BROWSER") == "1"
WIDTH, HEIGHT = 1280, 900  # a laptop screen

pytestmark = pytest.mark.skipif(chromium() is None and not REQUIRED,
                                reason="no chromium on PATH (Debian: apt-get install chromium)")

DECODE_EVERY_IMAGE = """
Promise.all(Array.from(document.images).map(img => img.decode().then(
    () => [img.naturalWidth, img.naturalHeight], () => [0, 0])))
"""

# Where each finding title is first drawn, and whether a user sees it there: inside the first
# screen, with size, not hidden, not covered by another element.
FIRST_SIGHT = """
(titles => {
  const found = {};
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const title of titles) {
      const at = node.data.indexOf(title);
      if (title in found || at < 0) continue;
      const range = document.createRange();
      range.setStart(node, at);
      range.setEnd(node, at + title.length);
      const r = range.getBoundingClientRect();
      const parent = node.parentElement;
      const top = document.elementFromPoint(r.left + Math.min(r.width / 2, 20), r.top + r.height / 2);
      found[title] = {
        top: r.top, bottom: r.bottom, width: r.width,
        visible: r.width > 0 && r.height > 0 && r.top >= 0 && r.bottom <= innerHeight
          && getComputedStyle(parent).visibility === "visible"
          && top !== null && (parent.contains(top) || top.contains(parent)),
      };
    }
  }
  const first = document.querySelector("[data-code]");
  return {found, firstCode: first && first.getAttribute("data-code"), innerHeight, scrollY};
})(%s)
"""


def _headlines(report: dict) -> list[dict]:
    """The findings a reader is shown first, most important first: each group's headline where
    the report groups findings, else the ranked findings themselves."""
    if report.get("groups"):
        return [report["findings"][g["headline"]] for g in report["groups"]]
    return report["findings"]


def test_report_opens_in_headless_chromium_headline_first_every_image_decoded(flawed_folder, tmp_path):
    report = json.loads((flawed_folder / "report.json").read_text())
    headlines = _headlines(report)
    titles = [f["title"] for f in headlines]
    headline = headlines[0]
    assert headline["code"] == PLANTED  # the env's planted flaw heads the report
    html = flawed_folder / "report.html"
    n_images = len(parse(html.read_text())[0].find_all("img"))

    with Page(tmp_path / "profile", width=WIDTH, height=HEIGHT) as page:
        page.open(html.as_uri())
        sizes = page.evaluate(DECODE_EVERY_IMAGE)
        sight = page.evaluate(FIRST_SIGHT % json.dumps(titles))
        shot = page.screenshot(tmp_path / "first-screen.png")

    assert n_images > 0 and len(sizes) == n_images
    assert all(w > 0 and h > 0 for w, h in sizes), f"images that did not decode: {sizes}"

    assert sight["scrollY"] == 0 and sight["innerHeight"] == HEIGHT
    assert sight["firstCode"] == headline["code"]
    seen = sight["found"].get(headline["title"])
    assert seen is not None, f"headline {headline['title']!r} is not on the page"
    assert seen["visible"], f"headline not visible on the first screen: {seen}"
    assert all(seen["top"] <= other["top"] for other in sight["found"].values()), sight["found"]

    # The screenshot is the first screen, and the headline's line is painted on it.
    pixels = mpimg.imread(shot)
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    line = pixels[int(seen["top"]):int(np.ceil(seen["bottom"])), :, :3]
    assert line.size and line.std() > 0.05, "the headline's line is blank in the screenshot"


def test_the_checks_see_a_hidden_headline_and_a_broken_image(tmp_path):
    """The same probes on a page built to fail them: the headline pushed below the first screen,
    a second title covered by another element, an image whose data is not a PNG."""
    page_html = tmp_path / "bad.html"
    page_html.write_text(
        '<!DOCTYPE html><html><body style="margin:0">'
        '<p style="margin:0">Covered title</p>'
        '<div style="position:absolute;left:0;top:0;width:400px;height:40px;background:#000"></div>'
        f'<div style="height:{2 * HEIGHT}px"></div><h3 data-code="x">Headline title</h3>'
        '<img src="data:image/png;base64,bm90IGEgcG5n"></body></html>')
    with Page(tmp_path / "profile", width=WIDTH, height=HEIGHT) as page:
        page.open(page_html.as_uri())
        sizes = page.evaluate(DECODE_EVERY_IMAGE)
        sight = page.evaluate(FIRST_SIGHT % json.dumps(["Headline title", "Covered title", "Absent"]))
    assert sizes == [[0, 0]]
    assert sight["found"]["Headline title"]["visible"] is False
    assert sight["found"]["Headline title"]["top"] > HEIGHT
    assert sight["found"]["Covered title"]["visible"] is False
    assert "Absent" not in sight["found"] and sight["firstCode"] == "x"
