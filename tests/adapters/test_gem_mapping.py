"""The GEM adapter's mapping, part by part, on envs gem-llm 0.1.0 ships (run in ``.venv-alt``).

Every expected value is worked out from GEM's source, read by hand:

- ``check``: an id GEM's registry lacks is a usage error with the closest registered id; wrapper
  names must be ``WRAPPER_FACTORY``'s (the closest one named, every one listed); the chat wrappers
  need a tokenizer envaudit does not pass. GEM's env constructors end in ``**_``, which drops any
  option they do not name: such an option is a usage error naming theirs; a constructor that fails by itself (``game:FifteenPuzzle-v0-random``: ``None ** 2``) is the env's.
- GuessTheNumber-v0-easy (1..10, 4 turns): a guess in range is read and, wrong, answered 0.0 with
  a hint; the secret number wins 1.0; a reply without ``\\boxed{}`` loses at once at -0.1 (GEM's
  format penalty); 11 is out of range, 0.0 and not read. So the playability measure, which tries
  every label on the first three states of games from seeds 0, 1 and 2 played with ``legal_1``,
  sees exactly three outcomes, and from seed 1 ``legal_1`` (1) is the secret number: 3 + 1 + 3 = 7
  states.
- rg:game_of_life_halting's ``score_answer`` pays any non-empty answer 1.0 (``bool(answer)``): every
  wrong answer the catalogue builds is paid in full, so none can be set aside and the first two of
  the pool stay (the reversed and the last-letter-changed reference), each listed as full marks
  without success; rg:leg_counting pays a wrong count less, so its wrong answers are never paid.
"""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

pytest.importorskip("gem")

from envaudit.adapters import gem as G  # noqa: E402
from envaudit.errors import UsageError  # noqa: E402

GUESS = "game:GuessTheNumber-v0-easy"
WRAPPERS = ("concat, concat_chat, concat_chat_on_reset, concat_with_action, episode_tracking, python_tool, "
            "python_tool_no_int_reward, python_tool_no_int_reward_last_line_error, search_tool, "
            "search_tool_no_int_reward")


def _usage(*args, **options) -> str:
    with pytest.raises(UsageError) as caught:
        G.check(*args, **options)
    return str(caught.value)


def test_an_unknown_env_is_a_usage_error_naming_the_closest_registered_id():
    assert _usage("game:GuessTheNumbr-v0-easy") == \
        "GEM has no env 'game:GuessTheNumbr-v0-easy'; did you mean 'game:GuessTheNumber-v0-easy'?"
    assert _usage("qqq") == "GEM has no env 'qqq' (e.g. game:GuessTheNumber-v0-easy)"
    assert G.check(GUESS) is None


def test_wrapper_names_are_checked_against_gems_factory():
    assert _usage(GUESS, wrappers="python_tol") == \
        f"--env-arg wrappers: GEM has no wrapper 'python_tol'; did you mean 'python_tool'? GEM's are {WRAPPERS}"
    assert _usage(GUESS, wrappers="zzzzzz") == f"--env-arg wrappers: GEM has no wrapper 'zzzzzz'; GEM's are {WRAPPERS}"
    assert _usage(GUESS, wrappers=3) == ("--env-arg wrappers=3: expected names of GEM's WRAPPER_FACTORY, "
                                         "comma-separated, e.g. --env-arg wrappers=python_tool")
    assert _usage(GUESS, wrappers=["python_tool", 4]).startswith("--env-arg wrappers=['python_tool', 4]: expected")
    assert "needs a tokenizer" in _usage(GUESS, wrappers="concat_chat")
    assert "needs a tokenizer" in _usage(GUESS, wrappers="concat, concat_chat_on_reset")
    assert G.check(GUESS, wrappers="") is None and G.check(GUESS, wrappers=" python_tool , concat ") is None


def test_wrappers_apply_in_the_order_given_and_options_go_to_gem():
    env = G.GemEnv(GUESS, wrappers=" python_tool , concat_with_action ")
    assert env.wrappers == ["python_tool", "concat_with_action"]
    # the last named is outermost: GEM's concat_with_action observation wrapper around its tool wrapper
    assert type(env.inner).__name__ == "ObservationWrapper" and env.inner.include_action is True
    assert type(env.inner.env).__name__ == "ToolEnvWrapper"
    assert G.GemEnv(GUESS, wrappers=["python_tool"]).adapter_info["wrappers"] == ["python_tool"]
    # GEM's constructors end in ``**_`` and would drop a misspelt option without a word
    assert _usage(GUESS, max_turn=2) == (
        "--env-arg max_turn: GEM's GuessTheNumberEnv has no option 'max_turn' and would drop it without a word; "
        "did you mean 'max_turns'? its options are max_number, max_turns, min_number")
    with pytest.raises(UsageError, match=r"^--env-arg bogus: .* its options are max_number, max_turns, min_number$"):
        G.GemEnv(GUESS, bogus=1)
    assert "did you mean 'size'? its options are name, seed, size" in _usage("rg:leg_counting", sise=3)
    assert G.check("rg:leg_counting", size=3) is None
    shorter = G.GemEnv(GUESS, max_turns=2)
    assert shorter.turn_limit == 2 and shorter.max_steps == 2 and shorter.adapter_info["options"] == {"max_turns": "2"}


