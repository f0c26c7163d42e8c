import dataclasses
import importlib
import random
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envaudit.envs as bundled
from envaudit.envs import VARIANTS, Variant
from envaudit.findings import CODES
from envaudit.rollout import RandomPolicy

ENV_LEVEL_CODES = {
    "timeout-rewarded", "failure-shortcut", "failure-rewarded", "length-bias",
    "reward-without-success", "non-replayable",
}
IDS = sorted(VARIANTS)
CLEAN = [i for i in IDS if VARIANTS[i].is_clean]
FLAWED = [i for i in IDS if not VARIANTS[i].is_clean]


@pytest.mark.parametrize("env_id", IDS)
def test_every_id_makes_and_passes_gymnasium_check_env(env_id):
    env = gym.make(env_id)
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", IDS)
def test_observations_stay_in_the_observation_space_under_random_play(env_id):
    env = gym.make(env_id)
    space = env.unwrapped.observation_space
    for seed in range(20):
        env.action_space.seed(seed)
        obs, _ = env.reset(seed=seed)
        assert space.contains(obs)
        done = False
        while not done:
            obs, reward, term, trunc, info = env.step(env.action_space.sample())
            assert space.contains(obs), f"{env_id}: observation {obs} outside {space}"
            assert np.isfinite(reward)
            assert info["tool"]["status"] in ("ok", "error", "timeout")
            done = term or trunc
        assert isinstance(info["success"], bool)


def test_registration_is_idempotent():
    """Importing twice, reloading and registering again must neither raise nor change a spec."""
    code = (
        "import importlib, gymnasium as gym, envaudit, envaudit.envs as e\n"
        "before = {i: gym.spec(i).kwargs for i in e.VARIANTS}\n"
        "e.register_all(); importlib.reload(e.registry); importlib.reload(e); importlib.reload(envaudit)\n"
        "import envaudit.envs\n"
        "assert {i: gym.spec(i).kwargs for i in e.VARIANTS} == before\n"
        "gym.make('envaudit/Helpdesk-AttemptCredit-v0').reset(seed=0)\n"
        "print(len(before))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(len(IDS))
    bundled.register_all()  # and in this process too
    assert all(i.startswith("envaudit/") for i in IDS)


def test_variant_table_is_consistent():
    for vid, v in VARIANTS.items():
        assert isinstance(v, Variant) and v.id == vid and v.description
        spec = gym.spec(vid)
        assert spec.entry_point == v.entry_point and dict(spec.kwargs) == dict(v.kwargs)
        if v.is_clean:
            assert v.clean_id is None and v.planted == () and v.severity == "" and not v.kwargs
        else:
            twin = VARIANTS[v.clean_id]
            assert twin.is_clean, f"{vid}'s clean twin {v.clean_id} plants {twin.planted}"
            assert twin.entry_point == v.entry_point, "a variant is its clean twin's class with a flaw on"
            assert len(v.planted) == 1 and set(v.planted) <= set(CODES)
            assert v.severity in ("warn", "fail")
    with pytest.raises(dataclasses.FrozenInstanceError):
        VARIANTS[IDS[0]].id = "x"


def test_the_flawed_variants_plant_every_env_level_code():
    planted = {code for v in VARIANTS.values() for code in v.planted}
    assert planted == ENV_LEVEL_CODES


def test_module_docstring_table_lists_every_id_and_its_code():
    lines = {line.split("|")[1].strip(" `"): line for line in bundled.__doc__.splitlines()
             if line.startswith("| `envaudit/")}
    assert set(lines) == set(IDS)
    for vid, v in VARIANTS.items():
        for code in v.planted:
            assert code in lines[vid]


@pytest.mark.parametrize("env_id", FLAWED)
def test_each_flawed_variant_names_an_existing_exploit_and_its_class_documents_the_flaw(env_id):
    v = VARIANTS[env_id]
    env = gym.make(env_id).unwrapped
    if v.exploit:
        assert v.exploit in env.exploits()
    doc = importlib.import_module(type(env).__module__).__doc__
    for kwarg in v.kwargs:
        if kwarg.endswith("_rate"):
            continue  # a rate only sets the scene; the flaw itself is the other keyword
        assert f"``{kwarg}``" in doc, f"{type(env).__name__}'s module docstring does not document {kwarg}"
    assert any(code in doc for code in v.planted)


REPLAYABLE = [i for i in IDS if "non-replayable" not in VARIANTS[i].planted]


@pytest.mark.parametrize("env_id", REPLAYABLE)
def test_every_env_but_the_non_replayable_one_replays_exactly(env_id, helpers):
    env = gym.make(env_id)
    n = env.action_space.n
    for seed in range(25):
        actions = np.random.default_rng(seed).integers(n, size=40)
        assert helpers.rollout(env, seed, actions) == helpers.rollout(env, seed, actions)


@pytest.mark.parametrize("env_id", CLEAN)
def test_clean_envs_pay_exactly_for_success_under_random_play(env_id):
    """No reward for failing, timing out or farming: return is 1 on success and 0 otherwise."""
    env = gym.make(env_id)
    rng = np.random.default_rng(1)
    endings = set()
    for policy in (RandomPolicy(), env.unwrapped.oracle()):
        for seed in range(300):
            obs, info = env.reset(seed=seed)
            policy.reset(env, rng)
            total, done = 0.0, False
            while not done:
                obs, reward, term, trunc, info = env.step(policy(obs, info))
                total += reward
                done = term or trunc
            assert total == float(info["success"]), (
                f"{env_id} seed {seed} ({policy.name}): return {total}, success {info['success']}")
            endings.add((bool(trunc), info["success"]))
    assert (False, True) in endings and (False, False) in endings


def test_the_non_replayable_variant_diverges_and_its_clean_twin_does_not(helpers):
    env = gym.make("envaudit/FlakySearch-Unseeded-v0")
    answer = env.unwrapped.action_index("answer_0")
    runs = [[helpers.rollout(env, seed, [answer]) for seed in range(50)] for _ in range(2)]
    diverged = sum(a != b for a, b in zip(*runs, strict=True))
    # Each replay of a seed draws the answer anew: P(same reward twice) = 1/16 + 9/16 per seed.
    assert diverged > 0
    state = random.getstate()
    try:  # the divergence comes from Python's global random, exactly as documented
        random.seed(7)
        first = [helpers.rollout(env, seed, [answer]) for seed in range(20)]
        random.seed(7)
        assert first == [helpers.rollout(env, seed, [answer]) for seed in range(20)]
    finally:
        random.setstate(state)


def test_steps_take_microseconds_not_simulated_seconds():
    import time

    env = gym.make("envaudit/CodeFix-v0")
    suite = env.unwrapped.action_index("run_full_suite")
    env.reset(seed=0)
    start = time.perf_counter()
    statuses = []
    for _ in range(7):  # the full suite "runs" up to 2.5 deadlines, simulated
        statuses.append(env.step(suite)[4]["tool"]["status"])
    assert time.perf_counter() - start < 0.5
    assert "timeout" in statuses
