"""Atomic files and folders: a reader sees the old folder, the new one, or none — never a mix."""

from __future__ import annotations

import pytest

from envaudit.atomic import atomic_folder


def _fill(files: dict[str, str]):
    def fill(folder):
        for name, text in files.items():
            (folder / name).write_text(text)
    return fill


def _siblings(path):
    return sorted(p.name for p in path.parent.iterdir())


def test_a_new_folder_appears_whole(tmp_path):
    target = atomic_folder(tmp_path / "r", _fill({"report.json": "{}", "a.txt": "a"}))
    assert sorted(p.name for p in target.iterdir()) == ["a.txt", "report.json"]
    assert _siblings(target) == ["r"]  # no temporary folder left beside it


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_an_interrupted_write_leaves_nothing(tmp_path, error):
    def fill(folder):
        (folder / "steps.parquet").write_text("half")
        raise error

    with pytest.raises(type(error)):
        atomic_folder(tmp_path / "r", fill)
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_replacement_keeps_the_old_report(tmp_path):
    atomic_folder(tmp_path / "r", _fill({"report.json": "old"}))

    def fill(folder):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_folder(tmp_path / "r", fill, replace=True)
    assert (tmp_path / "r" / "report.json").read_text() == "old" and _siblings(tmp_path / "r") == ["r"]


def test_a_report_folder_is_replaced_only_when_asked_and_never_mixed(tmp_path):
    atomic_folder(tmp_path / "r", _fill({"report.json": "old", "stale.parquet": "x"}))
    with pytest.raises(FileExistsError, match="pass --force"):
        atomic_folder(tmp_path / "r", _fill({"report.json": "new"}))
    atomic_folder(tmp_path / "r", _fill({"report.json": "new"}), replace=True)
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["report.json"]  # stale file gone
    assert (tmp_path / "r" / "report.json").read_text() == "new"


def test_a_folder_that_is_not_a_report_is_never_replaced(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("precious")
    with pytest.raises(FileExistsError, match="not a report folder"):
        atomic_folder(tmp_path / "home", _fill({"report.json": "{}"}), replace=True)
    assert (tmp_path / "home" / "thesis.tex").read_text() == "precious"


def test_an_empty_folder_is_filled(tmp_path):
    (tmp_path / "r").mkdir()
    atomic_folder(tmp_path / "r", _fill({"report.json": "{}"}))
    assert (tmp_path / "r" / "report.json").exists()
