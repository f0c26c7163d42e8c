"""Probe ``length`` → ``length-bias``: does the return depend on episode length beyond what success
explains (step farming, a brevity bonus, delaying a success that is in reach)?

``bias`` runs the probe (the regression, the farming and brevity strategies); ``delay`` pairs a
success with the same success delayed; ``search`` finds successes in long tasks without an oracle.
"""

from envaudit.probe import Probe
from envaudit.probes.length.bias import CODE, run

probe = Probe(
    name="length",
    run=run,
    summary="does the return depend on episode length beyond what success explains?",
    codes=(CODE,),
    weight=1.0,
    order=40,
)

__all__ = ["probe"]
