"""GEM adapter: ``envaudit scan gem:ENV_ID`` (gem-llm 0.1.0, e.g. ``gem:game:GuessTheNumber-v0-easy``).

GEM envs are not ``gymnasium.Env``s: ``gem.make(id, **kwargs)``, ``reset(seed) -> (str, info)``,
``step(str) -> (obs, reward, terminated, truncated, info)``. What the adapter maps:

- **Truncation.** At its turn limit a GEM game returns ``terminated=True`` *and*
  ``truncated=True``; the adapter reports that as truncated only (the turn limit cut the episode),
  so step-limit payoffs are seen as what they are. A single-turn env that returns both on its one
  answer (GEM's reasoning-gym wrapper does) has no turn limit and stays terminated.
- **Success.** GEM gives no success flag. Its games announce a win with one message,
  ``"Congratulations! ..."``, on the step that ends the game; that message is the success signal
  (the reward is not: GEM pays partial rewards, up to 0.95, for ending near the target).
- **Moves as tool calls.** Every step the game goes on after is a ``move`` call whose status is
  ``error`` when GEM answered with its invalid-move text, else ``ok``. The step that ends the game
  carries the game's verdict instead (``info["invalid_move"]`` says whether GEM rejected it): a
  format error that ends the game is a lost game at GEM's format-error reward, which GEM's
  training trains on, so the episode is a failure, not a tool error a pipeline would mask.
- **Seeding.** ``reset(seed)`` seeds Python's global ``random`` and NumPy's global state (GEM's
  ``set_seed``): any other user of those generators in the same process changes the episodes.
  The fingerprint records this replayability risk.

Catalogue: legal moves from GEM's own ``sample_random_action`` (drawn under a generator state
saved and restored around the draw, so the catalogue never moves the game's own random stream),
an illegal move (a legal move's content doubled, well formatted but not playable), the move
without ``\\boxed{}``, a repeat of the last move, a forfeit, the empty reply and an echo of the
prompt; games whose secret the adapter can read (Guess the Number, Mastermind) also get the
reference move, and with it an oracle.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from typing import Any

from envaudit.adapters import package_version, require
from envaudit.adapters.base import CatalogueEnv
from envaudit.adapters.catalogue import Strategy, game_labels, game_strategies
from envaudit.errors import UsageError
from envaudit.protocol import TOOL_ERROR, TOOL_OK

EXTRA = "gem"
WIN = "Congratulations"
"""GEM games' win message (every game of gem-llm 0.1.0 uses it, and only on a win)."""
INVALID = re.compile(
    r"did not provide a valid|invalid|outside the range|already (been )?guessed|has \d+ entries but|"
    r"not (a )?(legal|allowed|valid)", re.IGNORECASE)
"""GEM's invalid-move and format-error messages (the reward of those steps is GEM's invalid-action
or format-error reward)."""
BOXED = re.compile(r"\\boxed\{(.*)\}", re.DOTALL)

REFERENCES: dict[str, Callable[[Any], str]] = {
    "GuessTheNumberEnv": lambda env: boxed(str(env.game_number)),
    "MastermindEnv": lambda env: boxed(" ".join(str(d) for d in env.game_code)),
}
"""The winning move of games whose secret is an attribute of the env (white-box: an audit may look)."""


def _gem() -> Any:
    return require("gem", package="gem-llm", extra=EXTRA)


def check(env_id: str, **options: Any) -> None:
    gem = _gem()
    from gem.envs.registration import ENV_REGISTRY

    if env_id not in ENV_REGISTRY:
        import difflib

        close = difflib.get_close_matches(env_id, sorted(ENV_REGISTRY), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (e.g. game:GuessTheNumber-v0-easy)"
        raise UsageError(f"GEM has no env {env_id!r}{hint}")
    del gem


def make(env_id: str, **options: Any) -> GemEnv:
    return GemEnv(env_id, **options)


def boxed(content: str) -> str:
    return "\\boxed{" + content + "}"


def _inner(move: str) -> str:
    found = BOXED.search(move)
    return found.group(1) if found else move


class GemEnv(CatalogueEnv):
    """One GEM env behind the Gymnasium API and the info protocol."""

    ecosystem = "gem"

    def __init__(self, env_id: str, **options: Any) -> None:
        gem = _gem()
        try:
            self.inner = gem.make(env_id, **options)
        except TypeError as exc:
            raise UsageError(f"GEM env {env_id!r} rejected the options {options}: {exc}") from exc
        self.env_id = env_id
        base = self.inner.unwrapped
        self._reference = REFERENCES.get(type(base).__name__)
        self.has_reference = self._reference is not None
        max_turns = getattr(base, "max_turns", None)
        self.turn_limit = int(max_turns) if isinstance(max_turns, int) else None
        super().__init__(game_labels(self.has_reference), max_steps=self.turn_limit or 1)
        self.adapter_info.update({
            "package": "gem-llm", "version": package_version("gem-llm"), "env_id": env_id,
            "env_class": f"{type(base).__module__}.{type(base).__qualname__}",
            "options": {k: repr(v) for k, v in options.items()},
            "success": f"GEM's win message {WIN!r} on the step that ends the game",
            "replayability_risk": "reset(seed) seeds Python's global random and NumPy's global state "
                                  "(gem.utils.seeding.set_seed); other users of those generators in "
                                  "the same process change the episodes",
        })
        self._seed: int | None = None
        self._turn = 0
        self._last: str | None = None

    def _reset(self, seed: int | None, options: Mapping[str, Any] | None):
        self._seed = seed if seed is not None else int(self.np_random.integers(2**31))
        self._turn, self._last = 0, None
        obs, info = self.inner.reset(seed=self._seed)
        return str(obs), dict(info)

    def _step_text(self, text: str):
        obs, reward, terminated, truncated, info = self.inner.step(text)
        self._turn += 1
        self._last = text
        obs = str(obs)
        terminated, truncated = bool(terminated), bool(truncated)
        if terminated and truncated:
            # GEM marks both at its turn limit; only a limit that was reached truncates.
            at_limit = self.turn_limit is not None and self._turn >= self.turn_limit
            terminated, truncated = not at_limit, at_limit
        info = dict(info)
        invalid = INVALID.search(obs)
        if terminated or truncated:
            info["success"] = terminated and WIN in obs
            # A move that ends the game is the game's verdict (a loss at GEM's format-error
            # reward), which GEM's own training trains on: the episode is a failure, not a tool error.
            info["invalid_move"] = bool(invalid)
        else:
            info["tool"] = {"name": "move", "status": TOOL_ERROR if invalid else TOOL_OK,
                            **({"error": obs[:200]} if invalid else {})}
        return obs, float(reward), terminated, truncated, info

    def _legal_moves(self) -> list[str]:
        # GEM draws from the global random; draw under a state of our own and put the game's back.
        saved_py, saved_np = random.getstate(), None
        import numpy as np

        saved_np = np.random.get_state()
        try:
            random.seed(f"envaudit-catalogue:{self._seed}:{self._turn}")
            return [str(self.inner.sample_random_action()) for _ in range(3)]
        finally:
            random.setstate(saved_py)
            np.random.set_state(saved_np)

    def _strategies(self) -> list[Strategy]:
        legal = self._legal_moves()
        inner = _inner(legal[0])
        reference = self._reference(self.inner.unwrapped) if self._reference else None
        return game_strategies(legal, self.prompt, illegal=boxed(inner + inner),
                               unformatted=inner, last=self._last, reference=reference)
