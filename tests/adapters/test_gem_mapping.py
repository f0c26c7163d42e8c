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
    assert play["valid_share"] == 0.7 and play["legal_valid_share"] == 1.0 and play["playable"] is True
    lenient.reset(seed=0)
    moves = lenient.candidates()
    reference = lenient.inner.unwrapped.data["answer"]
    assert moves["reference"] == f"\\boxed{{{reference}}}" and moves["unformatted"] == f"The answer is {reference}."
    assert moves["wrong_1"] == f"\\boxed{{{reference[::-1]}}}"  # every wrong answer paid: the pool's first two stay
    strict = G.GemEnv("rg:leg_counting")
    strict.reset(seed=0)
    base = strict.inner.unwrapped
    for label in ("wrong_1", "wrong_2"):
        answer = G.answer_of(strict.candidates()[label])
        assert answer != str(base.data["answer"]) and base.reward_fn(answer=answer, entry=base.data) < 1.0
    assert strict.adapter_info["playability"]["full_marks_without_success"] == []


def test_an_env_whose_own_constructor_fails_is_not_playable_and_says_why():
    out = G.playability("game:FifteenPuzzle-v0-random")
    assert out == {"measured": False, "playable": False,
                   "why": "TypeError: unsupported operand type(s) for ** or pow(): 'NoneType' and 'int'"}
    with pytest.raises(TypeError):  # a scan of it is the env's error, not a usage error
        G.GemEnv("game:FifteenPuzzle-v0-random")


def test_wrong_answers_the_scorer_pays_in_full_are_set_aside_and_kept_only_as_a_last_resort():
    """rg:cryptarithm's entry from seed 0 maps eight letters (D=4,J=9,...); its scorer checks the
    mapping, not the text, so the first two shapes ``wrong_answers`` builds from it (the pairs in
    reverse order, and each pair written backwards, ``6=W,2=T,...``) are the same mapping, paid 1.0:
    both are set aside and the next two are wrong_1 and wrong_2. rg:fraction_simplification's scorer
    pays the first shape nothing and the rest in full (a ``$``-less fraction is the same fraction):
    the one it does not pay is kept, and the first paid one fills the second slot."""
    from envaudit.adapters.catalogue import wrong_answers

    for env_id, paid, chosen in (("rg:cryptarithm", [True, True, False, False], (2, 3)),
                                 ("rg:fraction_simplification", [False, True, True, True], (0, 1))):
        env = G.GemEnv(env_id)
        env.reset(seed=0)
        base = env.inner.unwrapped
        pool = wrong_answers(str(base.data["answer"]), G.WRONG_POOL)
        scores = [base.reward_fn(answer=G.answer_of(G.boxed(w)), entry=base.data) for w in pool[:4]]
        assert [s >= 1.0 for s in scores] == paid, env_id
        moves = env.candidates()
        assert (moves["wrong_1"], moves["wrong_2"]) == tuple(G.boxed(pool[i]) for i in chosen), env_id


def test_a_measure_stopped_by_the_envs_reset_says_so_and_the_env_is_not_playable(monkeypatch):
    """GEM's base ``reset`` raises ``NotImplementedError`` where a game leaves it out; the measure
    records where it stopped and every share it could not take is None, never a division by zero."""
    env = G.GemEnv(GUESS)

    def no_reset(self, seed=None):
        raise NotImplementedError("reset is not implemented here")

    monkeypatch.setattr(type(env.inner.unwrapped), "reset", no_reset)
    out = env.measure_check()
    assert out["measured"] is True and out["states"] == 0 and out["distinct_outcomes"] == 0
    assert out["valid_share"] is None and out["legal_valid_share"] is None and out["by_label"] == {}
    assert out["note"] == "stopped after 0 state(s): NotImplementedError: reset is not implemented here"
    assert out["playable"] is False and out["why"] == "; ".join([
        out["note"], "the env accepted none of the catalogue's legal moves: exploration cannot play it",
        "the catalogue gave 0 distinct outcome(s): nothing to tell apart",
        "no entry carries a reference answer or a verifier: success is undefined"])


def test_a_users_registered_env_that_takes_no_such_option_is_a_usage_error():
    """A GEM env registered by the user (``gem.register``) whose constructor names its options, without
    GEM's ``**_``: an option it does not take is GEM's TypeError, turned into the usage error; a
    constructor that fails by itself with a TypeError is the env's error, raised as is."""
    from gem.envs.registration import ENV_REGISTRY, register

    class Sized(type(G.GemEnv(GUESS).inner.unwrapped)):
        def __init__(self, size: int = 3):
            super().__init__(min_number=1, max_number=size, max_turns=2)

    class Broken(Sized):
        def __init__(self, size: int = 3):
            None ** size  # noqa: B018 -- fails as FifteenPuzzle-v0-random's does

    try:
        register("envaudit:Sized-v0", entry_point=Sized)
        register("envaudit:Broken-v0", entry_point=Broken)
        assert G.GemEnv("envaudit:Sized-v0", size=4).inner.unwrapped.max_number == 4
        with pytest.raises(UsageError, match=r"^GEM env 'envaudit:Sized-v0' rejected the options \{'bogus': 1\}: "
                                             r".*unexpected keyword argument 'bogus'"):
            G.GemEnv("envaudit:Sized-v0", bogus=1)
        with pytest.raises(TypeError, match="unsupported operand"):
            G.GemEnv("envaudit:Broken-v0")
        with pytest.raises(TypeError, match="unsupported operand"):
            G.GemEnv("envaudit:Broken-v0", size=2)  # no "argument" in the message: the env's own failure
    finally:
        ENV_REGISTRY.pop("envaudit:Sized-v0", None)
        ENV_REGISTRY.pop("envaudit:Broken-v0", None)


