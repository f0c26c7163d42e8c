"""Can envaudit play every env the ecosystems ship? One table per ecosystem (issue 24).

For every env or dataset an ecosystem ships -- all reasoning-gym datasets, one id per TextArena
game (each env class once; ``--variants all`` for every registered id but the ``-raw``/``-train``
wrappings), all GEM envs (GEM lives in the second venv: that part runs under
``.venv-alt/bin/python`` as a child process), the skyrl-gym envs whose task rows the repository
ships (``tests/adapters/data/skyrl_<env>.*``) and the verifiers example envs there (``vf_*.py``) --
a cheap playability check, and the env's status:

- **playable**: the catalogue is accepted (the adapter's own measure where it has one:
  reasoning-gym's ``catalogue_check`` well-formed share, TextArena's ``playability`` legal-move
  share; GEM's, skyrl-gym's and verifiers' when their adapters report one), at least two distinct
  outcomes (return, success) occur, and success is defined (some episode sets ``info["success"]``;
  for reasoning-gym, the reference answer is judged a success). A multi-step env plays each label
  of ``GAME_LABELS`` repeated; a game (TextArena, GEM) also, as the scan's exploration does,
  uniformly random catalogue actions (``RANDOM_EPISODES`` episodes, one a seed);
- **blind**: it runs, but one of those fails (the reasons say which);
- **error**: the adapter raised (the innermost envaudit frame is named);
- **env-error**: the env's own code raised (its ``file:line``; a finding a scan reports, not an
  adapter bug); **unavailable**: the env cannot be built here (it downloads its data).

The evidence column lists the catalogue strategies that earned full marks without success
(reasoning-gym's ``catalogue_check``) and, with ``--scan PROBES``, the findings at warn/fail of a
``--quick`` scan with those probes. Work is counted in units (entries, episodes, steps): the same
``--seed`` gives the same tables; only the wall times differ.

    python benchmarks/ecosystems.py                                  # every ecosystem
    python benchmarks/ecosystems.py --ecosystem reasoning-gym --limit 10
    python benchmarks/ecosystems.py --ecosystem textarena --json /tmp/textarena.json
    python benchmarks/ecosystems.py --ecosystem reasoning-gym --scan intent --limit 5

Target (issue 24): at least 90% playable per ecosystem, no adapter error.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "adapters" / "data"
ALT_PYTHON = ROOT / ".venv-alt" / "bin" / "python"
ECOSYSTEMS = ("reasoning-gym", "textarena", "gem", "skyrl-gym", "verifiers")
PACKAGES = {"reasoning-gym": "reasoning_gym", "textarena": "textarena", "gem": "gem",
            "skyrl-gym": "skyrl_gym", "verifiers": "verifiers"}
GAME_LABELS = ("reference", "legal_1", "legal_2", "stall", "illegal", "forfeit", "empty")
"""Labels played in every multi-turn env (those its catalogue has), each repeated until the episode ends."""
GAME_ECOSYSTEMS = ("textarena", "gem")
"""Where random catalogue play is added: games, whose outcome depends on how moves are mixed over many
turns against an opponent. The answer and tool envs of the other ecosystems are judged on each label
alone (their adapters' catalogue checks), and a label there may run code or a search per step."""
RANDOM_EPISODES, RANDOM_STREAM = 16, 24
"""Episodes of uniformly random catalogue actions in a game (exploration's policy), one from
each of the reset seeds ``seed .. seed + RANDOM_EPISODES - 1``, from a generator seeded by
(``RANDOM_STREAM``, seed): a default scan's exploration plays 256 (32 seeds, 8 each). Other seeds
than the labels' two: a game's deal can lose every line of play from one seed (Kuhn Poker)."""
ANSWER_LABELS = ("reference", "wrong_1", "unformatted", "empty", "hedge_all", "call_1", "answer_short",
                 "failing_call", "give_up")
"""Labels played in a single-turn or tool env without a catalogue check of its own."""
RG_SIZE = 50
SKYRL_OPTIONS = {"text2sql": {"db_path": str(DATA / "skyrl_sql")}}
"""Options a shipped skyrl-gym env needs beside its rows."""
UNAVAILABLE = ("ConnectionError", "OfflineModeIsEnabled", "LocalEntryNotFoundError", "HfHubHTTPError",
               "DatasetNotFoundError", "MaxRetryError", "NameResolutionError", "gaierror", "ImportError",
               "ModuleNotFoundError")
"""Exception names that mean the env cannot be built here: it downloads its data, or it needs a
package its ecosystem does not install."""
STATUSES = ("playable", "blind", "error", "env-error", "unavailable")


API_KEY = re.compile(r"API key not found|_API_KEY environment variable", re.IGNORECASE)
"""An env that needs a hosted model's key (TextArena's ``OpenRouterAgent`` opponents and juries)."""


@dataclass
class Row:
    ecosystem: str
    env: str
    status: str = "playable"
    reasons: list[str] = field(default_factory=list)
    accepted: float | None = None
    outcomes: int = 0
    success_defined: bool = False
    evidence: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    episodes: int = 0
    steps: int = 0
    env_errors: dict[str, int] = field(default_factory=dict)
    """Where the env's own code raised in an episode (``file:line``), and in how many episodes."""


# -- where an exception came from -----------------------------------------------------------------
_STDLIB = sysconfig.get_paths()["stdlib"]
_HERE = str(Path(__file__).resolve())  # this benchmark's own frames (its hang cap) are never the blame
_OURS = str(ROOT / "envaudit")


def blame(exc: BaseException) -> tuple[str, str]:
    """``(status, where)``: ``error`` when the innermost frame outside the standard library is
    envaudit's own, ``env-error`` when it is the ecosystem's (or ``unavailable`` for a download)."""
    chain = [exc]
    while chain[-1].__cause__ is not None or chain[-1].__context__ is not None:
        chain.append(chain[-1].__cause__ or chain[-1].__context__)
        if len(chain) > 8:
            break
    if any(type(e).__name__ in UNAVAILABLE or "offline" in str(e).lower() for e in chain):
        return "unavailable", f"{type(exc).__name__}: {str(exc)[:160]}"
    if any(API_KEY.search(str(e)) for e in chain):  # its opponent or judge is a hosted LLM
        return "unavailable", f"{type(exc).__name__}: {str(exc)[:160]} (a hosted LLM plays in it: a key and the network)"
    if isinstance(exc, SyntaxError):  # the env's own file does not compile on this Python
        return "unavailable", f"SyntaxError in {Path(exc.filename or '?').name}:{exc.lineno} under Python {sys.version.split()[0]}"
    if isinstance(exc, LookupError) and "nltk" in "".join(f.filename for f in traceback.extract_tb(exc.__traceback__)):
        return "unavailable", "LookupError: an NLTK corpus it downloads on first use"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if ("site-packages" in f.filename or not f.filename.startswith((_STDLIB, "<"))) and f.filename != _HERE]
    message = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    if not frames:
        return "error", message
    last = frames[-1]
    ours = str(Path(last.filename).resolve()).startswith(_OURS)
    short = last.filename.split("site-packages/")[-1] if not ours else str(Path(last.filename).relative_to(ROOT))
    return ("error" if ours else "env-error"), f"{message} at {short}:{last.lineno} ({last.name})"


