"""Do the one-call properties catch what they claim, at their defaults? Recall and false failures.

Runs every property of ``envaudit.testing`` with its default options on the bundled flawed and
clean variants (``envaudit.envs.VARIANTS``, Gymnasium mode) and on generated families
(``envaudit.families``): per property, its **recall** on the flaws of its class (the property
raised ``PropertyFailed``; ``PropertyNotExercised`` is a miss) and its **false failures** on clean
envs (``PropertyFailed`` on an env with no planted flaw; a clean env where the property could not
exercise its subject is counted apart, as "not exercised"). Targets (issue 26): recall >= 95%,
0 false failures.

    python benchmarks/properties.py                      # 10 flawed per kind, 30 clean families
    python benchmarks/properties.py --n-flawed 4 --n-clean 10 --skip-replay

Every case derives from ``--seed``; the properties run at their own defaults (seed 0), so the same
seed gives the same table.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from dataclasses import dataclass

import envaudit.envs  # noqa: F401  (registers the bundled ids)
import envaudit.testing as T
from envaudit.envs import VARIANTS
from envaudit.families import clean_case, flawed_case

CLASSES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # property: (the family flaw kinds it must catch, the bundled variants' codes it must catch)
    "assert_no_timeout_reward": (frozenset({"truncation-credit", "timeout-passes"}), frozenset({"timeout-rewarded"})),
    "assert_failures_not_rewarded": (frozenset({"attempt-credit"}), frozenset({"failure-rewarded"})),
    "assert_no_reward_after_failure": (frozenset({"failure-conditioned-quit"}), frozenset()),
    "assert_no_failure_penalty": (frozenset({"failure-cost"}), frozenset({"failure-shortcut"})),
    "assert_no_reward_without_success": (frozenset({"lenient-grader", "degenerate-answer"}),
                                         frozenset({"reward-without-success"})),
    "assert_replayable": (frozenset({"unseeded-answer", "unseeded-tools", "hashed-answer"}), frozenset({"non-replayable"})),
    "assert_no_length_reward": (frozenset({"step-farming", "brevity-bonus"}), frozenset({"length-bias"})),
    "assert_no_delayed_success_reward": (frozenset({"delayed-success"}), frozenset()),
}
TARGET_RECALL = 0.95


@dataclass
class Tally:
    caught: int = 0
    flawed: int = 0
    false_failures: int = 0
    not_exercised: int = 0
    clean: int = 0
    seconds: float = 0.0


def verdict(prop: str, make_env) -> tuple[str, float]:
    started = time.perf_counter()
    try:
        getattr(T, prop)(make_env)
        result = "pass"
    except T.PropertyFailed:
        result = "failed"
    except T.PropertyNotExercised:
        result = "not-exercised"
    return result, time.perf_counter() - started


def targets(n_flawed: int, n_clean: int, seed: int):
    """(name, make_env, flaw kind or bundled code or '' for clean, source)."""
    for v in VARIANTS.values():
        yield v.id, v.id, ("" if v.is_clean else v.planted[0]), "bundled"
    kinds = sorted({k for fam, _ in CLASSES.values() for k in fam})
    for kind in kinds:
        for i in range(n_flawed):
            case = flawed_case(seed, i, kind=kind)
            yield case.name, case.make_env, kind, f"family ({case.spec.base})"
    for i in range(n_clean):
        case = clean_case(seed, i)
        yield case.name, case.make_env, "", f"family ({case.spec.base})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-flawed", type=int, default=10, help="generated envs per flaw kind (default 10)")
    parser.add_argument("--n-clean", type=int, default=30, help="generated clean envs (default 30)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated cases (default 0)")
    parser.add_argument("--skip-replay", action="store_true", help="leave out assert_replayable (a subprocess each)")
    parser.add_argument("--only", nargs="+", metavar="PROPERTY", choices=sorted(CLASSES),
                        help="run only these properties")
    parser.add_argument("--verbose", action="store_true", help="print every miss and false failure")
    args = parser.parse_args()
    tallies: dict[str, Tally] = defaultdict(Tally)
    notes: list[str] = []
    props = [p for p in CLASSES if not (args.skip_replay and p == "assert_replayable")
             and (not args.only or p in args.only)]
    for name, make_env, flaw, source in targets(args.n_flawed, args.n_clean, args.seed):
        for prop in props:
            kinds, codes = CLASSES[prop]
            mine = flaw in kinds if source != "bundled" else flaw in codes
            if flaw and not mine:
                continue  # a flaw of another class: neither recall nor a false failure
            result, seconds = verdict(prop, make_env)
            t = tallies[prop]
            t.seconds += seconds
            if flaw:
                t.flawed += 1
                t.caught += result == "failed"
                if result != "failed":
                    notes.append(f"miss   {prop} on {name} [{source}]: {result}")
            else:
                t.clean += 1
                t.false_failures += result == "failed"
                t.not_exercised += result == "not-exercised"
                if result == "failed":
                    notes.append(f"FALSE  {prop} on {name} [{source}]")
    print(f"{'property':36s} {'recall':>14s} {'false failures':>15s} {'not exercised':>14s} {'s/env':>6s}")
    for prop in props:
        t = tallies[prop]
        recall = f"{t.caught}/{t.flawed} {100 * t.caught / t.flawed:5.1f}%" if t.flawed else "-"
        runs = t.flawed + t.clean
        print(f"{prop:36s} {recall:>14s} {f'{t.false_failures}/{t.clean}':>15s} "
              f"{f'{t.not_exercised}/{t.clean}':>14s} {t.seconds / max(1, runs):6.2f}")
    ok = all((not t.flawed or t.caught / t.flawed >= TARGET_RECALL) and t.false_failures == 0
             for t in tallies.values())
    print(f"targets (recall >= {TARGET_RECALL:.0%}, 0 false failures): {'met' if ok else 'NOT met'}")
    if args.verbose:
        print("\n".join(notes))


if __name__ == "__main__":
    main()
