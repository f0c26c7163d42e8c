"""One finding per incentive: the findings that describe the same incentive, grouped.

Several probes see one planted flaw from different angles: the timeouts probe measures that a
timed-out episode pays, fault injection sees a timed-out tool step pay more than a working one, a
scripted policy that forces timeouts out-earns random play, and the GRPO probe learns to time
out. A user should read that as one problem with corroborating evidence, not as five.

An incentive is keyed by the **behaviour** an agent would adopt (``timeout``, ``tool-failure``,
``quit``, ``stall``, ``delay-success``, ``degenerate-answer``; and the non-incentives
``non-replayable``, ``env-error``, ``exploration``) and the **reward path** that pays for it
(``env``: the env's own reward; ``pipeline``: the training pipeline's handling of rollouts). A
probe names both in ``evidence["behaviour"]`` / ``evidence["reward_path"]``; for findings that do
not (older or third-party probes) they are inferred from the code and the evidence.

Rules (DESIGN.md, "Findings"):

- findings with the same key form one group;
- generic findings (``exploit-policy``, ``learned-exploit``, and the GRPO targeted search's
  ``reward-without-success``) say *that* a behaviour pays, not *why*: they join the group of a
  specific code with the same behaviour when there is one, else one of a behaviour they cannot be
  told apart from (``STAND_INS``: a policy that stalls to the step limit also times out; staying
  put, giving up and ending on a worthless answer all end without doing the task, and which one a
  scripted or trained policy picks is an accident of the env's action set), and only without any
  such group do they stand alone (together with the other generic findings of that behaviour);
- an ``info`` group joins a ``warn``/``fail`` group of the same behaviour as corroboration;
- a group is as severe as its most severe member, so an ``info`` member never makes it louder;
- the headline is the most specific code among the members at the group's level (``SPECIFICITY``),
  then the most severe, then the one measured on the env before the one a trained policy surfaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envaudit.findings import CODES, Finding, Severity, rank

BEHAVIOURS = ("timeout", "tool-failure", "quit", "stall", "delay-success", "degenerate-answer",
              "non-replayable", "env-error", "exploration")
"""What an agent would do (or, for the last three, what is wrong instead of an incentive)."""
REWARD_PATHS = ("env", "pipeline")
"""Who pays for the behaviour: the env's own reward, or the training pipeline's handling of rollouts."""
SPECIFICITY = ("env-error", "non-replayable", "timeout-rewarded", "timeout-drop-incentive", "failure-rewarded",
               "failure-shortcut", "length-bias", "reward-without-success", "exploit-policy", "learned-exploit")
"""Headline preference: the code that says most precisely what pays and how to fix it comes first."""
GENERIC = frozenset({"exploit-policy", "learned-exploit"})
"""Codes that show a behaviour pays without naming the mechanism; they corroborate a specific code."""
STAND_INS: Mapping[str, tuple[str, ...]] = {
    "timeout": ("stall", "quit", "degenerate-answer"),
    "stall": ("timeout", "quit", "degenerate-answer"),
    "quit": ("degenerate-answer", "stall", "timeout"),
    "degenerate-answer": ("quit", "stall", "timeout"),
}
"""For a generic finding, the behaviours it may corroborate when its own has no specific group,
closest first: stalling to the step limit is a timeout; ending at once with a worthless answer and
giving up both end the episode without the task; all four are ways of not doing it."""

_MOVES = {"timeouts up": "timeout", "failures up": "tool-failure", "length down": "quit", "length up": "stall"}
"""The GRPO probe's moved behaviours (``envaudit.probes.grpo.drift.Move.behaviour``) in grouping words."""
_ENDINGS = {"tool_timeout": "timeout", "truncated": "timeout", "tool_error": "tool-failure",
            "env_exception": "env-error"}
"""An exploit policy's modal end reason (``evidence["ending"]``) in grouping words."""
MOSTLY_FAILED = 0.5
"""Episodes in which at least this share of tool calls failed show the behaviour 'hitting tool failures'."""