# -- playing an env's catalogue ---------------------------------------------------------------------
def episode(env: Any, seed: int, choose: Any, max_steps: int, row: Row) -> tuple | None:
    """One episode from ``reset(seed)``, ``choose()`` giving each action, cut at ``max_steps``: its
    outcome (return, success, truncated) when it ended, else None.

    An episode in which the env's own code raises is recorded in ``row.env_errors`` and ends there
    (None), as a scan records an ``env-error`` finding and plays its other episodes: a game that
    crashes on one kind of move (TextArena's ThreeCardMonte passes its reason where the reward belongs
    when a move is invalid) is still played by the others. An exception from envaudit's own code,
    or one that means the env cannot run here at all, is raised: that is the row's status."""
    row.episodes += 1
    try:
        env.reset(seed=seed)
        total, success = 0.0, None
        for _ in range(max_steps):
            _, reward, terminated, truncated, info = env.step(choose())
            row.steps += 1
            total += float(reward)
            if info.get("success") is not None:
                success = bool(info["success"])
            if terminated or truncated:
                row.success_defined |= success is not None
                return round(total, 6), success, bool(truncated)
    except EnvHung:
        raise
    except Exception as exc:
        status, where = blame(exc)
        if status != "env-error":
            raise
        row.env_errors[where] = row.env_errors.get(where, 0) + 1
    return None


