"""``assert_replayable`` end to end on envs built to diverge in one way each: on the same instance,
on a fresh instance, only where a task is solved; and what it sends to (and reads back from) the
fresh interpreter, with the subprocess replaced by a stand-in."""

import pickle
import subprocess
import sys
import threading
from types import SimpleNamespace

import gymnasium as gym
import pytest

from envaudit.testing import PropertyFailed, assert_replayable
from envaudit.testing import replay as rp
from envaudit.testing.explore import Explorer
from envaudit.testing.trajectory import EnvSession, Plan
from tests.testing.test_explore import Lock
from tests.testing.toy_envs import MIRROR, SUBMIT, FetchTask


class Tally(gym.Env):
    """One step ends the episode, paying how many episodes this instance has reset before."""

    action_space = gym.spaces.Discrete(1)
    observation_space = gym.spaces.Discrete(1)
    resets = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.resets += 1
        return 0, {}

    def step(self, action):
        return 0, float(self.resets), True, False, {"success": False}


class Numbered(Tally):
    """Pays the instance's number (the count of instances built before it): replays on one
    instance agree, a fresh instance does not."""

    built = 0

    def __init__(self):
        Numbered.built += 1
        self.number = Numbered.built

    def step(self, action):
        return 0, float(self.number), True, False, {"success": False}


class NumberedLock(Lock):
    """``Lock`` whose success pays the instance's number: only a solved task shows it, and the
    enumerated plans (two steps) never solve it."""

    built = 0

    def __init__(self):
        super().__init__()
        NumberedLock.built += 1
        self.number = NumberedLock.built

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward * self.number, terminated, truncated, info


def test_a_replay_on_the_same_instance_that_differs():
    with pytest.raises(PropertyFailed) as info:
        assert_replayable(Tally, max_examples=1, interpreters=False)
    text = str(info.value)
    assert "a different reward at step 0" in text and "(the replay on the same env instance)" in text
    assert "Counterexample (exhaustive over short plans, " in text


def test_a_replay_on_a_fresh_instance_that_differs():
    with pytest.raises(PropertyFailed) as info:
        assert_replayable(Numbered, max_examples=1, interpreters=False)
    assert "(the replay on a fresh env instance)" in str(info.value)
    assert info.value.counterexample.compared[0][0] == "the replay on a fresh env instance"


def test_a_difference_only_a_solved_task_shows_is_replayed():
    # No oracle, no short success: the deeper search's successes are replayed too.
    with pytest.raises(PropertyFailed) as info:
        assert_replayable(NumberedLock, max_examples=1, interpreters=False, seeds=[0])
    ce = info.value.counterexample
    assert ce.actions == Lock.PATH + (Lock.SUBMIT,) and ce.episode.success


def test_the_solved_tasks_come_from_the_oracle_or_a_deeper_search():
    with EnvSession(FetchTask) as session:
        assert rp._oracle_plans(session, [0, 3], [MIRROR, MIRROR, SUBMIT], 0) == [
            Plan(0, (MIRROR, MIRROR, SUBMIT)), Plan(3, (MIRROR, MIRROR, SUBMIT))]
        assert rp._oracle_plans(session, [0, 3], None, 0) == []  # FetchTask has no oracle()
        assert rp._deep_plans(Explorer(session)) == []  # short plans succeed already
    with EnvSession(Lock) as session:
        ex = Explorer(session, seeds=[4, 5])
        assert rp._deep_plans(ex) == [Plan(s, Lock.PATH + (Lock.SUBMIT,)) for s in (4, 5)]


class FakeRun:
    """Stands in for ``subprocess.run``: records the call and answers with ``answer(plans)``."""

    def __init__(self, answer=None, returncode=0, raises=None):
        self.answer, self.returncode, self.raises, self.calls = answer, returncode, raises, []

    def __call__(self, args, **kwargs):
        self.calls.append((args, kwargs))
        if self.raises is not None:
            raise self.raises
        make_env, plans, max_steps = pickle.loads(kwargs["input"])
        out = self.answer(make_env, plans, max_steps) if self.answer else rp.play_summaries(make_env, plans, max_steps)
        return SimpleNamespace(returncode=self.returncode, stdout=pickle.dumps(out))