@dataclass(frozen=True)
class FindingGroup:
    """One incentive: a headline finding and every finding that corroborates it.

    ``members`` holds the headline first, then the others in rank order; ``severity`` is the most
    severe member's; ``codes`` are the members' distinct codes, the headline's first.
    """

    headline: Finding
    members: tuple[Finding, ...]
    behaviour: str
    reward_path: str
    severity: Severity
    codes: tuple[str, ...]

    @property
    def code(self) -> str:
        return self.headline.code

    @property
    def corroborating(self) -> tuple[Finding, ...]:
        """The members other than the headline."""
        return self.members[1:]

    def to_dict(self, index: Mapping[int, int]) -> dict[str, Any]:
        """JSON form; ``index`` maps ``id(finding)`` to the finding's position in the report's list."""
        return {"headline": index[id(self.headline)], "code": self.code, "behaviour": self.behaviour,
                "reward_path": self.reward_path, "severity": str(self.severity),
                "members": [index[id(f)] for f in self.members], "codes": list(self.codes)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], findings: Sequence[Finding]) -> FindingGroup:
        """Rebuild a group of ``findings`` (the report's list) from ``to_dict``'s form."""
        try:
            members = tuple(findings[int(i)] for i in data["members"])
            headline = findings[int(data["headline"])]
        except (IndexError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a group in report.json points at findings that are not there ({exc!r}): "
                             f"{dict(data)}; re-run `envaudit scan`") from None
        return make_group(headline, members, data["behaviour"], data["reward_path"])


def make_group(headline: Finding, members: Iterable[Finding], behaviour: str, reward_path: str) -> FindingGroup:
    """A group with ``headline`` first and its severity and codes derived from ``members``."""
    rest = [f for f in members if f is not headline]
    ordered = (headline, *rest)
    return FindingGroup(headline=headline, members=ordered, behaviour=behaviour, reward_path=reward_path,
                        severity=max(f.severity for f in ordered),
                        codes=tuple(dict.fromkeys(f.code for f in ordered)))


# -- what a finding is about ---------------------------------------------------------------------
def paid_by_failed_calls(steps: Any, episode_ids: Any = None) -> bool:
    """Whether failed tool calls (status ``error``) earn most of what the steps of ``episode_ids``
    (all of ``steps`` when None) are paid: their rewards sum above 0 and to at least ``MOSTLY_FAILED``
    of the positive step rewards. Episodes that earn their return on failed calls are farming them,
    whatever ended them (stalling to the step limit on a tool that fails half the time is that)."""
    if steps is None or len(steps) == 0 or "tool_status" not in steps:
        return False
    mine = steps if episode_ids is None else steps[steps["episode_id"].isin(list(episode_ids))]
    reward = mine["reward"].to_numpy(float)
    on_failed = float(reward[(mine["tool_status"] == "error").to_numpy()].sum())
    return on_failed > 0 and on_failed >= MOSTLY_FAILED * float(reward.clip(min=0).sum())


def episodes_behaviour(episodes: Any, steps: Any = None) -> str | None:
    """The exploit behaviour a probe's unsuccessful episodes show (an ``episodes`` table of
    ``envaudit.recording``), for a probe to put in ``evidence["behaviour"]``: ending on a tool
    timeout is ``timeout``; most tool calls failing, or (with their ``steps``) failed calls earning
    most of their pay (``paid_by_failed_calls``), is ``tool-failure`` whatever ended the episode
    (farming failed calls until the step limit is about the failures); cut by the step limit is
    ``timeout``; ended by the agent says nothing about why (None: the probe knows better)."""
    if episodes is None or len(episodes) == 0:
        return None
    ending = str(episodes["end_reason"].mode().iloc[0])
    calls = float(episodes["n_tool_calls"].sum())
    failed = float((episodes["n_tool_errors"] + episodes["n_tool_timeouts"]).sum())
    if ending == "tool_timeout":
        return "timeout"
    if calls and failed / calls >= MOSTLY_FAILED:
        return "tool-failure"
    if calls and steps is not None and paid_by_failed_calls(steps, episodes["episode_id"]):
        return "tool-failure"
    return _ENDINGS.get(ending)