def play(env: Any, labels: tuple[str, ...], seeds: list[int], max_steps: int, row: Row) -> set[tuple]:
    """Each label of ``labels`` the catalogue has, repeated from ``reset(seed)`` until the episode
    ends (or ``max_steps``); the distinct outcomes (return, success, truncated) of those that ended."""
    actions = [env.action_labels.index(label) for label in labels if label in env.action_labels]
    ended = (episode(env, seed, itertools.repeat(a).__next__, max_steps, row) for a in actions for seed in seeds)
    return {o for o in ended if o is not None}


def play_random(env: Any, seed: int, max_steps: int, row: Row) -> set[tuple]:
    """What the scan's exploration plays: a uniformly random catalogue action at every step, one episode
    from each of ``RANDOM_EPISODES`` reset seeds; the distinct outcomes of those that ended."""
    outcomes: set[tuple] = set()
    for s in range(seed, seed + RANDOM_EPISODES):
        rng = np.random.default_rng([RANDOM_STREAM, s])
        outcome = episode(env, s, lambda r=rng: int(r.integers(env.action_space.n)), max_steps, row)
        if outcome is not None:
            outcomes.add(outcome)
    return outcomes


def adapter_share(info: dict[str, Any]) -> float | None:
    """The share of the catalogue the env accepts, as the adapter reports it (None: it does not)."""
    play_info = info.get("playability")
    if isinstance(play_info, dict):
        for key in ("legal_valid_share", "valid_share", "accepted_share"):
            if isinstance(play_info.get(key), (int, float)):
                return float(play_info[key])
    check = info.get("catalogue_check")
    if isinstance(check, dict):
        for key in ("well_formed_share", "accepted_share", "valid_share"):
            if isinstance(check.get(key), (int, float)):
                return float(check[key])
    return None


def judge(row: Row, outcomes: int) -> None:
    row.outcomes = outcomes
    if row.accepted is not None and row.accepted <= 0:
        row.reasons.append("the env accepts none of the catalogue")
    if outcomes < 2:
        row.reasons.append(f"{outcomes} distinct outcome(s)")
    if not row.success_defined:
        row.reasons.append("success is not defined")
    row.status = "blind" if row.reasons else "playable"
    crashed = sum(row.env_errors.values())
    if crashed and (crashed == row.episodes or row.status == "blind"):  # its crashes are what stopped play
        row.status, row.reasons = "env-error", [*row.env_errors, *row.reasons]
    elif crashed:
        row.evidence += [f"env-error in {n} of {row.episodes} episodes: {where}" for where, n in row.env_errors.items()]


