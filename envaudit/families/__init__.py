"""Procedurally generated tool-task environments, clean and with one planted flaw each.

The benchmark of envaudit's precision and recall on envs nobody tuned it for
(``benchmarks/detection.py``) and the detection-rate tests draw their envs here::

    from envaudit.families import make_cases
    for case in make_cases(n_clean=100, n_flawed=100, seed=0):
        report = run_scan(case.make_env, ScanConfig(seed=0, **case.overrides()))

A ``Case`` holds a frozen ``EnvSpec`` (honest path, tools with failure and timeout rates, step
cost, quit and submit actions, shaping, grader noise, step limit, base class), the codes that
catch its planted flaw (``expected``) and the codes that honestly name a side effect of it
(``tolerated``). ``FLAW_KINDS`` lists every flaw with its catalogue code, ``FLAW_DOCS`` what it
does. The same seed gives the same cases, and an env's every random choice flows from its
``reset(seed=...)`` (except where a ``non-replayable`` flaw is planted).
"""

from envaudit.families.analysis import honest_success_return, random_success_probability
from envaudit.families.case import Case
from envaudit.families.envs import FamilyGymEnv, FamilyToolEnv, HonestPolicy, make_env
from envaudit.families.generate import (
    CODE_ORDER,
    EXPECTED,
    TOLERATED,
    clean_case,
    clean_spec,
    flawed_case,
    inject,
    kind_for,
    make_cases,
)
from envaudit.families.spec import FLAW_DOCS, FLAW_KINDS, EnvSpec, Flaw, ToolSpec

__all__ = [
    "CODE_ORDER",
    "Case",
    "EXPECTED",
    "EnvSpec",
    "FLAW_DOCS",
    "FLAW_KINDS",
    "FamilyGymEnv",
    "FamilyToolEnv",
    "Flaw",
    "HonestPolicy",
    "TOLERATED",
    "ToolSpec",
    "clean_case",
    "clean_spec",
    "flawed_case",
    "honest_success_return",
    "inject",
    "kind_for",
    "make_cases",
    "make_env",
    "random_success_probability",
]
