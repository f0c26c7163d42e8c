"""Never a falsely clean report: say so when the scan's exploration could tell nothing apart.

Every probe compares behaviours by what they earn. When every recorded episode of the scan earned
the same return (constant reward across every strategy that was tried), or when the action space
is one the scan cannot explore (a ``gymnasium.spaces.Text`` whose ``sample()`` writes random
strings, with no strategy catalogue), no probe had anything to compare, and a report without
findings would read as "clean" when it means "learned nothing". This check turns that into a
``warn`` finding with the reason.

An ecosystem adapter that measured its catalogue against the env (``adapter_info["playability"]``
or ``adapter_info["catalogue_check"]``) and found it cannot play the env (no move or answer accepted,
fewer than two outcomes, no success signal) is a reason too, named in the adapter's own words, even
when the returns vary: a format penalty that varies is still not a game played.

Code: ``exploit-policy``, the check whose comparison (strategies against the exploration baseline)
could not be made; ``evidence["behaviour"] = "exploration"`` keeps it in a group of its own. It is
a statement about the audit, not about an incentive, so it carries no p-value and Holm leaves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.findings import Finding, Severity
from envaudit.recording import Records

MIN_EPISODES = 32
"""Below this many finished episodes a constant return says nothing either way: eight coin flips
come out all alike once in 128 scans, thirty-two once in two billion (a quick scan records more
than 64)."""
MIN_SEEDS = 2
"""And from at least this many reset seeds: one start state is not the env."""
EXAMPLES = 5


def unexplorable(space: gym.Space) -> str | None:
    """Why exploration cannot explore ``space``, or None when it can."""
    if isinstance(space, gym.spaces.Text) and type(space).sample is gym.spaces.Text.sample:
        return (f"the action space is free text ({space!r}) with no strategy catalogue: random "
                "strings are all the scan can send, and a grader rejects them all alike")
    return None


class ReturnTally:
    """What every episode the scan ran earned — kept in the report or not (an oracle's runs, the
    screening runs of scripted policies): count, lowest and highest return, reset seeds, successes."""

    def __init__(self) -> None:
        self.n, self.n_success = 0, 0
        self.low, self.high = np.inf, -np.inf
        self.seeds: set[int] = set()

    def add(self, episodes) -> None:
        if episodes.empty:
            return
        returns = episodes["return"].to_numpy(float)
        returns = returns[np.isfinite(returns)]
        if len(returns):
            self.n += len(returns)
            self.low, self.high = min(self.low, float(returns.min())), max(self.high, float(returns.max()))
        self.n_success += int(episodes["success"].fillna(False).astype(bool).sum())
        if len(self.seeds) < MIN_SEEDS:
            self.seeds.update(int(s) for s in episodes["seed"].dropna().unique()[:MIN_SEEDS])

    def merge(self, other: ReturnTally) -> None:
        """Add what ``other`` counted (a probe that played beside the others kept a tally of its own)."""
        self.n += other.n
        self.n_success += other.n_success
        self.low, self.high = min(self.low, other.low), max(self.high, other.high)
        if len(self.seeds) < MIN_SEEDS:
            self.seeds.update(sorted(other.seeds)[:MIN_SEEDS])

    @property
    def constant(self) -> bool:
        return self.n >= MIN_EPISODES and len(self.seeds) >= MIN_SEEDS and self.low == self.high


CHECKS = ("playability", "catalogue_check")
"""The keys of ``adapter_info`` under which adapters report what share of their catalogue the env
accepts (TextArena, GEM: ``playability``; reasoning-gym, skyrl-gym, verifiers: ``catalogue_check``)."""


def unplayable(adapter: Mapping[str, Any] | None) -> str | None:
    """Why the adapter says it cannot play the env, in its own words, or ``None`` when it can (or
    measured nothing)."""
    if not isinstance(adapter, Mapping):
        return None
    for key in CHECKS:
        check = adapter.get(key)
        if not isinstance(check, Mapping) or check.get("measured") is False and "playable" not in check:
            continue
        accepted = check.get("legal_valid_share", check.get("well_formed_share"))
        if check.get("playable") is False or ("playable" not in check and accepted == 0):
            why = check.get("why") or check.get("note") or (
                f"{accepted:.0%} of its catalogue accepted, {check.get('distinct_outcomes', '?')} distinct "
                "outcome(s)" if isinstance(accepted, (int, float)) else "no catalogue entry accepted")
            errors = check.get("scorer_errors")
            if isinstance(errors, Mapping) and errors.get("count") and errors.get("examples"):
                first = errors["examples"][0]
                why += (f"; the scorer raised {errors['count']} time(s), first {first.get('error')} at "
                        f"{first.get('where')}")
            return f"the adapter's own check ({key}) says exploration cannot play this env: {why}"
    return None


def coverage_findings(records: Records, action_space: gym.Space, tally: ReturnTally | None = None,
                      adapter: Mapping[str, Any] | None = None) -> list[Finding]:
    """A ``warn`` when the scan's episodes could tell nothing apart, or the env's ecosystem adapter
    (``adapter``: the fingerprint's ``adapter`` entry) found it cannot play the env; else nothing.
    ``tally`` counts every episode the scan ran (default: the recorded ones)."""
    episodes = records.episodes
    if tally is None:
        tally = ReturnTally()
        tally.add(episodes)
    space_reason = unexplorable(action_space)
    adapter_reason = unplayable(adapter)
    constant = tally.constant
    if space_reason is None and adapter_reason is None and not constant:
        return []
    reasons = [r for r in (space_reason, adapter_reason) if r]
    if constant:
        reasons.append(f"every one of the {tally.n} episodes the scan ran (all probes, every strategy "
                       f"tried) returned {tally.low:.4g}")
    returns = np.array([tally.low]) if constant else np.array([])
    n_success = tally.n_success
    return [Finding(
        code="exploit-policy", severity=Severity.WARN, probe="explore",
        title=("The scan could not tell any behaviour apart" if constant or space_reason
               else "The scan could not play this env"),
        summary=(("Exploration learned nothing" if constant or space_reason else
                  "Exploration did not play this env as its users do")
                 + ", so the absence of other findings does not mean the env is clean: "
                 + "; ".join(reasons) + "."),
        evidence={"behaviour": "exploration", "reward_path": "env", "reasons": reasons,
                  "n_episodes": int(tally.n),
                  "return": float(returns[0]) if constant else None,
                  "n_success": n_success, "action_space": repr(action_space)},
        examples=[int(e) for e in episodes["episode_id"].head(EXAMPLES)] if not episodes.empty else [],
        fix=("Give the scan something to compare: scan the env through its ecosystem adapter "
             "(envaudit scan reasoning-gym:..., textarena:..., gem:...), or expose a strategy catalogue "
             "(a Discrete action space with action_labels, or a Text space whose sample() writes "
             "real candidate responses), and check that the reward is wired to the grader."),
    )]
