"""Playing an env from an explicit plan, and how the resulting episode reads in a failure message.

A *plan* is everything that decides an episode: the reset seed, the actions, an action to repeat
until the episode ends, and a fault schedule (which tool calls fail or time out, for ``ToolEnv``s).
The strategies generate plans and the properties play them through ``EnvSession``, which records
every episode with ``envaudit.AuditWrapper`` and injects faults with ``envaudit.FaultInjector``.
``play`` is the same thing as one call, for reproducing a counterexample by hand::

    from envaudit.testing import play
    episode = play("envaudit/CodeFix-v0", ["run_full_suite"], seed=0, faults={0: "timeout"})
    print(episode)  # the trajectory as a table: action, tool status, reward, end
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.errors import a_type
from envaudit.faults import FaultInjector
from envaudit.protocol import (
    SUCCESS_KEY,
    TOOL_ERROR,
    TOOL_TIMEOUT,
    end_reason,
    outcome_class,
    read_tool_info,
)
from envaudit.recording import AuditWrapper, Recorder, Records, action_labels_of
from envaudit.rollout import Policy, limit_steps
from envaudit.toolenv import ToolEnv

FAULT_KINDS = (TOOL_ERROR, TOOL_TIMEOUT)
DEFAULT_MAX_STEPS = 50


# -- fault schedules ---------------------------------------------------------------------------
@dataclass(frozen=True, init=False)
class FaultSchedule:
    """Which tool calls of an episode fail (``"error"``) or time out (``"timeout"``).

    ``faults`` maps the index of a tool call within the episode (0 = the first call) to its
    forced status; ``every`` is forced on every call not listed; ``tools`` restricts the schedule
    to calls of those tools (the index still counts every call). A schedule is callable as
    ``FaultInjector``'s ``schedule=`` hook, ``(tool_name, call_index) -> status | None``::

        FaultSchedule({0: "timeout", 2: "error"})   # first call times out, third fails
        FaultSchedule(every="timeout")              # every call times out
    """

    faults: tuple[tuple[int, str], ...]
    every: str | None
    tools: frozenset[str] | None

    def __init__(
        self,
        faults: Mapping[int, str] | Iterable[tuple[int, str]] = (),
        *,
        every: str | None = None,
        tools: Iterable[str] | None = None,
    ) -> None:
        pairs = dict(faults.items() if isinstance(faults, Mapping) else faults)
        for k, status in pairs.items():
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
                raise ValueError(f"a fault schedule is keyed by tool-call index (an int >= 0), got {k!r}")
            _check_status(status, f"faults[{k}]")
        if every is not None:
            _check_status(every, "every")
        object.__setattr__(self, "faults", tuple(sorted((int(k), str(v)) for k, v in pairs.items())))
        object.__setattr__(self, "every", every)
        object.__setattr__(self, "tools", None if tools is None else frozenset(tools))

    def __call__(self, tool: str, call_index: int) -> str | None:
        if self.tools is not None and tool not in self.tools:
            return None
        return dict(self.faults).get(call_index, self.every)

    def with_fault(self, call_index: int, status: str | None) -> FaultSchedule:
        """The same schedule with call ``call_index`` forced to ``status`` (None: no fault)."""
        faults = dict(self.faults)
        if status is None:
            faults.pop(call_index, None)
        else:
            faults[call_index] = status
        return FaultSchedule(faults, every=self.every, tools=self.tools)

    @property
    def empty(self) -> bool:
        return not self.faults and self.every is None

    def __repr__(self) -> str:
        args = [repr(dict(self.faults))] if self.faults or self.every is None else []
        if self.every is not None:
            args.append(f"every={self.every!r}")
        if self.tools is not None:
            args.append(f"tools={sorted(self.tools)!r}")
        return f"FaultSchedule({', '.join(args)})"

    def __str__(self) -> str:
        parts = [f"call {k} {'times out' if s == TOOL_TIMEOUT else 'fails'}" for k, s in self.faults]
        if self.every is not None:
            parts.append(f"every {'other ' if parts else ''}call {'times out' if self.every == TOOL_TIMEOUT else 'fails'}")
        text = ", ".join(parts) or "no faults"
        return text + (f" (tools {', '.join(sorted(self.tools))})" if self.tools is not None and parts else "")


def _check_status(status: Any, where: str) -> None:
    if status not in FAULT_KINDS:
        raise ValueError(f"{where} must be 'error' or 'timeout', got {status!r}")


def as_schedule(faults: FaultSchedule | Mapping[int, str] | Sequence[str | None] | None) -> FaultSchedule | None:
    """A ``FaultSchedule`` from a schedule, a ``{call_index: status}`` mapping or a list of statuses."""
    if faults is None or isinstance(faults, FaultSchedule):
        return faults
    if isinstance(faults, Mapping):
        return FaultSchedule(faults)
    if isinstance(faults, Sequence) and not isinstance(faults, str):
        return FaultSchedule({k: s for k, s in enumerate(faults) if s is not None})
    raise TypeError(
        f"faults must be a FaultSchedule, a {{call_index: 'error'|'timeout'}} mapping or a list of "
        f"statuses, got {type(faults).__name__}"
    )


# -- plans and episodes ------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """What decides one episode: reset seed, actions, an action repeated until the end, faults."""

    seed: int | None
    actions: tuple = ()
    then_repeat: Any = None
    faults: FaultSchedule | None = None

    def with_fault(self, call_index: int, status: str | None) -> Plan:
        return replace(self, faults=(self.faults or FaultSchedule()).with_fault(call_index, status))


@dataclass(frozen=True)
class Step:
    """One recorded step. ``call`` is the index of its tool call within the episode (faults key)."""

    index: int
    action: Any
    label: str | None
    reward: float
    terminated: bool
    truncated: bool
    tool: str | None = None
    status: str | None = None
    injected: bool = False
    error: str | None = None
    call: int | None = None

    @property
    def action_text(self) -> str:
        return self.label if self.label is not None else short_text(self.action)

    @property
    def ends(self) -> bool:
        """The step ended the episode (terminated or truncated)."""
        return bool(self.terminated or self.truncated)


@dataclass(frozen=True)
class Episode:
    """A recorded episode: what was played, every step, and how it ended.

    ``end_reason`` and ``outcome`` (DESIGN.md's words) are None while the episode is unfinished
    (the plan ran out of actions first). ``records`` holds the same episode as
    ``envaudit.Records`` tables, recorded by ``AuditWrapper``.
    """

    env: str
    seed: int | None
    actions: tuple
    faults: FaultSchedule | None
    steps: tuple[Step, ...]
    finished: bool
    end_reason: str | None
    outcome: str | None
    success: bool | None
    observations: tuple | None = field(default=None, repr=False, compare=False)
    _recorder: Recorder | None = field(default=None, repr=False, compare=False)

    @property
    def episode_return(self) -> float:
        return float(sum(s.reward for s in self.steps))

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.steps]

    @property
    def length(self) -> int:
        return len(self.steps)

    @property
    def statuses(self) -> list[str | None]:
        return [s.status for s in self.steps]

    @property
    def records(self) -> Records:
        """The episode as ``Records`` (steps and episodes DataFrames) from ``AuditWrapper``."""
        return (self._recorder or Recorder()).records()

    def render(self, *, title: str | None = None) -> str:
        return render_episode(self, title=title)

    def __str__(self) -> str:
        return self.render()


def short_text(value: Any, width: int = 40) -> str:
    """A one-line, width-limited repr of an action or observation."""
    if isinstance(value, np.ndarray):
        text = np.array2string(value, precision=3, threshold=8, separator=", ")
    else:
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _reward(value: float) -> str:
    return f"{value:+.4g}"


def render_episode(episode: Episode, *, title: str | None = None) -> str:
    """The episode as a small fixed-width table; runs of identical steps are folded into one line."""
    head = f"reset(seed={episode.seed})"
    if episode.faults is not None and not episode.faults.empty:
        head += f", faults {episode.faults!r}"
    lines = [f"{title}: {head}" if title else head]
    rows = []
    for s in episode.steps:
        tool = "-" if s.tool is None else f"{s.tool} → {s.status}{' (injected)' if s.injected else ''}"
        end = "terminated" if s.terminated else "truncated" if s.truncated else ""
        rows.append((str(s.index), s.action_text, tool, _reward(s.reward), end))
    if rows:
        widths = [max(len(r[i]) for r in rows + [("step", "action", "tool call", "reward", "")]) for i in range(5)]
        fmt = "  {{:>{}}}  {{:<{}}}  {{:<{}}}  {{:>{}}}  {{}}".format(*widths[:4])
        lines.append(fmt.format("step", "action", "tool call", "reward", "").rstrip())
        i = 0
        while i < len(rows):
            j = i
            while j + 1 < len(rows) and rows[j + 1][1:] == rows[i][1:] and not rows[i][4]:
                j += 1
            lines.append(fmt.format(*rows[i]).rstrip())
            if j - i >= 2:
                lines.append(f"  {'…':>{widths[0]}}  {j - i} more steps like step {rows[i][0]} "
                             f"(steps {int(rows[i][0]) + 1}–{rows[j][0]})")
                i = j + 1
            else:
                i += 1
    else:
        lines.append("  (no steps)")
    if episode.finished:
        tail = f"ended {episode.end_reason}, outcome {episode.outcome}, success {episode.success}"
    else:
        tail = f"unfinished after {episode.length} step{'s' if episode.length != 1 else ''}"
    lines.append(f"  return {_reward(episode.episode_return)} · {tail}")
    return "\n".join(lines)


# -- sessions ----------------------------------------------------------------------------------
def resolve_target(make_env: Any, *, what: str = "make_env") -> tuple[str, Callable[[], gym.Env]]:
    """``(name, factory)`` for an env id string or a zero-argument factory."""
    if isinstance(make_env, str):
        from envaudit.resolve import resolve_env

        return resolve_env(make_env)
    if isinstance(make_env, gym.Env):
        raise TypeError(
            f"{what} must be a zero-argument factory or an env id, got an env instance "
            f"({type(make_env).__name__}); the properties need fresh envs, so pass its class, "
            "a function that builds it, or its Gymnasium id"
        )
    if not callable(make_env):
        raise TypeError(
            f"{what} must be a zero-argument factory (e.g. `lambda: gymnasium.make('CartPole-v1')`) "
            f"or an env id string, got {type(make_env).__name__}"
        )
    name = getattr(make_env, "__name__", None) or type(make_env).__name__
    return name, make_env


def _spec_name(env: gym.Env, fallback: str) -> str:
    spec = getattr(env, "spec", None)
    if spec is not None and spec.id:
        return spec.id
    return fallback if fallback.isidentifier() else type(env.unwrapped).__name__


def step_limit(env: gym.Env) -> int | None:
    """The env's own step limit (``max_episode_steps`` of its spec, or ``max_steps``), if any."""
    spec = getattr(env, "spec", None)
    limits = [spec.max_episode_steps if spec is not None else None, getattr(env.unwrapped, "max_steps", None)]
    limits = [int(x) for x in limits if isinstance(x, (int, np.integer)) and x > 0]
    return min(limits) if limits else None


class EnvSession:
    """One env instance, wrapped to play plans: step cap, fault injection (``ToolEnv``), recording.

    ``max_steps`` caps every episode: an env without a step limit of its own is truncated there
    (like the scan), and a longer one is left unfinished. Close the session when done.
    """

    def __init__(self, make_env: Any, *, max_steps: int = DEFAULT_MAX_STEPS, faults: bool = True) -> None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
        name, factory = resolve_target(make_env)
        env = factory()
        if not isinstance(env, gym.Env):
            raise TypeError(f"{name} made {a_type(env)}, not a gymnasium.Env")
        self.factory = factory
        self.name = _spec_name(env, name)
        self.max_steps = int(max_steps)
        self.space = env.action_space
        base = env.unwrapped
        self.tool_env = isinstance(base, ToolEnv)
        self.tools = sorted(base.tools) if self.tool_env else []
        self.labels = action_labels_of(env)
        self.limit = step_limit(env)
        env = limit_steps(env, self.max_steps)
        self.limit = self.limit or self.max_steps
        self.injector = FaultInjector(env) if self.tool_env and faults else None
        self._calls: list[tuple[str, int]] = []
        self._schedule: FaultSchedule | None = None
        if self.injector is not None:
            self.injector.schedule = self._hook
        self.env = AuditWrapper(self.injector if self.injector is not None else env)

    @property
    def injects(self) -> bool:
        return self.injector is not None

    def _hook(self, tool: str, call_index: int) -> str | None:
        self._calls.append((tool, call_index))
        return self._schedule(tool, call_index) if self._schedule is not None else None

    def action(self, value: Any) -> Any:
        """An action of the plan: a catalogue label (``ToolEnv``) becomes its index."""
        if isinstance(value, str) and self.labels is not None and not isinstance(self.space, gym.spaces.Text):
            if value not in self.labels:
                raise ValueError(f"{self.name} has no action labelled {value!r}; its labels are {self.labels}")
            return self.labels.index(value)
        return value

    def label(self, action: Any) -> str | None:
        if self.labels is not None:
            try:
                index = int(np.asarray(action).item())
            except (TypeError, ValueError):
                return None
            if 0 <= index < len(self.labels):
                return self.labels[index]
        return None

    def play(
        self,
        plan: Plan,
        *,
        policy: Policy | None = None,
        rng: np.random.Generator | None = None,
        keep_observations: bool = False,
    ) -> Episode:
        """Play ``plan`` (or ``policy`` from the plan's seed and faults) and record the episode."""
        faults = plan.faults if plan.faults is not None and not plan.faults.empty else None
        if faults is not None:
            if self.injector is None:
                raise ValueError(
                    f"{self.name} is not an envaudit.ToolEnv (or faults are off), so the fault schedule "
                    f"{faults!r} cannot be injected; drop faults= for plain Gymnasium envs"
                )
            unknown = sorted((faults.tools or set()) - set(self.tools))
            if unknown:
                raise ValueError(f"fault schedule names unknown tool(s) {unknown}; {self.name}'s tools are {self.tools}")
        self._schedule = faults
        self._calls = []
        recorder = Recorder()
        self.env.recorder = recorder
        obs, info = self.env.reset(seed=plan.seed)
        observations = [_snapshot(obs)] if keep_observations else None
        if policy is not None:
            policy.reset(self.env, rng if rng is not None else np.random.default_rng(plan.seed))
        actions = [self.action(a) for a in plan.actions]
        repeat = self.action(plan.then_repeat) if plan.then_repeat is not None else None
        steps: list[Step] = []
        played: list[Any] = []
        terminated = truncated = False
        for t in range(self.max_steps):
            if policy is not None:
                action = policy(obs, info)
            elif t < len(actions):
                action = actions[t]
            elif repeat is not None:
                action = repeat
            else:
                break
            n_calls = len(self._calls)
            obs, reward, terminated, truncated, info = self.env.step(action)
            if keep_observations:
                observations.append(_snapshot(obs))
            tool = read_tool_info(info)
            call = self._calls[-1][1] if len(self._calls) > n_calls else None
            plain = _plain(action)
            played.append(plain)
            steps.append(Step(
                index=t, action=plain, label=self.label(plain), reward=float(reward),
                terminated=bool(terminated), truncated=bool(truncated),
                tool=tool["name"] if tool else None, status=tool["status"] if tool else None,
                injected=bool(tool and tool["injected"]), error=tool["error"] if tool else None,
                call=call if tool else None,
            ))
            if terminated or truncated:
                break
        finished = bool(steps) and (terminated or truncated)
        reason = outcome = success = None
        if finished:
            flag = info.get(SUCCESS_KEY)
            success = None if flag is None else bool(flag)
            reason = end_reason(terminated=bool(terminated), truncated=bool(truncated), tool_status=steps[-1].status,
                                success=success)
            outcome = outcome_class(reason, success=success, episode_return=sum(s.reward for s in steps))
        return Episode(
            env=self.name, seed=plan.seed, actions=tuple(played), faults=faults, steps=tuple(steps),
            finished=finished, end_reason=reason, outcome=outcome, success=success,
            observations=tuple(observations) if observations is not None else None, _recorder=recorder,
        )

    def candidate_actions(self, *, limit: int = 64, samples: int = 8, seed: int = 0) -> list[Any]:
        """Actions to try as alternatives: every action of a small discrete space, else a sample."""
        space = self.space
        if isinstance(space, gym.spaces.Discrete) and space.n <= limit:
            return [int(space.start) + i for i in range(int(space.n))]
        other = copy.deepcopy(space)
        other.seed(seed)
        return [other.sample() for _ in range(samples)]

    def close(self) -> None:
        try:
            self.env.close()
        except Exception:  # closing a broken env is best effort; the episodes are already recorded
            pass

    def __enter__(self) -> EnvSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _plain(action: Any) -> Any:
    arr = np.asarray(action) if not isinstance(action, (str, dict, tuple)) else None
    if arr is not None and arr.shape == () and np.issubdtype(arr.dtype, np.integer):
        return int(arr)
    if arr is not None and arr.shape == () and np.issubdtype(arr.dtype, np.floating):
        return float(arr)
    return action


def _snapshot(obs: Any) -> Any:
    if isinstance(obs, np.ndarray):
        return obs.copy()
    try:
        return copy.deepcopy(obs)
    except Exception:  # an observation that cannot be copied is compared as it is
        return obs


def play(
    make_env: Any,
    actions: Sequence[Any] = (),
    *,
    seed: int | None = 0,
    faults: FaultSchedule | Mapping[int, str] | Sequence[str | None] | None = None,
    then_repeat: Any = None,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> Episode:
    """Play one episode of a fresh env and return it, recorded: how to replay a counterexample.

    ``actions`` are action values or, for ``ToolEnv``s, catalogue labels; ``then_repeat`` is
    played after them until the episode ends (or ``max_steps``); ``faults`` forces tool calls to
    fail or time out, keyed by call index (``{0: "timeout"}``: the first call times out). The
    episode keeps its observations (``observations[0]`` from ``reset``, then one per step).

    >>> from envaudit.testing import play
    >>> episode = play("envaudit/FlakySearch-v0", ["give_up"], seed=0)
    >>> episode.episode_return, episode.end_reason, episode.success
    (0.0, 'terminated', False)
    """
    schedule = as_schedule(faults)
    with EnvSession(make_env, max_steps=max_steps, faults=schedule is not None) as session:
        return session.play(Plan(seed, tuple(actions), then_repeat, schedule), keep_observations=True)


__all__ = ["Episode", "EnvSession", "FaultSchedule", "Plan", "Step", "as_schedule", "play", "render_episode"]