def test_what_the_fresh_interpreter_is_sent(monkeypatch):
    fake = FakeRun()
    monkeypatch.setattr(rp.subprocess, "run", fake)
    assert_replayable(FetchTask, max_examples=1, seeds=[2, 5], oracle=[MIRROR, SUBMIT])
    # Two children, hash seeds 1 and 2 whatever this process's own is, sent the same plans.
    assert [kwargs["env"]["PYTHONHASHSEED"] for _, kwargs in fake.calls] == list(rp.HASH_SEEDS) == ["1", "2"]
    assert fake.calls[0][1]["input"] == fake.calls[1][1]["input"]
    (args, kwargs) = fake.calls[0]
    assert args[0] == sys.executable and args[1] == "-c" and "play_summaries" in args[2]
    assert kwargs["env"]["PYTHONPATH"].split(rp.os.pathsep) == [p for p in sys.path if p]
    assert kwargs["timeout"] == rp.INTERPRETER_TIMEOUT_S and kwargs["capture_output"] and kwargs["check"] is False
    make_env, plans, max_steps = pickle.loads(kwargs["input"])
    assert make_env is FetchTask and max_steps == 50
    with EnvSession(FetchTask) as session:
        tree = [n.plan for n in Explorer(session, seeds=[2, 5]).tree()]
    assert len(tree) > rp.INTERPRETER_PLANS
    repeated = [Plan(2, (), a) for a in range(5)]
    solved = [Plan(2, (MIRROR, SUBMIT)), Plan(5, (MIRROR, SUBMIT))]
    assert plans == tree[:rp.INTERPRETER_PLANS] + repeated + solved


def test_a_fresh_interpreter_that_disagrees_is_reported(monkeypatch):
    def flip_last(make_env, plans, max_steps):
        out = rp.play_summaries(make_env, plans, max_steps)
        obs, steps, success = out[-1]
        return out[:-1] + [(obs, steps, not success)]

    monkeypatch.setattr(rp.subprocess, "run", FakeRun(flip_last))
    with pytest.raises(PropertyFailed) as info:
        assert_replayable(FetchTask, max_examples=1, seeds=[2, 5], oracle=[MIRROR, SUBMIT])
    text, ce = str(info.value), info.value.counterexample
    seed = rp.HASH_SEEDS[0]
    assert ce.actions == (MIRROR, SUBMIT) and ce.episode.seed == 5 and ce.compared == []
    assert ce.summary == (f"replaying the same seed and actions in a fresh interpreter (PYTHONHASHSEED={seed}) gave a "
                          f"different success flag ({ce.episode.success} here, {not ce.episode.success} there): state "
                          "hidden in hash() or in the order of a set of strings.")
    assert f"PYTHONHASHSEED={seed} python -c" in ce.details
    n = rp.INTERPRETER_PLANS + 5 + 2
    assert f"exhaustive over short plans, {n} plans, 2 fresh interpreters" in text
    assert info.value.property == "assert_replayable" and text.startswith("assert_replayable failed on FetchTask: ")
    assert "Replay it: envaudit.testing.play(FetchTask, " in text


@pytest.mark.parametrize("options", [dict(returncode=1), dict(raises=subprocess.TimeoutExpired("python", 1)),
                                     dict(answer=lambda *a: None)], ids=["exit-1", "timeout", "nothing"])
def test_a_fresh_interpreter_that_cannot_answer_decides_nothing(monkeypatch, options):
    fake = FakeRun(**options)
    monkeypatch.setattr(rp.subprocess, "run", fake)
    with EnvSession(FetchTask) as session:
        assert rp._other_interpreter(FetchTask, session, [Plan(0, (MIRROR, SUBMIT))], 50) is None
    assert len(fake.calls) == 2


def test_a_factory_that_cannot_be_sent_is_not_replayed_elsewhere(monkeypatch):
    fake = FakeRun()
    monkeypatch.setattr(rp.subprocess, "run", fake)
    lock = threading.Lock()

    def make_env():  # holds a lock: cloudpickle cannot send it
        with lock:
            return FetchTask()

    with EnvSession(make_env) as session:
        assert rp._other_interpreter(make_env, session, [Plan(0, (MIRROR,))], 50) is None
    assert fake.calls == []
    # And an agreeing answer is no failure, however many plans it holds.
    with EnvSession(FetchTask) as session:
        assert rp._other_interpreter(FetchTask, session, [Plan(0, (MIRROR,)), Plan(1, (SUBMIT,))], 50) is None
    assert len(fake.calls) == 2


def test_two_children_that_disagree_with_each_other_are_reported(monkeypatch):
    # This process and the child with hash seed 1 agree; the one with hash seed 2 flips the success
    # flag: the children's own comparison decides, whatever this process's hash seed happened to be.
    def run(args, **kwargs):
        make_env, plans, max_steps = pickle.loads(kwargs["input"])
        out = rp.play_summaries(make_env, plans, max_steps)
        if kwargs["env"]["PYTHONHASHSEED"] == "2":
            obs, steps, success = out[0]
            out = [(obs, steps, not success)] + out[1:]
        return SimpleNamespace(returncode=0, stdout=pickle.dumps(out))

    monkeypatch.setattr(rp.subprocess, "run", run)
    with EnvSession(FetchTask) as session:
        ce = rp._other_interpreter(FetchTask, session, [Plan(0, (MIRROR, SUBMIT))], 50)
    assert ce.summary.startswith("replaying the same seed and actions in two fresh interpreters (PYTHONHASHSEED=1 "
                                 "and 2) gave a different success flag (")
    assert "PYTHONHASHSEED=2 python -c" in ce.details
