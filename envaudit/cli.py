"""The ``envaudit`` command. The only module that prints.

Exit codes: see ``EXIT_CODES`` (shown under ``envaudit scan --help``); --fail-on is judged by finding
group, one per incentive, so several probes seeing one flaw are one verdict. A usage error is a
one-line message that names the fix, never a traceback.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import sys
import threading
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from envaudit.atomic import REPORT_MARKER
from envaudit.config import FAIL_ON, ScanConfig, config_help, normalise_options
from envaudit.execution import EXECUTORS, ExecutionConfig, execution_help
from envaudit.pipeline import HANDLINGS
from envaudit.resolve import UsageError

EXIT_CODES = """\
exit status:
  0  clean: the audit ran all its work and no finding group reached --fail-on
  1  a finding group (one incentive) reached --fail-on
  2  usage error (bad option, unknown env or probe)
  3  the env is broken: it cannot be made, or crashes or hangs before anything could be audited
  4  incomplete: the wall-clock safety cap (--budget) or the --max-env-steps cap was hit, or (logs) the log lacks the columns
     a check needs, so some work was skipped (report.json's "incomplete" lists it); the findings
     reported are still real
  when several apply: 2 and 3 before 1, 1 before 4
"""


_CONFIG_DEFAULTS = {f.name: f.default for f in fields(ScanConfig)}


class _Help(argparse.RawDescriptionHelpFormatter):
    """The epilog's table as written, and each option's default where it has one (the scan
    options' defaults are ScanConfig's: their flags default to None, so that a flag given wins
    over ``[tool.envaudit]``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = _CONFIG_DEFAULTS.get(action.dest, action.default)
        if (not action.option_strings or default is None or default is False or default == []
                or default is argparse.SUPPRESS or "default" in text.lower()):
            return text
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["formatter_class"] = _Help
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # argparse's own errors: exit 2 with one line
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _build_parser() -> argparse.ArgumentParser:
    helps = config_help()
    parser = _Parser(prog="envaudit", description="Audit an RL environment's incentives before training in it.",
                     epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"envaudit {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    scan = sub.add_parser("scan", help="scan an env and write a report folder", epilog=EXIT_CODES,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    scan.add_argument("env", metavar="ENV", nargs="*",
                      help="Gymnasium id, module:attr, path/file.py:attr, a module exposing make_env(), "
                      "or an ecosystem target: reasoning-gym:DATASET, textarena:ENV_ID, gem:ENV_ID, "
                      "skyrl-gym:ENV (with --tasks). Several ENVs, or a pattern ('reasoning-gym:*', "
                      "'envaudit/*'), scan as a suite.")
    scan.add_argument("--seed", type=int, help=helps["seed"])
    scan.add_argument("--episodes", type=int, help=helps["episodes"])
    scan.add_argument("--group-size", type=int, help=helps["group_size"])
    scan.add_argument("--max-steps", type=int, help=helps["max_steps"])
    scan.add_argument("--step-timeout", dest="step_timeout_s", type=float, help=helps["step_timeout_s"])
    scan.add_argument("--budget", dest="budget_s", type=float, help=helps["budget_s"])
    scan.add_argument("--max-env-steps", type=int, help=helps["max_env_steps"])
    scan.add_argument("--plan", action="store_true",
                      help="Print the env steps each probe will take at these settings and the predicted wall "
                      "time at --workers (from timing the first episodes), then stop: no scan, no report folder.")
    scan.add_argument("--out", help=helps["out"])
    scan.add_argument("--force", action="store_true",
                      help="Replace the report folder at --out if it already holds a report.")
    scan.add_argument("--timeout-handling", choices=HANDLINGS, help=helps["timeout_handling"])
    scan.add_argument("--timeout-penalty", type=float, help=helps["timeout_penalty"])
    scan.add_argument("--pipeline", metavar="PRESET", help=f"{helps['pipeline']} Presets: {', '.join(_preset_names())}.")
    scan.add_argument("--success-threshold", type=float, help=helps["success_threshold"])
    scan.add_argument("--fail-on", choices=FAIL_ON, help=helps["fail_on"])
    scan.add_argument("--probes", help="Comma-separated probe names (default: all; `envaudit probes` lists them).")
    scan.add_argument("--engine", choices=("torch", "vllm"), help=helps["engine"])
    scan.add_argument("--model", help=helps["model"])
    scan.add_argument("--max-new-tokens", type=int, help=helps["max_new_tokens"])
    scan.add_argument("--max-model-len", type=int, help=helps["max_model_len"])
    scan.add_argument("--quick", action="store_true", default=None, help=helps["quick"])
    scan.add_argument("--alpha", type=float, help=helps["alpha"])
    scan.add_argument("--no-progress", action="store_true", help="Do not show the progress bar.")
    ehelp = execution_help()
    scan.add_argument("--executor", choices=EXECUTORS, default="processes",
                      help=ehelp["executor"] + " With ray (pip install 'envaudit-rl[ray]') one env's episodes run "
                      "on Ray actors; a suite's env scans run as Ray tasks, each scan's rollouts inline in its task.")
    scan.add_argument("--workers", type=int, default=0, help=ehelp["workers"])
    scan.add_argument("--memory-cap", dest="memory_cap_mb", type=float, default=ExecutionConfig.memory_cap_mb,
                      metavar="MB", help=ehelp["memory_cap_mb"])
    scan.add_argument("--env-arg", dest="env_args", action="append", default=[], metavar="KEY=VALUE",
                      help="An option for the env's adapter or factory (repeatable); VALUE is read as "
                           "JSON when it parses (5, true, [1,2]), else as text.")
    scan.add_argument("--tasks", metavar="PATH",
                      help="Task rows for an adapter whose tasks you supply (skyrl-gym: SkyRL dataset rows, "
                           "JSONL or Parquet); the same as --env-arg tasks=PATH.")
    _add_logs_parser(sub, helps)
    _add_suite_arguments(scan)
    sub.add_parser("probes", help="list the registered probes")
    report = sub.add_parser("report", help="re-render report.md, report.html and the plots of a report folder")
    report.add_argument("folder", metavar="DIR", help="a report folder written by `envaudit scan` (holds report.json)")
    diff = sub.add_parser("diff", help="compare two reports of the same env: incentives (finding groups) fixed, "
                                       "new, unchanged; exit 1 when NEW has a warn/fail group OLD did not")
    diff.add_argument("old", metavar="OLD", help="report folder of the env before the change")
    diff.add_argument("new", metavar="NEW", help="report folder of the env after the change")
    diff.add_argument("--force", action="store_true", help="compare reports of different envs anyway")
    return parser


def _add_logs_parser(sub, helps: dict[str, str]) -> None:
    from envaudit.logs.audit import FORMATS

    logs = sub.add_parser("logs", help="audit a training run from its logged rollouts and write a report folder",
                          epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    logs.add_argument("paths", metavar="PATH", nargs="+",
                      help="the rollout log: an episode table (JSONL, Parquet or CSV) and optionally its step "
                           "table, a folder holding episodes.* and steps.*, or a trainer's rollout dump")
    logs.add_argument("--format", dest="log_format", choices=FORMATS, default="auto",
                      help="who wrote the log (default auto: the trainer reader that recognises it, else generic)")
    logs.add_argument("--map", dest="mapping", action="append", default=[], metavar="LOG_COLUMN=SCHEMA_COLUMN",
                      help="read a log column as a schema column (repeatable), e.g. --map score=return")
    logs.add_argument("--steps", help="the step table, when not given as the second PATH")
    logs.add_argument("--reader-arg", dest="reader_args", action="append", default=[], metavar="KEY=VALUE",
                      help="an option of the trainer's reader (repeatable), e.g. --reader-arg success_field=acc, "
                           "prime-rl's --reader-arg subset=effective")
    logs.add_argument("--env", dest="replay_env", metavar="ENV",
                      help="replay the logged episodes against this env (same seeds, same actions)")
    for flag, dest in (("--seed", "seed"), ("--alpha", "alpha"), ("--timeout-penalty", "timeout_penalty")):
        logs.add_argument(flag, dest=dest, type=int if dest == "seed" else float, help=helps[dest])
    logs.add_argument("--pipeline", metavar="PRESET", help=f"{helps['pipeline']} Presets: {', '.join(_preset_names())}.")
    logs.add_argument("--timeout-handling", choices=HANDLINGS, help=helps["timeout_handling"])
    logs.add_argument("--out", help=helps["out"])
    logs.add_argument("--force", action="store_true", help="Replace the report folder at --out if it already holds a report.")
    logs.add_argument("--fail-on", choices=FAIL_ON, help=helps["fail_on"])
    logs.add_argument("--quick", action="store_true", default=None, help=helps["quick"])
    logs.add_argument("--no-progress", action="store_true", help="Do not show the progress bar.")
    logs.set_defaults(probes=None)


def _logs(args: argparse.Namespace, console: Console, err: Console) -> int:
    from envaudit.logs.audit import default_out_dir, read_log, run_logs
    from envaudit.logs.generic import parse_mapping
    from envaudit.logs.schema import LogSchemaError
    from envaudit.reporting import write_folder

    config = _config(args)
    try:
        config.rollout_pipeline()
        mapping = parse_mapping(args.mapping)
    except (ValueError, LogSchemaError) as exc:
        raise UsageError(str(exc)) from None
    if config.out is not None:
        _check_out(Path(config.out), args.force)
    run = read_log(args.paths, fmt=args.log_format, mapping=mapping, steps=args.steps,
                   reader_options=_env_args(args.reader_args, flag="--reader-arg"))
    label = Path(args.paths[0]).stem or Path(args.paths[0]).name
    show = not args.no_progress and err.is_terminal
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=not show) as bar:
        task = bar.add_task("reading", total=1.0)
        report = run_logs(run, config, env=args.replay_env, label=label,
                          progress=lambda msg, frac: bar.update(task, description=msg, completed=frac))
    _raise_if_interrupted()
    try:
        folder = write_folder(report, config.out or default_out_dir(label), replace=args.force)
    except FileExistsError as exc:
        raise UsageError(str(exc)) from None
    console.print(report)
    console.print(f"report written to {folder}/")
    if report.broken:
        return 3
    if report.reaches(config.fail_severity):
        return 1
    return 4 if report.incomplete else 0


def _add_suite_arguments(scan: argparse.ArgumentParser) -> None:
    suite = scan.add_argument_group("suites", "several ENVs, a pattern or --suite FILE scan into one folder: a "
                                    "report folder per env\nand summary.md, summary.html, suite.json ranking them; "
                                    "exit status: the most urgent\nof the envs' codes, in the order 2, 3, 1, 4, 0")
    suite.add_argument("--suite", metavar="FILE", help="A suite TOML file: [[env]] entries (target, name, "
                       "env_args, tasks, any scan option) and [defaults] (see the README, Suites).")
    suite.add_argument("--jobs", type=int, help="Envs scanned at once, each in a worker process "
                       "(default 1: one after another in this process); with --executor ray, the CPUs of "
                       "the local Ray instance (default up to 4).")
    suite.add_argument("--ray-address", help="An existing Ray cluster for --executor ray, one env or a suite "
                       "(default: start a local instance).")
    suite.add_argument("--resume", action="store_true", help="Reuse a finished suite folder at --out: keep "
                       "the envs already scanned with the same options, scan new or changed ones "
                       "(an interrupted suite resumes without it).")


def _version() -> str:
    from envaudit import __version__

    return __version__


def _preset_names() -> list[str]:
    from envaudit.presets import PRESETS

    return list(PRESETS)


def _pyproject_options(cwd: Path) -> dict[str, Any]:
    """``[tool.envaudit]`` from ./pyproject.toml, keys normalised to ScanConfig field names."""
    path = cwd / "pyproject.toml"
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML ({exc}); fix it or run from another folder") from None
    return normalise_options(data.get("tool", {}).get("envaudit", {}), f"[tool.envaudit] of {path}")


def _config(args: argparse.Namespace) -> ScanConfig:
    options = _pyproject_options(Path.cwd())
    for f in fields(ScanConfig):
        value = getattr(args, f.name, None)
        if value is not None:
            options[f.name] = value
    if isinstance(args.probes, str):
        options["probes"] = [p.strip() for p in args.probes.split(",") if p.strip()]
    try:
        return ScanConfig(**options)
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def _execution(args: argparse.Namespace) -> ExecutionConfig:
    if args.ray_address is not None and args.executor != "ray":
        raise UsageError(f"--ray-address {args.ray_address} names a Ray cluster, but --executor is "
                         f"{args.executor}; add --executor ray, or drop --ray-address")
    try:
        return ExecutionConfig(executor=args.executor, workers=args.workers, memory_cap_mb=args.memory_cap_mb,
                               ray_address=args.ray_address)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _env_args(items: list[str], flag: str = "--env-arg") -> dict[str, Any]:
    """``--env-arg KEY=VALUE`` (or ``flag``) options as keyword arguments; VALUE as JSON when it parses."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise UsageError(f"{flag} {item!r}: expected KEY=VALUE with KEY a Python identifier, "
                             f"e.g. {flag} size=50")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def _scan(args: argparse.Namespace, console: Console, err: Console) -> int:
    from envaudit.reporting import write_folder
    from envaudit.scan import default_out_dir, run_scan

    config = _config(args)
    try:
        config.rollout_pipeline()  # an unknown preset is a usage error before any work
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.plan:
        return _plan(args, config, console)
    if config.engine == "vllm":  # vLLM missing, or no such model folder: a usage error before any work
        from envaudit.grpo.vllm_backend import check_engine

        check_engine(config.model)
    if config.out is not None:
        _check_out(Path(config.out), args.force)  # refuse before the scan, not after it
    show = not args.no_progress and err.is_terminal
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=not show) as bar:
        task = bar.add_task("starting", total=1.0)
        target, env_id = args.env, None
        env_args = _env_args(args.env_args)
        if args.tasks is not None:
            if env_args.get("tasks", args.tasks) != args.tasks:
                raise UsageError(f"--tasks {args.tasks} and --env-arg tasks={env_args['tasks']} disagree; give one")
            env_args["tasks"] = args.tasks
        if env_args:  # options reach the env through its factory, resolved here
            from envaudit.resolve import resolve_env

            env_id, target = resolve_env(args.env, env_args)
        execution = _execution(args)
        report = run_scan(target, config, env_id=env_id, execution=execution,
                          progress=lambda msg, frac: bar.update(task, description=msg, completed=frac))
    _raise_if_interrupted()
    out = config.out or default_out_dir(report.env_id)
    try:
        folder = write_folder(report, out, replace=args.force)
    except FileExistsError as exc:
        raise UsageError(str(exc)) from None
    _raise_if_interrupted()
    console.print(report)
    console.print(f"report written to {folder}/")
    if report.cost:
        from envaudit.cost import cost_line

        console.print(cost_line(report.cost, report.seconds, execution.n_workers), highlight=False)
    if report.broken:
        return 3
    # By group: one incentive seen by several probes is one verdict.
    reached = report.reaches(config.fail_severity)
    if reached:
        return 1
    return 4 if report.incomplete else 0


def _plan(args: argparse.Namespace, config: ScanConfig, console: Console) -> int:
    from envaudit.plan import plan_scan

    env_args = _env_args(args.env_args)
    if args.tasks is not None:
        env_args["tasks"] = args.tasks
    plan = plan_scan(args.env, config, workers=_execution(args).n_workers, env_args=env_args)
    for line in plan.lines():
        console.print(line, highlight=False)
    return 0


def _scan_any(args: argparse.Namespace, console: Console, err: Console) -> int:
    from envaudit.suite import is_suite

    if not args.env and args.suite is None:
        raise UsageError("the following arguments are required: ENV (one or more), or --suite FILE "
                         "(see `envaudit scan --help`)")
    if is_suite(args.env, args.suite, getattr(args, "tasks", None)):
        if getattr(args, "plan", False):
            raise UsageError("--plan plans one env's scan; give a single ENV")
        from envaudit.cli_suite import scan_suite

        return scan_suite(args, console, err, options=_suite_options(args),
                          interrupted=_raise_if_interrupted)
    suite_only = [flag for flag, used in (("--jobs", args.jobs is not None),
                                          ("--resume", args.resume)) if used]
    if suite_only:
        raise UsageError(f"{', '.join(suite_only)} appl{'y' if len(suite_only) > 1 else 'ies'} to suites; "
                         "give several ENVs or --suite FILE, or drop it for a single env")
    args.env = args.env[0]
    return _scan(args, console, err)


def _suite_options(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(``[tool.envaudit]``, the command line's scan options, its ``--env-arg`` options) for a suite."""
    base = _pyproject_options(Path.cwd())
    flags = {f.name: getattr(args, f.name) for f in fields(ScanConfig)
             if f.name != "out" and getattr(args, f.name, None) is not None}
    if isinstance(args.probes, str):
        flags["probes"] = [p.strip() for p in args.probes.split(",") if p.strip()]
    env_args = _env_args(args.env_args)
    if getattr(args, "tasks", None) is not None:  # as for one env: --tasks is --env-arg tasks=PATH
        if env_args.get("tasks", args.tasks) != args.tasks:
            raise UsageError(f"--tasks {args.tasks} and --env-arg tasks={env_args['tasks']} disagree; give one")
        env_args["tasks"] = args.tasks
    return base, flags, env_args


def _check_out(out: Path, force: bool) -> None:
    """``--out`` must be new, empty, or (with ``--force``) a report folder; never a user's other folder."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not out.is_dir() or not (out / REPORT_MARKER).exists():
        raise UsageError(f"--out {out} exists and is not a report folder; choose another --out")
    if not force:
        raise UsageError(f"--out {out} already holds a report; pass --force to replace it or choose another --out")


# SIGINT sets this before raising KeyboardInterrupt: Python swallows an exception raised inside a
# finalizer ("Exception ignored in: <function WeakSet...>"), so the flag is what makes an interrupt
# that landed there still end the run with 130 instead of a finished scan and rc 0.
_INTERRUPTED = threading.Event()


def _on_sigint(signum, frame) -> None:
    if _INTERRUPTED.is_set():
        return  # a second Ctrl-C (or a signal forwarded twice) must not break the clean-up of the first
    _INTERRUPTED.set()
    raise KeyboardInterrupt


def _raise_if_interrupted() -> None:
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


def _list_probes(console: Console) -> int:
    from envaudit.probe import registered_probes

    probes = list(registered_probes().values())
    width = max(len(p.name) for p in probes)
    for probe in probes:  # one line each, whatever the terminal width: greppable, pasteable
        console.print(f"{probe.name:<{width}}  {probe.summary} ({', '.join(probe.codes)})",
                      soft_wrap=True, highlight=False, markup=False)
    return 0


def _load_folder(path: str, role: str):
    from envaudit.reporting.load import load_report

    try:
        return load_report(path)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(f"{role} {path!r}: {exc}") from None


def _report(args: argparse.Namespace, console: Console) -> int:
    from envaudit.reporting.folder import rerender

    view = _load_folder(args.folder, "DIR")
    written = rerender(view.folder)
    console.print(f"re-rendered {', '.join(p.name for p in written)} in {view.folder}/")
    return 0


def _diff(args: argparse.Namespace, console: Console) -> int:
    from envaudit.reporting.diff import diff_reports

    result = diff_reports(_load_folder(args.old, "OLD"), _load_folder(args.new, "NEW"), force=args.force)
    console.print(result)
    return result.exit_code


def main(argv: list[str] | None = None) -> int:
    console = Console()
    err = Console(stderr=True)
    _INTERRUPTED.clear()
    previous = (signal.signal(signal.SIGINT, _on_sigint)
                if threading.current_thread() is threading.main_thread() else None)
    try:
        args = _build_parser().parse_args(argv)
        if args.command == "probes":
            return _list_probes(console)
        if args.command == "report":
            return _report(args, console)
        if args.command == "diff":
            return _diff(args, console)
        if args.command == "logs":
            return _logs(args, console, err)
        return _scan_any(args, console, err)
    except UsageError as exc:
        print(f"envaudit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("envaudit: interrupted; no report folder was written", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def run() -> None:
    """The ``envaudit`` command: ``main`` and then leave without finalizing the interpreter.

    An interrupted scan abandons its probe on a daemon thread that may be inside torch; Python's
    finalization then ends that thread with a forced unwind through native frames, and the process
    aborts ("terminate called without an active exception", rc -6) after the report folder was
    already cleaned up. Exit handlers still run and both streams are flushed; nothing is left to
    write at this point (report folders are renamed into place whole or not at all).
    """
    try:
        code = main()
    except KeyboardInterrupt:  # landed after main's own handler was removed
        code = 130
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
