"""Regenerate the example report folders in ``reports/``: ``python -m envaudit.reporting.examples``.

One flawed bundled env, its clean twin and a Gymnasium classic, scanned with the default
configuration and a fixed seed; then one real shipped env or dataset per LLM-RL ecosystem, quick
scans through its adapter. Each folder is written beside the old one and swapped in, so an
interrupted run never leaves a half-written example. ``reports/README.md`` indexes them.
Options: ``--out DIR`` (default ``reports``), ``--budget SECONDS`` (safety cap per scan), ``--only NAME``.
An example whose ecosystem package is not installed here is skipped with a note: GEM's and
OpenEnv's live in the second venv (``scripts/setup --alt-only``;
``.venv-alt/bin/python -m envaudit.reporting.examples --only gem-guess-the-number``).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envaudit.atomic import atomic_write
from envaudit.config import ScanConfig
from envaudit.findings import Severity


@dataclass(frozen=True)
class Example:
    folder: str
    env_id: str
    about: str
    env_args: dict[str, Any] = field(default_factory=dict)
    quick: bool = False
    needs: str | None = None
    """The module the ecosystem's package provides; without it the example is skipped."""
    prepare: Callable[[], None] | None = None


def scaffold_openenv_echo() -> None:
    """``openenv init echo_env`` (OpenEnv's own template) into a temporary folder, importable."""
    root = tempfile.mkdtemp(prefix="envaudit-openenv-")
    subprocess.run([sys.executable, "-m", "openenv.cli", "init", "echo_env", "--output-dir", root],
                   check=True, capture_output=True)
    sys.path.insert(0, root)


EXAMPLES = (
    Example("codefix-timeout-passes", "envaudit/CodeFix-TimeoutPasses-v0",
            "flawed: a timed-out full test suite counts as green and merges with +1, so forcing suite "
            "timeouts pays as much as fixing the bug (planted: timeout-rewarded)"),
    Example("codefix", "envaudit/CodeFix-v0",
            "the clean twin: a timed-out suite run costs the step and proves nothing; +1 only for a correct fix"),
    Example("cartpole", "CartPole-v1", "a plain Gymnasium classic: no tool info, no success flag"),
    Example("reasoning-gym-leg-counting", "reasoning-gym:leg_counting",
            "reasoning-gym's leg_counting dataset (100 entries), quick scan", {"size": 100}, True, "reasoning_gym"),
    Example("textarena-guess-the-number", "textarena:GuessTheNumber-v0",
            "TextArena's GuessTheNumber-v0, quick scan", {}, True, "textarena"),
    Example("gem-guess-the-number", "gem:game:GuessTheNumber-v0-easy",
            "GEM's GuessTheNumber-v0-easy, quick scan (made in .venv-alt)", {}, True, "gem"),
    Example("openenv-echo", "openenv:echo_env.server.echo_env_environment:EchoEnvironment",
            "the echo env `openenv init echo_env` scaffolds, in process, quick scan (made in .venv-alt)",
            {}, True, "openenv", scaffold_openenv_echo),
    Example("skyrl-gym-gsm8k_multi_turn", "skyrl-gym:gsm8k_multi_turn",
            "skyrl-gym's gsm8k_multi_turn env on 10 task rows shipped with the tests (SkyRL's dataset "
            "format), default scan", {"tasks": "tests/adapters/data/skyrl_gsm8k_multi_turn.parquet"},
            False, "skyrl_gym"),
    Example("verifiers-sums", "verifiers:tests/adapters/data/vf_sums.py",
            "a verifiers taskset built with verifiers' own classes (its format reward pays a hedge), quick scan",
            {}, True, "verifiers"),
)
SEED = 0
LOGGED = (
    ("logs-flakysearch-stall-drop", "a generated log on `envaudit/FlakySearch-v0` (`envaudit logs`, "
     "`--timeout-handling drop`)",
     "a logged run whose policy stalls to the step limit more and more from iteration 8; written by "
     "`python -m envaudit.testing.logs /tmp/stall-log --drift stall --start 8` and `envaudit logs /tmp/stall-log "
     "--timeout-handling drop --out reports/logs-flakysearch-stall-drop` (not by this module)"),
)
"""Example folders written by ``envaudit logs`` (folder, what was read, what it is): indexed, not rescanned."""