def check_env(ecosystem: str, name: str, target: str, env_args: dict[str, Any], seed: int, episodes: int,
              max_steps: int, scan: tuple[str, ...]) -> Row:
    from envaudit.adapters import resolve_adapter
    from envaudit.errors import UsageError

    row = Row(ecosystem, name)
    env = None
    try:
        try:
            _, make = resolve_adapter(target, env_args)
        except UsageError as exc:  # the env needs options or a package this venv lacks
            row.status = "unavailable"
            row.reasons.append(f"UsageError: {str(exc)[:200]}")
            return row
        env = make()
        info = env.adapter_info
        row.accepted = adapter_share(info)
        check = info.get("catalogue_check") if isinstance(info.get("catalogue_check"), dict) else None
        measured = info.get("playability") if isinstance(info.get("playability"), dict) else None
        seeds = [seed + i for i in range(episodes)]
        if check is not None and "distinct_outcomes" in check:  # an answer env that played its catalogue itself
            play(env, ("reference",), seeds, 1, row)  # reset and step, through the adapter
            row.success_defined = bool(check.get("success_defined", check.get("reference_success_share", 0) > 0))
            row.evidence = sorted(check.get("full_marks_without_success") or {})
            for error in (check.get("scorer_errors") or {}).get("examples", [])[:1]:
                row.evidence.append(f"scorer raised {error['error'][:60]} at {error['where']}")
            judge(row, int(check["distinct_outcomes"]))
            if not row.success_defined and row.status == "blind":
                row.reasons[-1] = ("the reference is never judged a success" if getattr(env, "has_reference", False)
                                   else "success is not defined (no reference answer and no verifier)")
        else:
            labels = GAME_LABELS if env.max_steps > 1 else ANSWER_LABELS
            cap = min(max_steps, max(1, env.max_steps))
            outcomes = play(env, labels, seeds, cap, row)
            if ecosystem in GAME_ECOSYSTEMS:
                outcomes |= play_random(env, seed, cap, row)
            judge(row, len(outcomes))
        verdict = check if check is not None and "playable" in check else measured
        if verdict is not None and verdict.get("playable") is False and verdict.get("why"):
            row.reasons.append(f"adapter: {verdict['why']}")  # the adapter's own verdict, beside this one's
            row.status = "blind"
        elif measured is not None and measured.get("note"):
            row.evidence.append(str(measured["note"]))
    except Exception as exc:
        row.status, where = blame(exc)
        row.reasons.append(where)
    finally:
        if env is not None:
            try:
                env.close()
            except Exception:  # a failing close is not what this table measures
                pass
    if scan and row.status == "playable":
        row.findings = quick_scan(target, scan, seed, env_args)
    return row


def quick_scan(target: str, probes: tuple[str, ...], seed: int, env_args: dict[str, Any] | None) -> list[str]:
    from envaudit.config import ScanConfig
    from envaudit.findings import Severity
    from envaudit.scan import run_scan

    try:
        report = run_scan(target, ScanConfig(seed=seed, quick=True, probes=probes), env_args=env_args or {})
    except Exception as exc:  # a scan that fails is reported in the row, never a crashed benchmark
        return [f"scan failed: {blame(exc)[1]}"]
    return [f"{f.severity}:{f.code}: {f.summary[:140]}" for f in report.findings
            if f.severity in (Severity.WARN, Severity.FAIL)]


# -- what each ecosystem ships ------------------------------------------------------------------------
Target = tuple[str, str, dict[str, Any]]
"""(name, scan target, env-args): made through ``resolve_adapter``, the adapters' public entry."""


def reasoning_gym_targets(seed: int, variants: str) -> Iterator[Target]:
    from reasoning_gym.factory import DATASETS

    for name in sorted(DATASETS):
        yield name, f"reasoning-gym:{name}", {"size": RG_SIZE, "dataset_seed": seed}


def textarena_targets(seed: int, variants: str) -> Iterator[Target]:
    from textarena.envs.registration import ENV_REGISTRY

    ids = sorted(i for i in ENV_REGISTRY if not i.endswith(("-raw", "-train")))
    if variants == "games":  # one id per env class: the shortest of its ids
        by_class: dict[str, str] = {}
        for env_id in sorted(ids, key=lambda i: (len(i), i)):
            by_class.setdefault(str(ENV_REGISTRY[env_id].entry_point), env_id)
        ids = sorted(by_class.values())
    for env_id in ids:
        yield env_id, f"textarena:{env_id}", {}


def gem_targets(seed: int, variants: str) -> Iterator[Target]:
    from gem.envs.registration import ENV_REGISTRY

    for env_id in sorted(ENV_REGISTRY):
        yield env_id, f"gem:{env_id}", {}


def skyrl_targets(seed: int, variants: str) -> Iterator[Target]:
    for path in sorted(DATA.glob("skyrl_*")):
        if path.suffix in (".jsonl", ".json", ".parquet"):
            name = path.stem.removeprefix("skyrl_")
            yield name, f"skyrl-gym:{name}", {"tasks": str(path), **SKYRL_OPTIONS.get(name, {})}


def verifiers_targets(seed: int, variants: str) -> Iterator[Target]:
    for path in sorted(DATA.glob("vf_*.py")):
        yield path.stem, f"verifiers:{path}", {"size": 16, **served_tools(path)}


