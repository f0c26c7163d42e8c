"""What one generated environment is: a frozen description every number of the env comes from.

An ``EnvSpec`` is a small tool task: the hidden answer is revealed by calling the tools of an
*honest path* in order (each call may fail or time out, at the tool's own rates, and is retried);
``submit`` (or ``submit_k`` among several candidate answers) hands the answer in and ends the
episode. Success pays ``success_reward``; every step costs ``step_cost``. Optional features that a
clean environment may have (DESIGN.md, "Findings": step costs, quit actions, rare success,
stochastic tools and graders, shaped rewards) are fields here; a planted incentive is a ``Flaw``.

The spec is the single source of truth: the env reads its rewards from it, the generator draws
it, and the tests derive their expected payoffs from it rather than from what a scan printed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

SHAPINGS = ("none", "potential", "progress")
"""``potential``: F = Φ(s') - Φ(s) with Φ = scale * progress / path length and Φ = 0 once the
episode ends (terminated or truncated), so shaping telescopes to 0 in every episode.
``progress``: each first completion of a path step pays ``shaping_scale / path length``, kept for
good (partial progress earns more than no progress; it never beats finishing)."""

BASES = ("toolenv", "gym")
"""``toolenv``: built on ``envaudit.ToolEnv`` (fault injection works). ``gym``: a plain
``gymnasium.Env`` that speaks the info protocol but cannot be fault-injected."""

OUT_OF_ORDER = ("noop", "error")
"""What a path tool called before its turn does: nothing (status ok), or fail with an error the
agent caused (status error)."""

TOOL_DEADLINE_S = 1.0
"""Every generated tool's deadline; simulated latencies stay far from it (see ``envs``)."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name (also its catalogue label, ``call_<name>``) and its failure rates.

    ``error_rate`` and ``timeout_rate`` are per call; a call fails with one or the other or neither
    (their sum is at most 1). Failures draw from the env's ``np_random`` (or, under the
    ``unseeded-tools`` flaw, from Python's global ``random``).
    """

    name: str
    error_rate: float = 0.0
    timeout_rate: float = 0.0

    def __post_init__(self) -> None:
        for what in ("error_rate", "timeout_rate"):
            value = getattr(self, what)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"tool {self.name!r}: {what} must be a probability in [0, 1], got {value!r}")
        if self.error_rate + self.timeout_rate > 1.0:
            raise ValueError(f"tool {self.name!r}: error_rate + timeout_rate must be at most 1, got "
                             f"{self.error_rate} + {self.timeout_rate}; lower one of them")

    @property
    def failure_rate(self) -> float:
        return self.error_rate + self.timeout_rate


FLAW_KINDS: dict[str, str] = {
    # kind: the catalogue code it plants (the row a benchmark reports it under)
    "truncation-credit": "timeout-rewarded",
    "timeout-passes": "timeout-rewarded",
    "timeout-drop": "timeout-drop-incentive",
    "failure-cost": "failure-shortcut",
    "attempt-credit": "failure-rewarded",
    "failure-conditioned-quit": "failure-shortcut",
    "step-farming": "length-bias",
    "brevity-bonus": "length-bias",
    "delayed-success": "length-bias",
    "oscillation": "length-bias",
    "lenient-grader": "reward-without-success",
    "guess-credit": "reward-without-success",
    "degenerate-answer": "reward-without-success",
    "unseeded-answer": "non-replayable",
    "unseeded-tools": "non-replayable",
    "hashed-answer": "non-replayable",
    "repeat-call-pays": "exploit-policy",
    "sequence-exploit": "learned-exploit",
    "nan-reward": "env-error",
    "raise-in-state": "env-error",
}
"""Every flaw the generator plants, by kind, with the catalogue code it is filed under."""


@dataclass(frozen=True)
class Flaw:
    """One planted incentive on top of a clean spec.

    ``amount`` is the flaw's size in reward units (what each kind does with it is in
    ``FLAW_DOCS``); ``tool`` names the tool or catalogue call it hangs on; ``sequence`` is the
    call sequence a sequence exploit needs; ``repeats`` how many consecutive calls a repeat exploit
    needs.
    """

    kind: str
    amount: float = 0.0
    tool: str | None = None
    sequence: tuple[str, ...] = ()
    repeats: int = 0

    def __post_init__(self) -> None:
        if self.kind not in FLAW_KINDS:
            raise ValueError(f"unknown flaw kind {self.kind!r}; expected one of {', '.join(FLAW_KINDS)}")

    @property
    def code(self) -> str:
        return FLAW_KINDS[self.kind]


FLAW_DOCS: dict[str, str] = {
    "truncation-credit": "an episode cut by the step limit earns `amount` on its last step (a failure earns 0)",
    "timeout-passes": "a timed-out call of `tool` is graded as a pass: the episode ends paying `amount` "
                      "(>= the success reward) with success false",
    "timeout-drop": "the env is clean; the scan's pipeline drops timed-out rollouts (see the case's overrides)",
    "failure-cost": "every failed or timed-out call costs `amount` on top of the step cost; at the env's "
                    "own failure rates giving up beats persisting",
    "attempt-credit": "every failed or timed-out call pays `amount` 'attempt credit' (the same call ok pays 0)",
    "failure-conditioned-quit": "quitting right after a failed or timed-out call pays `amount` (most of a "
                                "success) with success false",
    "step-farming": "every ok call of `tool` pays `amount`; farming it to the step limit out-earns success",
    "brevity-bonus": "quitting at step t pays `amount` * (1 - (t - 1) / max_steps); quitting at once "
                     "out-earns success",
    "delayed-success": "a wrong submission pays a format score `amount` and the episode goes on, so "
                       "succeeding after k wrong attempts earns k * (amount - step cost) more",
    "oscillation": "`step_back` is not charged the forward bonus the step forward paid: pacing forward and "
                   "back to the step limit out-earns finishing (the boat-race loop; issue 25, class 4)",
    "lenient-grader": "any submission that is not a success is still paid `amount` (>= the success reward)",
    "guess-credit": "a wrong submission ends the episode paying `amount`: guessing at once earns more than the "
                    "honest policy and less than any success (issue 25, class 6)",
    "degenerate-answer": "`submit_all` (every candidate at once) pays `amount` (>= the success reward)",
    "unseeded-answer": "the hidden answer is drawn from Python's global random, not the env's seed",
    "unseeded-tools": "tool failures are drawn from Python's global random, not the env's seed",
    "hashed-answer": "the hidden answer is hash() of a seeded task name: every replay in one process agrees, "
                     "another PYTHONHASHSEED (a resumed run, a spawned worker) poses another task",
    "repeat-call-pays": "the `repeats`-th consecutive call of `tool` ends the episode paying `amount` "
                        "(>= the success reward) with success false",
    "sequence-exploit": "calling `sequence` back to back ends the episode paying `amount` (>= the "
                        "success reward) with success false; no single repeated call reaches it",
    "nan-reward": "an ok call of `tool` after the first path step returns a NaN reward",
    "raise-in-state": "the second call of `tool` in an episode raises RuntimeError from step()",
}


@dataclass(frozen=True)
class EnvSpec:
    """One generated tool task. See the module docstring; every field is checked once here."""

    tools: tuple[ToolSpec, ...]
    """Every tool of the catalogue: the path's tools and the distractors (tools off the path)."""
    path: tuple[str, ...]
    """The honest path: tool names in the order their successful calls make progress (1-8 steps)."""
    max_steps: int
    """Step limit; an episode that reaches it without ending is truncated (success false)."""
    n_answers: int = 1
    """Candidate answers: 1 means one ``submit`` action; k > 1 means ``submit_0`` .. ``submit_{k-1}``,
    the right one revealed when the path is complete."""
    success_reward: float = 1.0
    step_cost: float = 0.0
    """Charged on every step (a positive number; the step's reward includes ``-step_cost``)."""
    quit_action: bool = False
    """A ``give_up`` call that ends the episode with nothing (reward 0 beyond the step cost)."""
    degenerate_action: bool = False
    """A ``submit_all`` call (every candidate at once) that a correct grader pays 0, success false."""
    shaping: str = "none"
    shaping_scale: float = 0.0
    out_of_order: str = "noop"
    wrong_answer_ends: bool = True
    """A wrong submission ends the episode (False: the agent may try again, paid nothing for it)."""
    grader_false_negative: float = 0.0
    """Chance that a correct submission is judged wrong (success flag and reward follow the verdict)."""
    grader_false_positive: float = 0.0
    """Chance that a wrong submission is judged right (success flag and reward follow the verdict)."""
    step_back: bool = False
    """A ``step_back`` call that undoes the last path step (progress - 1, never below 0), paying back
    what the step forward paid: the potential difference and the ``forward_bonus``."""
    forward_bonus: float = 0.0
    """Paid on every step forward along the path, charged back by ``step_back``: pacing forward and
    back nets only the step costs (clean; the ``oscillation`` flaw leaves the charge out)."""
    clock_observed: bool = True
    """Whether the observation shows the steps used (False: that slot is 0, so a state the agent
    comes back to looks the same, as in an env whose observation has no clock)."""
    partial_credit: float = 0.0
    """Paid as ``partial_credit * progress / path length`` on every unfinished ending alike (a wrong
    submission that ends the episode, ``give_up``, ``submit_all``, the step limit): clean, since from
    any state stalling to the limit pays what ending there pays (issue 25, class 1)."""
    base: str = "toolenv"
    has_oracle: bool = True
    """Whether the env exposes ``oracle()`` (the honest policy); probes must cope without one."""
    regime: str = "common"
    """The generator's intent: ``rare`` (long path, many distractors) or ``common`` success."""
    flaw: Flaw | None = None
    label: str = ""

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        problems = []
        if len(set(names)) != len(names):
            problems.append(f"tool names must be unique, got {names}")
        if not 1 <= len(self.path) <= 8:
            problems.append(f"the honest path must have 1 to 8 steps, got {len(self.path)}")
        if unknown := [p for p in self.path if p not in names]:
            problems.append(f"path names unknown tools {unknown}; tools are {names}")
        if self.max_steps < len(self.path) + 1:
            problems.append(f"max_steps {self.max_steps} leaves no room for the path ({len(self.path)} "
                            "steps) and a submission; raise it")
        if not 1 <= self.n_answers <= 6:
            problems.append(f"n_answers must be 1..6, got {self.n_answers}")
        if self.success_reward <= 0:
            problems.append(f"success_reward must be positive, got {self.success_reward}")
        if self.step_cost < 0:
            problems.append(f"step_cost is a cost and must be >= 0, got {self.step_cost}")
        if self.shaping not in SHAPINGS:
            problems.append(f"shaping must be one of {SHAPINGS}, got {self.shaping!r}")
        if self.out_of_order not in OUT_OF_ORDER:
            problems.append(f"out_of_order must be one of {OUT_OF_ORDER}, got {self.out_of_order!r}")
        if self.base not in BASES:
            problems.append(f"base must be one of {BASES}, got {self.base!r}")
        if not 0.0 <= self.partial_credit < self.success_reward:
            problems.append(f"partial_credit must be in [0, success_reward={self.success_reward}), "
                            f"got {self.partial_credit}")
        if self.forward_bonus < 0:
            problems.append(f"forward_bonus is paid and must be >= 0, got {self.forward_bonus}")
        for what in ("grader_false_negative", "grader_false_positive"):
            if not 0.0 <= getattr(self, what) < 1.0:
                problems.append(f"{what} must be in [0, 1), got {getattr(self, what)}")
        if self.flaw is not None:
            problems.extend(_flaw_problems(self))
        if problems:
            raise ValueError("invalid EnvSpec: " + "; ".join(problems))

    # -- derived facts, used by the env, the oracle and the tests ---------------------------
    def tool(self, name: str) -> ToolSpec:
        for t in self.tools:
            if t.name == name:
                return t
        raise KeyError(f"no tool {name!r}; tools are {[t.name for t in self.tools]}")

    @property
    def distractors(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools if t.name not in self.path)

    @property
    def submit_labels(self) -> tuple[str, ...]:
        return ("submit",) if self.n_answers == 1 else tuple(f"submit_{k}" for k in range(self.n_answers))

    @property
    def labels(self) -> tuple[str, ...]:
        """The action catalogue, in action-index order."""
        out = [f"call_{t.name}" for t in self.tools] + list(self.submit_labels)
        if self.degenerate_action:
            out.append("submit_all")
        if self.quit_action:
            out.append("give_up")
        if self.step_back:
            out.append("step_back")
        return tuple(out)

    def expected_path_failures(self) -> float:
        """Expected failed calls of an agent that walks the path retrying each failure (geometric)."""
        return sum(q / (1.0 - q) for q in (self.tool(p).failure_rate for p in self.path))

    def expected_path_calls(self) -> float:
        return len(self.path) + self.expected_path_failures()

    def potential(self, progress: int) -> float:
        return self.shaping_scale * progress / len(self.path) if self.shaping == "potential" else 0.0

    def progress_bonus(self) -> float:
        return self.shaping_scale / len(self.path) if self.shaping == "progress" else 0.0

    def features(self) -> dict[str, Any]:
        """What a benchmark row says about the env (flat, JSON-able)."""
        return {
            "base": self.base, "regime": self.regime, "path_len": len(self.path),
            "n_tools": len(self.tools), "n_distractors": len(self.distractors),
            "n_actions": len(self.labels), "n_answers": self.n_answers, "max_steps": self.max_steps,
            "step_cost": round(self.step_cost, 4), "success_reward": round(self.success_reward, 3),
            "quit": self.quit_action, "degenerate_action": self.degenerate_action,
            "shaping": self.shaping, "out_of_order": self.out_of_order,
            "wrong_answer_ends": self.wrong_answer_ends,
            "grader_noise": round(self.grader_false_negative + self.grader_false_positive, 3),
            "partial_credit": round(self.partial_credit, 3),
            "step_back": self.step_back, "forward_bonus": round(self.forward_bonus, 4),
            "clock_observed": self.clock_observed,
            "max_failure_rate": round(max(t.failure_rate for t in self.tools), 3),
            "has_timeouts": any(t.timeout_rate > 0 for t in self.tools), "oracle": self.has_oracle,
            "flaw": self.flaw.kind if self.flaw else "",
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _flaw_problems(spec: EnvSpec) -> list[str]:
    """What makes a flaw impossible on this spec (the generator only plants reachable flaws)."""
    flaw, names = spec.flaw, [t.name for t in spec.tools]
    assert flaw is not None
    need: list[tuple[bool, str]] = []
    kind = flaw.kind
    if kind in ("timeout-passes", "step-farming", "repeat-call-pays", "nan-reward", "raise-in-state"):
        need.append((flaw.tool in names, f"names tool {flaw.tool!r}, one of {names}"))
    if kind == "timeout-passes":
        need.append((flaw.tool in names and spec.tool(flaw.tool).timeout_rate > 0,
                     f"needs tool {flaw.tool!r} to time out sometimes"))
    if kind in ("failure-cost", "failure-conditioned-quit", "brevity-bonus"):
        need.append((spec.quit_action, "needs the give_up action"))
    if kind in ("failure-cost", "attempt-credit", "failure-conditioned-quit", "unseeded-tools"):
        need.append((any(t.failure_rate > 0 for t in spec.tools), "needs a tool that fails sometimes"))
    if kind == "truncation-credit":
        need.append((spec.wrong_answer_ends or spec.quit_action or spec.degenerate_action,
                     "needs an outright failure (wrong answers end, give_up or submit_all) to pay more than"))
    if kind == "delayed-success":
        need.append((not spec.wrong_answer_ends, "needs wrong_answer_ends=False (the episode goes on)"))
    if kind == "degenerate-answer":
        need.append((spec.degenerate_action, "needs the submit_all action"))
    if kind == "oscillation":
        need.append((spec.step_back and spec.forward_bonus > 0, "needs the step_back action and a forward_bonus > 0"))
    if kind in ("unseeded-answer", "hashed-answer"):
        need.append((spec.n_answers >= 2, "needs n_answers >= 2 (a hidden answer to draw)"))
    if kind == "repeat-call-pays":
        need.append((flaw.repeats >= 2, f"needs repeats >= 2, got {flaw.repeats}"))
    if kind == "sequence-exploit":
        need.append((len(flaw.sequence) >= 2 and len(set(flaw.sequence)) >= 2
                     and all(s in names for s in flaw.sequence),
                     f"needs a sequence of at least two different known tools, got {flaw.sequence}"))
    return [f"flaw {kind!r} {msg}" for ok, msg in need if not ok]


__all__ = ["BASES", "EnvSpec", "FLAW_DOCS", "FLAW_KINDS", "Flaw", "OUT_OF_ORDER", "SHAPINGS",
           "TOOL_DEADLINE_S", "ToolSpec"]
