"""The exploration notebook honours its parameters: executed (nbclient + ipykernel) with an env
that is not its default, it scans that env into its cache and shows that env, nothing else."""

from pathlib import Path

import pytest

from envaudit.envs import VARIANTS
from envaudit.reporting import explore

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "explore_incentives.ipynb"
ENV = "envaudit/Helpdesk-AttemptCredit-v0"
"""Not the notebook's default env: a failed ticket action still pays the attempt credit."""
PLANTED = VARIANTS[ENV].planted[0]
PROBES = ["failures", "pipeline"]  # the probe that owns the planted flaw, and the advantages table


def _run(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = next(i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    assert 'ENV_ID = "envaudit/CodeFix-TimeoutPasses-v0"' in nb.cells[params].source  # the default we override
    nb.cells.insert(params + 1, nbformat.v4.new_code_cell(
        f'ENV_ID = "{ENV}"\nPROBES = {PROBES!r}\nCACHE = Path({str(tmp_path / "cache")!r})'))
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError on the first cell that errors
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
    return text, html, outputs


def test_notebook_scans_the_env_it_is_given_and_shows_only_that_env(tmp_path):
    text, html, outputs = _run(tmp_path)
    folder = explore.cache_folder(tmp_path / "cache", ENV, 0, "keep")
    assert f"{ENV}: scanned now and saved to {folder}" in text
    assert "CodeFix" not in text and "CodeFix" not in html  # the default env is nowhere
    view = explore.load_report(folder)
    assert view.env_id == ENV and view.config["probes"] == PROBES
    # The planted incentive heads the groups, and the played-back episode is one of its examples
    # that shows its behaviour (failed tool calls that pay).
    head = view.groups[0]
    assert head.code == PLANTED and f"{PLANTED} (tool-failure" in text
    episode = explore.exploit_episode(view, head)
    assert episode in {int(e) for f in head.members for e in f.examples}
    assert f"{ENV}, episode {episode}:" in text and "  step 0: " in text and "(tool-failure)" in text
    # The second pipeline was scanned into its own cache folder and compared, the setting named.
    assert (explore.cache_folder(tmp_path / "cache", ENV, 0, "drop") / "report.json").exists()
    assert "Settings differ: timeout_handling keep → drop." in text
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 4  # the headline's plot, the two pipelines' advantages, the GRPO curves


def test_cached_scan_loads_exactly_its_parameters_and_rescans_otherwise(tmp_path):
    first = explore.cached_scan(ENV, 0, "keep", cache=tmp_path, probes=["api"])
    again = explore.cached_scan(ENV, 0, "keep", cache=tmp_path, probes=["api"])
    assert first.scanned and not again.scanned and again.folder == first.folder
    assert again.report.report.to_dict()["findings"] == first.report.report.to_dict()["findings"]
    other_seed = explore.cached_scan(ENV, 1, "keep", cache=tmp_path, probes=["api"])
    assert other_seed.scanned and other_seed.folder != first.folder
    assert other_seed.report.config["seed"] == 1
    # Same folder, other probes: a report of other parameters is replaced, never shown.
    more = explore.cached_scan(ENV, 0, "keep", cache=tmp_path, probes=["api", "replay"])
    assert more.scanned and more.folder == first.folder and more.report.config["probes"] == ["api", "replay"]
    preset = explore.cached_scan(ENV, 0, "rllm", cache=tmp_path, probes=["api"])
    assert preset.folder.name.endswith("-seed0-rllm") and preset.report.config["pipeline"] == "rllm"
