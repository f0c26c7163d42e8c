"""GEM adapter: ``envaudit scan gem:ENV_ID`` (gem-llm 0.1.0, e.g. ``gem:game:GuessTheNumber-v0-easy``).

GEM envs are not ``gymnasium.Env``s: ``gem.make(id, **kwargs)``, ``reset(seed) -> (str, info)``,
``step(str) -> (obs, reward, terminated, truncated, info)``. What the adapter maps:

- **Success**, judged apart from the reward: a game by its own win state, read from the game's
  attributes (``gem_moves.GAMES``: the secret guessed, every disk on tower C, the board equal to the
  solution grid...; GEM's "Congratulations" message only for a game the adapter does not know); a
  ``rg:*`` env (GEM's reasoning-gym wrapper, one answer per episode) by the entry's reference or
  the dataset's own verifier (``envaudit.adapters.reasoning_gym.judge``), never ``score_answer``,
  which is GEM's reward there.
- **Truncation.** At its turn limit a GEM game returns ``terminated=True`` *and*
  ``truncated=True``; the adapter reports that as truncated only when the limit was reached by a
  move the game read (a format error on the last turn ends the game by the format error). A
  single-turn env that returns both on its one answer has no turn limit and stays terminated.
- **Moves as tool calls.** Every step the game goes on after is a ``move`` call whose status is
  ``error`` when the game rejected the move with one of its own rejection messages (``gem_moves.
  INVALID``: out of range, already guessed, a wall collision, a move that does not change the
  board...), else ``ok``. The step that ends the game carries the game's verdict instead, with
  ``info["invalid_move"]``: a format error that ends the game is a lost game at GEM's format-error
  reward, which GEM's training trains on, so the episode is a failure, not a masked tool error.
- **GEM's wrappers**: ``--env-arg wrappers=python_tool`` (names of GEM's ``WRAPPER_FACTORY``,
  comma-separated, applied in order as GEM's ``get_wrapper_fns`` does) wraps the env as GEM's
  training does; a ``ToolEnvWrapper``'s calls are tool steps (``info["tool"]``, status ``ok`` when
  GEM counted the call a success), paid GEM's per-call ``tool_reward``.
- **Rewards** that are not numbers raise ``RewardTypeError`` naming the env's own ``file:line``
  that returned them (the innermost ``step`` that did), so the scan's ``env-error`` points there.
- **Seeding.** ``reset(seed)`` seeds Python's global ``random`` and NumPy's global state (GEM's
  ``set_seed``): any other user of those generators in the same process changes the episodes.
  The fingerprint records this replayability risk. The adapter's own draws and trial moves keep
  the global generators' state as they found it.

Catalogue: a game's legal moves come from its state (``gem_moves``), never from GEM's
``sample_random_action`` where the adapter knows the game (that function is missing in
TowerofHanoi and Sudoku and writes unparseable moves in FifteenPuzzle, Crosswords and WordSearch);
then an illegal move (well formatted, rejected by the rules), the move without ``\\boxed{}``, a
repeat of the last move, a forfeit, the empty reply and an echo of the prompt; games whose state
shows a winning or correct move (Guess the Number, Mastermind, Sudoku, Crosswords) also get the
reference move, and with it an oracle. An ``rg:*`` env gets an answer task's catalogue
(``answer_strategies``) in GEM's ``\\boxed{}`` format. With a tool wrapper, a tool call that works
and one that fails are added (``tool_call``, ``tool_error``). ``adapter_info["playability"]`` (and
``playability(env_id)``) is the share of the catalogue the env accepts, measured on copies.
"""

from __future__ import annotations

import copy
import importlib
import numbers
import sys
import types
from collections.abc import Mapping
from typing import Any

import numpy as np

