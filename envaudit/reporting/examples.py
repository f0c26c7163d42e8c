"""Regenerate the example report folders in ``reports/``: ``python -m envaudit.reporting.examples``.

One flawed bundled env, its clean twin and a Gymnasium classic, scanned with the default
configuration and a fixed seed; each folder is written beside the old one and swapped in, so an
interrupted run never leaves a half-written example. ``reports/README.md`` indexes them.
Options: ``--out DIR`` (default ``reports``), ``--budget SECONDS`` (safety cap per scan), ``--only NAME``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from envaudit.atomic import atomic_write
from envaudit.config import ScanConfig
from envaudit.findings import Severity


@dataclass(frozen=True)
class Example:
    folder: str
    env_id: str
    about: str


EXAMPLES = (
    Example("codefix-timeout-passes", "envaudit/CodeFix-TimeoutPasses-v0",
            "flawed: a timed-out full test suite counts as green and merges with +1, so forcing suite "
            "timeouts pays as much as fixing the bug (planted: timeout-rewarded)"),
    Example("codefix", "envaudit/CodeFix-v0",
            "the clean twin: a timed-out suite run costs the step and proves nothing; +1 only for a correct fix"),
    Example("cartpole", "CartPole-v1", "a plain Gymnasium classic: no tool info, no success flag"),
)
SEED = 0


def regenerate(out: str | Path = "reports", *, config: ScanConfig | None = None,
               only: str | None = None) -> list[Path]:
    """Scan every example env (default: ``ScanConfig(seed=SEED)``) and write its folder under ``out``."""
    from envaudit.scan import run_scan

    out = Path(out)
    chosen = [e for e in EXAMPLES if only in (None, e.folder)]
    if not chosen:
        raise ValueError(f"unknown example {only!r}; expected one of {', '.join(e.folder for e in EXAMPLES)}")
    written = []
    for example in chosen:
        report = run_scan(example.env_id, config or ScanConfig(seed=SEED))
        written.append(report.write(out / example.folder, replace=True))
    atomic_write(out / "README.md", index(out))
    return written


def index(out: Path) -> str:
    """``reports/README.md``: one line per example folder with its verdict."""
    from envaudit.reporting.load import load_report

    lines = ["# Example reports", "",
             "Written by `envaudit scan` on bundled envs and a Gymnasium classic (seed "
             f"{SEED}, default configuration). Regenerate them with `python -m envaudit.reporting.examples`",
             "(one scan per folder, default work units).", "",
             "| folder | env | incentives (finding groups) | what it is |", "| --- | --- | --- | --- |"]
    for example in EXAMPLES:
        folder = out / example.folder
        if not (folder / "report.json").exists():
            continue
        view = load_report(folder)
        c = view.counts()
        top = view.groups[0] if view.groups and view.groups[0].severity >= Severity.WARN else None
        verdict = (f"{c['fail']} fail, {c['warn']} warn, {c['info']} info ({len(view.findings)} findings)"
                   + (f" (first: `{top.code}`)" if top else ""))
        lines.append(f"| [{example.folder}]({example.folder}/report.md) ([html]({example.folder}/report.html)) "
                     f"| `{example.env_id}` | {verdict} | {example.about} |")
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
    for folder in regenerate(args.out, config=ScanConfig(seed=SEED, budget_s=args.budget), only=args.only):
        print(f"wrote {folder}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
