"""Probe ``length`` → ``length-bias``: does the return depend on episode length beyond what success
explains (step farming, a brevity bonus, delaying a success that is in reach)?

``bias`` runs the probe (the regression, the farming and brevity strategies); ``cycles`` judges
action cycles that pay lap after lap by the counterfactual engine; ``delay`` pairs a
success with the same success delayed; ``fading`` says which endings pay less the later they are
taken (a brevity bonus's signature); ``search`` finds successes in long tasks without an oracle;
``logged`` is its half that judges a logged run's episodes alone (``envaudit logs``).
Each measures; ``decide_length_bias`` (``decisions``, with its words in ``text``) grades every kind
of length effect they hand over and is the one place a ``length-bias`` finding is made.
"""

from envaudit.probe import Probe
from envaudit.probes.length.bias import run
from envaudit.probes.length.decisions import CODE, decide_length_bias
from envaudit.probes.length.logged import analyse

probe = Probe(
    name="length",
    run=run,
    analyse=analyse,
    analyse_needs=("length",),
    summary="does the return depend on episode length beyond what success explains?",
    codes=(CODE,),
    decisions={CODE: decide_length_bias},
    weight=1.0,
    order=40,
)

__all__ = ["CODE", "decide_length_bias", "probe"]