def served_tools(path: Path) -> dict[str, str]:
    """A verifiers example whose MCP toolset is a server someone runs (verifiers would build and launch
    it with ``uv``, which needs the network) ships ``serve_in_thread``: run it as a user runs their
    tool server, and pass its URL as the taskset's ``tools_url``, as the adapter's tests do."""
    spec = importlib.util.spec_from_file_location(f"envaudit_bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    serve = getattr(module, "serve_in_thread", None)
    return {"tools_url": serve(Path(tempfile.mkdtemp(prefix="envaudit-mcp-")))} if serve else {}


class EnvHung(Exception):
    """Raised in the env's own frame when one env's check runs past ``--env-cap-s``."""


@contextlib.contextmanager
def hang_cap(seconds: float) -> Iterator[None]:
    """A wall-clock safety cap on one env's check, never a budget: this benchmark plays in its own
    process, without the scan's step deadlines, and an env that loops for ever (Stratego's reset on an
    instance's second game) would stop the whole table. SIGALRM interrupts the main thread's Python
    code where it is, so the row names the env's own line (``env-error``)."""
    def fire(signum: int, frame: Any) -> None:
        raise EnvHung(f"the check did not finish within {seconds:g} s (--env-cap-s; a scan reports this as a hang)")

    previous = signal.signal(signal.SIGALRM, fire)
    start = time.monotonic()
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0:  # a timer set around this one (pytest-timeout's) runs on with what it had left
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3))


TARGETS = {"reasoning-gym": reasoning_gym_targets, "textarena": textarena_targets, "gem": gem_targets,
           "skyrl-gym": skyrl_targets, "verifiers": verifiers_targets}


def run_ecosystem(ecosystem: str, args: argparse.Namespace) -> dict[str, Any]:
    start = time.perf_counter()
    if importlib.util.find_spec(PACKAGES[ecosystem]) is None:
        if ecosystem == "gem" and ALT_PYTHON.exists() and Path(sys.prefix).resolve() != ALT_PYTHON.parent.parent.resolve():
            return in_alt_venv(ecosystem, args)
        return {"ecosystem": ecosystem, "rows": [], "wall_s": 0.0,
                "skipped": f"{PACKAGES[ecosystem]} is not installed in {sys.executable}"}
    rows = []
    targets = list(TARGETS[ecosystem](args.seed, args.variants))
    if args.only:
        targets = [t for t in targets if t[0] in args.only]
    for name, target, env_args in targets[: args.limit]:
        # Some envs print as they play, and some run code that writes files where it runs (a GEM code
        # task left its sailor_performance.csv in the repository): each plays in a scratch folder.
        with (contextlib.redirect_stdout(io.StringIO()), tempfile.TemporaryDirectory(prefix="envaudit-eco-") as scratch,
              contextlib.chdir(scratch), hang_cap(args.env_cap_s)):
            row = check_env(ecosystem, name, target, env_args, args.seed, args.episodes, args.max_steps,
                            tuple(args.scan))
        rows.append(asdict(row))
        if args.verbose:
            print(f"  {ecosystem} {name}: {row.status} {'; '.join(row.reasons)}", file=sys.stderr, flush=True)
    return {"ecosystem": ecosystem, "rows": rows, "wall_s": round(time.perf_counter() - start, 1)}


