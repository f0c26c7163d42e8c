"""The machinery every property shares: options, the Hypothesis search, and the failure message.

A property hands ``run_search`` a strategy of plans and a ``check(plan)`` that returns a
``Counterexample`` or None. Hypothesis searches (seeded, no example database, no deadline) and
shrinks; the shrunk counterexample comes back as a ``PropertyFailed`` (an ``AssertionError``)
whose message shows the trajectory as a table and a ``play(...)`` call that replays it.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis.strategies import SearchStrategy

from envaudit.testing.trajectory import DEFAULT_MAX_STEPS, EnvSession, Episode

DEFAULT_MAX_EXAMPLES = 50
"""Examples per property by default: a few seconds on a bundled env, shrinking included."""

COMMON_OPTIONS = {
    "max_examples": "how many generated cases to try (default 50)",
    "max_steps": f"the longest episode played (default {DEFAULT_MAX_STEPS}); envs with no step limit of their own are truncated there",
    "seed": "seed of the Hypothesis search: the same seed finds the same counterexample (default 0)",
    "settings": "a hypothesis.settings object to start from (max_examples and seed options still apply)",
    "seeds": "reset seeds: an int, a list of ints or a strategy (default 0..65535, shrinking to 0)",
    "faults": "inject generated tool faults into ToolEnvs (default True; plain envs never get faults)",
    "tolerance": "reward differences at or below this are ties (default 1e-9)",
}


@dataclass(frozen=True)
class Options:
    """The options every property takes, validated once."""

    max_examples: int | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    seed: int = 0
    settings: settings | None = None
    seeds: Any = None
    faults: bool = True
    tolerance: float = 1e-9


def parse_options(prop: str, options: Mapping[str, Any], extra: Sequence[str] = ()) -> tuple[Options, dict[str, Any]]:
    """Split ``options`` into the common ``Options`` and the property's own ``extra`` keywords."""
    known = list(COMMON_OPTIONS) + list(extra)
    unknown = [k for k in options if k not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise TypeError(f"{prop}() got an unexpected option {unknown[0]!r}{hint} (options: {', '.join(known)})")
    common = {k: v for k, v in options.items() if k in COMMON_OPTIONS}
    rest = {k: v for k, v in options.items() if k not in COMMON_OPTIONS}
    for name in ("max_examples", "max_steps"):
        value = common.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{prop}(): {name} must be a positive int, got {value!r}")
    if "seed" in common and (isinstance(common["seed"], bool) or not isinstance(common["seed"], int)):
        raise ValueError(f"{prop}(): seed must be an int, got {common['seed']!r}")
    if common.get("settings") is not None and not isinstance(common["settings"], settings):
        raise TypeError(f"{prop}(): settings must be a hypothesis.settings object, got {type(common['settings']).__name__}")
    if "faults" in common and not isinstance(common["faults"], bool):
        raise ValueError(f"{prop}(): faults must be True or False, got {common['faults']!r}")
    if "tolerance" in common and not (isinstance(common["tolerance"], (int, float)) and common["tolerance"] >= 0):
        raise ValueError(f"{prop}(): tolerance must be a number >= 0, got {common['tolerance']!r}")
    if common.get("max_steps") is None:
        common.pop("max_steps", None)
    return Options(**common), rest


def search_settings(opts: Options) -> settings:
    """Every setting that can change which cases run, set here, so no ambient profile can.

    ``settings(...)`` without a parent inherits the *loaded profile* (``settings.default``): a
    conftest's ``settings.load_profile(...)``, ``--hypothesis-profile`` or the ``ci`` profile
    Hypothesis loads on CI would otherwise change ``max_examples``, ``phases``, the database or the
    backend, and with them the verdict. ``@seed`` (in ``run_search``) overrides ``derandomize``.
    The user's ``settings`` option is the one exception: it is the base, and only the database,
    the seed and ``report_multiple_bugs`` are forced.
    """
    overrides: dict[str, Any] = {"database": None, "report_multiple_bugs": False}
    if opts.settings is None:
        base = settings(
            max_examples=DEFAULT_MAX_EXAMPLES,
            derandomize=False,
            deadline=None,  # time per case must never decide a verdict
            phases=(Phase.generate, Phase.shrink),
            suppress_health_check=list(HealthCheck),  # too_slow and friends are timing-dependent
            verbosity=Verbosity.quiet,
            print_blob=False,
            **_HYPOTHESIS_BACKEND,
        )
    else:
        base = opts.settings
    if opts.max_examples is not None:
        overrides["max_examples"] = opts.max_examples
    return settings(base, **overrides)


# Pinned where the installed Hypothesis has alternative backends (a profile could pick one).
_HYPOTHESIS_BACKEND = {"backend": "hypothesis"} if "backend" in inspect.signature(settings).parameters else {}


@contextmanager
def pinned_constant_pool() -> Iterator[None]:
    """Run Hypothesis with an empty pool of "local constants" (restored afterwards).

    Why the verdict changed under pytest: Hypothesis (>= 6.131) draws about one value in twenty
    from literals it harvests from every module in ``sys.modules`` that lives outside
    site-packages. Which modules are loaded differs between plain Python, pytest with envaudit's
    plugin (``envaudit.testing.pytest_plugin`` is imported), without it, with other plugins or
    conftests, so the same ``@seed`` generated different cases, and a search that finds a flaw in
    some of its cases found it under one and not the other. The pool is emptied for the search
    and its per-type cache cleared before and after; Hypothesis's fixed global constants stay.
    Not thread-safe against another Hypothesis run in a parallel thread of the same process.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - older Hypothesis: no constant pool to pin
        yield
        return
    original = getattr(providers, "_get_local_constants", None)
    constants = getattr(providers, "Constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if original is None or constants is None or cache is None:  # pragma: no cover - other versions
        yield
        return
    empty = constants()
    providers._get_local_constants = lambda: empty
    cache.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.cache.clear()


# -- counterexamples ---------------------------------------------------------------------------
@dataclass
class Counterexample:
    """What a property found: one sentence, the episode that breaks it, and what it was compared with."""

    summary: str
    episode: Episode
    compared: list[tuple[str, Episode]] = field(default_factory=list)
    details: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)  # the statistics, when a test decided

    @property
    def actions(self) -> tuple:
        return self.episode.actions


class PropertyFailed(AssertionError):
    """An envaudit property does not hold; ``counterexample`` holds the shrunk case."""

    def __init__(self, message: str, counterexample: Counterexample, prop: str) -> None:
        super().__init__(message)
        self.counterexample = counterexample
        self.property = prop


class PropertyNotExercised(AssertionError):
    """The property could not test its subject on this env (no timeout ever seen, nothing
    comparable to a failed call), so it did not hold: it failed, and the message says what the
    search saw and how to make the env testable. Never a vacuous pass."""

    def __init__(self, message: str, prop: str, seen: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.property = prop
        self.seen = dict(seen or {})


class _Found(Exception):
    def __init__(self, counterexample: Counterexample) -> None:
        super().__init__(counterexample.summary)
        self.counterexample = counterexample


def _actions_code(episode: Episode) -> str:
    """The played actions as compact Python: labels where the env has them, runs as ``[x] * n``."""
    items = [repr(s.label) if s.label is not None else repr(s.action) for s in episode.steps]
    parts: list[str] = []
    plain: list[str] = []
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[i]:
            j += 1
        if j - i >= 2:
            if plain:
                parts.append("[" + ", ".join(plain) + "]")
                plain = []
            parts.append(f"[{items[i]}] * {j - i + 1}")
        else:
            plain.extend(items[i:j + 1])
        i = j + 1
    if plain or not parts:
        parts.append("[" + ", ".join(plain) + "]")
    return " + ".join(parts)


def replay_code(target: str, episode: Episode) -> str:
    faults = ""
    schedule = episode.faults
    if schedule is not None and not schedule.empty:
        plain = schedule.every is None and schedule.tools is None
        faults = f", faults={dict(schedule.faults)!r}" if plain else f", faults=envaudit.testing.{schedule!r}"
    return f"envaudit.testing.play({target}, {_actions_code(episode)}, seed={episode.seed}{faults})"


def render_failure(prop: str, target: str, found: Counterexample, cases: int, *, flaky: bool = False,
                   how: str | None = None) -> str:
    lines = [f"{prop} failed on {found.episode.env}: {found.summary}", ""]
    if how is None:
        how = (f"not shrunk: it did not fail again when replayed, so the env is nondeterministic; "
               f"found after {cases} generated cases" if flaky else f"shrunk, after {cases} generated cases")
    lines.append(f"Counterexample ({how}):")
    lines.append(found.episode.render())
    for caption, other in found.compared:
        lines += ["", f"Compared with {caption}:", other.render()]
    if found.details:
        lines += ["", found.details]
    lines += ["", "Replay it: " + replay_code(target, found.episode)]
    return "\n".join(lines)


def target_text(make_env: Any) -> str:
    if isinstance(make_env, str):
        return repr(make_env)
    name = getattr(make_env, "__name__", None)
    return name if name and name.isidentifier() else "make_env"


def _found_in(group: BaseException) -> _Found | None:
    if isinstance(group, _Found):
        return group
    for exc in getattr(group, "exceptions", ()):
        inner = _found_in(exc)
        if inner is not None:
            return inner
    return None


def run_search(
    prop: str,
    make_env: Any,
    strategy: SearchStrategy,
    check: Callable[[Any], Counterexample | None],
    opts: Options,
) -> int:
    """Search ``strategy`` for a case where ``check`` finds a counterexample; raise ``PropertyFailed``.

    Returns the number of cases tried when the property holds.
    """
    cases = [0]

    def test(case: Any) -> None:
        cases[0] += 1
        found = check(case)
        if found is not None:
            raise _Found(found)

    runner = hypothesis.seed(opts.seed)(search_settings(opts)(given(strategy)(test)))
    try:
        with pinned_constant_pool():
            runner()
    except _Found as exc:
        message = render_failure(prop, target_text(make_env), exc.counterexample, cases[0])
        raise PropertyFailed(message, exc.counterexample, prop) from None
    except BaseExceptionGroup as group:  # hypothesis's FlakyFailure: the case did not fail twice
        found = _found_in(group)
        if found is None:
            raise
        message = render_failure(prop, target_text(make_env), found.counterexample, cases[0], flaky=True)
        raise PropertyFailed(message, found.counterexample, prop) from None
    return cases[0]


def open_session(make_env: Any, opts: Options) -> EnvSession:
    return EnvSession(make_env, max_steps=opts.max_steps, faults=opts.faults)