from envaudit.adapters import package_version, require
from envaudit.adapters.base import CatalogueEnv
from envaudit.adapters.catalogue import (
    ANSWER_LABELS,
    Strategy,
    answer_strategies,
    game_labels,
    game_strategies,
    wrong_answers,
)
from envaudit.adapters.gem_moves import (
    FORMAT_ERROR,
    GAMES,
    INVALID,
    boxed,
    fallback_moves,
    global_random_kept,
    try_move,
    unboxed,
)
from envaudit.errors import UsageError
from envaudit.protocol import TOOL_ERROR, TOOL_OK

EXTRA = "gem"
WIN = "Congratulations"
"""GEM games' win message: the success signal only of a game ``gem_moves.GAMES`` does not know."""
ANSWER_ENVS = frozenset({"ReasoningGymEnv"})
"""GEM env classes that are one question answered in ``\\boxed{}`` (the entry in ``data``)."""
RANDOM_TURN_CAP = 100
"""Step cap of a ``-random`` variant, whose turn limit is drawn at every reset (GEM's largest is 64)."""
TOOL_LABELS = ("tool_call", "tool_error")
TOOL_TEXTS = {
    "python_code": ("<python>print(6 * 7)</python>", "<python>raise ValueError('envaudit')</python>"),
    "search": ("<search>capital of France</search>", "<search></search>"),
}
"""A call GEM's tool runs and one it reports as failed, per ``tool_type``."""
NEEDS_TOKENIZER = ("concat_chat", "concat_chat_on_reset")
WRONG_POOL = 8
"""Wrong answers built per entry, of which the first two the scorer does not pay in full are kept."""
PLAYABILITY_SEEDS = (0, 1, 2)
PLAYABILITY_TURNS = 3
"""States on which ``adapter_info["playability"]`` tries the catalogue: the first turns of games
from these seeds, played with ``legal_1``."""


class RewardTypeError(TypeError):
    """A GEM env returned a reward that is not a number; the message names where."""


def _gem() -> Any:
    return require("gem", package="gem-llm", extra=EXTRA)


