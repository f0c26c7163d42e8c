"""The exploration notebook executes top to bottom on a small budget (nbclient + ipykernel)."""

from pathlib import Path

import pytest

from envaudit.envs import VARIANTS

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "explore_incentives.ipynb"


def test_explore_incentives_notebook_runs_without_a_cell_error():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = next(i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    # Scan now (whatever reports/ holds), on a small budget, with the probe that owns the planted flaw.
    nb.cells.insert(params + 1, nbformat.v4.new_code_cell(
        'SCAN = True\nBUDGET_S = 5.0\nPROBES = ["timeouts", "pipeline"]'))
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError on the first cell that errors
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 5  # return vs length, sources, sweep, advantages, GRPO curves
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    planted = VARIANTS["envaudit/CodeFix-TimeoutPasses-v0"].planted[0]
    assert f"{planted}:" in text and " fixed, 0 new" in text  # the planted finding, fixed in the clean twin