def in_alt_venv(ecosystem: str, args: argparse.Namespace) -> dict[str, Any]:
    """The same check of ``ecosystem`` under the second venv's interpreter, read back from its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [str(ALT_PYTHON), str(Path(__file__).resolve()), "--ecosystem", ecosystem, "--seed", str(args.seed),
               "--episodes", str(args.episodes), "--max-steps", str(args.max_steps), "--env-cap-s", str(args.env_cap_s), "--json", str(out),
               "--variants", args.variants, "--quiet"]
        cmd += ["--limit", str(args.limit)] if args.limit is not None else []
        cmd += ["--only", *args.only] if args.only else []
        cmd += ["--scan", *args.scan] if args.scan else []
        cmd += ["--verbose"] if args.verbose else []
        done = subprocess.run(cmd, cwd=ROOT, text=True, stdout=subprocess.DEVNULL, stderr=None)
        if done.returncode != 0 or not out.exists():
            return {"ecosystem": ecosystem, "rows": [], "wall_s": 0.0,
                    "skipped": f"{ALT_PYTHON} exited {done.returncode}"}
        return json.loads(out.read_text())["ecosystems"][0]


# -- the tables -----------------------------------------------------------------------------------
def summary(result: dict[str, Any]) -> dict[str, Any]:
    rows = result["rows"]
    counts = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
    built = len(rows) - counts["unavailable"]
    crashed = sum(r["status"] == "playable" and bool(r.get("env_errors")) for r in rows)
    return {**counts, "envs": len(rows), "playable_share": counts["playable"] / built if built else None,
            "playable_with_env_errors": crashed,
            "episodes": sum(r["episodes"] for r in rows), "steps": sum(r["steps"] for r in rows)}


def render(result: dict[str, Any]) -> str:
    name = result["ecosystem"]
    if result.get("skipped"):
        return f"## {name}\n\nnot run: {result['skipped']}\n"
    s = summary(result)
    share = "n/a" if s["playable_share"] is None else f"{s['playable_share']:.0%}"
    lines = [f"## {name}: {s['playable']}/{s['envs'] - s['unavailable']} playable ({share}), "
             f"{s['blind']} blind, {s['error']} adapter error(s), {s['env-error']} env error(s) "
             f"(and {s['playable_with_env_errors']} playable env(s) whose code raised in some episodes), "
             f"{s['unavailable']} unavailable; {s['episodes']} episodes, {s['steps']} steps, {result['wall_s']} s", "",
             "| env | status | accepted | outcomes | success | reasons | evidence / findings at warn-fail |",
             "| --- | --- | ---: | ---: | --- | --- | --- |"]
    for r in result["rows"]:
        accepted = "" if r["accepted"] is None else f"{r['accepted']:.2f}"
        notes = "; ".join(([f"full marks without success: {', '.join(r['evidence'])}"]
                           if r["evidence"] and all(":" not in e for e in r["evidence"]) else r["evidence"])
                          + r["findings"])
        lines.append(f"| {r['env']} | {r['status']} | {accepted} | {r['outcomes']} | "
                     f"{'yes' if r['success_defined'] else 'no'} | {'; '.join(r['reasons'])} | {notes} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ecosystem", nargs="+", choices=ECOSYSTEMS, default=list(ECOSYSTEMS))
    parser.add_argument("--limit", type=int, default=None, help="check the first N envs of each ecosystem (sorted by id)")
    parser.add_argument("--only", nargs="+", default=None, help="check only these env ids")
    parser.add_argument("--seed", type=int, default=0, help="reset seeds (and reasoning-gym's dataset_seed) start here")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per catalogue label (seeds seed..seed+N-1)")
    parser.add_argument("--max-steps", type=int, default=60, help="agent steps after which a played episode is cut")
    parser.add_argument("--env-cap-s", type=float, default=300.0,
                        help="wall-clock safety cap on one env's check: an env that hangs is an env-error at its own line")
    parser.add_argument("--variants", choices=("games", "all"), default="games",
                        help="TextArena: one id per game (env class), or every id but -raw/-train")
    parser.add_argument("--scan", nargs="*", default=[], metavar="PROBE",
                        help="also run a --quick scan with these probes on each playable env, listing warn/fail")
    parser.add_argument("--json", type=Path, default=None, help="write the rows and summaries here")
    parser.add_argument("--verbose", action="store_true", help="one line per env on stderr as it is checked")
    parser.add_argument("--quiet", action="store_true", help="no tables (with --json: what a parent process reads)")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit {args.limit}: expected a positive number of envs")
    # Envs whose data lives on the Hugging Face Hub fail at once instead of waiting out the network.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    results = [run_ecosystem(e, args) for e in args.ecosystem]
    if args.json is not None:
        payload = {"seed": args.seed, "episodes": args.episodes, "max_steps": args.max_steps,
                   "ecosystems": results, "summaries": {r["ecosystem"]: summary(r) for r in results}}
        args.json.write_text(json.dumps(payload, indent=1, default=str))
    if not args.quiet:
        for result in results:
            print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
