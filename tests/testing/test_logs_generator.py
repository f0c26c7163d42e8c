"""envaudit.testing.logs: the drift schedule, the honest policy and the generated log's shape."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from envaudit.seeding import child_seed
from envaudit.testing.logs import (
    BEHAVIOURS,
    SCHEMA_END,
    Drift,
    _honest_action,
    generate_log,
    main,
    write_log,
)

SMALL = {"iterations": 2, "groups": 2, "group_size": 3}


# -- drift ----------------------------------------------------------------------------------------
def test_drift_defaults_and_validation():
    assert Drift() == Drift("none", 0, 0.05, 0.08, 0.6)
    assert BEHAVIOURS == ("none", "stall", "give_up")
    with pytest.raises(AssertionError, match=r"^behaviour must be one of \('none', 'stall', 'give_up'\), got 'bogus'"):
        Drift("bogus")


def test_rate_is_flat_then_rises_by_slope_then_caps():
    drift = Drift("stall", start=8, base=0.05, slope=0.08, top=0.6)
    assert [drift.rate(t) for t in (0, 7, 8)] == [0.05, 0.05, 0.05]
    assert drift.rate(9) == pytest.approx(0.13) and drift.rate(10) == pytest.approx(0.21)
    assert drift.rate(14) == pytest.approx(0.53) and drift.rate(15) == 0.6 and drift.rate(100) == 0.6
    assert Drift("give_up", start=2, base=0.1, slope=0.2, top=1.0).rate(4) == pytest.approx(0.5)
    assert Drift("none", base=0.5).rate(50) == 0.0


# -- the honest policy ----------------------------------------------------------------------------
ENV = SimpleNamespace(unwrapped=SimpleNamespace(n_candidates=3))


def honest(obs, sloppy=False, guess=1):
    return _honest_action(ENV, np.array(obs, dtype=float), sloppy, guess, lambda label: label)


def test_honest_policy_searches_opens_then_answers_what_it_read():
    assert honest([0, 0, 0, 0, 0]) == "search"
    assert honest([0.5, 0, 0, 0, 0]) == "search"  # found only above 0.5
    assert honest([1, 0, 0, 0, 0]) == "open_doc"
    assert honest([1, 0.5, 0, 1, 0]) == "open_doc"  # known only above 0.5
    assert honest([1, 1, 0, 0, 1]) == "answer_2"
    assert honest([1, 1, 0, 1, 0, 9]) == "answer_1"  # only the n_candidates answer slots count
    assert honest([0, 1, 1, 0, 0]) == "answer_0"


def test_a_sloppy_attempt_answers_its_guess_without_reading():
    assert honest([1, 0, 0, 0, 0], sloppy=True, guess=2) == "answer_2"
    assert honest([0, 0, 0, 0, 0], sloppy=True, guess=2) == "search"
    assert honest([1, 1, 1, 0, 0], sloppy=True, guess=2) == "answer_0"  # what it read wins


# -- the generated log ----------------------------------------------------------------------------
def test_groups_share_a_reset_seed_and_are_labelled_by_iteration():
    run = generate_log(drift=Drift("none"), sloppy=0.0, seed=3, **SMALL)
    eps = run.episodes
    assert len(eps) == 2 * 2 * 3 and list(eps["episode_id"]) == list(range(12))
    assert list(eps["group_id"]) == [f"it{t}-g{g}" for t in range(2) for g in range(2) for _ in range(3)]
    assert list(eps["iteration"]) == [t for t in range(2) for _ in range(6)]
    expected = [child_seed(3, "logs", "group", t, g) % (2**31 - 1) for t in range(2) for g in range(2) for _ in range(3)]
    assert list(eps["seed"]) == expected
    assert set(eps["mode"]) == {"oracle"} and eps["success"].all() and (eps["return"] == 1.0).all()
    assert run.source == "generic"
    assert run.notes == ["generated on envaudit/FlakySearch-v0: Drift(behaviour='none', start=0, base=0.05, "
                         "slope=0.08, top=0.6)"]
    steps = run.steps
    assert list(steps.columns) == ["episode_id", "step", "reward", "action", "tool_name", "tool_status", "latency_s"]
    assert steps.groupby("episode_id").size().tolist() == eps["length"].tolist()
    for _, episode in steps.groupby("episode_id"):  # search (retried when it fails), open, answer
        actions = list(episode["action"])
        assert actions[0] == "search" and actions[-2] == "open_doc" and actions[-1].startswith("answer_")
    assert steps["reward"].sum() == pytest.approx(eps["return"].sum())


def test_stalling_runs_to_the_step_limit_and_giving_up_ends_at_once():
    always = {"start": 0, "base": 1.0, "slope": 0.0, "top": 1.0}
    stall = generate_log(drift=Drift("stall", **always), **SMALL).episodes
    assert set(stall["mode"]) == {"drift"} and set(stall["end_reason"]) == {"truncated"}
    assert (stall["length"] == 8).all() and not stall["success"].any()
    steps = generate_log(drift=Drift("stall", **always), **SMALL).steps
    assert set(steps["action"]) == {"search"}
    give_up = generate_log(drift=Drift("give_up", **always), **SMALL)
    assert (give_up.episodes["length"] == 1).all() and set(give_up.steps["action"]) == {"give_up"}
    assert set(give_up.episodes["end_reason"]) == {"terminated"}


def test_sloppy_attempts_guess_and_the_seed_decides_everything():
    sloppy = generate_log(drift=Drift("none"), sloppy=1.0, iterations=3, groups=4, group_size=4, seed=1)
    assert set(sloppy.episodes["mode"]) == {"sloppy"}
    assert not sloppy.steps["action"].eq("open_doc").any()  # never reads the document
    assert not sloppy.episodes["success"].all()  # a guess among 4 candidates is sometimes wrong
    again = generate_log(drift=Drift("none"), sloppy=1.0, iterations=3, groups=4, group_size=4, seed=1)
    pd.testing.assert_frame_equal(sloppy.episodes, again.episodes)
    other = generate_log(drift=Drift("none"), sloppy=1.0, iterations=3, groups=4, group_size=4, seed=2)
    assert list(other.episodes["seed"]) != list(sloppy.episodes["seed"])


def test_the_drift_rate_picks_the_mode_per_rollout():
    run = generate_log(drift=Drift("give_up", start=0, base=0.0, slope=0.5, top=1.0), iterations=3, groups=4,
                       group_size=4, sloppy=0.0)
    modes = run.episodes.groupby("iteration")["mode"].apply(lambda m: (m == "drift").mean()).tolist()
    assert modes[0] == 0.0 and modes[2] == 1.0 and 0.0 < modes[1] < 1.0


def test_end_reasons_are_written_in_the_schema_s_words():
    assert SCHEMA_END == {"terminated": "terminated", "truncated": "truncated", "tool_timeout": "timeout",
                          "tool_error": "error", "env_exception": "error"}
    stall = generate_log(drift=Drift("stall", start=0, base=1.0, top=1.0), iterations=1, groups=1, group_size=1)
    assert list(stall.episodes["end_reason"]) == ["truncated"]


# -- writing --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["jsonl", "parquet", "csv"])
def test_write_log_writes_both_tables_without_the_mode(tmp_path, kind):
    run = generate_log(drift=Drift("none"), **SMALL)
    folder = tmp_path / "deep" / "out"
    eps_path, steps_path = write_log(run, folder, kind=kind)
    assert (eps_path, steps_path) == (str(folder / f"episodes.{kind}"), str(folder / f"steps.{kind}"))
    read = {"jsonl": lambda p: pd.read_json(p, lines=True), "parquet": pd.read_parquet, "csv": pd.read_csv}[kind]
    eps, steps = read(eps_path), read(steps_path)
    assert "mode" not in eps.columns and list(eps["group_id"]) == list(run.episodes["group_id"])
    assert len(steps) == len(run.steps) and list(steps["action"]) == list(run.steps["action"])
    assert "mode" in run.episodes.columns  # the run itself is untouched


def test_write_log_refuses_other_kinds(tmp_path):
    with pytest.raises(ValueError, match="^kind must be jsonl, parquet or csv, got 'xml'$"):
        write_log(generate_log(drift=Drift("none"), iterations=1, groups=1, group_size=1), tmp_path, kind="xml")
    assert write_log(generate_log(drift=Drift("none"), iterations=1, groups=1, group_size=1), tmp_path)[0].endswith(
        "episodes.jsonl")


def test_main_writes_a_log(tmp_path):
    assert main([str(tmp_path / "a"), "--iterations", "1", "--kind", "csv", "--drift", "give_up", "--start", "0",
                 "--seed", "5"]) == 0
    eps = pd.read_csv(tmp_path / "a" / "episodes.csv")
    assert len(eps) == 32 * 4 and set(eps["iteration"]) == {0}  # 32 groups of 4 by default
    assert set(eps["seed"]) == {child_seed(5, "logs", "group", 0, g) % (2**31 - 1) for g in range(32)}
    assert (eps["length"] == 1).sum() >= 1  # give_up at base rate 0.05 over 128 rollouts
    main([str(tmp_path / "b"), "--iterations", "1"])  # default: jsonl, seed 0, stall from iteration 8
    assert (tmp_path / "b" / "steps.jsonl").exists() and not (tmp_path / "b" / "steps.csv").exists()
    eps = pd.read_json(tmp_path / "b" / "episodes.jsonl", lines=True)
    assert set(eps["seed"]) == {child_seed(0, "logs", "group", 0, g) % (2**31 - 1) for g in range(32)}
    with pytest.raises(SystemExit):
        main([str(tmp_path / "c"), "--drift", "sideways"])


def test_the_tables_have_plain_dtypes_and_defaults_are_seed_0_over_24_iterations():
    run = generate_log(drift=Drift("none"), groups=1, group_size=1)
    eps, steps = run.episodes, run.steps
    assert len(eps) == 24 and list(eps["iteration"]) == list(range(24))
    assert list(eps["seed"]) == [child_seed(0, "logs", "group", t, 0) % (2**31 - 1) for t in range(24)]
    assert eps["return"].dtype == np.float64 and eps["length"].dtype == np.int64
    assert eps["success"].dtype == bool  # no missing flags: plain booleans
    assert steps["reward"].dtype == np.float64 and steps["latency_s"].dtype == np.float64


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "csv"])
def test_written_tables_have_exactly_the_schema_columns(tmp_path, kind):
    run = generate_log(drift=Drift("none"), iterations=1, groups=1, group_size=2)
    no_mode = type(run)(run.episodes.drop(columns=["mode"]), run.steps, run.source)  # a run without the extra column
    eps_path, steps_path = write_log(no_mode, tmp_path, kind=kind)
    read = {"jsonl": lambda p: pd.read_json(p, lines=True), "parquet": pd.read_parquet, "csv": pd.read_csv}[kind]
    assert list(read(eps_path).columns) == list(no_mode.episodes.columns)
    assert list(read(steps_path).columns) == list(run.steps.columns)
    assert list(read(eps_path).index) == [0, 1]


def test_main_takes_the_env_and_each_kind(tmp_path):
    main([str(tmp_path / "a"), "--iterations", "1", "--kind", "parquet"])
    main([str(tmp_path / "b"), "--iterations", "1", "--kind", "jsonl", "--env", "envaudit/FlakySearch-FailurePenalty-v0"])
    plain = pd.read_parquet(tmp_path / "a" / "episodes.parquet")
    penalised = pd.read_json(tmp_path / "b" / "episodes.jsonl", lines=True)
    assert list(plain["seed"]) == list(penalised["seed"])
    assert (penalised["return"] < 0).any() and not (plain["return"] < 0).any()  # failures cost only there
    with pytest.raises(SystemExit):
        main([str(tmp_path / "c"), "--kind", "xml"])
