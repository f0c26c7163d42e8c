"""``adapter_info["catalogue_check"]`` of the skyrl-gym adapter: is the env playable, and what does
its scorer pay that its judge does not call a success?

Every strategy of the first state's catalogue is played as the first reply to a fresh skyrl-gym env
of each of the first rows (``CHECK_ROWS``; ``CODE_CHECK_ROWS`` for code envs, whose every reply is a
program run by lcb's grader and by the judge); tool calls are played on the first row only (a search
call reaches a server). Recorded per row and strategy: the reward, whether the env ended the
episode, the judge's verdict on an ending reply, and a tool call's status. The same shape as
reasoning-gym's check: ``well_formed_share`` (replies the env takes: a reward above 0, or a tool call
that ran), ``distinct_outcomes``, ``playable`` (some reply well formed, two outcomes at least, and a
success signal), ``full_marks_without_success`` per strategy, the relabellings and the scorer's
exceptions.
"""

from __future__ import annotations

from typing import Any

from envaudit.adapters.catalogue import REFERENCE, raised_at
from envaudit.protocol import TOOL_OK

CHECK_ROWS = 4
CODE_CHECK_ROWS = 1
TOOL_CALLS = frozenset({"tool_valid", "tool_failing", "tool_malformed", "tool_repeat"})
FULL_MARKS = 1.0
EXAMPLES = 3




def _first_state(env: Any, index: int) -> list[Any]:
    """The catalogue of row ``index``'s first state."""
    task = env.first_prompt(index)
    kind = env.profile.kind
    if kind == "code":
        return env.checked(index, task)["strategies"]
    if kind in ("search", "searchcode"):
        from envaudit.adapters import skyrl_search

        checked = env.checked(index, task)
        build = skyrl_search.search_strategies if kind == "search" else skyrl_search.searchcode_strategies
        return build(checked["reference"], task, None, transplant=checked["transplant"], constant=checked["constant"],
                     wrong=checked["wrong"])
    from envaudit.adapters.skyrl_profiles import ground_truth

    return env.profile.strategies(ground_truth(env.rows[index]) or "", task, None)


def catalogue_check(env: Any) -> dict[str, Any]:
    """The check ``adapter_info["catalogue_check"]`` holds (see the module's docstring)."""
    n = min(CODE_CHECK_ROWS if env.profile.kind == "code" else CHECK_ROWS, len(env.rows))
    rows: list[tuple[str, float | None, bool, bool | None, str | None]] = []
    relabelled: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    note = None
    skip_tools = False
    if env.profile.kind == "search":
        from envaudit.adapters.skyrl_search import server_reachable

        url = env.config.get("search_url")
        if not server_reachable(url):
            skip_tools = True
            note = (f"the search server {url} accepted no connection: tool calls were not played "
                    "(give --env-arg search_url=URL of a running retriever)")
    for i in range(n):
        try:
            strategies = _first_state(env, i)
        except Exception as exc:  # a row the adapter cannot build a catalogue for is a fact about it
            errors.append({"label": "(catalogue)", "index": i, "error": f"{type(exc).__name__}: {exc}",
                           "where": raised_at(exc, "skyrl_gym")})
            continue
        if env.profile.kind in ("code", "search", "searchcode"):
            relabelled += [{**r, "index": i} for r in env.checked(i, "")["relabelled"]]
        for s in strategies:
            if s.label in TOOL_CALLS and (i > 0 or skip_tools):
                continue
            try:
                reward, done, success, status = env.play_first(i, s.text)
            except Exception as exc:
                errors.append({"label": s.label, "index": i, "error": f"{type(exc).__name__}: {exc}",
                               "where": raised_at(exc, "skyrl_gym")})
                rows.append((s.label, None, False, None, None))
                continue
            rows.append((s.label, reward, done, success, status))
    played = [r for r in rows if r[1] is not None]
    well_formed = sum(reward > 0 or status == TOOL_OK for _, reward, _, _, status in played)
    outcomes = {(round(reward, 6), done, success) for _, reward, done, success, _ in played}
    success_defined = any(success is not None for _, _, _, success, _ in played)
    unearned = {}
    for label in env.action_labels:
        hits = sum(reward >= FULL_MARKS and success is False for lab, reward, _, success, _ in played if lab == label)
        if hits:
            unearned[label] = hits / n
    reference = [(reward, success) for lab, reward, _, success, _ in played if lab == REFERENCE]
    share = well_formed / len(rows) if rows else 0.0
    return {
        "entries": n, "strategies": len(env.action_labels), "played": len(rows),
        "well_formed_share": share,
        "distinct_outcomes": len(outcomes),
        "success_defined": success_defined,
        "playable": share > 0 and len(outcomes) >= 2 and success_defined,
        "reference_full_marks_share": sum(r >= FULL_MARKS for r, _ in reference) / n if n else 0.0,
        "reference_success_share": sum(ok is True for _, ok in reference) / n if n else 0.0,
        "full_marks_without_success": unearned,
        "relabelled": {"count": len(relabelled), "examples": relabelled[:EXAMPLES]},
        "scorer_errors": {"count": len(errors), "examples": errors[:EXAMPLES]},
        **({"note": note} if note else {}),
    }


__all__ = ["CHECK_ROWS", "CODE_CHECK_ROWS", "catalogue_check"]
