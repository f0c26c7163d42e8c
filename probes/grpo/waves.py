"""The GRPO probe's runs in waves: which runs may play side by side, and how they do.

Only three things pass between the probe's runs: the natural run may stand in for the success
search (``sparing.stands_in_for_success``), and the other targets' ceilings read honest success
from both (``sparing.ceilings``). So the runs play in three waves (the natural runs: natural and
faults; the success search; the other targets), each wave from what the waves before it gave.

A wave's runs play side by side, each on a thread of the probe with its own lanes, where the
executor's workers are shared by whatever plays on them at once (threads, asyncio:
``execution.places``); one after another elsewhere (inline, worker processes, Ray, and the
language-model engine, whose model is one). Either way each run numbers its episodes from its own
stride of ids (``strided_ids``), so no id depends on which run reached a reset first, and the
probe reads the results in plan order: the same report both ways.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

R = TypeVar("R")


def waves(plans: Sequence[Any]) -> list[list[Any]]:
    """The runs (``training.Plan``) in the order they can play, those of a wave side by side: the
    natural runs first, then the success search, then the other targets (empty waves left out)."""
    def wave(plan: Any) -> int:
        return 0 if plan.kind != "target" else 1 if plan.behaviour == "success" else 2
    return [w for k in range(3) if (w := [p for p in plans if wave(p) == k])]


def play_wave(ctx: Any, runs: Sequence[Callable[[Iterator[int]], R]]) -> list[R]:
    """Play one wave's ``runs`` (each called with the id iterator its episodes take their ids
    from), side by side where the workers are shared, in order elsewhere (module docstring); their
    results in the runs' order. ``ctx.ids`` is then passed over every id the wave handed out."""
    ids = strided_ids(ctx.ids, len(runs))
    if side_by_side(ctx, len(runs)):
        with ThreadPoolExecutor(len(runs), thread_name_prefix="envaudit-grpo-run") as pool:
            out = list(pool.map(lambda k: runs[k](ids[k]), range(len(runs))))
    else:
        out = [run(ids[k]) for k, run in enumerate(runs)]
    used = max((i.last for i in ids if i.last is not None), default=None)
    while used is not None and next(ctx.ids) < used:
        pass
    return out


def side_by_side(ctx: Any, n: int) -> bool:
    """Whether ``n`` runs play at once: more than one, on an executor whose workers every run shares
    (``places``: threads, asyncio), with the embedded torch policy (a language model is one)."""
    return n > 1 and hasattr(ctx.executor, "places") and ctx.config.engine == "torch"


class Stride:
    """Ids ``first, first + n, first + 2n, ...``; remembers the last it handed out."""

    def __init__(self, first: int, n: int) -> None:
        self.next, self.n, self.last = first, n, None

    def __iter__(self) -> Stride:
        return self

    def __next__(self) -> int:
        self.last, self.next = self.next, self.next + self.n
        return self.last


def strided_ids(ids: Iterator[int], n: int) -> list[Stride]:
    """``n`` id iterators that never meet, from the next id of ``ids`` on: the k-th hands out every
    n-th id from that id + k. Only that first id is drawn from ``ids``; ``play_wave`` passes ``ids``
    over the rest the wave used."""
    first = next(ids)
    return [Stride(first + k, n) for k in range(n)]


__all__ = ["Stride", "play_wave", "side_by_side", "strided_ids", "waves"]