def behaviour_of(finding: Finding) -> str:
    """The behaviour ``finding`` is about: ``evidence["behaviour"]`` when the probe named one of
    ``BEHAVIOURS``, else inferred from its code and evidence."""
    named = finding.evidence.get("behaviour")
    if named in BEHAVIOURS:
        return named
    return _INFER[finding.code](finding)


def reward_path_of(finding: Finding) -> str:
    """``env`` or ``pipeline``: ``evidence["reward_path"]`` when named, ``pipeline`` for
    ``timeout-drop-incentive``, else ``env``."""
    named = finding.evidence.get("reward_path")
    if named in REWARD_PATHS:
        return named
    return "pipeline" if finding.code == "timeout-drop-incentive" else "env"


def incentive_of(finding: Finding) -> tuple[str, str]:
    """The group key: (behaviour, reward path)."""
    return behaviour_of(finding), reward_path_of(finding)


def _failure_rewarded(f: Finding) -> str:
    # A timed-out step that pays is the timeout incentive seen one step at a time.
    return "timeout" if f.evidence.get("status") == "timeout" else "tool-failure"


def _length_bias(f: Finding) -> str:
    ev = f.evidence
    if any("delay" in str(k) for k in ev) or "delay" in f.title.lower():
        return "delay-success"
    effect = ev.get("length_effect")
    slope = effect.get("estimate") if isinstance(effect, Mapping) else ev.get("reward_per_step")
    if isinstance(slope, (int, float)) and slope < 0:
        return "quit"  # a brevity bonus or a step cost: ending early is what it pays for
    return "stall"


def _reward_without_success(f: Finding) -> str:
    ev = f.evidence
    if str(ev.get("run", "")).startswith("target-timeout"):
        return "timeout"
    ending = _ENDINGS.get(str(ev.get("ending")))
    if ending is not None:
        return ending
    share = ev.get("final_step_share")
    if isinstance(share, (int, float)) and share < 0.5:
        return "stall"  # the return accrues along the way, not on the ending
    return "degenerate-answer"


def _exploit_policy(f: Finding) -> str:
    ev = f.evidence
    if ev.get("policy") == "stall":
        return "stall"
    ending = _ENDINGS.get(str(ev.get("ending")))
    if ending is not None:
        return ending
    return "quit" if ev.get("policy") == "end-early" else "degenerate-answer"


def _moved(f: Finding) -> list[str]:
    """The behaviours of the GRPO run's exploit moves, in the order the probe lists them."""
    moves = [m for m in f.evidence.get("moves", []) if isinstance(m, Mapping) and m.get("exploit")]
    return [b for b in (_MOVES.get(str(m.get("behaviour"))) for m in moves) if b is not None]


def is_generic(finding: Finding) -> bool:
    """Whether ``finding`` shows that a behaviour pays without naming the mechanism: the generic
    codes, and the GRPO targeted search's "ending without success pays as much as success"."""
    return finding.code in GENERIC or (finding.code == "reward-without-success"
                                       and str(finding.evidence.get("run", "")).startswith("target-"))


def _candidates(f: Finding) -> list[str]:
    """Where a generic finding may belong, best first: its behaviour, the other behaviours its
    GRPO run moved, then the stand-ins of its behaviour."""
    own = behaviour_of(f)
    return list(dict.fromkeys([own, *_moved(f), *STAND_INS.get(own, ())]))


def _learned_exploit(f: Finding) -> str:
    ev = f.evidence
    moves = [m for m in ev.get("moves", []) if isinstance(m, Mapping)]
    # The headline move is the one the title names; a takeover by one action says nothing by
    # itself, so the first other move that names a behaviour decides.
    named = [m for m in moves if str(m.get("behaviour", "")) and str(m.get("behaviour")) in f.title]
    for m in [*named, *(m for m in moves if m.get("exploit")), *moves]:
        b = _MOVES.get(str(m.get("behaviour")))
        if b is not None:
            return b
    return "exploration" if not moves or "reason" in ev else "degenerate-answer"