def test_without_the_package_the_error_names_the_extra_that_installs_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "gem", None)
    assert _usage(GUESS) == ("the gem adapter needs the 'gem-llm' package, which is not installed; "
                             "install it with: pip install 'envaudit-rl[gem]'")


def test_the_fingerprint_and_the_step_cap():
    env = G.GemEnv(GUESS)
    info = env.adapter_info
    assert {k: info[k] for k in ("package", "version", "env_id", "env_class", "options", "wrappers")} == {
        "package": "gem-llm", "version": importlib.metadata.version("gem-llm"), "env_id": GUESS,
        "env_class": "gem.envs.game_env.guess_the_number.GuessTheNumberEnv", "options": {}, "wrappers": None}
    assert info["success"] == ("the game's own win state: the secret number was guessed "
                               "(GuessTheNumberEnv.game_number in previous_guesses)")
    assert (env.turn_limit, env.max_steps) == (4, 4)
    tools = G.GemEnv(GUESS, wrappers="python_tool")
    assert tools.max_steps == 4 + tools.inner.max_tool_uses == 9  # every turn, and every tool call GEM allows
    assert tools.action_labels[-2:] == G.TOOL_LABELS
    answer = G.GemEnv("rg:leg_counting")
    assert answer.max_steps == 1 and answer.adapter_info["success"].endswith("(GEM's reward is the dataset's score_answer)")
    assert answer.adapter_info["success"].startswith("the entry's reference answer under a normalised exact match")


def test_playability_of_guess_the_number_by_gems_rules():
    play = G.GemEnv(GUESS).adapter_info["playability"]
    assert {k: play[k] for k in ("measured", "seeds", "states", "distinct_outcomes", "success_defined",
                                 "success_from", "playable", "reward_types", "full_marks_without_success")} == {
        "measured": True, "seeds": [0, 1, 2], "states": 7, "distinct_outcomes": 3, "success_defined": True,
        "success_from": "state", "playable": True, "reward_types": ["float"], "full_marks_without_success": []}
    by = play["by_label"]
    assert {k: by[k] for k in ("reference", "legal_1", "legal_2", "legal_3", "echo_prompt")} == dict.fromkeys(
        ("reference", "legal_1", "legal_2", "legal_3", "echo_prompt"), 1.0)  # the prompt's \boxed{7} is a guess
    assert {k: by[k] for k in ("illegal", "unformatted", "forfeit", "empty")} == dict.fromkeys(
        ("illegal", "unformatted", "forfeit", "empty"), 0.0)
    # a repeat of the last guess is no guess on a first turn (there is none) nor a read one after it
    assert 0 < by["repeat_last"] < 1
    assert play["valid_share"] == pytest.approx(sum(by.values()) / len(by))  # every label tried on every state
    assert play["legal_valid_share"] == 1.0 and "why" not in play and "note" not in play


def test_playability_of_an_answer_task_and_full_marks_without_success():
    lenient = G.GemEnv("rg:game_of_life_halting")
    play = lenient.adapter_info["playability"]
    assert play["full_marks_without_success"] == ["hedge_all", "partial", "wrong_1", "wrong_2"]
    assert play["states"] == 3 and play["success_from"] == "reference"
    # accepted: a \boxed{} answer GEM grades; the unformatted, empty and echoed replies have none
    assert play["by_label"] == {"reference": 1.0, "wrong_1": 1.0, "wrong_2": 1.0, "unformatted": 0.0, "empty": 0.0,
                                "echo_prompt": 0.0, "hedge_all": 1.0, "hedge_last": 1.0,
                                "reference_trailing": 1.0, "partial": 1.0}
    assert play["valid_share"] == 0.7
    lenient.reset(seed=0)
    moves = lenient.candidates()
    reference = lenient.inner.unwrapped.data["answer"]
    assert moves["reference"] == f"\\boxed{{{reference}}}" and moves["unformatted"] == f"The answer is {reference}."
    assert moves["wrong_1"] == f"\\boxed{{{reference[::-1]}}}"  # every wrong answer paid: the pool's first two stay
    strict = G.GemEnv("rg:leg_counting")
    strict.reset(seed=0)
    base = strict.inner.unwrapped
    for label in ("wrong_1", "wrong_2"):
        answer = strict._answer_of(strict.candidates()[label])
        assert answer != str(base.data["answer"]) and base.reward_fn(answer=answer, entry=base.data) < 1.0
    assert strict.adapter_info["playability"]["full_marks_without_success"] == []


def test_an_env_whose_own_constructor_fails_is_not_playable_and_says_why():
    out = G.playability("game:FifteenPuzzle-v0-random")
    assert out == {"measured": False, "playable": False,
                   "why": "TypeError: unsupported operand type(s) for ** or pow(): 'NoneType' and 'int'"}
    with pytest.raises(TypeError):  # a scan of it is the env's error, not a usage error
        G.GemEnv("game:FifteenPuzzle-v0-random")
