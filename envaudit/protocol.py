"""The info protocol of DESIGN.md: the words envaudit uses for what happened in an episode.

An environment tells envaudit about tool calls through ``info["tool"]`` (a mapping with ``name``,
``status`` and optional ``latency_s`` / ``error``) and about the designer's own judgement of the
episode through ``info["success"]`` on its last step. Everything else envaudit derives: the
*end reason* of an episode and its *outcome class*, which is what a training pipeline keys on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOOL_KEY = "tool"
SUCCESS_KEY = "success"

TOOL_OK = "ok"
TOOL_ERROR = "error"
TOOL_TIMEOUT = "timeout"
TOOL_STATUSES = (TOOL_OK, TOOL_ERROR, TOOL_TIMEOUT)
TOOL_FAILED = (TOOL_ERROR, TOOL_TIMEOUT)
"""The statuses of a tool call that did not work: it raised or reported an error, or it overran."""

# Why an episode ended. A tool status only names the end reason when the episode ended on that step.
END_TERMINATED = "terminated"
END_TRUNCATED = "truncated"
END_TOOL_TIMEOUT = "tool_timeout"
END_TOOL_ERROR = "tool_error"
END_ENV_EXCEPTION = "env_exception"
END_REASONS = (END_TERMINATED, END_TRUNCATED, END_TOOL_TIMEOUT, END_TOOL_ERROR, END_ENV_EXCEPTION)

# What a training pipeline sees: the class it attaches a handling to.
SUCCESS = "success"
FAILURE = "failure"
TIMEOUT = "timeout"
ERROR = "error"
UNKNOWN = "unknown"
OUTCOMES = (SUCCESS, FAILURE, TIMEOUT, ERROR)


def read_tool_info(info: Mapping[str, Any], key: str = TOOL_KEY) -> dict[str, Any] | None:
    """Return the normalised tool record of one step, or None when the step called no tool.

    Accepts a mapping with at least ``name`` and ``status``. A status outside ``TOOL_STATUSES`` is
    kept as ``"error"`` with the unknown status in ``error``, so a typo in an env cannot hide a
    failure from the probes.
    """
    fields = tool_fields(info.get(key), key)
    return None if fields is None else dict(zip(TOOL_FIELDS, fields, strict=True))


TOOL_FIELDS = ("name", "status", "latency_s", "error", "injected")
_STATUSES = frozenset(TOOL_STATUSES)


def tool_fields(raw: Any, key: str = TOOL_KEY) -> tuple[str, str, float | None, str | None, bool] | None:
    """``read_tool_info`` on the value of ``info[key]``, as a tuple in ``TOOL_FIELDS`` order.

    The recorder calls this on every step of a tool env, so the usual case (a dict of plain
    strings) takes no conversions; every other input normalises exactly as ``read_tool_info`` says.
    """
    if raw is None:
        return None
    if raw.__class__ is not dict and not isinstance(raw, Mapping):
        raise TypeError(
            f"info[{key!r}] must be a mapping with 'name' and 'status', got {type(raw).__name__}; "
            "pass tool_key=... to envaudit.wrap if your env uses another key"
        )
    get = raw.get
    status = get("status", TOOL_OK)
    if status.__class__ is not str:
        status = str(status)
    error = get("error")
    if status not in _STATUSES:
        error = f"unknown tool status {status!r}" + (f": {error}" if error else "")
        status = TOOL_ERROR
    elif error is not None and error.__class__ is not str:
        error = str(error)
    name = get("name", "")
    if name.__class__ is not str:
        name = str(name)
    latency = get("latency_s")
    if latency is not None and latency.__class__ is not float:
        latency = float(latency)
    injected = get("injected", False)
    if injected.__class__ is not bool:
        injected = bool(injected)
    return name, status, latency, error, injected


def end_reason(
    *, terminated: bool, truncated: bool, tool_status: str | None, exception: bool = False,
    success: bool | None = None,
) -> str:
    """The end reason of an episode from its last step.

    A truncated last step is ``truncated`` even when ``terminated`` is set too (GEM at its turn
    limit, Gymnasium's ``TimeLimit`` on a terminating step): read as terminated, a payoff for
    reaching the limit would pass as an ordinary ending. Only a success on that step (``success``
    true: the task was done) stays ``terminated``.
    """
    if exception:
        return END_ENV_EXCEPTION
    if truncated and not (terminated and success is True):
        # The step limit cut the episode, whatever its last tool call did.
        return END_TRUNCATED
    if tool_status == TOOL_TIMEOUT:
        return END_TOOL_TIMEOUT
    if tool_status == TOOL_ERROR:
        return END_TOOL_ERROR
    return END_TERMINATED


def outcome_class(
    reason: str,
    *,
    success: bool | None,
    episode_return: float,
    success_threshold: float | None = None,
) -> str:
    """The outcome class of an episode: what a pipeline's handling keys on.

    Timeouts (truncation or a final tool timeout) and errors come first: a pipeline sees a
    timed-out rollout as timed out whatever its reward. Otherwise the env's own success flag
    decides; without one, ``success_threshold`` on the return does; without that, ``unknown``.
    """
    if reason in (END_TRUNCATED, END_TOOL_TIMEOUT):
        return TIMEOUT
    if reason in (END_TOOL_ERROR, END_ENV_EXCEPTION):
        return ERROR
    if success is not None:
        return SUCCESS if success else FAILURE
    if success_threshold is not None:
        return SUCCESS if episode_return >= success_threshold else FAILURE
    return UNKNOWN