def _split(options: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """(GEM wrapper names, the options ``gem.make`` gets)."""
    opts = dict(options)
    raw = opts.pop("wrappers", None)
    if raw is None or raw == "":
        return [], opts
    names = raw.split(",") if isinstance(raw, str) else list(raw) if isinstance(raw, list) else None
    if names is None or not all(isinstance(n, str) for n in names):
        raise UsageError(f"--env-arg wrappers={raw!r}: expected names of GEM's WRAPPER_FACTORY, comma-separated, "
                         "e.g. --env-arg wrappers=python_tool")
    return [n.strip() for n in names if n.strip()], opts


def _check_wrappers(names: list[str]) -> None:
    from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

    for name in names:
        if name not in WRAPPER_FACTORY:
            import difflib

            close = difflib.get_close_matches(name, sorted(WRAPPER_FACTORY), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UsageError(f"--env-arg wrappers: GEM has no wrapper {name!r}; {hint}GEM's are "
                             + ", ".join(sorted(WRAPPER_FACTORY)))
        if name in NEEDS_TOKENIZER:
            raise UsageError(f"--env-arg wrappers: GEM's {name!r} needs a tokenizer (a chat template), which "
                             "envaudit does not pass; use 'concat_with_action' or 'concat' instead")


def _check_options(env_id: str, options: Mapping[str, Any]) -> None:
    """GEM's env constructors end in ``**_``: an option they do not name is dropped without a word
    (``--env-arg max_turn=2`` would scan the default game). Such an option is a usage error here."""
    import difflib
    import inspect

    from gem.envs.registration import ENV_REGISTRY

    entry = ENV_REGISTRY[env_id].entry_point
    if isinstance(entry, str):
        module, name = entry.split(":")
        try:
            entry = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):  # gem.make says so when the env is made
            return
    try:
        params = inspect.signature(entry).parameters.values()
    except (TypeError, ValueError):
        return
    swallowed = [p.name for p in params if p.kind is p.VAR_KEYWORD]
    if not swallowed or not swallowed[0].startswith("_"):
        return  # the constructor passes unnamed options on, or takes only those it names
    named = sorted(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    for option in options:
        if option not in named:
            close = difflib.get_close_matches(option, named, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UsageError(f"--env-arg {option}: GEM's {entry.__name__} has no option {option!r} and would drop it "
                             f"without a word; {hint}its options are {', '.join(named) or 'none'}")


def check(env_id: str, **options: Any) -> None:
    _gem()
    from gem.envs.registration import ENV_REGISTRY

    if env_id not in ENV_REGISTRY:
        import difflib

        close = difflib.get_close_matches(env_id, sorted(ENV_REGISTRY), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (e.g. game:GuessTheNumber-v0-easy)"
        raise UsageError(f"GEM has no env {env_id!r}{hint}")
    names, gem_options = _split(options)
    _check_wrappers(names)
    _check_options(env_id, gem_options)


def make(env_id: str, **options: Any) -> GemEnv:
    return GemEnv(env_id, **options)


def playability(env_id: str, **options: Any) -> dict[str, Any]:
    """Whether exploration can play ``gem:env_id``: the env made, its catalogue tried on copies
    (``adapter_info["playability"]``), and ``playable`` (some legal move or the reference accepted,
    two distinct outcomes at least, success defined) with ``why`` when it is not. An env that cannot
    be made is not playable, with the error as ``why``; nothing here raises for a broken env."""
    check(env_id, **options)
    try:
        with global_random_kept():
            env = GemEnv(env_id, **options)
            out = dict(env.adapter_info["playability"])
    except Exception as exc:  # a broken env is a row of the survey, not a crash
        return {"measured": False, "playable": False, "why": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _tool_layers(env: Any) -> list[Any]:
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    layers, layer = [], env
    while layer is not None:
        if isinstance(layer, ToolEnvWrapper):
            layers.append(layer)
        layer = getattr(layer, "env", None)
    return layers


def answer_of(text: str) -> str | None:
    """The answer GEM grades: the last ``\\boxed{}``'s content (None without one)."""
    from gem.utils.parsing import extract_last_boxed_answer

    return extract_last_boxed_answer(text)


def full_marks(base: Any, answer: str) -> bool:
    """Whether the answer task's scorer (``base.reward_fn``, as GEM grades) pays ``answer`` in full."""
    try:
        score = base.reward_fn(answer=answer_of(boxed(answer)), entry=base.data)
        return _is_number(score) and float(score) >= 1.0
    except Exception:  # a scorer that cannot read the answer does not pay it
        return False


class GemEnv(CatalogueEnv):
    """One GEM env behind the Gymnasium API and the info protocol."""

    ecosystem = "gem"

    def __init__(self, env_id: str, **options: Any) -> None:
        gem = _gem()
        names, gem_options = _split(options)
        _check_wrappers(names)
        _check_options(env_id, gem_options)
        try:
            inner = gem.make(env_id, **gem_options)
        except TypeError as exc:
            if not gem_options or "argument" not in str(exc):
                raise  # GEM's own constructor failed (FifteenPuzzle-v0-random does): the env is broken
            raise UsageError(f"GEM env {env_id!r} rejected the options {gem_options}: {exc}") from exc
        from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

        for name in names:  # in the order given, as GEM's get_wrapper_fns applies them
            inner = WRAPPER_FACTORY[name](inner)
        self.inner, self.env_id, self.wrappers = inner, env_id, names
        base = inner.unwrapped
        kind = type(base).__name__
        self.game = GAMES.get(kind)
        self.answers = kind in ANSWER_ENVS
        self.tools = [t for layer in _tool_layers(inner) for t in layer.tools]
        self.has_reference = self.answers or (self.game is not None and self.game.reference is not None)
        max_turns = getattr(base, "max_turns", None)
        self.turn_limit = int(max_turns) if isinstance(max_turns, int) else None
        cap = max(self.turn_limit or 1, RANDOM_TURN_CAP if getattr(base, "_is_random", False) else 1)
        tool_uses = sum(int(min(layer.max_tool_uses, 1000)) for layer in _tool_layers(inner))
        labels = ANSWER_LABELS if self.answers else game_labels(self.has_reference)
        super().__init__(labels + (TOOL_LABELS if self.tools else ()), max_steps=cap + tool_uses)
        self._info.update({
            "package": "gem-llm", "version": package_version("gem-llm"), "env_id": env_id,
            "env_class": f"{type(base).__module__}.{type(base).__qualname__}",
            "options": {k: repr(v) for k, v in gem_options.items()},
            "wrappers": names or None,
            "success": self._success_rule(base),
            "legal_moves": ("an answer task: the entry's reference answer in \\boxed{}" if self.answers else
                            "read from the game's state (envaudit.adapters.gem_moves)" if self.game else
                            "GEM's sample_random_action, else the prompt's \\boxed{} examples, each tried on a "
                            "copy of the game"),
            "replayability_risk": "reset(seed) seeds Python's global random and NumPy's global state "
                                  "(gem.utils.seeding.set_seed); other users of those generators in "
                                  "the same process change the episodes",
        })
        self._seed: int | None = None
        self._turn = 0
        self._last: str | None = None
        self._rng = np.random.default_rng(0)

    measured_check = "playability"

    def measure_check(self) -> dict[str, Any]:
        return self._measure_playability()

    def _success_rule(self, base: Any) -> str:
        if self.answers:
            from envaudit.adapters.reasoning_gym import success_rule

            return success_rule(getattr(base, "name", "")) + " (GEM's reward is the dataset's score_answer)"
        if self.game is not None:
            return f"the game's own win state: {self.game.progress}"
        return f"GEM's win message {WIN!r} on the step that ends the game"

    # -- Gymnasium side ---------------------------------------------------------------------------
    def _reset(self, seed: int | None, options: Mapping[str, Any] | None):
        self._seed = seed if seed is not None else int(self.np_random.integers(2**31))
        self._turn, self._last = 0, None
        self._rng = np.random.default_rng([self._seed, 0x6E6])
        obs, info = self.inner.reset(seed=self._seed)
        max_turns = getattr(self.inner.unwrapped, "max_turns", None)  # a -random variant draws it
        self.turn_limit = int(max_turns) if isinstance(max_turns, int) else None
        return str(obs), dict(info)

    def _step_text(self, text: str):
        counters = [layer.tool_success_counter for layer in _tool_layers(self.inner)]
        obs, reward, terminated, truncated, info = self._checked_step(text)
        obs, info = str(obs), dict(info)
        terminated, truncated = bool(terminated), bool(truncated)
        if "tool_type" in info:  # GEM's ToolEnvWrapper ran the call; the game did not see it
            worked = [layer.tool_success_counter for layer in _tool_layers(self.inner)] != counters
            info["tool"] = {"name": str(info["tool_type"]), "status": TOOL_OK if worked else TOOL_ERROR,
                            **({} if worked else {"error": obs[:200] or "GEM counted the call a failure"})}
            return obs, float(reward), terminated, truncated, info
        self._turn += 1
        self._last = text
        format_error = terminated and bool(FORMAT_ERROR.search(obs))
        if terminated and truncated:
            # GEM marks both at its turn limit; only a limit reached by a move the game read truncates.
            at_limit = self.turn_limit is not None and self._turn >= self.turn_limit and not format_error
            terminated, truncated = not at_limit, at_limit
        invalid = format_error or bool(INVALID.search(obs)) or (self.answers and answer_of(text) is None)
        if terminated or truncated:
            success = self._succeeded(text, obs)
            if success is not None:
                info["success"] = success
            info["invalid_move"] = invalid
        else:
            info["tool"] = {"name": "move", "status": TOOL_ERROR if invalid else TOOL_OK,
                            **({"error": obs[:200]} if invalid else {})}
        return obs, float(reward), terminated, truncated, info

    def _succeeded(self, text: str, obs: str) -> bool | None:
        base = self.inner.unwrapped
        if self.answers:
            from envaudit.adapters.reasoning_gym import judge

            return judge(answer_of(text), base.data, base.name, base.ds)
        if self.game is not None:
            return bool(self.game.won(base))
        return WIN in obs

    def _checked_step(self, text: str):
        """``inner.step(text)``; a reward that is not a number raises ``RewardTypeError`` at the line
        of the innermost ``step`` that returned it (found by watching ``step`` frames return)."""
        bad: list[types.FrameType] = []

        def watch(frame: types.FrameType, event: str, arg: Any) -> None:
            if (event == "return" and not bad and frame.f_code.co_name == "step" and isinstance(arg, tuple)
                    and len(arg) == 5 and not _is_number(arg[1])):
                bad.append(frame)

        previous = sys.getprofile()
        sys.setprofile(watch)
        try:
            out = self.inner.step(text)
        finally:
            sys.setprofile(previous)
        if not bad:
            return out
        frame = bad[0]
        where = f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_qualname})"
        reward = out[1]
        raise RewardTypeError(
            f"GEM's {type(self.inner.unwrapped).__name__} returned the reward {reward!r} ({type(reward).__name__}), "
            f"not a number, at {where}; a trainer's float(reward) fails there") \
            .with_traceback(types.TracebackType(None, frame, frame.f_lasti, frame.f_lineno))

    # -- the catalogue ------------------------------------------------------------------------------
    def _strategies(self) -> list[Strategy]:
        out = self._answer_strategies() if self.answers else self._game_strategies()
        if self.tools:
            ok, error = TOOL_TEXTS.get(self.tools[0].tool_type, TOOL_TEXTS["python_code"])
            out += [Strategy(TOOL_LABELS[0], ok), Strategy(TOOL_LABELS[1], error)]
        return out

    def _answer_strategies(self) -> list[Strategy]:
        from envaudit.adapters.reasoning_gym import reference_of

        base = self.inner.unwrapped
        reference = reference_of(base.data, base.name)
        ref = reference if reference is not None else "None"
        # A wrong answer built from the reference's shape can be a right one (a sum's terms rotated):
        # those the scorer pays in full are set aside, as the reasoning-gym adapter does.
        pool = wrong_answers(ref, WRONG_POOL)
        with global_random_kept():
            checked = [w for w in pool if not full_marks(base, w)]
        wrong = (checked + [w for w in pool if w not in checked])[:2]
        return answer_strategies(ref, self.prompt, fmt=boxed, unformatted=lambda a: f"The answer is {a}.",
                                 wrong=wrong)

    def _game_strategies(self) -> list[Strategy]:
        base = self.inner.unwrapped
        with global_random_kept():
            if self.game is not None:
                moves, illegal = self.game.legal(base, self._rng), self.game.illegal(base)
                reference = self.game.reference(base) if self.game.reference else None
            else:
                moves, _ = fallback_moves(base, self.prompt)
                illegal, reference = boxed(unboxed(moves[0]) * 2) if moves else boxed("?"), None
        if not moves:  # a state with no legal move left (the game ends on any reply): the illegal move stands in
            moves = [illegal]
        picks = [moves[int(i)] for i in self._rng.choice(len(moves), size=min(3, len(moves)), replace=False)]
        if self.has_reference and reference is None:
            reference = picks[0]  # no correct move left in this state: the game ends on the next reply anyway
        return game_strategies(picks, self.prompt, illegal=illegal, unformatted=unboxed(picks[0]),
                               last=self._last, reference=reference)

    # -- playability ----------------------------------------------------------------------------------
    def _measure_playability(self) -> dict[str, Any]:
        """The share of the catalogue the env accepts, on the first ``PLAYABILITY_TURNS`` states of
        games from ``PLAYABILITY_SEEDS`` played with ``legal_1`` (``reference`` for an answer task),
        every strategy tried on a copy; with the distinct outcomes those tries gave. Played on a copy
        of the env with the global generators kept, so nothing here changes a scan."""
        accepted = {label: [0, 0] for label in self.action_labels if label not in TOOL_LABELS}
        outcomes: set[tuple] = set()
        full_marks: set[str] = set()
        self._reward_types: set[str] = set()
        states, note = 0, None
        inner, keep = self.inner, (self._seed, self._turn, self._last, self.prompt, self._current,
                                   self._labels_by_text, self._rng, self.turn_limit, self._np_random)
        shallow = self.answers and not self.wrappers  # GEM's rg step changes nothing: no deep copy
        try:
            with global_random_kept():
                self.inner = copy.deepcopy(inner)
                for seed in PLAYABILITY_SEEDS:
                    self.reset(seed=seed)
                    for _ in range(1 if self.answers else PLAYABILITY_TURNS):
                        states += 1
                        for s in self._current:
                            if s.label in TOOL_LABELS:
                                continue
                            ok, outcome = self._try(s.text, shallow)
                            accepted[s.label][0] += ok
                            accepted[s.label][1] += 1
                            outcomes.add(outcome)
                            if len(outcome) == 3 and outcome[2] is False and _is_number(outcome[0]) \
                                    and outcome[0] >= 1.0:
                                full_marks.add(s.label)
                        if self.answers:
                            break
                        _, _, terminated, truncated, _ = self.step(self.action_labels.index("legal_1"))
                        if terminated or truncated:
                            break
        except Exception as exc:  # the measurement is a fact about the env, never a reason not to scan
            note = f"stopped after {states} state(s): {type(exc).__name__}: {str(exc)[:200]}"
        finally:
            self.inner = inner
            (self._seed, self._turn, self._last, self.prompt, self._current, self._labels_by_text, self._rng,
             self.turn_limit, self._np_random) = keep
        out = self._playability_summary(accepted, outcomes, states, note)
        out["reward_types"] = sorted(self._reward_types)
        out["full_marks_without_success"] = sorted(full_marks)
        return out

    def _try(self, text: str, shallow: bool) -> tuple[bool, tuple]:
        """(the env accepted ``text``, the outcome it gave: reward, ended, success) on a copy."""
        t = try_move(self.inner, text, shallow=shallow)
        if t is None:
            return False, ("raised",)
        self._reward_types.add(type(t.reward).__name__)
        reward = round(float(t.reward), 6) if _is_number(t.reward) else repr(t.reward)
        if self.answers:
            return answer_of(text) is not None, (reward, True, self._succeeded(text, ""))
        won = self.game.won(t.twin.unwrapped) if self.game is not None else WIN in t.obs
        return t.accepted, (reward, t.terminated or t.truncated, bool(won))

    def _playability_summary(self, accepted: dict[str, list[int]], outcomes: set[tuple], states: int,
                             note: str | None) -> dict[str, Any]:
        tried = sum(n for _, n in accepted.values())
        honest = [accepted[label] for label in ("reference", "legal_1", "legal_2", "legal_3") if label in accepted]
        honest_tried = sum(n for _, n in honest)
        out: dict[str, Any] = {
            "measured": True, "seeds": list(PLAYABILITY_SEEDS), "states": states,
            "valid_share": sum(k for k, _ in accepted.values()) / tried if tried else None,
            "legal_valid_share": sum(k for k, _ in honest) / honest_tried if honest_tried else None,
            "by_label": {label: k / n for label, (k, n) in accepted.items() if n},
            "distinct_outcomes": len(outcomes),
            "success_defined": any(len(o) == 3 and o[2] is not None for o in outcomes),
            "success_from": "reference" if self.answers else "state" if self.game is not None else "message",
        }
        why = []
        if note:
            out["note"] = note
            why.append(note)
        if not out["legal_valid_share"]:
            why.append("the env accepted none of the catalogue's legal moves: exploration cannot play it")
        if len(outcomes) < 2:
            why.append(f"the catalogue gave {len(outcomes)} distinct outcome(s): nothing to tell apart")
        if not out["success_defined"]:
            why.append("no entry carries a reference answer or a verifier: success is undefined")
        out["playable"] = not why
        if why:
            out["why"] = "; ".join(why)
        return out
