"""verifiers adapter: ``envaudit scan verifiers:MODULE`` (verifiers 0.4, ``verifiers.v1``).

MODULE is an importable module or a path to a ``.py`` file that is either

- a module exposing ``load_environment(**kwargs)`` that returns a ``vf.Env`` (or a
  ``vf.EnvConfig``); ``--env-arg KEY=VALUE`` options are its keyword arguments; or
- a verifiers taskset plugin (the package's own convention: it exports a ``vf.Taskset`` subclass,
  and optionally its ``vf.Env``, via ``__all__``), built with ``vf.load_environment`` as
  ``vf eval`` builds it; ``--env-arg`` options are the taskset config's fields (e.g.
  ``verifiers:verifiers.v1.tasksets.textarena --env-arg game=Wordle-v0``).

Control is inverted in verifiers: ``Env.run(task, agents)`` drives the agent. The adapter runs
the rollout on an event loop of its own and answers each model call with the next action given
to ``step()`` (``verifiers_bridge``), so every probe drives it like any Gymnasium env. What it maps
onto the info protocol, from the finished ``Episode`` and its ``Trace``s:

- **Reward**: the sum of the traces' weighted rewards; a reward left ``None`` (unscored) counts 0,
  with a note in ``info["reward_note"]``.
- **Success**: the rubric's correctness signal, a reward or metric named ``correct``,
  ``correctness``, ``accuracy``, ``exact_match``, ``is_correct``, ``solved``, ``passed`` or
  ``success`` (or the one ``--env-arg success=NAME`` names) equal to 1 -- never "the reward reached
  its maximum". An env with no such signal reports no success flag (the scan says so).
- **Endings**: ``is_timeout`` (a verifiers deadline expired) is truncated with ``info["end"] =
  "timeout"``; ``is_truncated`` (``max_turns`` and the token limits) is truncated; errors on the
  episode or a trace end it as a failed call, ``info["tool"]`` with status ``error`` (``timeout``
  for a ``TimeoutError``); an episode that runs past the adapter's ``turn_cap`` is cut and truncated.
- **Tool calls**: in envs with MCP tools, each step whose action made tool calls carries
  ``info["tool"]`` with the status the bridge's harness saw (ok, error: an unknown tool, malformed
  arguments, an MCP error result; timeout).
- **Deadlines**: verifiers' wall-clock deadlines are lifted (an audited episode waits on the
  auditor, so seconds would make outcomes depend on machine load); the fingerprint says so.

Tasks are the first ``size`` tasks of the env's own taskset (default 100); the reset seed picks
one (``seed mod size``). The catalogue per task: the reference answer (the task data's ``answer``,
or ``--env-arg answer_field=NAME``), formatted wrong answers, unformatted, empty, echo, hedged, the
reference with trailing text and a partial answer; in tool envs also a valid, a failing (unknown
tool), a malformed and a repeated tool call (the last one that worked). Multi-turn envs get delaying from the length probe,
which puts wrong attempts before the reference.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envaudit.adapters import package_version, require
from envaudit.adapters.base import CatalogueEnv
from envaudit.adapters.catalogue import ANSWER_LABELS, REFERENCE, Strategy, answer_strategies
from envaudit.errors import UsageError
from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT

EXTRA = "verifiers"
DEFAULT_SIZE = 100
DEFAULT_TURN_CAP = 20
"""Agent turns after which the adapter cuts an episode whose env sets no turn limit of its own."""
DEFAULT_EVENT_CAP_S = 120.0
"""Wall-clock safety cap on one wait for the rollout (a hung env), never a budget of the audit."""
CORRECTNESS = ("correct", "correctness", "accuracy", "exact_match", "is_correct", "solved", "passed", "success")
ANSWER_FIELDS = ("answer", "reference", "target", "solution", "ground_truth")
TOOL_LABELS = ("tool_valid", "tool_failing", "tool_malformed", "tool_repeat")
NO_REFERENCE = "I don't know."
CHECK_TASKS = 3
"""Tasks on which ``adapter_info["catalogue_check"]`` plays every catalogue strategy as a first reply."""
EXAMPLES = 3
ADAPTER_OPTIONS = {"size", "max_turns", "turn_cap", "success", "answer_field", "event_cap_s"}


def _vf() -> Any:
    return require("verifiers.v1", package="verifiers", extra=EXTRA)


def _bridge() -> Any:
    _vf()
    from envaudit.adapters import verifiers_bridge

    return verifiers_bridge


# -- resolving MODULE ----------------------------------------------------------------------
def import_target(target: str) -> Any:
    """The module a ``verifiers:TARGET`` names: a ``.py`` file (imported once per path, under a
    lower-cased name verifiers' plugin loader can import again) or an importable module name."""
    if target.endswith(".py") or "/" in target:
        path = Path(target)
        if not path.is_file():
            raise UsageError(f"verifiers:{target}: no such file; expected a .py file exposing "
                             "load_environment(**kwargs) or an importable module name")
        # Lower case: verifiers' plugin loader lower-cases the ids it imports (a module that names its
        # taskset ``id=__name__`` must be importable under the lower-cased name).
        name = "envaudit_vf_" + re.sub(r"\W", "_", path.stem).lower()
        if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path.resolve()):
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path.resolve())
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # verifiers' plugin loader imports tasksets by module name
        try:
            spec.loader.exec_module(module)
        except Exception:
            sys.modules.pop(name, None)
            raise
        return module
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name and target.startswith(exc.name):
            raise UsageError(f"verifiers:{target}: no module named {exc.name!r}; expected an importable "
                             "module or a path to a .py file exposing load_environment(**kwargs)") from None
        raise


