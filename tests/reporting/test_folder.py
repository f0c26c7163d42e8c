from envaudit.cli import main
from envaudit.config import ScanConfig
from envaudit.reporting.examples import EXAMPLES, regenerate
from envaudit.reporting.folder import rerender
from envaudit.reporting.load import load_report
from envaudit.reporting.plots import PLOTS

PNG = b"\x89PNG\r\n\x1a\n"


def test_report_write_adds_every_plot_and_the_html_atomically(full_folder):
    folder = full_folder
    for name in PLOTS:
        assert (folder / f"{name}.png").read_bytes().startswith(PNG)
    assert (folder / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_cli_report_rebuilds_markdown_html_and_plots_from_report_json(flawed_folder, tmp_path, capsys):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(flawed_folder, folder)
    for name in ["report.html", "report.md", *(f"{p}.png" for p in PLOTS)]:
        (folder / name).unlink()
    assert main(["report", str(folder)]) == 0
    assert "re-rendered" in capsys.readouterr().out
    assert (folder / "report.md").read_text() == (flawed_folder / "report.md").read_text()
    assert (folder / "report.html").exists() and all((folder / f"{p}.png").exists() for p in PLOTS)
    assert [p.name for p in rerender(folder)][0] == "report.md"


def test_examples_regenerate_into_a_folder_with_an_index(tmp_path):
    config = ScanConfig(seed=0, quick=True, probes=())
    written = regenerate(tmp_path, config=config, only="cartpole")
    assert written == [tmp_path / "cartpole"]
    view = load_report(tmp_path / "cartpole")
    assert view.env_id == next(e.env_id for e in EXAMPLES if e.folder == "cartpole")
    assert (tmp_path / "cartpole" / "report.html").exists()
    index = (tmp_path / "README.md").read_text()
    assert "[cartpole](cartpole/report.md)" in index
    # Regenerating swaps the folder in: no staging folders are left behind.
    regenerate(tmp_path, config=config, only="cartpole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "cartpole"]
