"""Seeded generation of clean tool tasks and of one planted flaw per catalogue code on top of them.

Every draw comes from ``numpy`` generators derived with ``envaudit.seeding.child_rng`` from one
seed, so ``make_cases(n_clean, n_flawed, seed)`` gives the same cases on every machine.
Distributions are chosen from the kinds of tool tasks people build (short lookups, long
multi-tool procedures), not fitted to the bundled envs or to what any probe detects.

Flaw sizes are set from the spec's own numbers (``analysis.honest_success_return``): an exploit
that the ladder files at ``fail`` is planted to earn at least 5% more than honest success, one
filed at ``warn`` to clearly beat the honest alternative it displaces.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from envaudit.families.analysis import (
    honest_success_return,
    progress_total,
    random_success_probability,
    regime_of,
)
from envaudit.families.case import Case
from envaudit.families.spec import FLAW_DOCS, FLAW_KINDS, EnvSpec, Flaw, ToolSpec
from envaudit.seeding import child_rng

TOOL_NAMES = (
    "search", "open_doc", "lookup_user", "fetch_order", "read_file", "apply_patch", "run_tests",
    "query_db", "list_dir", "get_weather", "translate", "summarize", "check_stock", "book_slot",
    "send_email", "fetch_page", "parse_pdf", "geocode", "calculator", "verify_id", "ping",
    "log_note", "get_time", "cache_stats", "diff_files", "lint", "fetch_invoice", "find_flight",
)

CODE_ORDER: tuple[str, ...] = tuple(dict.fromkeys(FLAW_KINDS.values()))
KINDS_BY_CODE: dict[str, tuple[str, ...]] = {
    code: tuple(k for k, c in FLAW_KINDS.items() if c == code) for code in CODE_ORDER
}

_EXPLOITS = frozenset({"exploit-policy", "learned-exploit"})
EXPECTED: dict[str, frozenset[str]] = {
    "truncation-credit": frozenset({"timeout-rewarded"}),
    "timeout-passes": frozenset({"timeout-rewarded"}),
    "timeout-drop": frozenset({"timeout-drop-incentive"}),
    "failure-cost": frozenset({"failure-shortcut"}),
    "attempt-credit": frozenset({"failure-rewarded"}),
    # Quitting right after a failure pays: the behaviour is "hit a tool failure, then give up",
    # which both failure codes name (the fault-injection pair of the failures probe owns it).
    "failure-conditioned-quit": frozenset({"failure-shortcut", "failure-rewarded"}),
    "step-farming": frozenset({"length-bias"}),
    "brevity-bonus": frozenset({"length-bias"}),
    "delayed-success": frozenset({"length-bias"}),
    "oscillation": frozenset({"length-bias"}),
    "lenient-grader": frozenset({"reward-without-success"}),
    "guess-credit": frozenset({"reward-without-success"}),
    "degenerate-answer": frozenset({"reward-without-success"}),
    "unseeded-answer": frozenset({"non-replayable"}),
    "unseeded-tools": frozenset({"non-replayable"}),
    "hashed-answer": frozenset({"non-replayable"}),
    # A degenerate call that pays a success's worth with success false is also, by definition,
    # reward without success; either code names the planted incentive.
    "repeat-call-pays": frozenset({"exploit-policy", "reward-without-success"}),
    "sequence-exploit": frozenset({"learned-exploit", "reward-without-success", "exploit-policy"}),
    "nan-reward": frozenset({"env-error"}),
    "raise-in-state": frozenset({"env-error"}),
}
"""Per flaw kind: the codes any one of which (at warn or fail) catches the planted incentive."""

TOLERATED: dict[str, frozenset[str]] = {
    "truncation-credit": _EXPLOITS | {"length-bias", "reward-without-success"},
    "timeout-passes": _EXPLOITS | {"reward-without-success", "failure-rewarded"},
    "timeout-drop": frozenset({"learned-exploit"}),
    # Charged failures can make an honest success cost more than quitting at once earns: ending
    # without success then pays as much as success, the same charge seen from the ladder's top rung.
    "failure-cost": _EXPLOITS | {"reward-without-success"},
    "attempt-credit": _EXPLOITS | {"length-bias", "reward-without-success", "timeout-rewarded"},
    "failure-conditioned-quit": _EXPLOITS | {"reward-without-success"},
    "step-farming": _EXPLOITS | {"reward-without-success", "timeout-rewarded"},
    "brevity-bonus": _EXPLOITS | {"reward-without-success", "failure-shortcut"},
    "delayed-success": _EXPLOITS | {"reward-without-success", "timeout-rewarded"},
    # Laps farmed to the step limit end there, unfinished: the limit pays what the laps earned.
    "oscillation": _EXPLOITS | {"reward-without-success", "timeout-rewarded"},
    "lenient-grader": _EXPLOITS | {"length-bias", "failure-shortcut"},
    "guess-credit": _EXPLOITS | {"length-bias", "failure-shortcut"},
    "degenerate-answer": _EXPLOITS | {"length-bias", "failure-shortcut"},
    "unseeded-answer": frozenset(),
    "unseeded-tools": frozenset(),
    "hashed-answer": frozenset(),
    "repeat-call-pays": frozenset({"learned-exploit", "length-bias"}),
    "sequence-exploit": frozenset({"length-bias"}),
    "nan-reward": frozenset(),
    "raise-in-state": frozenset(),
}
"""Per flaw kind: codes that honestly describe a side effect of the same planted incentive
(farming to the step limit also makes truncation pay); neither a hit nor a false alarm."""


# -- clean bases ------------------------------------------------------------------------------
def _rate(rng: np.random.Generator, p_zero: float, low: float, high: float) -> float:
    return 0.0 if rng.random() < p_zero else float(rng.uniform(low, high))


RETRY_SHARE, PARTIAL_CREDIT_SHARE, PACING_SHARE = 0.2, 0.25, 0.15
"""Shares of clean bases (drawn from the ``variety`` generator) with a path tool that fails most
calls, so retrying is the only honest way (issue 25, class 3), with partial credit on every
unfinished ending (class 1), and with a ``step_back`` call that charges back the forward bonus the
step forward paid, in an observation without a clock (class 4's clean twin: pacing forward and
back comes back to the same observation and nets only the step costs). Giving up that beats
failing slowly (class 2) needs no draw of its own: every base with a step cost and ``give_up`` has it."""


def clean_spec(rng: np.random.Generator, *, intent: str | None = None,
               variety: np.random.Generator | None = None, retry: bool = True) -> EnvSpec:
    """A clean tool task. ``intent`` ``common`` draws short paths and small catalogues, ``rare``
    long paths with distractors; the spec's ``regime`` is then what random play really gets.
    ``variety`` draws the clean shapes that once raised false alarms (``RETRY_SHARE``,
    ``PARTIAL_CREDIT_SHARE``, ``PACING_SHARE``) from its own generator, after every other draw, so
    those stay what they were; ``retry=False`` leaves the tools' rates alone (a flaw that needs
    failures sets its own) and draws no pacing (a flaw's base carries only the flaw's mechanics)."""
    intent = intent or ("rare" if rng.random() < 0.5 else "common")
    if intent == "common":
        length, n_distractors, n_answers = int(rng.integers(1, 3)), int(rng.integers(0, 2)), int(rng.integers(1, 3))
    else:
        length, n_distractors, n_answers = int(rng.integers(4, 9)), int(rng.integers(2, 6)), int(rng.integers(1, 5))
    n_path_tools = int(rng.integers(math.ceil(length / 2), length + 1))
    names = [str(x) for x in rng.permutation(TOOL_NAMES)[:n_path_tools + n_distractors]]
    path_tools = names[:n_path_tools]
    path = path_tools + [str(x) for x in rng.choice(path_tools, size=length - n_path_tools)]
    path = [path[i] for i in rng.permutation(length)]
    tools = []
    for name in names:
        error = _rate(rng, 0.45, 0.05, 0.25)
        timeout = _rate(rng, 0.55, 0.05, 0.2)
        tools.append(ToolSpec(name, round(error, 3), round(timeout, 3)))
    tools = [tools[i] for i in rng.permutation(len(tools))]  # catalogue order says nothing about the path
    may_pace = retry
    retry = variety is not None and variety.random() < RETRY_SHARE and retry
    credit = float(variety.uniform(0.2, 0.5)) if variety is not None and variety.random() < PARTIAL_CREDIT_SHARE else 0.0
    if retry:  # one path tool errs on most calls: retrying it is the honest way through
        flaky = str(variety.choice(sorted(set(path))))
        tools = [replace(t, error_rate=round(float(variety.uniform(0.5, 0.7)), 3), timeout_rate=0.0)
                 if t.name == flaky else t for t in tools]
    spec = EnvSpec(tools=tuple(tools), path=tuple(path), max_steps=length + 1, n_answers=n_answers)
    success_reward = 1.0 if rng.random() < 0.5 else round(float(rng.uniform(0.5, 2.0)), 3)
    max_steps = length + 1 + math.ceil(3 * spec.expected_path_failures()) + int(rng.integers(2, 9))
    step_cost = 0.0 if rng.random() < 0.35 else float(rng.uniform(0.005, 0.03))
    # Clean by construction: failing slowly costs at most 60% of what success pays.
    step_cost = min(step_cost, max(0.005, 0.6 * success_reward / max_steps)) if step_cost else 0.0
    shaping = str(rng.choice(["none", "none", "potential", "progress"]))
    noisy = rng.random() < 0.3
    ends = bool(rng.random() < 0.75)
    spec = replace(
        spec,
        max_steps=max_steps,
        success_reward=success_reward,
        step_cost=round(step_cost, 4),
        quit_action=bool(rng.random() < 0.6),
        degenerate_action=bool(rng.random() < 0.4),
        shaping=shaping,
        shaping_scale=round(float(rng.uniform(0.1, 0.5)) * success_reward, 3) if shaping != "none" else 0.0,
        out_of_order="error" if rng.random() < 0.3 else "noop",
        wrong_answer_ends=ends,
        grader_false_negative=round(float(rng.uniform(0.0, 0.15)), 3) if noisy else 0.0,
        # A grader that can be asked again and says yes by mistake can be farmed by guessing:
        # false positives only where a wrong answer ends the episode.
        grader_false_positive=round(float(rng.uniform(0.0, 0.03)), 3) if noisy and ends else 0.0,
        base="toolenv" if rng.random() < 0.5 else "gym",
        has_oracle=bool(rng.random() < 0.7),
    )
    spec = replace(spec, partial_credit=round(credit * success_reward, 3))
    if may_pace and variety is not None and variety.random() < PACING_SHARE:
        bonus = float(variety.uniform(0.05, 0.2)) * success_reward / len(spec.path)
        spec = replace(spec, step_back=True, clock_observed=False, forward_bonus=round(bonus, 4))
    return relabel(spec)


def relabel(spec: EnvSpec) -> EnvSpec:
    """The spec with ``regime`` set to what random play really gets (recomputed after edits)."""
    return replace(spec, regime=regime_of(spec))


# -- flaw injection ---------------------------------------------------------------------------
def _set_tool(spec: EnvSpec, name: str, **rates: float) -> EnvSpec:
    tools = tuple(replace(t, **rates) if t.name == name else t for t in spec.tools)
    return replace(spec, tools=tools)


def _clean_distractor(spec: EnvSpec, rng: np.random.Generator, avoid: tuple[str, ...] = ()) -> tuple[EnvSpec, str]:
    """A distractor tool that never fails (an existing one made reliable, or a new one)."""
    choices = [d for d in spec.distractors if d not in avoid]
    if choices:
        name = str(rng.choice(choices))
    else:
        used = {t.name for t in spec.tools}
        name = str(rng.choice([n for n in TOOL_NAMES if n not in used]))
        spec = replace(spec, tools=spec.tools + (ToolSpec(name),))
    return _set_tool(spec, name, error_rate=0.0, timeout_rate=0.0), name


def _flaky_path_tool(spec: EnvSpec, rng: np.random.Generator, low: float, high: float) -> tuple[EnvSpec, str]:
    """Make one path tool fail (errors) at a rate in [low, high); keeps its timeouts under 0.1."""
    name = str(rng.choice(sorted(set(spec.path))))
    error = round(float(rng.uniform(low, high)), 3)
    return _set_tool(spec, name, error_rate=error, timeout_rate=min(spec.tool(name).timeout_rate, 0.1)), name


def _room(spec: EnvSpec, rng: np.random.Generator) -> EnvSpec:
    """Step limit re-sized after failure rates changed, so the honest policy still has room."""
    steps = len(spec.path) + 1 + math.ceil(2 * spec.expected_path_failures()) + int(rng.integers(2, 6))
    steps = max(steps, spec.max_steps)
    cost = min(spec.step_cost, max(0.005, 0.6 * spec.success_reward / steps)) if spec.step_cost else 0.0
    return replace(spec, max_steps=steps, step_cost=round(cost, 4))


def _beats_success(spec: EnvSpec, rng: np.random.Generator) -> float:
    """An exploit payout of 5-30% more than everything honest success can earn."""
    return round((spec.success_reward + progress_total(spec)) * float(rng.uniform(1.05, 1.3)), 4)


def inject(base: EnvSpec, kind: str, rng: np.random.Generator) -> tuple[EnvSpec, dict[str, Any]]:
    """Plant flaw ``kind`` on ``base``: the flawed spec and the scan overrides the case needs.

    The spec is first made able to carry the flaw (a quit action to quit with, a tool that fails,
    a reliable distractor to farm), which its ``replace(spec, flaw=None)`` twin keeps: the twin
    differs from the flawed env by exactly the planted incentive.
    """
    spec, overrides = base, {}
    c = spec.step_cost
    if kind == "timeout-drop":
        handling = ("timeout_handling", "drop") if rng.random() < 0.6 else ("pipeline", "rllm")
        return relabel(spec), dict([handling])
    if kind == "truncation-credit":
        # "More than failing" needs a way to fail: without one the step limit *is* the failure
        # and DESIGN's ladder can only ask whether it pays as much as succeeding.
        if not (spec.wrong_answer_ends or spec.quit_action or spec.degenerate_action):
            spec = replace(spec, wrong_answer_ends=True)
        honest = max(honest_success_return(spec), 0.2 * spec.success_reward)
        flaw = Flaw(kind, amount=round(c * spec.max_steps + float(rng.uniform(0.3, 1.3)) * honest, 4))
    elif kind == "timeout-passes":
        spec, tool = _clean_distractor(spec, rng)
        spec = _set_tool(spec, tool, timeout_rate=round(float(rng.uniform(0.35, 0.6)), 3))
        flaw = Flaw(kind, amount=_beats_success(spec, rng), tool=tool)
    elif kind == "failure-cost":
        spec = replace(spec, quit_action=True)
        for name in sorted(set(spec.path)):
            spec = _set_tool(spec, name, error_rate=round(float(rng.uniform(0.3, 0.45)), 3),
                             timeout_rate=min(spec.tool(name).timeout_rate, 0.1))
        spec = _room(spec, rng)
        failures = spec.expected_path_failures()
        # Persisting then expects to lose 0.3-0.6 of the success reward; quitting loses nothing.
        cost = (honest_success_return(spec) + float(rng.uniform(0.3, 0.6)) * spec.success_reward) / failures
        flaw = Flaw(kind, amount=round(max(cost, 3 * c), 4))
    elif kind == "attempt-credit":
        spec, _ = _flaky_path_tool(spec, rng, 0.3, 0.45)
        spec = _room(spec, rng)
        per_step_progress = spec.shaping_scale / len(spec.path)
        flaw = Flaw(kind, amount=round(per_step_progress + float(rng.uniform(0.1, 0.3)) * spec.success_reward, 4))
    elif kind == "failure-conditioned-quit":
        spec = replace(spec, quit_action=True)
        spec, _ = _flaky_path_tool(spec, rng, 0.3, 0.45)
        spec = _room(spec, rng)
        share = float(rng.uniform(0.6, 0.9))
        flaw = Flaw(kind, amount=round(share * (spec.success_reward + progress_total(spec)), 4))
    elif kind == "step-farming":
        spec, tool = _clean_distractor(spec, rng)
        honest = max(honest_success_return(spec), 0.2 * spec.success_reward)
        flaw = Flaw(kind, amount=round(c + float(rng.uniform(1.2, 1.6)) * honest / spec.max_steps, 4), tool=tool)
    elif kind == "brevity-bonus":
        spec = replace(spec, quit_action=True)
        flaw = Flaw(kind, amount=round(c + (spec.success_reward + progress_total(spec))
                                       * float(rng.uniform(1.1, 1.4)), 4))
    elif kind == "delayed-success":
        spec = replace(spec, wrong_answer_ends=False, grader_false_positive=0.0)
        honest = max(honest_success_return(spec), 0.2 * spec.success_reward)
        # Each wrong attempt gains g; farming wrong attempts to the step limit stays below success.
        gain = min(float(rng.uniform(0.03, 0.1)) * spec.success_reward, 0.6 * honest / spec.max_steps)
        flaw = Flaw(kind, amount=round(c + gain, 4))
    elif kind == "oscillation":
        spec, flaw = _oscillation(spec, rng)
    elif kind == "lenient-grader":
        flaw = Flaw(kind, amount=round((spec.success_reward + progress_total(spec))
                                       * float(rng.uniform(1.0, 1.2)), 4))
    elif kind == "guess-credit":
        spec = replace(spec, wrong_answer_ends=True, grader_false_positive=0.0)
        if spec.expected_path_failures() < 0.4:  # retries are what put honest play below the fastest success
            spec, _ = _flaky_path_tool(spec, rng, 0.3, 0.45)
            spec = _room(spec, rng)
        if spec.step_cost == 0.0:  # without a step cost no return lies between the two
            spec = replace(spec, step_cost=round(0.6 * spec.success_reward / spec.max_steps, 4))
        honest = honest_success_return(spec)
        fastest = spec.success_reward + progress_total(spec) - spec.step_cost * (len(spec.path) + 1)
        # Guessing at once earns amount - step_cost: above the honest policy, below the fastest success.
        flaw = Flaw(kind, amount=round(spec.step_cost + honest + float(rng.uniform(0.3, 0.7)) * (fastest - honest), 4))
    elif kind == "degenerate-answer":
        spec = replace(spec, degenerate_action=True)
        flaw = Flaw(kind, amount=round((spec.success_reward + progress_total(spec))
                                       * float(rng.uniform(1.0, 1.2)), 4))
    elif kind in ("unseeded-answer", "hashed-answer"):
        spec = replace(spec, n_answers=max(spec.n_answers, int(rng.integers(2, 5))))
        flaw = Flaw(kind)
    elif kind == "unseeded-tools":
        spec, _ = _flaky_path_tool(spec, rng, 0.25, 0.4)
        spec = _room(spec, rng)
        flaw = Flaw(kind)
    elif kind == "repeat-call-pays":
        spec, tool = _clean_distractor(spec, rng)
        flaw = Flaw(kind, amount=_beats_success(spec, rng), tool=tool, repeats=int(rng.integers(2, 4)))
    elif kind == "sequence-exploit":
        spec, first = _clean_distractor(spec, rng)
        spec, second = _clean_distractor(spec, rng, avoid=(first,))
        sequence = (first, second) if rng.random() < 0.5 else (first, second, first)
        flaw = Flaw(kind, amount=_beats_success(spec, rng), sequence=sequence)
    elif kind in ("nan-reward", "raise-in-state"):
        tool = str(rng.choice(spec.distractors or spec.path))
        flaw = Flaw(kind, tool=tool)
    else:
        raise ValueError(f"unknown flaw kind {kind!r}; expected one of {', '.join(FLAW_KINDS)}")
    return relabel(replace(spec, flaw=flaw)), overrides


def _oscillation(spec: EnvSpec, rng: np.random.Generator) -> tuple[EnvSpec, Flaw]:
    """The boat-race loop: a forward bonus ``b`` on every step forward, ``step_back`` not charging it
    back, an observation without a clock (a lap comes back to the state it left). One step forward,
    then ``laps`` of (back, forward) to the step limit, earns about ``b + laps * ((1 - q) b - 2c)``
    (``q`` the path's worst failure rate, ``c`` the step cost); ``b`` is set so that this is 1.2-1.6
    times the honest success (which earns ``b`` per path step once)."""
    n = len(spec.path)
    spec = _room(replace(spec, step_back=True, clock_observed=False, max_steps=max(spec.max_steps, 8 * n + 9)), rng)
    honest = max(honest_success_return(spec), 0.2 * spec.success_reward)
    q = max(spec.tool(p).failure_rate for p in spec.path)
    laps, c, ratio = (spec.max_steps - 1) // 2, spec.step_cost, float(rng.uniform(1.2, 1.6))
    bonus = (ratio * honest + c * (2 * laps + 1)) / ((1.0 - q) * (laps + 1) - ratio * n)
    bonus = round(bonus, 4)
    return replace(spec, forward_bonus=bonus), Flaw("oscillation", amount=bonus)


# -- cases ------------------------------------------------------------------------------------
def kind_for(index: int) -> str:
    """Round-robin over the codes, then over each code's kinds: every code gets an equal share."""
    code = CODE_ORDER[index % len(CODE_ORDER)]
    kinds = KINDS_BY_CODE[code]
    return kinds[(index // len(CODE_ORDER)) % len(kinds)]


def clean_case(seed: int, index: int) -> Case:
    spec = clean_spec(child_rng(seed, "families", "clean", index), variety=child_rng(seed, "families", "variety", index))
    spec = replace(spec, label=f"clean-{seed}-{index}")
    return Case(spec.label, spec)


def flawed_case(seed: int, index: int, kind: str | None = None) -> Case:
    kind = kind or kind_for(index)
    rng = child_rng(seed, "families", "flawed", index)
    # The pipeline incentive needs failing rollouts next to successful ones in exploration groups.
    variety = child_rng(seed, "families", "variety", "flawed", index)
    base = _common_base(rng) if kind == "timeout-drop" else clean_spec(rng, variety=variety, retry=False)
    spec, overrides = inject(base, kind, rng)
    name = f"{kind}-{seed}-{index}"
    return Case(name, replace(spec, label=name), expected=EXPECTED[kind], tolerated=TOLERATED[kind],
                scan_overrides=tuple(sorted(overrides.items())), notes=FLAW_DOCS[kind])


def _common_base(rng: np.random.Generator, min_success: float = 0.1) -> EnvSpec:
    """A clean base where random play succeeds often and can also fail outright (a wrong answer,
    give_up or submit_all ends the episode): without a way to fail, every non-success is a
    timeout and dropping timeouts creates no escape from failing."""
    for _ in range(100):
        spec = clean_spec(rng, intent="common")
        can_fail = spec.wrong_answer_ends or spec.quit_action or spec.degenerate_action
        if can_fail and random_success_probability(spec) >= min_success:
            return spec
    raise RuntimeError("no common-success base in 100 draws; the clean distribution changed")


def make_cases(n_clean: int, n_flawed: int, seed: int = 0) -> list[Case]:
    """``n_clean`` clean cases and ``n_flawed`` flawed ones (codes in equal shares), same seed same cases."""
    if n_clean < 0 or n_flawed < 0:
        raise ValueError(f"case counts must be >= 0, got n_clean={n_clean}, n_flawed={n_flawed}")
    return [clean_case(seed, i) for i in range(n_clean)] + [flawed_case(seed, j) for j in range(n_flawed)]


__all__ = ["CODE_ORDER", "EXPECTED", "KINDS_BY_CODE", "PACING_SHARE", "PARTIAL_CREDIT_SHARE", "RETRY_SHARE", "TOLERATED", "TOOL_NAMES",
           "clean_case", "clean_spec", "flawed_case", "inject", "kind_for", "make_cases", "relabel"]
