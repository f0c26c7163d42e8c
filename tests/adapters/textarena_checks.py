"""TextArena's own verdict on a move, read on a deep copy of the whole wrapped game (TextArena's
``Wrapper.__deepcopy__``): the game's error count rising, or the game ending by an invalid move, is
its rejection. Shared by the TextArena adapter tests; Python's global random is left as it was."""

from __future__ import annotations

import copy
import random
from typing import Any


def stepped_copy(env: Any, move: str) -> tuple[Any, bool]:
    """The base game of a copy of ``env``'s game after ``move``, and whether TextArena accepted it."""
    kept = random.getstate()
    try:
        twin = copy.deepcopy(env.game)
        base = twin
        while "env" in vars(base):
            base = vars(base)["env"]
        errors, pid = base.state.error_count, base.state.current_player_id
        twin.step(move)
        return base, not (base.state.error_count > errors or base.state.game_info[pid]["invalid_move"])
    finally:
        random.setstate(kept)


def game_accepts(env: Any, move: str) -> bool:
    """TextArena's own verdict on ``move`` for the player to move."""
    return stepped_copy(env, move)[1]
