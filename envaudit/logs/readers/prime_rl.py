"""prime-rl: the episode traces its file monitor writes (verifiers v1 ``Episode`` records).

What prime-rl writes (PrimeIntellect-ai/prime-rl, verifiers pinned as ``deps/verifiers``):

- ``src/prime_rl/monitors/file.py``, ``FileMonitor.log_episodes``: every episode to
  ``{output_dir}/rollouts/step_{N}/{train|eval}/{all|effective}/traces.jsonl``, one
  ``episode.to_record()`` per line. The file monitor is on by default (``monitors.file``,
  ``packages/prime-rl-configs/src/prime_rl/configs/monitors.py``; off with ``--no-monitors.file``).
  ``src/prime_rl/orchestrator/orchestrator.py`` logs each arriving rollout to ``all`` (errored and
  never-batched ones included) and the trained-on batch to ``effective``.
- ``verifiers/v1/episode.py``, ``Episode.to_record``: ``model_dump(mode="json", exclude_none=True)``
  of ``id``, ``env``, ``task`` (``type``, ``data``, ``key``, ``hash``), ``group.id`` (the rollout
  group), ``run.work`` (``type`` train/eval, ``step``, ``policy``), ``ok``, ``errors`` and
  ``traces``; each trace (``verifiers/v1/trace.py``, ``Trace``) has ``agent`` (``name``,
  ``trainable``), ``nodes`` (messages, ``sampled`` marking model turns), ``calls`` (model calls
  with ``finish_reason``), ``rewards`` (``{name: {score, weight}}``), ``metrics``,
  ``stop_condition``, ``ok``, ``errors``.

Mapping (one schema episode per trainable trace: prime-rl trains on each trace with its own
reward, ``src/prime_rl/orchestrator/algo/grpo.py``):

- ``episode_id`` <- ``id`` (``id/agent/index`` when an episode has several trainable traces).
- ``group_id`` <- ``group.id``; ``iteration`` <- ``run.work.step`` (else the ``step_N`` folder).
- ``return`` <- ``Trace.reward`` = sum of ``score * weight`` over the non-null ``rewards``.
- ``length`` <- ``Trace.num_turns``: the nodes with ``sampled`` true (model turns, not tokens).
- ``end_reason``: ``timeout`` when an error is the agent deadline (``verifiers/v1/rollout.py``
  records ``HarnessError("agent timeout: ...")``) or a ``TimeoutError``; ``error`` for any other
  error (trace or episode) or ``ok`` false; ``truncated`` as ``Trace.is_truncated`` (a
  ``stop_condition`` of ``max_turns``, ``max_input_tokens``, ``max_output_tokens``,
  ``max_total_tokens``, ``context_length``, or the last model call finishing with ``length``);
  else ``terminated``.
- ``success`` <- a ``metrics`` entry with an explicit correctness name (``correct``, ``acc``...; or
  ``success_field=``), 0/1 only; never a ``rewards`` entry.
- ``task`` <- ``task.key``; ``response`` <- the last sampled assistant message.
- Steps (one per model turn): ``step``, ``action`` (the called tools' names, ``reply`` for a turn
  without tool calls), ``tool_name`` (the first tool called). Missing: ``reward`` (rewards are
  per trace), ``tool_status`` (tool messages carry no status), ``latency_s`` (the traces time model
  calls, not tools).
- An episode that failed before producing any trace is kept with ``end_reason`` error and a NaN
  ``return`` (prime-rl trains nothing on it); non-trainable traces are left out. Both are counted
  in the notes.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pandas as pd

from envaudit.errors import UsageError
from envaudit.logs.readers import _common
from envaudit.logs.schema import LoggedRun

NAME = "prime-rl"
FIELDS = ("id", "task", "ok")
TRUNCATING_STOPS = ("max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "context_length")
"""``Trace.is_truncated``'s stop conditions (verifiers/v1/trace.py)."""
_STEP_DIR = re.compile(r"^step_(\d+)$")


def sniff(path: str | os.PathLike) -> bool:
    """A ``traces.jsonl`` (or a folder holding them) whose first record is a verifiers episode."""
    first = _common.sniff_first(path, "traces.jsonl")
    if first is None:
        return False
    record = _common.first_record(first)
    return record is not None and all(k in record for k in FIELDS) and "traces" in record \
        and isinstance(record.get("task"), dict)


def _files(root: Path, kind: str, subset: str) -> list[Path]:
    if root.is_file():
        return [root]
    files = [p for p in sorted(root.rglob("traces.jsonl"), key=_common.natural_key)
             if p.parent.name == subset and p.parent.parent.name == kind]
    if not files:
        raise UsageError(f"{root} holds no {kind}/{subset}/traces.jsonl; point at {{output_dir}}/rollouts of a "
                         "prime-rl run (the file monitor writes it, on unless --no-monitors.file), or choose "
                         "kind= (train, eval) and subset= (all, effective)")
    return files


def _folder_step(file: Path) -> int | None:
    for part in reversed(file.parts):
        match = _STEP_DIR.match(part)
        if match:
            return int(match.group(1))
    return None


def _reward(trace: dict) -> float:
    """``Trace.reward``: ``sum(score * weight)`` over the rewards that ran (``None`` = not scored)."""
    return float(sum(r["score"] * r.get("weight", 1.0) for r in (trace.get("rewards") or {}).values() if r))


def _is_timeout(error: dict) -> bool:
    return error.get("type") == "TimeoutError" or str(error.get("message", "")).startswith("agent timeout")


