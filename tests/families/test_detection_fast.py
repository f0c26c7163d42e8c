"""Detection and false-alarm rates on a fast subset of generated envs (the benchmark's small twin).

``benchmarks/detection.py`` scans hundreds of generated envs with every probe; this runs in the
default suite on a few dozen with ``quick=True`` and probes limited to keep it fast:

- one flawed env per catalogue code, scanned by the probes that own its expected codes
  (``Probe.codes``), so recall is measured per code;
- clean envs scanned by every probe but ``grpo``, and a few more by ``grpo`` alone (the slowest
  probe, and the source of the first false-alarm class of issue 10).

Margins: with a true recall of 95%, the number of hits among n flawed envs is below the 5% quantile
of Binomial(n, 0.95) in at most 5% of draws; with a true false-alarm rate of 2%, clean envs with a
warn/fail exceed the 95% quantile of Binomial(n, 0.02) in at most 5% of draws. The assertions use
those quantiles. Every scan is fixed by its seed and counted in work units; ``budget_s`` is a
safety cap far above what the scans need.
"""

from __future__ import annotations

import functools

from scipy.stats import binom

from envaudit.families import CODE_ORDER, flawed_case, make_cases
from envaudit.families.evaluate import CaseResult, evaluate_case, summarise
from envaudit.probe import registered_probes

SEED = 2
N_CLEAN_ALL_BUT_GRPO = 8
N_CLEAN_GRPO = 3
TARGET_RECALL, TARGET_FALSE_ALARMS = 0.95, 0.02


def owners(codes) -> tuple[str, ...]:
    """The probes that can report any of ``codes`` (read from the registry, not hard-coded)."""
    return tuple(name for name, p in registered_probes().items() if set(p.codes) & set(codes))


@functools.cache
def flawed_results() -> tuple[CaseResult, ...]:
    cases = [flawed_case(SEED, i) for i in range(len(CODE_ORDER))]
    return tuple(evaluate_case(c, seed=SEED, quick=True, probes=owners(c.expected), baseline=False) for c in cases)


@functools.cache
def clean_results() -> tuple[CaseResult, ...]:
    cases = make_cases(N_CLEAN_ALL_BUT_GRPO + N_CLEAN_GRPO, 0, seed=SEED)
    all_but_grpo = tuple(n for n in registered_probes() if n != "grpo")
    out = [evaluate_case(c, seed=SEED, quick=True, probes=all_but_grpo, baseline=False)
           for c in cases[:N_CLEAN_ALL_BUT_GRPO]]
    out += [evaluate_case(c, seed=SEED, quick=True, probes=("grpo",), baseline=False)
            for c in cases[N_CLEAN_ALL_BUT_GRPO:]]
    return tuple(out)


def _describe(results) -> str:
    return "\n".join(
        f"{r.name} ({r.features['base']}, {r.features['regime']}, cost {r.features['step_cost']}, "
        f"shaping {r.features['shaping']}, quit {r.features['quit']}): "
        + (", ".join(f"{f.code}:{f.severity}[{f.probe}]" for f in r.flags) or "nothing at warn/fail")
        for r in results)


def test_the_fast_subset_covers_every_code_and_both_bases():
    flawed = [flawed_case(SEED, i) for i in range(len(CODE_ORDER))]
    assert {c.code for c in flawed} == set(CODE_ORDER)
    for c in flawed:
        assert owners(c.expected), f"no registered probe reports {sorted(c.expected)}"
    clean = make_cases(N_CLEAN_ALL_BUT_GRPO + N_CLEAN_GRPO, 0, seed=SEED)
    assert {c.spec.base for c in clean} == {"toolenv", "gym"}


def test_scans_of_the_fast_subset_ran_all_their_work():
    for r in flawed_results() + clean_results():
        assert not r.error and not r.incomplete and not r.probe_problems, (r.name, r.error, r.incomplete,
                                                                          r.probe_problems)


def test_planted_flaws_are_named_at_warn_or_fail_at_the_target_rate():
    results = flawed_results()
    summary = summarise(results)
    k_min = int(binom.ppf(0.05, len(results), TARGET_RECALL))
    assert summary.overall_recall.k >= k_min, (
        f"recall {summary.overall_recall} below {k_min}/{len(results)}; misses:\n"
        + _describe([r for r in results if not r.hit]))


def test_clean_envs_get_no_warn_or_fail_at_the_target_rate():
    results = clean_results()
    summary = summarise(results)
    k_max = int(binom.ppf(0.95, len(results), TARGET_FALSE_ALARMS))
    assert summary.false_alarms.k <= k_max, (
        f"false alarms {summary.false_alarms} above {k_max}/{len(results)}:\n"
        + _describe([r for r in results if r.false_alarm]))
