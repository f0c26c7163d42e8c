import pandas as pd
import pytest

import envaudit
from envaudit.report import Report
from envaudit.reporting.load import AuditReport, load_report
from tests.reporting import synthetic


def test_load_report_is_the_public_entry_point():
    assert envaudit.load_report is load_report
    assert "load_report" in envaudit.__all__


def test_round_trip_keeps_findings_tables_and_config(full_folder):
    report = synthetic.full_report()
    loaded = load_report(full_folder)
    assert isinstance(loaded, AuditReport) and loaded.folder == full_folder
    assert [f.to_dict() for f in loaded.findings] == [f.to_dict() for f in report.findings]
    assert loaded.config == {"seed": 3} and loaded.env_id == "synthetic/Full-v0"
    assert loaded.episodes["return"].tolist() == pytest.approx([1.2, 0.3, 0.8, 0.0])
    assert len(loaded.steps) == sum(len(e[3]) for e in synthetic.EPISODES)
    pd.testing.assert_frame_equal(loaded.curves.reset_index(drop=True), synthetic.CURVES, check_dtype=False)
    assert loaded.table("failures_failure_sweep") is not None and loaded.table("no_such_table") is None
    # The same report, read through its report.json path.
    assert load_report(full_folder / "report.json").env_id == "synthetic/Full-v0"


def test_in_memory_reports_are_viewed_the_same_way():
    report = synthetic.full_report()
    view = load_report(report)
    assert view.report is report and view.folder is None and load_report(view) is view
    assert view.episode(2)["reward"].tolist() == pytest.approx([0.1, 0.1, 0.1, 0.5])
    frame = view.findings_frame()
    assert frame["rank"].tolist() == list(range(1, len(report.findings) + 1))
    assert "synthetic/Full-v0" in repr(view) and "4 episodes" in repr(view)


def test_a_report_without_records_or_curves_has_empty_tables():
    view = load_report(synthetic.empty_report())
    assert view.episodes.empty and view.steps.empty and view.exploration_episodes.empty
    assert view.curves is None and view.findings_frame().empty


def test_missing_folder_and_folder_without_report_json_say_what_to_pass(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist; pass the folder that `envaudit scan` wrote"):
        load_report(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="has no report.json"):
        load_report(tmp_path)
    with pytest.raises(TypeError, match="got int"):
        load_report(42)


def test_exploration_episodes_are_the_random_policy_ones():
    report = synthetic.full_report()
    extra = report.records.episodes.iloc[[0]].assign(episode_id=99, probe="length", policy="repeat wait")
    report.records.episodes = pd.concat([report.records.episodes, extra], ignore_index=True)
    view = load_report(report)
    assert len(view.episodes) == 5 and sorted(view.exploration_episodes["episode_id"]) == [0, 1, 2, 3]
    assert isinstance(view.report, Report)
