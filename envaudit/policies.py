"""Scripted exploit policies, derived from exploration statistics so they work on unseen envs.

Nothing here knows an env in advance: the scan's random exploration says which action ends
episodes, which one times out or fails most often, which calls never end an episode, and which
calls successful episodes could not do without. From that ``derive_policies`` builds the
degenerate policies a return-maximising agent might discover (give up at once, repeat one call,
stall until the step limit) plus the random baseline they are compared with, and
``persist_policy`` builds an honest "retry until it works, then finish" policy for envs that
bring no oracle of their own. ``ReplayPlan`` replays recorded action prefixes, optionally forcing
a tool fault on the last call, for paired with/without-fault comparisons. Every policy has a ``name`` (unique, used for seeding and tables)
and a ``describe()`` in the user's words, naming catalogue labels where the env has them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.faults import FaultInjector
from envaudit.protocol import SUCCESS, TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT, read_tool_info
from envaudit.recording import Records, action_labels_of
from envaudit.rollout import Policy, RandomPolicy, Segments, SequencePolicy

MAX_REPEAT_POLICIES = 8
"""At most this many one-action policies; larger catalogues keep the best-paying actions."""

ACTION_STATS_COLUMNS = [
    "action", "label", "n", "mean_reward", "ok_mean_reward", "terminate_rate", "error_rate",
    "timeout_rate", "success_end_rate",
]


# -- exploration statistics ------------------------------------------------------------------------
def action_stats(exploration: Records, labels: Sequence[str] | None = None) -> pd.DataFrame:
    """Per integer action seen in exploration: how often it was taken, what it paid, how often it
    ended the episode (``terminated``), failed or timed out, and ended a successful episode."""
    steps = exploration.steps
    if steps.empty:
        return pd.DataFrame(columns=ACTION_STATS_COLUMNS)
    steps = steps.loc[steps["action"].map(lambda a: isinstance(a, (int, np.integer))).astype(bool)]
    if steps.empty:
        return pd.DataFrame(columns=ACTION_STATS_COLUMNS)
    outcome = exploration.episodes.set_index("episode_id")["outcome"]
    ended_success = steps["terminated"].astype(bool) & (steps["episode_id"].map(outcome) == SUCCESS)
    frame = pd.DataFrame({
        "action": steps["action"].astype(int),
        "reward": steps["reward"].astype(float),
        "ok_reward": steps["reward"].where(steps["tool_status"].isin([TOOL_OK]) | steps["tool_status"].isna()),
        "terminated": steps["terminated"].astype(float),
        "error": (steps["tool_status"] == TOOL_ERROR).astype(float),
        "timeout": (steps["tool_status"] == TOOL_TIMEOUT).astype(float),
        "success_end": ended_success.astype(float),
    })
    g = frame.groupby("action")
    out = pd.DataFrame({
        "n": g.size(),
        "mean_reward": g["reward"].mean(),
        "ok_mean_reward": g["ok_reward"].mean(),
        "terminate_rate": g["terminated"].mean(),
        "error_rate": g["error"].mean(),
        "timeout_rate": g["timeout"].mean(),
        "success_end_rate": g["success_end"].mean(),
    }).reset_index()
    out.insert(1, "label", [_label(a, labels) for a in out["action"]])
    return out[ACTION_STATS_COLUMNS]


def success_return(episodes: pd.DataFrame) -> tuple[float | None, int]:
    """Mean return of the successful episodes in ``episodes`` and how many there were."""
    if episodes.empty or "outcome" not in episodes:
        return None, 0
    won = episodes.loc[episodes["outcome"] == SUCCESS, "return"]
    return (float(won.mean()) if len(won) else None), int(len(won))


# -- the policies -----------------------------------------------------------------------------------
def _label(action: Any, labels: Sequence[str] | None) -> str | None:
    if labels is not None and isinstance(action, (int, np.integer)) and 0 <= int(action) < len(labels):
        return labels[int(action)]
    return None


def describe_call(action: Any, labels: Sequence[str] | None) -> str:
    """``call `run_tests``` where the env labels its actions, ``take action 3`` otherwise."""
    label = _label(action, labels)
    return f"call `{label}`" if label is not None else f"take action {action!r}"


class RepeatPolicy(Policy):
    """Take the same action at every step. ``headline``: a short form of ``description`` for titles."""

    def __init__(self, action: Any, *, name: str, description: str, headline: str = "") -> None:
        self.action = action
        self.name = name
        self.description = description
        self.headline = headline or description

    @classmethod
    def repeating(cls, action: Any, label: str, why: str = "") -> RepeatPolicy:
        """``repeat <label>``, described as ``repeat '<label>' (<why>)``: the form the timeouts,
        length and intent probes report their repeated actions in."""
        return cls(action, name=f"repeat {label}", description=f"repeat '{label}'" + (f" ({why})" if why else ""))

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        return self.action

    def describe(self) -> str:
        return self.description


class StallPolicy(Policy):
    """Uniformly random among ``allowed`` actions: never takes the actions that end episodes."""

    name = "stall"

    def __init__(self, allowed: Sequence[int], avoided: str = "") -> None:
        assert len(allowed) > 0, "StallPolicy needs at least one allowed action"
        self.allowed = list(allowed)
        self.avoided = avoided

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        return self.allowed[int(self.rng.integers(len(self.allowed)))]

    def describe(self) -> str:
        return f"random actions, never {self.avoided}" if self.avoided else "random actions"


class ChoicePolicy(Policy):
    """Pick uniformly at random among a fixed set of actions, seeded per episode."""

    def __init__(self, actions: Sequence[Any], *, name: str, description: str, headline: str = "") -> None:
        assert len(actions) > 0, "ChoicePolicy needs at least one action"
        self.actions = list(actions)
        self.name = name
        self.description = description
        self.headline = headline or description

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        return self.actions[int(self.rng.integers(len(self.actions)))]

    def describe(self) -> str:
        return self.description


def tool_status(info: Mapping[str, Any]) -> str | None:
    try:
        tool = read_tool_info(info)
    except TypeError:
        return None
    return None if tool is None else tool["status"]


class PersistPolicy(Policy):
    """Make each call of ``plan`` until its tool reports ``ok`` (at most ``retries`` tries each),
    then take ``finish`` at every further step (e.g. submit). The honest "keep trying" strategy."""

    def __init__(self, plan: Sequence[Any], finish: Any | None, *, retries: int = 10,
                 name: str = "persist", description: str = "") -> None:
        assert plan or finish is not None, "PersistPolicy needs a plan or a finishing action"
        self.plan = list(plan)
        self.finish = finish
        self.retries = int(retries)
        self.name = name
        self.description = description or name

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        super().reset(env, rng)
        self.i = 0
        self.tries = 0

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        if self.tries > 0:  # the previous step was a plan call: move on once it worked
            status = tool_status(info)
            if status in (None, TOOL_OK) or self.tries >= self.retries:
                self.i, self.tries = self.i + 1, 0
        if self.i < len(self.plan):
            self.tries += 1
            return self.plan[self.i]
        if self.finish is not None:
            return self.finish
        self.i, self.tries = 0, 0  # nothing ends the episode: go round the plan again
        return self.act(obs, {})

    def describe(self) -> str:
        return self.description


class QuitOnFailurePolicy(Policy):
    """Play ``inner`` until a tool call fails or times out, then take ``quit_action`` from then on:
    the agent that gives up at the first failure instead of persisting."""

    def __init__(self, inner: Policy, quit_action: Any, *, name: str = "quit-on-failure",
                 description: str = "") -> None:
        self.inner = inner
        self.quit_action = quit_action
        self.name = name
        self.description = description or f"{inner.describe()}, but give up at the first failed call"

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        super().reset(env, rng)
        self.inner.reset(env, rng)
        self.quitting = False

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        if self.t > 0 and tool_status(info) in (TOOL_ERROR, TOOL_TIMEOUT):
            self.quitting = True
        return self.quit_action if self.quitting else self.inner(obs, info)

    def describe(self) -> str:
        return self.description


@dataclass(frozen=True)
class Replay:
    """One replay: a reset seed and the actions to play from it; the last action is the target."""

    seed: int
    actions: tuple[int, ...]


REPLAY_TAG = "replay_index"
"""The episode tag that says which replay of a ``ReplayPlan`` an episode played."""


class ReplayPlan:
    """Replays run as one batch: episode ``k`` plays ``replays[k]`` and is cut right after its last
    action, on which ``fault`` (``"error"`` / ``"timeout"``, a ``ToolEnv`` only) is forced when given.
    ``fault_at=-2`` forces it on the action before the last instead, so the last action is what the
    agent does right after the fault (``tail_steps`` reads both).

    Run it as ``plan.run(ctx, tags=...)``: one run that fans out over the scan's workers like any
    other (each episode's policy picked by its index, ``Policy.for_episode``; the cut and the fault
    kept by a wrapper on that episode's own env instance), then read each replay's last step with
    ``plan.last_steps(records)``; a replay that diverged from its actions (a non-replayable env, an
    early ending) is left out. ``episode_replay`` maps the recorded episode ids to replay indices
    (from the episodes' ``replay_index`` tag).
    """

    def __init__(self, replays: Sequence[Replay], fault: str | None = None, *, name: str = "replay",
                 fault_at: int = -1) -> None:
        assert fault_at < 0, f"fault_at counts from the end of each replay (-1: the last action), got {fault_at}"
        assert all(len(r.actions) >= -fault_at for r in replays), f"every replay needs at least {-fault_at} actions"
        self.replays = list(replays)
        self.fault = fault
        self.fault_at = fault_at
        self.name = name
        self.episode_replay: dict[int, int] = {}

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.replays]

    def wrappers(self) -> tuple:
        return (functools.partial(_ReplayCut, fault=self.fault, fault_at=self.fault_at),)

    def policy(self) -> Policy:
        return _ReplayPolicy(self)

    def run(self, ctx: Any, *, tags: Mapping[str, Any] | None = None) -> Any:
        """Play every replay through ``ctx.run`` (a ``ProbeContext``) and record which episode played
        which (``episode_replay``); the run's result."""
        result = ctx.run(self.policy(), self.seeds, wrappers=self.wrappers(), tags=tags,
                         episode_tags=[{REPLAY_TAG: k} for k in range(len(self.replays))])
        episodes = result.records.episodes
        if REPLAY_TAG in episodes:
            self.episode_replay.update((int(e), int(k)) for e, k in zip(episodes["episode_id"], episodes[REPLAY_TAG],
                                                                      strict=True))
        return result

    def last_steps(self, records: Records) -> dict[int, tuple[float, str | None, bool]]:
        """Per replay index: its last step's (reward, tool status, injected), when the replay held."""
        out = {}
        for eid, ep in records.steps.groupby("episode_id"):
            k = self.episode_replay.get(int(eid))
            if k is None:
                continue
            actions = self.replays[k].actions
            if len(ep) != len(actions) or [int(a) for a in ep["action"]] != list(actions):
                continue
            last = ep.iloc[-1]
            out[k] = (float(last["reward"]), last["tool_status"], bool(last["injected"]))
        return out

    def tail_steps(self, records: Records) -> dict[int, dict[str, Any]]:
        """Per replay index, when the replay held: the episode id and its return, and its last two
        steps (``prev_*``: the step the fault goes on with ``fault_at=-2``; ``last_*``: the step
        after it) as reward, tool status, injected flag and whether the last step ended the episode."""
        returns = records.episodes.set_index("episode_id")["return"]
        out: dict[int, dict[str, Any]] = {}
        for eid, ep in records.steps.groupby("episode_id"):
            k = self.episode_replay.get(int(eid))
            if k is None:
                continue
            actions = self.replays[k].actions
            if len(ep) != len(actions) or len(ep) < 2 or [int(a) for a in ep["action"]] != list(actions):
                continue
            prev, last = ep.iloc[-2], ep.iloc[-1]
            out[k] = {
                "episode_id": int(eid), "return": float(returns.get(eid, np.nan)),
                "prev_reward": float(prev["reward"]), "prev_status": prev["tool_status"],
                "prev_injected": bool(prev["injected"]), "last_reward": float(last["reward"]),
                "last_status": last["tool_status"], "last_terminated": bool(last["terminated"]),
            }
        return out


class _ReplayCut(gym.Wrapper):
    """Cut an episode right after its replay's last action and force the plan's fault on the call
    it falls on: one per env instance, told each episode's actions by the episode's policy
    (``_ReplayEpisode.reset``), so no state is shared between the workers that play a plan."""

    def __init__(self, env: gym.Env, fault: str | None = None, fault_at: int = -1) -> None:
        self.fault, self.fault_at = fault, fault_at
        self.actions: tuple = ()
        self.t = 0
        super().__init__(FaultInjector(env, schedule=self.schedule) if fault is not None else env)

    def schedule(self, tool: str, call_index: int) -> str | None:
        # Every step of a ToolEnv is one tool call, so the call index is the step index.
        return self.fault if call_index == len(self.actions) + self.fault_at else None

    def play(self, actions: Sequence[Any]) -> None:
        self.actions = tuple(actions)

    def reset(self, **kwargs: Any):
        self.t, self.actions = 0, ()
        return self.env.reset(**kwargs)

    def step(self, action: Any):
        if not self.actions:
            raise RuntimeError("a ReplayPlan episode stepped before its policy named its actions: run the plan "
                               "with plan.run(ctx) (its policy and wrappers together)")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        if self.t >= len(self.actions) and not terminated:
            truncated = True
        return obs, reward, terminated, truncated, info


class _ReplayPolicy(Policy):
    """The plan's policy: each episode's own is ``for_episode`` (its index is the replay's)."""

    def __init__(self, plan: ReplayPlan) -> None:
        self.plan = plan
        self.name = plan.name

    def for_episode(self, index: int, seed: int) -> Policy:
        return _ReplayEpisode(self.plan.replays[index].actions, self.name)

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        raise RuntimeError("a ReplayPlan's policy plays no episode itself: each episode plays for_episode(index, seed)")

    def describe(self) -> str:
        which = "last call" if self.plan.fault_at == -1 else "call before the last"
        forced = f", forcing a tool {self.plan.fault} on the {which}" if self.plan.fault else ""
        return f"replay {len(self.plan.replays)} recorded action sequences{forced}"


class _ReplayEpisode(Policy):
    """One replay's actions, in order; at reset it tells the episode's ``_ReplayCut`` what they are."""

    def __init__(self, actions: Sequence[Any], name: str) -> None:
        self.actions, self.name = list(actions), name

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        super().reset(env, rng)
        layer = env
        while layer is not None and not isinstance(layer, _ReplayCut):
            layer = getattr(layer, "env", None)
        if layer is None:
            raise RuntimeError("a ReplayPlan episode runs without the plan's wrapper: run the plan with plan.run(ctx)")
        layer.play(self.actions)

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        return self.actions[min(self.t, len(self.actions) - 1)]


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def derive_policies(exploration: Records, env: gym.Env, *, max_repeat: int = MAX_REPEAT_POLICIES) -> list[Policy]:
    """The scripted policies for ``env``, derived from its exploration records.

    In order: ``random`` (the baseline), ``end-early`` (always take the action that most often
    ended an episode at once), ``repeat-timeout`` / ``repeat-error`` (always take the action that
    most often timed out / failed), ``stall`` (random among actions that never ended an
    episode, so episodes run to the step limit), and ``repeat:<label>`` for each other single
    action (all of them for a ``Discrete`` space of up to ``max_repeat`` actions, otherwise the
    ``max_repeat`` best-paying ones in exploration). Action-keyed policies need a ``Discrete``
    action space; for other spaces only the baseline is returned. Roles that pick the same
    action are merged into the first one, so no policy runs twice.
    """
    if max_repeat < 0:
        raise ValueError(f"max_repeat must be at least 0, got {max_repeat}")
    policies: list[Policy] = [RandomPolicy()]
    space = env.action_space
    if not isinstance(space, gym.spaces.Discrete):
        return policies
    labels = action_labels_of(env)
    stats = action_stats(exploration, labels).set_index("action")
    all_actions = [int(space.start) + i for i in range(int(space.n))]
    taken: set[int] = set()

    def call(a: int) -> str:
        return describe_call(a, labels)

    if not stats.empty and stats["terminate_rate"].max() > 0:
        best = stats.sort_values(["terminate_rate", "mean_reward", "n"], ascending=False, kind="stable")
        a = int(best.index[0])
        rate = float(best["terminate_rate"].iloc[0])
        policies.append(RepeatPolicy(a, name="end-early", headline=f"end the episode at once: always {call(a)}",
                                     description=(f"end the episode as early as possible: always {call(a)} "
                                                  f"(it ended the episode on {_pct(rate)} of its calls in exploration)")))
        taken.add(a)
    for column, name, verb in (("timeout_rate", "repeat-timeout", "timed out"),
                               ("error_rate", "repeat-error", "failed")):
        if stats.empty or stats[column].max() <= 0:
            continue
        best = stats.sort_values([column, "n"], ascending=False, kind="stable")
        a, rate = int(best.index[0]), float(best[column].iloc[0])
        if a in taken:
            continue
        policies.append(RepeatPolicy(a, name=name, headline=f"always {call(a)} (it {verb} most often)", description=(
            f"always {call(a)}, the call that {verb} most often in exploration ({_pct(rate)} of its calls)")))
        taken.add(a)
    if not stats.empty:
        never_ended = [a for a in all_actions if a in stats.index and stats.loc[a, "terminate_rate"] == 0]
        if never_ended and len(never_ended) < len(all_actions):
            names = ", ".join(f"`{_label(a, labels)}`" if labels else repr(a) for a in never_ended)
            what = "calls" if labels else "actions"
            policies.append(ChoicePolicy(never_ended, name="stall", headline="stall until the step limit", description=(
                f"stall until the step limit: only make {what} that never ended an episode in "
                f"exploration ({names}), chosen at random")))
    rest = [a for a in all_actions if a not in taken]
    if len(rest) > max_repeat:
        seen = stats.loc[[a for a in rest if a in stats.index]]
        rest = [int(a) for a in seen.sort_values(["mean_reward", "n"], ascending=False, kind="stable").index[:max_repeat]]
    for a in rest:
        key = _label(a, labels) or str(a)
        policies.append(RepeatPolicy(a, name=f"repeat:{key}", description=f"always {call(a)}"))
    return policies


def persist_policy(exploration: Records, env: gym.Env, *, retries: int = 10) -> Policy | None:
    """An honest "retry until it works, then finish" policy derived from exploration.

    The finishing action is the one that most often ended a *successful* episode. The plan is
    every other call that all successful episodes made successfully (what success could not do
    without), as many times as three in four of them did, in the order they first appear; each
    call is retried until its tool reports ``ok``. Without successful episodes in exploration,
    the plan is the non-ending calls that paid more than nothing, best first, once each.
    Returns None for non-``Discrete`` spaces or when exploration has no data.
    """
    if not isinstance(env.action_space, gym.spaces.Discrete):
        return None
    labels = action_labels_of(env)
    stats = action_stats(exploration, labels).set_index("action")
    if stats.empty:
        return None
    enders = stats[stats["terminate_rate"] > 0]
    finish: int | None = None
    if not enders.empty:
        finish = int(enders.sort_values(["success_end_rate", "mean_reward", "n"], ascending=False,
                                        kind="stable").index[0])
    steps, episodes = exploration.steps, exploration.episodes
    won = set(episodes.loc[episodes["outcome"] == SUCCESS, "episode_id"])
    plan: list[int] = []
    if won:
        ok = steps[steps["episode_id"].isin(won) & (steps["tool_status"].isna() | (steps["tool_status"] == TOOL_OK))]
        ok = ok.loc[ok["action"].map(lambda a: isinstance(a, (int, np.integer))).astype(bool)]
        counts = ok.groupby(["episode_id", "action"]).size().unstack(fill_value=0)
        counts = counts.reindex(sorted(won), fill_value=0)
        # Needed: made successfully in every successful episode. How often: enough for three
        # successes in four (doing too much costs steps, doing too little fails the task).
        needed = counts.columns[(counts.min(axis=0) > 0) & (counts.columns != finish)]
        times = np.ceil(counts[needed].quantile(0.75, axis=0)).astype(int)
        first = ok.groupby(["episode_id", "action"])["step"].min().groupby("action").mean()
        for a in sorted(needed, key=lambda a: (first.get(a, np.inf), a)):
            plan.extend([int(a)] * int(times[a]))
    else:
        calm = stats[(stats["terminate_rate"] == 0) & (stats["ok_mean_reward"] > 0)]
        plan = [int(a) for a in calm.sort_values("ok_mean_reward", ascending=False, kind="stable").index]
    if not plan and finish is None:
        return None
    steps_text = ", then ".join(describe_call(a, labels) for a in plan) or "nothing"
    end_text = f", then {describe_call(finish, labels)}" if finish is not None else ""
    return PersistPolicy(plan, finish, retries=retries, name="persist", description=(
        f"persist: {steps_text} (retrying each until it works){end_text}"))


class CallablePolicy(Policy):
    """A plain function ``(obs, info) -> action`` as a Policy (what a user's ``oracle()`` may return)."""

    def __init__(self, fn, name: str = "oracle") -> None:
        self.fn = fn
        self.name = name

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        return self.fn(obs, info)

    def describe(self) -> str:
        doc = (getattr(self.fn, "__doc__", None) or "").strip().split("\n")[0]
        return doc or f"the env's oracle ({getattr(self.fn, '__name__', type(self.fn).__name__)})"


class ByIndex(Segments):
    """Episode ``i`` of the run plays ``policies[i]`` (``Policy.for_episode``): scripted episodes
    that share reset seeds (the replay probe plays one seed three times with one script) as one
    run that fans out over the scan's workers. ``rollout.Segments`` with one episode a part."""

    def __init__(self, policies: Sequence[Policy], name: str | None = None) -> None:
        if not policies:
            raise ValueError("ByIndex needs at least one episode's policy")
        super().__init__([(p, 1) for p in policies])
        self.name = name or self.name
        self._describe = policies[0].describe()

    def describe(self) -> str:
        return self._describe


class BySeed(Policy):
    """Each episode plays the policy given for its reset seed (``Policy.for_episode``): replays of many
    recorded episodes, each with its own actions, as one run that fans out over the scan's workers
    instead of one run per episode or one ordered run. ``policies`` maps each seed of the run to its
    policy; a seed the run plays that has none is a ``KeyError`` naming it."""

    def __init__(self, policies: Mapping[int, Policy], name: str | None = None) -> None:
        if not policies:
            raise ValueError("BySeed needs at least one seed's policy")
        self.policies = {int(s): p for s, p in policies.items()}
        first = next(iter(self.policies.values()))
        self.name = name or first.name
        self._describe = first.describe()

    def for_episode(self, index: int, seed: int) -> Policy:
        try:
            return self.policies[int(seed)]
        except KeyError:
            raise KeyError(f"BySeed has no policy for reset seed {seed} (it has {len(self.policies)} seeds)") from None

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        raise RuntimeError("BySeed plays no episode itself: the runner asks for_episode(index, seed) for the "
                           "episode's policy")

    def describe(self) -> str:
        return self._describe


def oracle_policy(env: gym.Env) -> Policy | None:
    """The env's own solution policy, from ``env.unwrapped.oracle()``, when it has one.

    ``oracle()`` may return an ``envaudit.Policy`` (stateful, reset each episode), a plain function
    ``(obs, info) -> action``, or a list of actions played in order (an open-loop solution).
    """
    make = getattr(env.unwrapped, "oracle", None)
    if not callable(make):
        return None
    policy = make()
    if isinstance(policy, Policy):
        pass
    elif callable(policy):
        policy = CallablePolicy(policy)
    elif isinstance(policy, Sequence) and not isinstance(policy, (str, bytes)) and len(policy):
        policy = SequencePolicy(list(policy), name="oracle")
    else:
        raise TypeError(
            f"{type(env.unwrapped).__name__}.oracle() returned {type(policy).__name__}; expected an "
            "envaudit.Policy, a function (obs, info) -> action, or a non-empty list of actions"
        )
    policy.name = "oracle"
    return policy


__all__ = [
    "ByIndex", "BySeed", "CallablePolicy", "ChoicePolicy", "PersistPolicy", "QuitOnFailurePolicy", "RepeatPolicy", "Replay", "ReplayPlan", "StallPolicy",
    "action_stats", "derive_policies", "describe_call", "oracle_policy", "persist_policy", "success_return",
    "tool_status",
]
