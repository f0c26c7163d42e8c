"""GEM end to end: shipped games through GEM's own API (gem.make, reset(seed), step(str)).

gem-llm 0.1.0 pins reasoning-gym==0.1.23, so it lives in the second venv; this module skips
where gem is not installed. To run it for real (``.ci/run`` does, and fails if it skips there)::

    scripts/setup --alt-only && .venv-alt/bin/python -m pytest tests/adapters/test_gem.py

game:GuessTheNumber-v0-easy: numbers 1-10, 4 turns. By GEM's source: the right guess ends the
game with GEM's win message and reward 1; a reply without ``\\boxed{}`` ends it with the format
error reward -0.1; a guess outside the range or repeated pays 0 and the game goes on; at the turn
limit GEM returns terminated *and* truncated and pays ``1 - |guess - target| / 9`` for the last
guess (0 when it was out of range) -- a timeout that pays up to 0.89 without success.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gem")

import gem  # noqa: E402

from envaudit.adapters.gem import GemEnv  # noqa: E402
from envaudit.rollout import Runner, SequencePolicy  # noqa: E402
from envaudit.scan import run_scan  # noqa: E402

GAME = "game:GuessTheNumber-v0-easy"
SEEDS = list(range(8))


def _run(labels: list[str], seeds=SEEDS):
    env = GemEnv(GAME)
    actions = [env.action_labels.index(label) for label in labels]
    runner = Runner(lambda: GemEnv(GAME))
    return runner.run(SequencePolicy(actions, name="+".join(labels)), seeds, rng=np.random.default_rng(0)).records


def test_the_reference_guess_wins_with_gems_own_message():
    records = _run(["legal_1", "reference"])
    eps = records.episodes
    assert (eps["outcome"] == "success").all() and (eps["return"] == 1.0).all()
    # A legal guess the game goes on after is an ok move (unless it hit the number at once).
    assert set(records.steps.loc[records.steps["step"] == 0, "tool_status"].dropna()) <= {"ok"}


def test_a_format_error_loses_the_game_at_gems_format_penalty():
    records = _run(["unformatted"])
    assert (records.episodes["return"] == -0.1).all() and (records.episodes["length"] == 1).all()
    assert (records.episodes["outcome"] == "failure").all()


def test_an_out_of_range_guess_is_a_failed_move_and_the_game_goes_on():
    records = _run(["illegal", "reference"])
    steps = records.steps
    assert set(steps.loc[steps["step"] == 0, "tool_status"]) == {"error"}
    assert (records.episodes["outcome"] == "success").all() and (records.episodes["length"] == 2).all()


def test_the_turn_limit_is_a_timeout_that_pays_for_closeness():
    records = _run(["legal_1", "repeat_last"])  # one fresh guess, then repeats of it (invalid, 0)
    env = GemEnv(GAME)
    timeouts = 0
    for _, ep in records.episodes.iterrows():
        env.reset(seed=int(ep["seed"]))
        target, guess = env.inner.game_number, int(env.candidates()["legal_1"][len("\\boxed{"):-1])
        if guess == target:
            assert ep["outcome"] == "success" and ep["length"] == 1
            continue
        timeouts += 1
        # GEM said terminated=True and truncated=True at its limit: a timeout, not a failure.
        assert ep["end_reason"] == "truncated" and ep["outcome"] == "timeout" and ep["length"] == 4
        assert ep["return"] == pytest.approx(1 - abs(guess - target) / 9)
    assert timeouts > 0
    middle = records.steps[(records.steps["step"] > 0) & (records.steps["step"] < 3)]
    assert set(middle["tool_status"]) == {"error"}  # repeated guesses are invalid moves


def test_catalogue_draws_leave_the_games_random_stream_alone():
    plain = gem.make(GAME)
    for seed in SEEDS:
        plain.reset(seed=seed)
        env = GemEnv(GAME)
        env.reset(seed=seed)
        assert env.inner.game_number == plain.game_number
        env.step(env.action_labels.index("legal_1"))  # draws legal moves for the next turn
        assert env.inner.game_number == plain.game_number


def test_quick_scan_reports_the_paying_timeout():
    report = run_scan(lambda: GemEnv(GAME), env_id=f"gem:{GAME}", quick=True, seed=0)
    codes = {f.code for f in report.findings}
    assert "timeout-rewarded" in codes, [(f.code, f.summary) for f in report.findings]
    assert "set_seed" in report.fingerprint["adapter"]["replayability_risk"]


# -- the next envs: other shipped GEM envs, outcomes read in GEM's source and played by hand ----------
# TowerofHanoi-v0-easy: 3 disks, 10 turns; GEM has no sample_random_action for it (reset used to
# raise NotImplementedError through the catalogue); the optimal 7 moves win with reward 1; at the
# limit GEM pays len(C) / 3 and returns terminated and truncated; a reply it cannot parse ends the
# game at -0.1 (terminated, and truncated too when it is the last turn).
HANOI = "game:TowerofHanoi-v0-easy"
HANOI_SOLUTION = ["A C", "A B", "C B", "A C", "B A", "B C", "A C"]


def _play(env_id: str, labels: list[str], seeds=SEEDS, **options):
    env = GemEnv(env_id, **options)
    actions = [env.action_labels.index(label) for label in labels]
    return Runner(lambda: GemEnv(env_id, **options)).run(
        SequencePolicy(actions, name="+".join(labels)), seeds, rng=np.random.default_rng(0)).records


def test_tower_of_hanoi_resets_plays_and_is_won_by_its_own_state():
    env = GemEnv(HANOI)
    env.reset(seed=0)  # GEM's sample_random_action is not implemented here
    assert sorted({env.candidates()[f"legal_{i}"] for i in (1, 2, 3)}) == ["\\boxed{A B}", "\\boxed{A C}"]
    for i, move in enumerate(HANOI_SOLUTION):
        obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{move}}}")
        if i < len(HANOI_SOLUTION) - 1:
            assert info["tool"]["status"] == "ok" and not (terminated or truncated)
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    assert env.inner.board["C"] == [3, 2, 1]
    assert "tower C" in env.adapter_info["success"]


def test_the_turn_limit_truncates_on_the_last_turn_and_a_last_turn_format_error_is_a_lost_game():
    stalled = _play(HANOI, ["illegal"] * 10, seeds=[0, 1])
    eps = stalled.episodes
    assert (eps["length"] == 10).all() and (eps["end_reason"] == "truncated").all()
    assert (eps["outcome"] == "timeout").all() and (eps["return"] == 0.0).all()  # len(C) / 3 with C empty
    steps = stalled.steps
    assert set(steps.loc[steps["step"] < 9, "tool_status"]) == {"error"}  # moves from an empty tower
    garbled = _play(HANOI, ["illegal"] * 9 + ["unformatted"], seeds=[0, 1]).episodes
    assert (garbled["length"] == 10).all() and (garbled["end_reason"] == "terminated").all()
    assert (garbled["outcome"] == "failure").all() and np.allclose(garbled["return"], -0.1)


def test_a_correct_move_on_the_last_allowed_turn_is_a_success_not_a_timeout():
    # Sudoku-v0-easy: 4x4, 9 empty cells, 15 turns: six rejected moves leave exactly nine turns, and
    # the ninth correct placement, on turn 15, completes the grid.
    records = _play("game:Sudoku-v0-easy", ["illegal"] * 6 + ["reference"] * 9, seeds=[0, 1])
    eps = records.episodes
    assert (eps["length"] == 15).all() and (eps["end_reason"] == "terminated").all()
    assert (eps["outcome"] == "success").all() and np.allclose(eps["return"], 1.0)  # 9 x 1/9


def test_a_wall_collision_is_a_failed_move_and_an_open_move_an_ok_one():
    env = GemEnv("game:Sokoban-v0-easy")
    env.reset(seed=0)
    game = env.inner.unwrapped
    bump = env.candidates()["illegal"]
    assert game._would_collide_with_wall(bump[len("\\boxed{"):-1])  # GEM's own rule says it collides
    obs, reward, terminated, _, info = env.step(env.action_labels.index("illegal"))
    assert "collide with wall" in obs and reward == 0.0 and not terminated
    assert info["tool"]["status"] == "error"
    obs, _, _, _, info = env.step(env.action_labels.index("legal_1"))
    assert "moved" in obs and info["tool"]["status"] == "ok"


def test_rg_envs_reset_and_succeed_by_the_reference_not_by_score_answer():
    # rg:gcd seed 3: "GCD of 505, 885" -> 5 (505 = 5 * 101, 885 = 5 * 177).
    env = GemEnv("rg:gcd")
    obs, _ = env.reset(seed=3)
    assert "505, 885" in obs and env.candidates()["reference"] == "\\boxed{5}"
    results = {}
    for label in ("reference", "wrong_1", "unformatted", "hedge_last"):
        env.reset(seed=3)
        _, reward, terminated, truncated, info = env.step(env.action_labels.index(label))
        assert terminated and not truncated
        results[label] = (reward, info["success"], info["invalid_move"])
    assert results["reference"] == (1.0, True, False)
    assert results["wrong_1"] == (0.0, False, False)
    assert results["unformatted"] == (0.0, False, True)  # no \boxed{}: GEM grades None
    assert results["hedge_last"] == (1.0, True, False)  # GEM grades the last box, the reference
    assert "reference" in env.adapter_info["success"] and "score_answer" in env.adapter_info["success"]


def test_full_marks_from_a_lenient_scorer_are_reward_without_success():
    # rg:game_of_life_halting: reasoning-gym 0.1.23's score_answer pays
    # `bool(answer) == bool(entry["answer"])` (game_of_life_halting.py:398): any non-empty answer,
    # "eurT" included, earns 1.0. Success is the reference ("True"/"False"), so only it succeeds.
    env = GemEnv("rg:game_of_life_halting")
    for seed in (0, 1):
        env.reset(seed=seed)
        assert env.candidates()["reference"] in ("\\boxed{True}", "\\boxed{False}")
        _, reward, _, _, info = env.step(env.action_labels.index("wrong_1"))
        assert (reward, info["success"]) == (1.0, False)
        env.reset(seed=seed)
        _, reward, _, _, info = env.step(env.action_labels.index("reference"))
        assert (reward, info["success"]) == (1.0, True)
    assert "wrong_1" in env.adapter_info["playability"]["full_marks_without_success"]


def test_gems_tool_wrapper_applies_through_env_arg_and_its_calls_are_tool_steps():
    from envaudit.adapters import resolve_adapter
    from envaudit.errors import UsageError

    _, make_env = resolve_adapter("gem:rg:gcd", {"wrappers": "python_tool"})  # --env-arg wrappers=python_tool
    env = make_env()
    env.reset(seed=3)
    assert env.adapter_info["wrappers"] == ["python_tool"]
    # GEM's python_tool: 0.05 per call, 0.25 more when the code runs, 5 calls at most. GEM runs the
    # code with the `python` found on PATH (gem/utils/sandbox.py), so the test needs one there.
    _, reward, terminated, _, info = env.step(env.action_labels.index("tool_call"))
    assert (reward, terminated, info["tool"]) == (pytest.approx(0.30), False, {"name": "python_code", "status": "ok"})
    _, reward, terminated, _, info = env.step(env.action_labels.index("tool_error"))
    assert (reward, terminated, info["tool"]["status"]) == (pytest.approx(0.05), False, "error")
    _, reward, terminated, _, info = env.step(env.action_labels.index("reference"))
    assert (reward, terminated, info["success"]) == (1.0, True, True)
    with pytest.raises(UsageError, match="python_tool"):
        resolve_adapter("gem:rg:gcd", {"wrappers": "python_tol"})
    with pytest.raises(UsageError, match="tokenizer"):
        resolve_adapter("gem:rg:gcd", {"wrappers": "concat_chat"})


def test_playability_says_per_env_what_share_of_its_catalogue_it_accepts():
    from envaudit.adapters.gem import playability

    crosswords = playability("game:Crosswords-v0-easy")
    assert crosswords["playable"] and crosswords["legal_valid_share"] == 1.0
    assert crosswords["by_label"]["unformatted"] == 0.0 and crosswords["by_label"]["illegal"] == 0.0
    assert crosswords["success_from"] == "state" and crosswords["reward_types"] == ["float"]
    # GEM's own constructor fails for this variant (num_rows None ** 2): not playable, and says why.
    broken = playability("game:FifteenPuzzle-v0-random")
    assert not broken["playable"] and broken["why"].startswith("TypeError")


class _ReasonAsReward(gem.Env):
    """A GEM env (GEM's own base class, registered through GEM's own ``register``) that returns its
    reason where the reward belongs: the flaw the adapter must locate."""

    def reset(self, seed=None):
        super().reset(seed)
        return "Say anything.", {}

    def step(self, action):
        return "done", "the answer was not boxed", True, False, {}  # REASON-AS-REWARD


def test_a_reward_that_is_not_a_number_names_the_envs_own_line():
    import inspect

    from gem.envs.registration import ENV_REGISTRY, register

    from envaudit.adapters.gem import RewardTypeError
    from envaudit.errors import user_frame

    if "envaudit-test:ReasonAsReward-v0" not in ENV_REGISTRY:
        register("envaudit-test:ReasonAsReward-v0", entry_point=_ReasonAsReward)
    lines, first = inspect.getsourcelines(_ReasonAsReward.step)
    where = f"{__file__}:{first + next(i for i, line in enumerate(lines) if 'REASON-AS-REWARD' in line)}"
    env = GemEnv("envaudit-test:ReasonAsReward-v0")
    env.reset(seed=0)
    with pytest.raises(RewardTypeError, match="not a number") as caught:
        env.step("\\boxed{1}")
    assert where in str(caught.value) and "'the answer was not boxed' (str)" in str(caught.value)
    assert user_frame(caught.value) == where  # what the scan's env-error finding names
