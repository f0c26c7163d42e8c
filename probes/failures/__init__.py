"""Probe ``failures`` → ``failure-rewarded``, ``failure-shortcut``: failed tool calls that pay, and
failures that make giving up pay.

Each code is decided in one place, ``decisions``: ``decide_failure_shortcut`` grades a short path
that failures make pay (the failure sweep on a ``ToolEnv``, exploration on a plain env, or an
ending move that pays more right after a failure) and ``decide_failure_rewarded`` a step that pays
because a call failed (the failed call itself, or a move right after it); their words are in
``text``. The measuring modules hand them what they found: ``sweep`` runs the probe (the
failure-rate sweep behind ``failure-shortcut``, ``plain`` its exploration-only form on plain envs);
``rewarded`` and ``conditioned`` test whether a failed call pays; ``charge``, ``topup`` and
``confirm`` are the measurements they share.
"""

from envaudit.probe import Probe
from envaudit.probes.failures.decisions import decide_failure_rewarded, decide_failure_shortcut
from envaudit.probes.failures.sweep import run

probe = Probe(
    name="failures",
    run=run,
    analyse=run,  # reads recorded episodes alone where it has no env to inject faults into
    analyse_needs=("steps", "steps.tool_status", "steps.reward"),
    summary="failed tool calls that pay, and failures that make giving up pay (fault injection, failure sweep)",
    codes=("failure-rewarded", "failure-shortcut"),
    weight=1.0,
    order=55,
    decisions={"failure-rewarded": decide_failure_rewarded, "failure-shortcut": decide_failure_shortcut},
)

__all__ = ["decide_failure_rewarded", "decide_failure_shortcut", "probe"]