_INFER = {
    "env-error": lambda f: "env-error",
    "non-replayable": lambda f: "non-replayable",
    "timeout-rewarded": lambda f: "timeout",
    "timeout-drop-incentive": lambda f: "timeout",
    "failure-rewarded": _failure_rewarded,
    "failure-shortcut": lambda f: "quit",
    "length-bias": _length_bias,
    "reward-without-success": _reward_without_success,
    "exploit-policy": _exploit_policy,
    "learned-exploit": _learned_exploit,
}
assert set(_INFER) == set(CODES) == set(SPECIFICITY), "every catalogue code needs an inference and a rank"


# -- grouping ------------------------------------------------------------------------------------
class _Bucket:
    def __init__(self, key: tuple[str, str], specific: bool) -> None:
        self.key = key
        self.specific = specific
        self.members: list[Finding] = []

    @property
    def loud(self) -> bool:
        return any(f.severity > Severity.INFO for f in self.members)


def _headline(members: Sequence[Finding]) -> Finding:
    loud = [f for f in members if f.severity > Severity.INFO]
    order = {code: i for i, code in enumerate(SPECIFICITY)}
    return min(loud or members, key=lambda f: (order[f.code], -int(f.severity),
                                               f.evidence.get("source") == "grpo", f.title))


def _home(buckets: list[_Bucket], behaviours: Sequence[str], path: str, *, specific: bool) -> _Bucket | None:
    """The first bucket of the first behaviour that has one: loud before quiet, same path first."""
    for behaviour in behaviours:
        found = [b for b in buckets if b.key[0] == behaviour and (b.specific or not specific)]
        if found:
            return min(found, key=lambda b: (not b.loud, b.key[1] != path))
    return None


def group_findings(findings: Iterable[Finding]) -> list[FindingGroup]:
    """Group ``findings`` by incentive; most severe group first, then by the headline's catalogue order."""
    ranked = rank(list(findings))
    buckets: list[_Bucket] = []
    by_key: dict[tuple[str, str], _Bucket] = {}

    def bucket(key: tuple[str, str], specific: bool) -> _Bucket:
        if key not in by_key:
            by_key[key] = _Bucket(key, specific)
            buckets.append(by_key[key])
        return by_key[key]

    for f in ranked:
        if not is_generic(f):
            bucket(incentive_of(f), True).members.append(f)
    for f in ranked:
        if is_generic(f):
            behaviour, path = incentive_of(f)
            # A specific home first; else the generic findings of one behaviour (or its stand-ins)
            # still read as one incentive among themselves.
            home = (_home(buckets, _candidates(f), path, specific=True)
                    or _home(buckets, _candidates(f), path, specific=False))
            (home or bucket((behaviour, path), False)).members.append(f)
    # Stalling that pays per step also pays for delaying a success: where a stall group exists on the
    # same reward path, delaying is that incentive seen from a succeeding policy, not a second one.
    for path in REWARD_PATHS:
        stall, delay = by_key.get(("stall", path)), by_key.get(("delay-success", path))
        if stall is not None and delay is not None and stall.loud and delay in buckets:
            stall.members.extend(delay.members)
            buckets.remove(delay)
    # A quiet group corroborates a loud one of the same behaviour (another reward path).
    for quiet in [b for b in buckets if not b.loud]:
        loud = _home([b for b in buckets if b.loud], (quiet.key[0],), quiet.key[1], specific=False)
        if loud is not None:
            loud.members.extend(quiet.members)
            buckets.remove(quiet)
    groups = [make_group(_headline(b.members), rank(b.members), *b.key) for b in buckets]
    return rank_groups(groups)


def rank_groups(groups: Iterable[FindingGroup]) -> list[FindingGroup]:
    """Most severe first; then the headline's catalogue order, env-measured before GRPO, title."""
    order = {code: i for i, code in enumerate(CODES)}
    return sorted(groups, key=lambda g: (-int(g.severity), order[g.code],
                                         g.headline.evidence.get("source") == "grpo", g.headline.title))


__all__ = ["BEHAVIOURS", "GENERIC", "REWARD_PATHS", "SPECIFICITY", "STAND_INS", "FindingGroup", "behaviour_of",
           "episodes_behaviour", "group_findings", "incentive_of", "is_generic", "make_group", "paid_by_failed_calls",
           "rank_groups", "reward_path_of"]
