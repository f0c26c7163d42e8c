"""Real small scans shared by the reporting tests: a flawed bundled env, its clean twin, a plain
Gymnasium env. Scans are quick and restricted to probes that exist, so each takes about a second."""

from __future__ import annotations

import pytest

from envaudit.config import ScanConfig
from envaudit.envs import VARIANTS
from envaudit.reporting import write_folder
from envaudit.scan import run_scan
from tests.reporting import synthetic

FLAWED = "envaudit/Helpdesk-EngagementBonus-v0"
CLEAN = VARIANTS[FLAWED].clean_id
PLANTED = VARIANTS[FLAWED].planted[0]
PROBES = ("length",)  # the probe that owns the planted code; others are exercised by the synthetic report


def _scan(env_id: str, folder, probes=PROBES):
    report = run_scan(env_id, ScanConfig(seed=0, quick=True, probes=probes))
    write_folder(report, folder)
    return report


@pytest.fixture(scope="session")
def flawed_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("flawed") / "report"
    _scan(FLAWED, folder)
    return folder


@pytest.fixture(scope="session")
def clean_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clean") / "report"
    _scan(CLEAN, folder)
    return folder


@pytest.fixture(scope="session")
def plain_folder(tmp_path_factory):
    """CartPole: no info['tool'], no info['success'], and no probe tables."""
    folder = tmp_path_factory.mktemp("plain") / "report"
    _scan("CartPole-v1", folder, probes=())
    return folder


@pytest.fixture(scope="session")
def full_folder(tmp_path_factory):
    """The synthetic report with every table, written by write_folder."""
    return write_folder(synthetic.full_report(), tmp_path_factory.mktemp("full") / "report")