def regenerate(out: str | Path = "reports", *, config: ScanConfig | None = None,
               only: str | None = None, skipped: list[str] | None = None) -> list[Path]:
    """Scan every example env (default: ``ScanConfig(seed=SEED)``) and write its folder under ``out``.
    Examples whose package is missing are left as they are, their folder names added to ``skipped``."""
    import dataclasses

    from envaudit.reporting.folder import write_folder
    from envaudit.resolve import resolve_env
    from envaudit.scan import run_scan

    out = Path(out)
    chosen = [e for e in EXAMPLES if only in (None, e.folder)]
    if not chosen:
        raise ValueError(f"unknown example {only!r}; expected one of {', '.join(e.folder for e in EXAMPLES)}")
    written = []
    for example in chosen:
        if example.needs and importlib.util.find_spec(example.needs) is None:
            if skipped is not None:
                skipped.append(example.folder)
            continue
        if example.prepare is not None:
            example.prepare()
        env_id, make_env = resolve_env(example.env_id, example.env_args)
        base = config or ScanConfig(seed=SEED)
        report = run_scan(make_env, dataclasses.replace(base, quick=base.quick or example.quick), env_id=env_id)
        written.append(write_folder(report, out / example.folder, replace=True))
    atomic_write(out / "README.md", index(out))
    return written


def index(out: Path) -> str:
    """``reports/README.md``: one line per example folder with its verdict."""
    from envaudit.reporting.load import load_report

    lines = ["# Example reports", "",
             "Written by `envaudit scan` on bundled envs and a Gymnasium classic (seed "
             f"{SEED}, default configuration), and on one real shipped env or dataset per LLM-RL ecosystem",
             "(quick scans through the adapters). Regenerate them with `python -m envaudit.reporting.examples`",
             "(one scan per folder); GEM's and OpenEnv's need the second venv: `scripts/setup --alt-only`, then",
             "`.venv-alt/bin/python -m envaudit.reporting.examples --only gem-guess-the-number` (and `--only openenv-echo`).",
             "",
             "| folder | env | incentives (finding groups) | what it is |", "| --- | --- | --- | --- |"]
    rows = [(e.folder, f"`{e.env_id}`", e.about) for e in EXAMPLES] + list(LOGGED)
    for name, what, about in rows:
        folder = out / name
        if not (folder / "report.json").exists():
            continue
        view = load_report(folder)
        c = view.counts()
        top = view.groups[0] if view.groups and view.groups[0].severity >= Severity.WARN else None
        verdict = (f"{c['fail']} fail, {c['warn']} warn, {c['info']} info ({len(view.findings)} findings)"
                   + (f" (first: `{top.code}`)" if top else ""))
        lines.append(f"| [{name}]({name}/report.md) ([html]({name}/report.html)) | {what} | {verdict} | {about} |")
    lines += ["", "Compare the flawed env with its clean twin: "
              "`envaudit diff reports/codefix-timeout-passes reports/codefix`.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envaudit.reporting.examples", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="reports", help="folder that receives the example folders (default: reports)")
    parser.add_argument("--budget", type=float, default=ScanConfig().budget_s,
                        help="wall-clock safety cap of each scan in seconds (default: the scan default)")
    parser.add_argument("--only", choices=[e.folder for e in EXAMPLES], help="regenerate one example only")
    args = parser.parse_args(argv)
    skipped: list[str] = []
    for folder in regenerate(args.out, config=ScanConfig(seed=SEED, budget_s=args.budget), only=args.only,
                             skipped=skipped):
        print(f"wrote {folder}/")
    for name in skipped:
        example = next(e for e in EXAMPLES if e.folder == name)
        print(f"skipped {name}: its package ({example.needs}) is not installed in this venv "
              "(GEM and OpenEnv: scripts/setup --alt-only, then .venv-alt/bin/python -m envaudit.reporting.examples "
              f"--only {name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
