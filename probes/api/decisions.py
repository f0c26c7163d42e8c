"""The api probe's two decisions, ``decide_env_error`` and ``decide_non_replayable``, and the words of their findings."""

from __future__ import annotations

from collections.abc import Sequence

from envaudit.findings import Finding, Severity
from envaudit.probes.api.defects import DEFECTS, Defect, Seen, Tally, soft_rule


# -- findings ---------------------------------------------------------------------------------
def decide_env_error(basis: str, *, key: str = "", seen: Sequence[Seen] = (), tally: Tally | None = None,
                     step_timeout_s: float = 0.0, checker_warnings: Sequence[str] = (), message: str = "",
                     deadline_s: float = 0.0, error: Exception | None = None) -> Finding:
    """The one place this probe decides ``env-error``, for each way it sees a defect:

    - ``"defect"``: a ``DEFECTS`` entry (``key``) seen in exploration or the probe's own rollouts
      (``seen``, counted in ``tally``): the entry's severity (``fail`` for what crashes or poisons
      training, ``warn`` for what misleads it);
    - ``"checker-warnings"``: ``check_env``'s warnings (``checker_warnings``): ``info``;
    - ``"checker-hang"``: ``check_env`` did not return within ``deadline_s``: ``fail``;
    - ``"checker-error"``: ``check_env`` stopped with ``error`` (``message``): the severity of the
      first ``CHECKER_SOFT`` rule it matches when it is an assertion, ``fail`` otherwise.
    """
    if basis == "defect":
        d = DEFECTS[key]
        title, summary, fix = _defect_text(d, key, seen, step_timeout_s)
        first = seen[0]
        by_source: dict[str, int] = {}
        for s in seen:
            by_source[s.source] = by_source.get(s.source, 0) + 1
        return Finding(
            code="env-error", severity=Severity.parse(d.severity), title=title, summary=summary,
            evidence={
                "count": len(seen), "first_seed": first.seed, "first_step": first.step,
                "first_message": first.message, "messages": list(dict.fromkeys(s.message for s in seen))[:3],
                "by_source": by_source, "episodes_checked": tally.episodes, "steps_checked": tally.steps,
                "behaviour": "env-error",
            },
            examples=list(dict.fromkeys(s.episode_id for s in seen if s.episode_id is not None))[:5], fix=fix,
        )
    if basis == "checker-warnings":
        title, summary, fix = _checker_warnings_text(checker_warnings)
        return Finding(code="env-error", severity=Severity.INFO, title=title, summary=summary,
                       evidence={"warnings": list(checker_warnings), "behaviour": "env-error"}, fix=fix)
    if basis == "checker-hang":
        title, summary, fix = _checker_hang_text(message)
        return Finding(code="env-error", severity=Severity.FAIL, title=title, summary=summary,
                       evidence={"deadline_s": deadline_s, "message": message, "behaviour": "env-error"}, fix=fix)
    if basis == "checker-error":
        soft = soft_rule(error)
        if isinstance(error, AssertionError) and soft is not None:
            _, severity, fix = soft
            title = "Gymnasium's env checker reports a defect"
        else:
            severity, title = "fail", "Gymnasium's env checker rejects the env"
            fix = ("Fix what the message says; training code calls the env the same way check_env "
                   "does and will fail on it.")
        return Finding(code="env-error", severity=Severity.parse(severity), title=title,
                       summary=_checker_stopped(message),
                       evidence={"message": message, "exception": type(error).__name__, "behaviour": "env-error"},
                       fix=fix)
    raise ValueError(f"unknown basis {basis!r} for env-error; expected defect, checker-warnings, checker-hang "
                     "or checker-error")


def decide_non_replayable(error: Exception, message: str) -> Finding:
    """The one place this probe decides ``non-replayable``: ``check_env``'s own two-reset replay
    gave another observation, reward, ending or generator state (``replay_mismatch``), graded as
    the first ``CHECKER_SOFT`` rule it matches (``warn``; grouped with the replay probe's ``fail``)."""
    _, severity, fix = soft_rule(error)
    return Finding(code="non-replayable", severity=Severity.parse(severity),
                   title="Same seed and action, another result under Gymnasium's env checker",
                   summary=_checker_stopped(message),
                   evidence={"message": message, "exception": type(error).__name__, "behaviour": "non-replayable"},
                   fix=fix)


# -- the findings' words -----------------------------------------------------------------------
def _defect_text(d: Defect, key: str, seen: Sequence[Seen], step_timeout_s: float) -> tuple[str, str, str]:
    first = seen[0]
    where = (f"reset(seed={first.seed})" if first.step is None else f"seed {first.seed}, step {first.step}")
    if key.endswith("_hang"):
        detail = f"{d.what} ({step_timeout_s:g} s deadline) at {where}"
    else:
        detail = f"{d.what} {len(seen)} time(s), first at {where}: {first.message}"
    return d.title, f"{detail}; {d.why}.", d.fix


def _checker_warnings_text(notes: Sequence[str]) -> tuple[str, str, str]:
    return ("Gymnasium's env checker warns",
            f"check_env raised {len(notes)} warning(s); the first: {notes[0]}",
            "Each warning names what Gymnasium expects; none of them stops training by itself.")


def _checker_hang_text(message: str) -> tuple[str, str, str]:
    return ("The env hangs under Gymnasium's env checker",
            f"{message}; a rollout worker calling the env the same way blocks for good.",
            "Put a deadline on every blocking call in reset() and step(); most likely a call "
            "waits for a backend that never answers.")


def _checker_stopped(message: str) -> str:
    return f"gymnasium.utils.env_checker.check_env stopped with {message}"