def _end_reason(episode: dict, trace: dict | None) -> str:
    errors = list(episode.get("errors") or []) + list((trace or {}).get("errors") or [])
    if any(_is_timeout(e) for e in errors):
        return "timeout"
    if errors or not episode.get("ok", False) or (trace is not None and not trace.get("ok", False)):
        return "error"
    if trace is None:  # no trace at all: prime-rl marks such an episode not ok
        return "error"
    if trace.get("stop_condition") in TRUNCATING_STOPS:
        return "truncated"
    last = next((c for c in reversed(trace.get("calls") or []) if c.get("error") is None), None)
    return "truncated" if last is not None and last.get("finish_reason") == "length" else "terminated"


def _turns(trace: dict) -> list[dict]:
    return [n["message"] for n in trace.get("nodes") or [] if n.get("sampled")]


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def read(path: str | os.PathLike, *, kind: str = "train", subset: str = "all",
         success_field: str | None = None) -> LoggedRun:
    """The ``kind``/``subset`` traces under ``path`` (``{output_dir}/rollouts``, or one
    ``traces.jsonl``) as a ``LoggedRun``. ``subset="all"`` (default) holds every completed rollout,
    the errored and dropped ones too; ``"effective"`` only what was trained on."""
    if kind not in ("train", "eval") or subset not in ("all", "effective"):
        raise UsageError(f"kind={kind!r}, subset={subset!r}: expected kind train or eval, subset all or effective")
    root = _common.as_path(path)
    files = _files(root, kind, subset)
    episodes: list[dict] = []
    steps: list[dict] = []
    counts = {"untrained": 0, "traceless": 0, "no_group": 0}
    metric_names: set[str] = set()
    for file in files:
        folder_step = _folder_step(file.resolve())
        for lineno, record in _common.read_jsonl(file):
            _common.require(record, FIELDS, f"{file}:{lineno}", NAME)
            if not isinstance(record["task"], dict) or not isinstance(record.get("traces", []), list):
                raise UsageError(f"{file}:{lineno}: 'task' is not an object or 'traces' not a list; this is not a "
                                 "verifiers episode record (Episode.to_record)")
            work = (record.get("run") or {}).get("work") or {}
            iteration = work.get("step", folder_step)
            if iteration is None:
                raise UsageError(f"{file}:{lineno}: the episode has no run.work.step and the file is not under a "
                                 "step_N folder; point at prime-rl's rollouts/ folder")
            group = (record.get("group") or {}).get("id")
            if group is None:
                counts["no_group"] += 1
                group = record["id"]
            task = record["task"].get("key") or record["task"].get("hash")
            traces = [t for t in record.get("traces") or [] if (t.get("agent") or {}).get("trainable", True)]
            counts["untrained"] += len(record.get("traces") or []) - len(traces)
            if not traces:
                counts["traceless"] += 1
                episodes.append({"episode_id": record["id"], "group_id": str(group), "iteration": iteration,
                                 "return": math.nan, "length": 0, "end_reason": _end_reason(record, None),
                                 "_metrics": {}, "task": task, "response": ""})
                continue
            for index, trace in enumerate(traces):
                agent = (trace.get("agent") or {}).get("name", "agent")
                eid = record["id"] if len(traces) == 1 else f"{record['id']}/{agent}/{index}"
                turns = _turns(trace)
                metrics = trace.get("metrics") or {}
                metric_names.update(metrics)
                episodes.append({"episode_id": eid, "group_id": str(group), "iteration": iteration,
                                 "return": _reward(trace), "length": len(turns),
                                 "end_reason": _end_reason(record, trace), "_metrics": metrics, "task": task,
                                 "response": _text(turns[-1]).strip() if turns else ""})
                for step, message in enumerate(turns):
                    names = [c["name"] for c in message.get("tool_calls") or []]
                    steps.append({"episode_id": eid, "step": step, "action": ",".join(names) or "reply",
                                  "tool_name": names[0] if names else None})
    table = pd.DataFrame(episodes)
    notes = [f"read {len(table)} rollouts ({kind}/{subset}) from {len(files)} prime-rl traces.jsonl file(s)",
             "group_id <- group.id; iteration <- run.work.step; return <- Trace.reward (sum of score * weight)",
             "length <- Trace.num_turns (sampled model turns); end_reason <- errors (agent timeout -> timeout), "
             "stop_condition / last finish_reason (-> truncated), else terminated",
             "steps: one per model turn; action <- the called tools' names, 'reply' for a turn without tool calls"]
    if counts["traceless"]:
        notes.append(f"{counts['traceless']} episodes failed before any trace: end_reason error, return NaN")
    if counts["untrained"]:
        notes.append(f"{counts['untrained']} non-trainable traces (agent.trainable false) left out")
    if counts["no_group"]:
        notes.append(f"{counts['no_group']} episodes had no group: each is its own group")
    field = _common.pick_correctness_field(sorted(metric_names), success_field) if metric_names or success_field \
        else None
    if field is None:
        notes.append("success: no correctness metric (correct, acc, ...) in the traces' metrics; missing "
                     "(rewards are never read as success)")
    else:
        values = table["_metrics"].map(lambda m: m.get(field))
        success, note = _common.correctness(values, f"metrics.{field}")
        notes.append(note)
        if success is not None:
            table["success"] = success
    # --map reads the traces' metrics by name (e.g. a tool-timeout count an env's rubric records)
    fields = pd.DataFrame([{f"metrics.{k}": v for k, v in m.items()} for m in table["_metrics"]], index=table.index)
    table = table.drop(columns="_metrics")
    step_table = pd.DataFrame(steps, columns=["episode_id", "step", "action", "tool_name"])
    return _common.logged_run(table, step_table, NAME, notes, fields=fields)
