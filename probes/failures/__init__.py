"""Probe ``failures`` → ``failure-rewarded``, ``failure-shortcut``: failed tool calls that pay, and
failures that make giving up pay.

``sweep`` runs the probe (the failure-rate sweep behind ``failure-shortcut``); ``rewarded`` and
``conditioned`` decide whether a failed call pays (``failure-rewarded``); ``charge``, ``plain``,
``topup`` and ``confirm`` are the measurements they share.
"""

from envaudit.probe import Probe
from envaudit.probes.failures.sweep import run

probe = Probe(
    name="failures",
    run=run,
    summary="failed tool calls that pay, and failures that make giving up pay (fault injection, failure sweep)",
    codes=("failure-rewarded", "failure-shortcut"),
    weight=1.0,
    order=55,
)

__all__ = ["probe"]
