"""The counterfactual engine: judge a behaviour against what the alternatives pay *from the same
state* (DESIGN.md, "Counterfactuals").

Given prefixes (a reset seed and the actions taken) it plays named continuations from each —
end now each available way, the oracle's or a known honest continuation, idle ``k`` steps then end,
repeat an action cycle ``k`` times then end, run into the step limit, the next call with its tool
forced ok/error/timeout — through ``rollout.Runner`` (a probe's ``ctx.run``), and pairs their
returns prefix by prefix. Continuations are counted in env steps (``Played.cost``). ``cycles``
finds action cycles that return to the same observation with positive net reward.
"""

from envaudit.counterfactual.cycles import MAX_PREFIXES, Cycle, find_cycles
from envaudit.counterfactual.engine import (
    Counterfactuals,
    Episode,
    Played,
    from_runner,
    paired_test,
)
from envaudit.counterfactual.plans import (
    ANY,
    ENDED,
    LIMIT,
    Continuation,
    Prefix,
    cycle_then_end,
    end_now,
    forced,
    idle_then_end,
    oracle_from_here,
    play_then,
    run_into_limit,
)

__all__ = [
    "ANY", "ENDED", "LIMIT", "MAX_PREFIXES", "Continuation", "Counterfactuals", "Cycle", "Episode", "Played", "Prefix",
    "cycle_then_end", "end_now", "find_cycles", "forced", "from_runner", "idle_then_end", "oracle_from_here",
    "paired_test", "play_then", "run_into_limit",
]
