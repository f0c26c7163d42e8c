"""Never a falsely clean report: a scan that could tell nothing apart says so at ``warn``.

The env's grader pays 1 for one exact answer. Written as a free ``Text`` action with no catalogue,
random strings never hit it, so every episode earns 0 and the scan has learned nothing; the same
grader behind a ``Discrete`` catalogue (the answer and a wrong one) is explored and gets no such
warning.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

from envaudit.scan import run_scan

ANSWER = "forty-two"


class TextAnswerEnv(gym.Env):
    """One turn: the action is the answer as free text."""

    def __init__(self) -> None:
        self.action_space = gym.spaces.Text(32)
        self.observation_space = gym.spaces.Discrete(1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        right = action == ANSWER
        return 0, float(right), True, False, {"success": right}


class CatalogueAnswerEnv(TextAnswerEnv):
    """The same grader, explored through a catalogue: 0 = the answer, 1 = a wrong one."""

    action_labels = ("reference", "wrong")

    def __init__(self) -> None:
        super().__init__()
        self.action_space = gym.spaces.Discrete(2)

    def step(self, action):
        return super().step(ANSWER if int(action) == 0 else "forty-three")


class ConstantEnv(CatalogueAnswerEnv):
    """A grader that is not wired to the answer: every response earns 0.5."""

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, 0.5, terminated, truncated, info


def _blind(report):
    return [f for f in report.findings if f.evidence.get("behaviour") == "exploration" and f.probe == "explore"]


def test_text_action_env_without_catalogue_gets_the_warn():
    report = run_scan(TextAnswerEnv, env_id="text-answer", probes=["api", "exploits"], quick=True, seed=0)
    [finding] = _blind(report)
    assert str(finding.severity) == "warn"
    assert "learned nothing" in finding.summary
    assert any("free text" in r for r in finding.evidence["reasons"])
    assert any("returned 0" in r for r in finding.evidence["reasons"])
    # Every episode the scan ran counts, kept in the report or not (scripted screening runs, an oracle).
    assert finding.evidence["n_episodes"] >= len(report.records.episodes)


def test_the_same_grader_behind_a_catalogue_gets_no_warn():
    report = run_scan(CatalogueAnswerEnv, env_id="catalogue-answer", probes=["api", "exploits"], quick=True, seed=0)
    assert _blind(report) == []
    assert report.records.episodes["success"].any()


def test_constant_reward_across_every_strategy_gets_the_warn():
    report = run_scan(ConstantEnv, env_id="constant", probes=["api", "exploits"], quick=True, seed=0)
    [finding] = _blind(report)
    assert finding.evidence["return"] == 0.5
    assert not any("free text" in r for r in finding.evidence["reasons"])


def test_an_oracle_that_succeeds_is_something_told_apart():
    """All random play returns 0 (rare success, no shaping), but the env's oracle succeeds: the scan
    did tell success apart from failure, through episodes it ran but did not keep."""
    from envaudit.families.generate import make_cases
    from envaudit.scan import run_scan

    case = next(c for c in make_cases(100, 0, seed=0) if c.name == "clean-0-16")
    assert case.features()["oracle"] and case.features()["regime"] == "rare"
    report = run_scan(case.make_env, quick=True, env_id=case.name)
    assert not [f for f in report.findings if f.evidence.get("behaviour") == "exploration"]


def _adapter_info(spec):
    from envaudit.resolve import fingerprint, resolve_env

    _, make = resolve_env(spec)
    return fingerprint(make())["adapter"]


def _records_that_vary():
    """Episodes whose returns differ (so the constant-return reason does not fire on its own)."""
    import pandas as pd

    from envaudit.recording import Records

    episodes = pd.DataFrame({"episode_id": range(40), "seed": range(40), "return": [i % 3 - 1.0 for i in range(40)],
                             "success": [False] * 40, "length": [1] * 40})
    return Records(steps=pd.DataFrame(), episodes=episodes)


@pytest.fixture
def text_only_recruit(monkeypatch):
    """NewRecruit-v0 with its state reader removed: its moves read from its text alone, where a proposal
    is ``[Propose]`` and eight letters outside the brackets, so the game accepts none of them (every
    shipped TextArena game that runs has a reader or readable text now; this one without its reader
    is the real game that the adapter cannot play)."""
    from envaudit.adapters.textarena_games import GAMES

    monkeypatch.delitem(GAMES, "NewRecruitEnv")


def test_a_textarena_game_that_accepts_no_legal_move_is_a_named_warn(text_only_recruit):
    """NewRecruit-v0 read from its text rejects every move the catalogue writes: the report says so
    in the adapter's words, even when the returns vary."""
    from envaudit.coverage import coverage_findings

    adapter = _adapter_info("textarena:NewRecruit-v0")
    assert adapter["playability"]["legal_valid_share"] == 0
    [finding] = coverage_findings(_records_that_vary(), gym.spaces.Discrete(3), adapter=adapter)
    assert str(finding.severity) == "warn" and finding.title == "The scan could not play this env"
    [reason] = finding.evidence["reasons"]
    assert "(playability)" in reason and "accepted none of the catalogue's legal moves" in reason


def test_a_reasoning_gym_dataset_whose_scorer_crashes_names_the_scorers_line():
    """boxnet's score_answer raises TypeError on every answer (reasoning_gym/games/boxnet.py): the
    warn names that line, not only 'every episode returned 0'."""
    from envaudit.coverage import coverage_findings

    adapter = _adapter_info("reasoning-gym:boxnet")
    [finding] = coverage_findings(_records_that_vary(), gym.spaces.Discrete(3), adapter=adapter)
    [reason] = finding.evidence["reasons"]
    assert "(catalogue_check)" in reason and "boxnet.py:" in reason and "TypeError" in reason


def test_a_playable_adapter_env_gets_no_warn():
    from envaudit.coverage import coverage_findings

    for spec in ("textarena:GuessTheNumber-v0", "reasoning-gym:leg_counting"):
        assert coverage_findings(_records_that_vary(), gym.spaces.Discrete(3), adapter=_adapter_info(spec)) == []


def test_the_adapter_check_shapes():
    """GEM's ``playability`` and skyrl-gym's/verifiers' ``catalogue_check`` say ``playable`` with a
    ``why`` or a ``note``; an unmeasured check (a game that could not be copied) is no verdict."""
    from envaudit.coverage import unplayable

    assert "format error" in unplayable({"playability": {"playable": False, "why": "every move a format error"}})
    assert "no search" in unplayable({"catalogue_check": {"playable": False, "well_formed_share": 0.5,
                                                          "note": "no search"}})
    assert "50% of its catalogue accepted, 1 distinct" in unplayable(
        {"catalogue_check": {"playable": False, "well_formed_share": 0.5, "distinct_outcomes": 1}})
    assert unplayable({"playability": {"measured": False, "why": "could not be copied"}}) is None
    assert unplayable({"catalogue_check": {"playable": True}}) is None
    assert unplayable(None) is None and unplayable({}) is None


def test_the_scan_passes_the_adapters_verdict_on(text_only_recruit):
    from envaudit.resolve import resolve_env

    _, make = resolve_env("textarena:NewRecruit-v0")
    report = run_scan(make, env_id="textarena:NewRecruit-v0", probes=["api"], quick=True, seed=0)
    [finding] = _blind(report)
    assert any("(playability)" in r for r in finding.evidence["reasons"])