def taskset_id(module: Any) -> str | None:
    """The id verifiers' loader resolves to this module, when it is a taskset plugin."""
    vf = _vf()
    exported = [getattr(module, n, None) for n in getattr(module, "__all__", ())]
    if not any(isinstance(o, type) and issubclass(o, vf.Taskset) and o is not vf.Taskset for o in exported):
        return None
    name = module.__name__
    prefix = "verifiers.v1.tasksets."
    if name.startswith(prefix) and "." not in name[len(prefix):]:
        return name[len(prefix):]
    # The loader probes ``verifiers.v1.tasksets.<id>`` first, which a dotted id breaks, and imports
    # the id lower-cased (``utils.loaders._import_plugin``).
    alias = name.replace(".", "_").lower()
    sys.modules.setdefault(alias, module)
    return alias


def _split(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    adapter = {k: v for k, v in options.items() if k in ADAPTER_OPTIONS}
    for key in ("size", "turn_cap"):
        value = adapter.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise UsageError(f"--env-arg {key}={value!r}: expected a positive integer")
    turns = adapter.get("max_turns")
    if turns is not None and (not isinstance(turns, int) or isinstance(turns, bool) or turns < 1):
        raise UsageError(f"--env-arg max_turns={turns!r}: expected a positive integer (verifiers' turn limit)")
    cap = adapter.get("event_cap_s", DEFAULT_EVENT_CAP_S)
    if not isinstance(cap, (int, float)) or isinstance(cap, bool) or cap <= 0:
        raise UsageError(f"--env-arg event_cap_s={cap!r}: expected a positive number of seconds")
    return adapter, {k: v for k, v in options.items() if k not in ADAPTER_OPTIONS}


def _builder(target: str, kwargs: Mapping[str, Any]):
    """``(module, build)``: ``build(patch)`` makes the verifiers Env under a patched config."""
    bridge = _bridge()
    module = import_target(target)
    load = getattr(module, "load_environment", None)
    if callable(load) and getattr(load, "__module__", "").split(".")[0] != "verifiers":
        def build(patch):
            try:
                made = load(**kwargs)
            except TypeError as exc:
                raise UsageError(f"verifiers:{target}: load_environment rejected the options {dict(kwargs)}: {exc}") from exc
            if bridge.is_env(made):
                return bridge.rebuild(made)(patch)
            if bridge.is_env_config(made):
                return bridge.env_from_config(patch(made))
            raise UsageError(f"verifiers:{target}: load_environment returned a {type(made).__name__}; "
                             "expected a verifiers Env (vf.Env) or EnvConfig")
        return module, build
    taskset = taskset_id(module)
    if taskset is None:
        raise UsageError(f"verifiers:{target}: module {module.__name__!r} has no load_environment(**kwargs) and "
                         "exports no verifiers Taskset via __all__; expected one of the two")
    try:
        config = bridge.resolve_config({"taskset": {"id": taskset, **kwargs}})
    except Exception as exc:
        raise UsageError(f"verifiers:{target}: the taskset config rejected the options {dict(kwargs)}: {exc}") from exc
    return module, lambda patch: bridge.env_from_config(patch(config))


def check(target: str, **options: Any) -> None:
    """Validate the options and import MODULE (a typo is a usage error before any rollout)."""
    _builder(target, _split(options)[1])


def make(target: str, **options: Any) -> VerifiersEnv:
    return VerifiersEnv(target, **options)


# -- mapping a finished episode ------------------------------------------------------------
def _value(trace: Any, key: str) -> float | None:
    reward = trace.rewards.get(key)
    if reward is not None:
        return float(reward.score)
    metric = trace.metrics.get(key)
    return None if metric is None else float(metric)


def correctness_key(traces: list[Any], wanted: str | None) -> str | None:
    """The reward or metric that says whether the task was done (``wanted`` when given)."""
    names = {k for t in traces for k in (*t.rewards, *t.metrics)}
    if wanted is not None:
        return wanted if wanted in names else None
    return next((k for k in CORRECTNESS if k in names), None)


def map_episode(episode: Any, success_key: str | None) -> tuple[float, bool, bool, dict[str, Any]]:
    """``(reward, terminated, truncated, info)`` of a finished verifiers ``Episode``."""
    traces = list(episode.traces)
    reward = sum(r.value for t in traces for r in t.rewards.values() if r is not None)
    info: dict[str, Any] = {"rewards": {k: (None if r is None else r.score) for t in traces for k, r in t.rewards.items()},
                            "stop_condition": next((t.stop_condition for t in traces if t.stop_condition), None)}
    unscored = sorted({k for t in traces for k, r in t.rewards.items() if r is None})
    if unscored:
        info["reward_note"] = f"verifiers left the rewards {unscored} unscored (None); counted as 0"
    elif not any(t.rewards for t in traces):
        info["reward_note"] = "the env recorded no reward; counted as 0"
    key = correctness_key(traces, success_key)
    values = [v for v in (_value(t, key) for t in traces) if v is not None] if key else []
    success = bool(values) and all(v == 1.0 for v in values) if key else None
    errors = [*episode.errors, *(e for t in traces for e in t.errors)]
    if episode.is_timeout or any(t.is_timeout for t in traces):
        info.update(end="timeout", success=False)
        return reward, False, True, info
    if errors:
        last = errors[-1]
        status = TOOL_TIMEOUT if last.type == "TimeoutError" else TOOL_ERROR
        info["tool"] = {"name": last.type, "status": status, "error": last.message[:300]}
        info["success"] = False
        return reward, True, False, info
    if any(t.is_truncated for t in traces):
        info["success"] = False
        return reward, False, True, info
    if success is not None:
        info["success"] = success
    return reward, True, False, info


# -- the env -------------------------------------------------------------------------------
def content_text(content: Any) -> str:
    """A message's text: the string, or its parts' texts one per line (a part without text, an
    image, is an empty line)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(str(getattr(p, "text", "") or "") for p in content)


def new_text(messages: list[Any]) -> str:
    """What the env said since the model last spoke (the whole prompt on the first turn)."""
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    return "\n\n".join(content_text(m.content) for m in messages[last + 1:] if m.role != "system")


def reference_of(data: Any, field: str | None) -> str | None:
    """The task's reference answer: ``field`` (else the first of ``ANSWER_FIELDS``) of the task data
    or of its ``info``, when it is a single value (a dict or list is no answer to write)."""
    fields = (field,) if field else ANSWER_FIELDS
    for name in fields:
        value = getattr(data, name, None)
        if value is None and isinstance(getattr(data, "info", None), Mapping):
            value = data.info.get(name)
        if value is not None and not isinstance(value, (dict, list)):
            return str(value)
    return None


def answer_format(text: str):
    """How the task asks for its answer: ``\\boxed{}``, ``<answer>`` tags, or bare."""
    if "boxed" in text:
        return lambda a: "\\boxed{" + a + "}"
    if "<answer>" in text:
        return lambda a: f"<answer>{a}</answer>"
    return lambda a: a


def example_args(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments a tool's JSON schema accepts: each required property (every property when the
    schema names none) filled with a sample of its type ("test" for a string or an unknown type)."""
    samples = {"string": "test", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    props = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    required = schema.get("required", list(props)) if isinstance(schema, Mapping) else []
    return {k: samples.get(str(props.get(k, {}).get("type", "string")), "test") for k in required}


def tool_call(name: str, arguments: Any) -> str:
    import json

    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


class VerifiersEnv(CatalogueEnv):
    """One verifiers Env, its rollouts bridged into steps, behind the Gymnasium API."""

    ecosystem = "verifiers"

    def __init__(self, target: str, **options: Any) -> None:
        adapter, kwargs = _split(options)
        module, build = _builder(target, kwargs)
        bridge = _bridge()
        self.success_name = adapter.get("success")
        self.answer_field = adapter.get("answer_field")
        self.bridge = bridge.EpisodeBridge(build, max_turns=adapter.get("max_turns"),
                                           event_cap_s=float(adapter.get("event_cap_s", DEFAULT_EVENT_CAP_S)))
        try:
            self.tasks = bridge.task_list(self.bridge.env, adapter.get("size", DEFAULT_SIZE))
        except Exception:
            self.bridge.close()
            raise
        if not self.tasks:
            self.bridge.close()
            raise UsageError(f"verifiers:{target}: the env's taskset yielded no tasks")
        first = self.tasks[0]
        self.tool_env = bool(type(first).toolsets(first.config) or type(self.bridge.env.taskset).toolsets(
            self.bridge.env.taskset.config))
        # The vLLM engine prompts with the env's own system prompt (tasks of a taskset share one).
        self.system_prompt = first.data.system_prompt or ""
        references = [reference_of(t.data, self.answer_field) for t in self.tasks]
        self.has_reference = all(r is not None for r in references)
        seats = list(bridge.agent_config_fields(self.bridge.env.config).values())
        limits = [s.max_turns for s in seats if s.max_turns is not None]
        self.turn_limit = max(limits) if limits else None
        self.turn_cap = adapter.get("turn_cap") or ((self.turn_limit + 1) if self.turn_limit else DEFAULT_TURN_CAP)
        super().__init__(ANSWER_LABELS + (TOOL_LABELS if self.tool_env else ()), max_steps=self.turn_cap)
        env = self.bridge.env
        self._info.update({
            "package": "verifiers", "version": package_version("verifiers"), "target": target,
            "module": module.__name__, "env_class": f"{type(env).__module__}.{type(env).__qualname__}",
            "taskset": type(env.taskset).__qualname__, "tasks": len(self.tasks), "tool_env": self.tool_env,
            "options": {k: repr(v) for k, v in kwargs.items()},
            "success": (f"the reward or metric {self.success_name!r} equals 1" if self.success_name else
                        "a correctness reward or metric (" + ", ".join(CORRECTNESS) + ") equals 1; none: no success flag"),
            "reference": "the task data's " + (repr(self.answer_field) if self.answer_field else "/".join(ANSWER_FIELDS))
                         + (" field" if self.has_reference else " field (missing on some tasks: no oracle)"),
            "turn_limit": self.turn_limit, "turn_cap": self.turn_cap,
            "deadlines": "verifiers' wall-clock deadlines are lifted: an audited episode waits on the auditor",
            "grading": "on the thread that steps the env (the rollout's event loop runs there): a worker process's "
                       "main thread under the process executor (the scan's default), where graders that use "
                       "signal.alarm (math-verify) work; in-process executors step envs on threads of their own, "
                       "where Python refuses signals and such graders score 0",
            "replay": "the reset seed picks the task (seed mod tasks)",
        })
        self.task: Any = None
        self.index = 0
        self._turn = 0
        self._tools: list[dict[str, Any]] = []
        self._last_call: str | None = None

    measured_check = "catalogue_check"

    def measure_check(self) -> dict[str, Any]:
        return self.catalogue_check()

    def catalogue_check(self, tasks: int = CHECK_TASKS) -> dict[str, Any]:
        """Every catalogue strategy played as the first reply on the first ``tasks`` tasks, through
        the bridge (verifiers' own rollout and scoring): the share the env takes (a reward above 0,
        or a tool call that ran), the distinct outcomes (return, success, ended), whether the env is
        playable (some reply taken, two outcomes at least, a success signal), per strategy how often
        it earns the reference's return without success, and the rollouts' exceptions. The reset
        generator is left as it was (``adapter_info`` replays an episode the check interrupted)."""
        n = min(tasks, len(self.tasks))
        kept = self._np_random
        played: list[tuple[str, float, bool, bool | None, str | None]] = []
        errors: list[dict[str, Any]] = []
        try:
            for i in range(n):
                for k, label in enumerate(self.action_labels):
                    try:
                        self.reset(seed=i)
                        _, reward, terminated, truncated, info = self.step(k)
                    except Exception as exc:  # a rollout that raises is a fact about the env
                        errors.append({"label": label, "index": i, "error": f"{type(exc).__name__}: {exc}"[:300]})
                        continue
                    tool = (info.get("tool") or {}).get("status")
                    played.append((label, float(reward), bool(terminated or truncated), info.get("success"), tool))
        finally:
            self.bridge.abandon()
            self._np_random = kept
            self.task, self._current, self._labels_by_text, self.prompt = None, [], {}, ""
        total = n * len(self.action_labels)
        taken = sum(reward > 0 or status == TOOL_OK for _, reward, _, _, status in played)
        outcomes = {(round(reward, 6), success, done) for _, reward, done, success, _ in played}
        success_defined = any(success is not None for *_, success, _ in played)
        reference = [(reward, success) for label, reward, _, success, _ in played if label == REFERENCE]
        top = max((reward for reward, ok in reference if ok), default=None)
        unearned = {}
        if top is not None:
            for label in self.action_labels:
                hits = sum(reward >= top and success is False for lab, reward, _, success, _ in played if lab == label)
                if hits:
                    unearned[label] = hits / n
        share = taken / total if total else 0.0
        note = ({} if threading.current_thread() is threading.main_thread() else
                {"note": "played off the main thread: graders that use signal.alarm (math-verify) score 0 here, "
                         "though not in the scan's worker processes"})
        return {
            "entries": n, "strategies": len(self.action_labels), "played": len(played),
            "well_formed_share": share, "distinct_outcomes": len(outcomes), "success_defined": success_defined,
            "playable": share > 0 and len(outcomes) >= 2 and success_defined,
            "reference_success_share": sum(ok is True for _, ok in reference) / n if n else 0.0,
            "reference_return": top,
            "full_marks_without_success": unearned,
            "scorer_errors": {"count": len(errors), "examples": errors[:EXAMPLES]},
            **note,
        }

    # -- episodes ------------------------------------------------------------------------------
    def _reset(self, seed: int | None, options: Mapping[str, Any] | None):
        self.index = seed % len(self.tasks) if seed is not None else int(self.np_random.integers(len(self.tasks)))
        self.task = self.tasks[self.index]
        self.system_prompt = self.task.data.system_prompt or ""
        self._turn, self._last_call = 0, None
        self.bridge.begin(self.task)
        event = self.bridge.next_event()
        if not hasattr(event, "messages"):
            detail = event.error or (event.episode.errors[-1].message if event.episode and event.episode.errors else "")
            raise RuntimeError(f"the verifiers episode of task {self.index} ended before its first model call: {detail}")
        self._tools = event.tools
        return new_text(event.messages), {"index": self.index, "system_prompt": self.system_prompt}

    def _step_text(self, text: str):
        self._turn += 1
        calls = self.bridge_calls(text)
        self.bridge.act(text)
        event = self.bridge.next_event()
        if hasattr(event, "messages"):
            self._tools = event.tools or self._tools
            info: dict[str, Any] = {"index": self.index}
            if calls and event.tool_statuses:
                worst = next((s for s in event.tool_statuses if s["status"] != "ok"), event.tool_statuses[0])
                info["tool"] = {k: worst[k] for k in ("name", "status", "error") if k in worst}
                if worst["status"] == "ok":
                    self._last_call = text  # what 'tool_repeat' plays: the last call that worked
            if self._turn >= self.turn_cap:
                self.bridge.abandon()
                info.update(success=False, end="turn_cap")
                return "", 0.0, False, True, info
            return new_text(event.messages), 0.0, False, False, info
        if event.error is not None:
            raise RuntimeError(f"the verifiers episode raised: {type(event.error).__name__}: {event.error}")
        reward, terminated, truncated, info = map_episode(event.episode, self.success_name)
        info["index"] = self.index
        return "", reward, terminated, truncated, info

    @staticmethod
    def bridge_calls(text: str) -> list[dict[str, Any]]:
        return _bridge().split_tool_calls(text)[1]

    def close(self) -> None:
        bridge = getattr(self, "bridge", None)
        if bridge is not None:
            bridge.close()
        super().close()

    # -- the catalogue ---------------------------------------------------------------------------
    def _strategies(self) -> list[Strategy]:
        data = self.task.data
        reference = reference_of(data, self.answer_field)
        fmt = answer_format(f"{data.system_prompt or ''}\n{data.prompt_text}")
        strategies = answer_strategies(reference if reference is not None else NO_REFERENCE, self.prompt, fmt=fmt,
                                       unformatted=(lambda a: a) if fmt("x") != "x" else None)
        if self.tool_env:
            strategies += self._tool_strategies()
        return strategies

    def _tool_strategies(self) -> list[Strategy]:
        tool = self._tools[0]["function"] if self._tools else {"name": "tool", "parameters": {}}
        valid = tool_call(tool["name"], example_args(tool.get("parameters") or {}))
        malformed = "<tool_call>{\"name\": \"" + tool["name"] + "\", \"arguments\": {</tool_call>"
        return [Strategy("tool_valid", valid), Strategy("tool_failing", tool_call(tool["name"] + "_missing", {})),
                Strategy("tool_malformed", malformed), Strategy("tool_repeat", self._last_call or valid)]