def test_a_random_variant_gets_the_adapters_cap_and_a_seedless_reset_draws_from_the_env_seed():
    assert G.GemEnv("game:GuessTheNumber-v0-random").max_steps == G.RANDOM_TURN_CAP == 100
    from gymnasium.utils import seeding

    env = G.GemEnv(GUESS)
    env.reset(seed=5)
    env.reset()  # seedless: the episode's seed is the next draw of the generator reset(seed=5) made
    drawn = int(seeding.np_random(5)[0].integers(2**31))
    twin = G.GemEnv(GUESS)
    twin.reset(seed=drawn)
    assert env.inner.unwrapped.game_number == twin.inner.unwrapped.game_number
    assert env.candidates() == twin.candidates()


def test_moves_and_tool_calls_carry_gems_own_words_as_their_error():
    env = G.GemEnv(GUESS)
    env.reset(seed=5)
    *_, info = env.step("\\boxed{11}")
    assert info["tool"] == {"name": "move", "status": "error",
                            "error": "At turn 1, you guessed 11, which is outside the range specified."}
    *_, info = env.step("\\boxed{3}")
    assert info["tool"] == {"name": "move", "status": "ok"}
    tools = G.GemEnv(GUESS, wrappers="python_tool")
    tools.reset(seed=0)
    obs, *_, info = tools.step("<python>raise ValueError('envaudit')</python>")
    assert info["tool"] == {"name": "python_code", "status": "error", "error": obs[:200]}
    assert obs.startswith("Code execution result: Traceback") and obs.rstrip().endswith("ValueError: envaudit")
    *_, info = tools.step("<python>print(6 * 7)</python>")
    assert info["tool"] == {"name": "python_code", "status": "ok"}


def test_an_answer_tasks_success_rule_is_its_datasets():
    """GEM's rg envs carry the dataset's name; success is judged by that dataset's rule, as in the
    reasoning-gym adapter: puzzle24 by its own verifier, not the reference."""
    assert G.GemEnv("rg:puzzle24").adapter_info["success"] == (
        "an expression that uses the entry's four numbers once each and makes 24 "
        "(GEM's reward is the dataset's score_answer)")
    assert "letter case ignored" in G.GemEnv("rg:family_relationships").adapter_info["success"]


def test_an_answer_the_scorer_cannot_read_is_not_paid_and_stays_a_wrong_answer():
    """rg:prime_factorization's scorer takes ``int()`` of each factor (``prime_factorization.py:55``):
    from seed 1 (2 × 479) the first wrong shape, ``× 479 2``, makes it raise, which pays nothing, so
    it stays wrong_1; the second, ``479 × 2``, is the same factorisation, paid 1.0 and set aside; the
    third, ``974 × 2``, is paid 0.01 and becomes wrong_2."""
    from envaudit.adapters.catalogue import wrong_answers

    env = G.GemEnv("rg:prime_factorization")
    env.reset(seed=1)
    base = env.inner.unwrapped
    pool = wrong_answers(str(base.data["answer"]), G.WRONG_POOL)
    assert pool[:3] == ["× 479 2", "479 × 2", "974 × 2"]
    with pytest.raises(ValueError):
        base.reward_fn(answer=G.answer_of(G.boxed(pool[0])), entry=base.data)
    assert G.full_marks(base, pool[0]) is False and G.full_marks(base, pool[1]) is True
    assert G.full_marks(base, pool[2]) is False
    moves = env.candidates()
    assert (moves["wrong_1"], moves["wrong_2"]) == (G.boxed(pool[0]), G.boxed(pool[2]))


def test_a_users_own_game_is_played_from_gems_random_actions_and_judged_by_its_win_message():
    """A game class GEM's registry holds but ``gem_moves`` does not know (a user's, here a subclass of
    GuessTheNumber registered under another name): its legal moves are three of its own
    ``sample_random_action``'s draws, each played on a copy; the illegal move is the first one
    written twice (77: out of 1..10); there is no reference; success is GEM's "Congratulations"."""
    from gem.envs.game_env.guess_the_number import GuessTheNumberEnv
    from gem.envs.registration import ENV_REGISTRY, register

    from envaudit.adapters.gem_moves import fallback_moves

    class MyGuess(GuessTheNumberEnv):
        pass

    register("envaudit:MyGuess-v0", entry_point=MyGuess, min_number=1, max_number=10, max_turns=4)
    try:
        env = G.GemEnv("envaudit:MyGuess-v0")
        assert env.game is None and not env.has_reference and "reference" not in env.action_labels
        assert env.adapter_info["success"] == "GEM's win message 'Congratulations' on the step that ends the game"
        env.reset(seed=0)
        drawn, source = fallback_moves(env.inner.unwrapped, env.prompt)
        assert source == "sample_random_action" and len(drawn) == 4
        moves = env.candidates()
        picks = [moves[f"legal_{i}"] for i in (1, 2, 3)]
        assert len(set(picks)) == 3 and set(picks) <= set(drawn)
        assert moves["illegal"] == G.boxed(G.unboxed(drawn[0]) * 2) == "\\boxed{77}"
        assert moves["unformatted"] == G.unboxed(picks[0])
        play = env.adapter_info["playability"]
        assert play["success_from"] == "message" and play["legal_valid_share"] == 1.0 and play["by_label"]["illegal"] == 0.0
        secret = env.inner.unwrapped.game_number
        obs, reward, terminated, _, info = env.step(G.boxed(str(secret)))
        assert terminated and info["success"] is True and "Congratulations" in obs
    finally:
        ENV_REGISTRY.pop("envaudit:MyGuess-v0", None)
