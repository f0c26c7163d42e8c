"""Every code block of README.md and docs/**.md is run, so the docs cannot drift from the code.

- ```python blocks run in one subprocess, page by page (a page's blocks in order, in one namespace,
  its working folder a temp folder that links the repository's ``reports/``, ``tests/`` and
  ``docs/``). The default run takes every block but those that scan (``run_scan(``), which run under
  ``-m slow``. A block that quotes a file (``QUOTES``) must equal it.
- ```bash, ```sh and ```console blocks: every command line (console: the ``$`` lines; the rest is
  output) is split at ``&&``, ``||``, ``;``, ``|`` and ``&``. Each part that runs envaudit
  (``envaudit``, ``.venv/bin/envaudit``), one of its modules (``python -m envaudit...``), a benchmark
  (``python benchmarks/...``), a script (``scripts/...``) or pytest is checked in the default run:
  envaudit's with the CLI's own parser (``envaudit.cli``), the ``ScanConfig`` it builds, the
  registered probes and presets, and its targets resolved by ``envaudit.resolve`` when they are a
  bundled env or a file here; modules' and benchmarks' with a parser rebuilt from their
  ``add_argument`` calls; every repository path a command names must exist. Under ``-m slow`` each
  block's commands run for real, in order, in a temp folder, and must exit as the docs say.
- ```toml blocks parse; ``[tool.envaudit]`` goes through ``normalise_options`` and ``ScanConfig``, a
  ``# suite.toml`` block through ``read_suite_file`` (and ``build_entries`` under ``-m slow``);
  ```json blocks parse; ```text blocks are output, and the property failure message is compared
  with a real run.
- ``NOT_RUNNABLE`` lists, with the reason, the commands that cannot run here; an entry that matches
  no command fails, so the list cannot go stale.

Beside the blocks: links, anchors and repository paths in inline code resolve; every probe has a
page whose "What it decides" table has one row per code it emits; the README keeps its first two
commands and at most 300 lines.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import glob
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LANGS = {"python", "bash", "sh", "console", "toml", "json", "text"}
SHELL = {"bash", "sh", "console"}
OPERATORS = {"&&", "||", ";", "|", "&"}
REPO_DIRS = ("tests", "probes", "envaudit", "envs", "benchmarks", "docs", "reports", "notebooks", "scripts")
FIRST_COMMANDS = [
    "scripts/setup && .venv/bin/envaudit scan envaudit/CodeFix-TimeoutPasses-v0 --timeout-handling drop --fail-on never",
    "scripts/setup --vllm && .venv/bin/python -m pytest -n auto --dist loadfile",
]
QUOTES = {"README.md": "docs/examples/lookup.py", "docs/testing.md": "tests/test_user_example.py"}
"""A page's python block that is a file of the repository, whole (the file itself runs elsewhere)."""

# Commands the slow run cannot execute, and why. A reason given as (text, module) applies only while
# that module is missing. Every entry must match a command of the docs.
NOT_RUNNABLE: dict[str, str | tuple[str, str]] = {
    r"^scripts/setup\b": "makes .venv (or .venv-alt) and pip-installs into it; the tests run in the venv it made",
    r"\bpip (install|uninstall)\b": "installs packages",
    r"^\.ci/run$": "CI's whole run: both venvs, the whole suite, chromium when CI=true",
    r"\.venv-alt/bin/": "needs the second venv, .venv-alt (OpenEnv, GEM), that scripts/setup --alt-only makes",
    r"pytest -n auto --dist loadfile$": "the whole default test suite: the run this test is part of",
    r"pytest -m ''$": "the whole suite, slow tests included: hours of CPU",
    r"--engine vllm|tests/grpo/test_lm_engine\.py|benchmarks/lm_rollouts\.py": ("needs vLLM (scripts/setup --vllm)", "vllm"),
    r"benchmarks/grpo_vs_ppo\.py": ("needs the [bench] extra (stable-baselines3)", "stable_baselines3"),
    r"benchmarks/mutation\.py": "needs the [mutation] extra (mutmut) and hours of CPU per module",
    r"--model \./my-agent-checkpoint": "stands for a language-model checkpoint of your own",
    r"ray://": "names a Ray cluster that is not there",
    r"reasoning-gym:\*": "every dataset reasoning-gym ships: about a hundred scans",
    r"--baseline-pythonpath DIR": "DIR stands for another envaudit checkout",
}
MACHINE_WORDS = re.compile(r"\b(this|these) (\d-core |shared |quiet )*machines?\b|\bcores here\b|\bmeasured here\b",
                           re.IGNORECASE)


# -- reading the pages ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def read_blocks(path: Path) -> list[Block]:
    blocks, lines, i = [], path.read_text().splitlines(), 0
    while i < len(lines):
        opening = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if opening is None:
            i += 1
            continue
        indent, lang, start, body = len(opening.group(1)), opening.group(2), i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        assert i < len(lines), f"{rel(path)}:{start}: a code block that never closes"
        blocks.append(Block(rel(path), start, lang, "\n".join(body) + "\n"))
        i += 1
    return blocks


BLOCKS = [b for page in PAGES for b in read_blocks(page)]


def prose(path: Path) -> str:
    """The page without its fenced blocks."""
    return re.sub(r"^\s*```.*?^\s*```\s*$", "", path.read_text(), flags=re.S | re.M)


# -- commands ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Command:
    block: Block
    line: int
    env: tuple[tuple[str, str], ...]
    argv: tuple[str, ...]
    comment: str

    @property
    def text(self) -> str:
        return " ".join([*(f"{k}={v}" for k, v in self.env), *(a or "''" for a in self.argv)])

    @property
    def kind(self) -> str:
        head = self.argv[0]
        if Path(head).name == "envaudit":
            return "envaudit"
        if Path(head).name in ("python", "python3") and len(self.argv) > 1:
            if self.argv[1] == "-m" and self.argv[2] == "pytest":
                return "pytest"
            if self.argv[1] == "-m" and self.argv[2].split(".")[0] == "envaudit":
                return "module"
            if self.argv[1].startswith("benchmarks/"):
                return "benchmark"
        if head.startswith("scripts/"):
            return "script"
        return "other"

    def not_runnable(self) -> str | None:
        for pattern, reason in NOT_RUNNABLE.items():
            if re.search(pattern, self.text):
                if isinstance(reason, tuple):
                    text, module = reason
                    if importlib.util.find_spec(module) is None:
                        return text
                    continue
                return reason
        return None


def command_lines(block: Block) -> list[tuple[int, str]]:
    out, pending = [], ""
    for i, raw in enumerate(block.text.splitlines()):
        line = raw.rstrip()
        if block.lang == "console" and not pending:
            if not line.startswith("$ "):
                continue  # output
            line = line[2:]
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        if (pending + line).strip():
            out.append((block.line + 1 + i, pending + line))
        pending = ""
    return out


def commands_of(block: Block) -> list[Command]:
    out = []
    for line, text in command_lines(block):
        comment = text.partition(" #")[2].strip() if " #" in text else ""
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens, part = list(lexer), []
        for token in [*tokens, ";"]:
            if token not in OPERATORS:
                part.append(token)
                continue
            env = []
            while part and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", part[0]):
                env.append(tuple(part.pop(0).split("=", 1)))
            if part:
                out.append(Command(block, line, tuple(env), tuple(part), comment))
            part = []
    return out


SHELL_BLOCKS = [b for b in BLOCKS if b.lang in SHELL]
COMMANDS = [c for b in SHELL_BLOCKS for c in commands_of(b)]
CHECKED = ("envaudit", "module", "benchmark", "script", "pytest")


# -- parsers ----------------------------------------------------------------------------------------
class _Raising(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(f"{self.prog}: {message}")


def rebuilt_parser(path: Path) -> argparse.ArgumentParser:
    """The parser a script builds, from its ``add_argument`` calls with literal arguments (``type``
    kept for int and float); what cannot be read statically is left out, never guessed."""
    objects: dict[str, object] = {}
    root = _Raising(prog=rel(path), add_help=True)
    statements = [n for n in ast.walk(ast.parse(path.read_text()))
                  if isinstance(n, (ast.Assign, ast.Expr)) and isinstance(n.value, ast.Call)]
    for node in sorted(statements, key=lambda n: (n.lineno, n.col_offset)):
        call = node.value
        func = call.func
        name = node.targets[0].id if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) else None
        literal = {}
        for kw in call.keywords:
            if kw.arg in ("action", "nargs", "choices", "dest", "metavar", "required", "default"):
                try:
                    literal[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    pass
            elif kw.arg == "type" and isinstance(kw.value, ast.Name) and kw.value.id in ("int", "float"):
                literal["type"] = {"int": int, "float": float}[kw.value.id]
        args = [a.value for a in call.args if isinstance(a, ast.Constant)]
        if isinstance(func, ast.Attribute) and func.attr == "ArgumentParser" and name:
            objects[name] = root
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = objects.get(func.value.id, root)
            if func.attr == "add_argument" and args:
                owner.add_argument(*args, **literal)
            elif func.attr == "add_subparsers" and name:
                objects[name] = owner.add_subparsers(**{k: v for k, v in literal.items() if k in ("dest", "required")},
                                                     parser_class=_Raising)
            elif func.attr == "add_parser" and name and args:
                objects[name] = owner.add_parser(args[0])
            elif func.attr in ("add_argument_group", "add_mutually_exclusive_group") and name:
                objects[name] = owner
    return root


@pytest.fixture(scope="module")
def cli():
    """envaudit's own parser and what a scan command is checked against."""
    from envaudit import cli as envaudit_cli
    from envaudit.presets import PRESETS
    from envaudit.probe import registered_probes

    return {"parser": envaudit_cli._build_parser(), "probes": set(registered_probes()), "presets": set(PRESETS)}


OUTPUT_FLAGS = ("--out", "--output-dir", "--keep")


def repo_paths(argv) -> list[str]:
    """Arguments that name a file or folder of the repository (a glob allowed), outputs left out."""
    out = []
    for i, arg in enumerate(argv):
        if i and argv[i - 1] in OUTPUT_FLAGS:
            continue
        value = arg.partition("=")[2] if "=" in arg else arg
        if re.match(rf"^({'|'.join(REPO_DIRS)})/[\w./*?\[\]-]*$", value) and not is_env_id(value):
            out.append(value)
    return out


def is_env_id(text: str) -> bool:
    import gymnasium as gym

    import envaudit  # noqa: F401 - registers the bundled envs

    return text in gym.registry or bool(fnmatch.filter(gym.registry, text)) and "*" in text


def exists(path: str, produced: set[str]) -> bool:
    path = path.rstrip("/")
    if any(path == p or path.startswith(p + "/") for p in produced):
        return True
    return bool(glob.glob(str(ROOT / path)))


def produced_by(command: Command) -> set[str]:
    """Paths a command creates, for the commands after it on the same page."""
    argv, out = command.argv, set()
    for flag in OUTPUT_FLAGS:
        if flag in argv:
            out.add(argv[argv.index(flag) + 1].rstrip("/"))
    if command.kind == "module" and argv[2] == "envaudit.testing.logs":
        out.add(argv[3].rstrip("/"))
    return out


def env_args(items) -> dict:
    out = {}
    for item in items:
        key, _, raw = item.partition("=")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def check_target(target: str, options: dict) -> None:
    import gymnasium as gym

    from envaudit.adapters import prefix_of
    from envaudit.resolve import resolve_env
    from envaudit.suite_file import is_pattern

    prefix = prefix_of(target)
    if is_pattern(target):
        assert prefix is not None or fnmatch.filter(gym.registry, target), f"{target!r} matches no registered env"
        return
    if prefix is not None:  # the adapter itself (its package, the id) is checked when the command runs
        rest = target.partition(":")[2]
        assert not rest.endswith(".py") or (ROOT / rest).exists(), f"{target!r}: no file {rest}"
        return
    resolve_env(target, options)  # Gymnasium ids, module:attr, files: the CLI's own resolver


def check_envaudit(command: Command, cli, produced: set[str], suite_files: set[str]) -> None:
    from envaudit.config import ScanConfig

    try:
        ns = cli["parser"].parse_args(list(command.argv[1:]))
    except SystemExit as exc:  # --help, --version
        assert exc.code == 0
        return
    if ns.command in ("scan", "logs"):
        options = {f.name: getattr(ns, f.name) for f in fields(ScanConfig) if getattr(ns, f.name, None) is not None}
        if isinstance(ns.probes, str):
            options["probes"] = [p.strip() for p in ns.probes.split(",") if p.strip()]
            unknown = set(options["probes"]) - cli["probes"]
            assert not unknown, f"no such probe {sorted(unknown)}; registered: {sorted(cli['probes'])}"
        config = ScanConfig(**options)
        config.rollout_pipeline()  # an unknown --pipeline preset raises here
    if ns.command == "scan":
        for target in ns.env:
            check_target(target, env_args(ns.env_args))
        if ns.suite is not None:
            assert ns.suite in suite_files, f"--suite {ns.suite}: no '# {ns.suite}' toml block on {command.block.page}"
        if ns.tasks is not None:
            assert exists(ns.tasks, produced), f"--tasks {ns.tasks}: no such file"
    elif ns.command == "logs":
        for path in ns.paths:
            assert exists(path, produced), f"no log at {path}"
        if ns.replay_env is not None:
            check_target(ns.replay_env, {})
    elif ns.command in ("report", "diff"):
        for folder in ([ns.folder] if ns.command == "report" else [ns.old, ns.new]):
            assert exists(folder, produced) and (exists(f"{folder}/report.json", produced) or folder in produced), \
                f"{folder}: not a report folder"


def check_script(command: Command) -> None:
    path = ROOT / command.argv[0]
    assert path.is_file(), f"no script {command.argv[0]}"
    options = set(re.findall(r"^\s*(--[\w-]+)\)", path.read_text(), re.M))
    for arg in command.argv[1:]:
        assert arg in options, f"{command.argv[0]} has no option {arg} (it takes {sorted(options)})"


# -- the default run: commands ----------------------------------------------------------------------
def page_commands(page: str) -> list[Command]:
    return [c for c in COMMANDS if c.block.page == page]


@pytest.mark.parametrize("page", sorted({c.block.page for c in COMMANDS}))
def test_commands_parse_and_their_targets_resolve(page, cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    suite_files = {m.group(1) for b in BLOCKS if b.page == page and b.lang == "toml"
                   for m in [re.match(r"# (\S+\.toml)\n", b.text)] if m}
    produced: set[str] = set()
    problems = []
    for command in page_commands(page):
        where = f"{page}:{command.line}: {command.text}"
        try:
            if command.kind == "other":
                assert command.not_runnable(), "not a command this test knows: check it or list it in NOT_RUNNABLE"
            elif command.kind == "envaudit":
                check_envaudit(command, cli, produced, suite_files)
            elif command.kind == "script":
                check_script(command)
            elif command.kind in ("module", "benchmark"):
                spec = importlib.util.find_spec(command.argv[2]) if command.kind == "module" else None
                assert command.kind == "benchmark" or spec is not None, f"no module {command.argv[2]}"
                path = ROOT / command.argv[1] if command.kind == "benchmark" else Path(spec.origin)
                assert path.is_file(), f"no such script {path}"
                rebuilt_parser(path).parse_args(list(command.argv[2 if command.kind == "benchmark" else 3:]))
                if Path(command.argv[1]).name == "mutation.py":
                    check_mutation_modules(command)
            missing = [p for p in repo_paths(command.argv[1:]) if not exists(p, produced)]
            assert not missing, f"no such path in the repository: {missing}"
        except Exception as exc:  # gather every bad command of the page, not the first only
            problems.append(f"{where}\n    {type(exc).__name__}: {exc}")
        produced |= produced_by(command)
    assert not problems, "\n".join(problems)


def check_mutation_modules(command: Command) -> None:
    """benchmarks/mutation.py takes modules by short name (``stats``, ``timeouts``, ``adapters``: a
    module or folder of envaudit/ or probes/) or path."""
    argv = list(command.argv[2:])
    modules = []
    for arg in argv:
        if arg.startswith("-"):
            break
        modules.append(arg)
    for name in modules:
        found = (ROOT / name).exists() if "/" in name else any(
            (ROOT / d / f"{name}.py").is_file() or (ROOT / d / name).is_dir() for d in ("envaudit", "probes"))
        assert found, f"benchmarks/mutation.py: no module {name!r}"


def test_every_block_has_a_known_language():
    unknown = [f"{b.id} ```{b.lang}" for b in BLOCKS if b.lang not in LANGS]
    assert not unknown, f"name one of {sorted(LANGS)} so the block is run: {unknown}"


def test_shell_blocks_hold_commands_this_test_checks():
    for block in SHELL_BLOCKS:
        commands = commands_of(block)
        assert commands, f"{block.id}: a shell block without a command"
        assert any(c.kind in CHECKED for c in commands) or all(c.not_runnable() for c in commands), block.id


def test_not_runnable_list_matches_commands():
    texts = [c.text for c in COMMANDS]
    stale = [p for p in NOT_RUNNABLE if not any(re.search(p, t) for t in texts)]
    assert not stale, f"NOT_RUNNABLE entries that match no command of the docs: {stale}"


def test_no_indented_code_blocks():
    for page in PAGES:
        lines = prose(page).splitlines()
        for i in range(1, len(lines)):
            if lines[i].startswith("    ") and not lines[i - 1].strip():
                pytest.fail(f"{rel(page)}: an indented code block ({lines[i].strip()!r}); fence it so it is run")


# -- the default run: toml, json, text ----------------------------------------------------------------
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in ("toml", "json")], ids=lambda b: b.id)
def test_config_blocks_load(block, tmp_path):
    from envaudit.config import ScanConfig, normalise_options
    from envaudit.suite_file import read_suite_file

    if block.lang == "json":
        json.loads(block.text)
        return
    data = tomllib.loads(block.text)
    if "tool" in data:
        ScanConfig(**normalise_options(data["tool"]["envaudit"], block.id))
    suite = re.match(r"# (\S+\.toml)\n", block.text)
    if suite:
        path = tmp_path / suite.group(1)
        path.write_text(block.text)
        parsed = read_suite_file(path)
        defaults = {k: v for k, v in parsed.defaults.items() if k != "env_args"}
        for i, entry in enumerate(parsed.envs, 1):
            own = normalise_options({k: v for k, v in entry.items() if k not in ("target", "name", "tasks")},
                                    f"[[env]] #{i}", exclude=("out",), extra=("env_args",))
            own.pop("env_args", None)
            ScanConfig(**{**defaults, **own})
    assert data, f"{block.id}: an empty toml block"


def test_text_blocks_are_real_output(python_results):
    """The one text block is the failure message of a property; it is compared with a real run."""
    texts = [b for b in BLOCKS if b.lang == "text"]
    assert [b.page for b in texts] == ["docs/testing.md"]
    assert python_results["property message"].strip() == texts[0].text.strip()


# -- the default run: python ------------------------------------------------------------------------
RUNNER = r"""
import contextlib, io, json, os, sys, traceback
pages = json.load(open(sys.argv[1]))
results = {}
for page in pages:
    os.chdir(page["cwd"])
    namespace = {"__name__": "__main__"}
    for block in page["blocks"]:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(block["code"], block["id"], "exec"), namespace)
            results[block["id"]] = None
        except BaseException:
            results[block["id"]] = traceback.format_exc()
json.dump(results, open(sys.argv[2], "w"))
"""
PROPERTY_MESSAGE = """
from envaudit.testing import assert_no_timeout_reward
try:
    assert_no_timeout_reward("envaudit/CodeFix-TimeoutPasses-v0")
except AssertionError as exc:
    open(os.environ["PROPERTY_MESSAGE"], "w").write(str(exc))
"""
PYTHON_BLOCKS = [b for b in BLOCKS if b.lang == "python"]


def is_slow(block: Block) -> bool:
    return "run_scan(" in block.text


def workdir(tmp: Path) -> Path:
    """A folder to run the docs' code in: links to the repository's folders, a copy of reports/."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name in ("tests", "docs", "benchmarks", "scripts", "notebooks", ".venv"):
        if (ROOT / name).exists() and not (tmp / name).exists():
            (tmp / name).symlink_to(ROOT / name)
    return tmp


def run_python(blocks: list[Block], tmp: Path, extra: dict[str, str] | None = None) -> dict:
    pages = []
    for page in dict.fromkeys(b.page for b in blocks):
        cwd = workdir(tmp / re.sub(r"\W", "_", page))
        if not (cwd / "reports").exists():
            (cwd / "reports").symlink_to(ROOT / "reports")
        pages.append({"cwd": str(cwd), "blocks": [{"id": b.id, "code": b.text} for b in blocks if b.page == page]})
    for name, code in (extra or {}).items():
        pages.append({"cwd": str(workdir(tmp / "extra")), "blocks": [{"id": name, "code": "import os\n" + code}]})
    (tmp / "pages.json").write_text(json.dumps(pages))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROPERTY_MESSAGE": str(tmp / "message.txt")}
    done = subprocess.run([sys.executable, "-c", RUNNER, str(tmp / "pages.json"), str(tmp / "results.json")],
                          env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp / "results.json").read_text())
    message = tmp / "message.txt"
    results["property message"] = message.read_text() if message.exists() else ""
    return results


@pytest.fixture(scope="module")
def python_results(tmp_path_factory):
    return run_python([b for b in PYTHON_BLOCKS if not is_slow(b)], tmp_path_factory.mktemp("python"),
                      extra={"property message": PROPERTY_MESSAGE})


@pytest.mark.parametrize("block", [b for b in PYTHON_BLOCKS if not is_slow(b)], ids=lambda b: b.id)
def test_python_block_runs(block, python_results):
    assert python_results[block.id] is None, python_results[block.id]


@pytest.mark.parametrize("page, path", sorted(QUOTES.items()))
def test_quoted_files_are_quoted_whole(page, path):
    quoted = [b.text for b in PYTHON_BLOCKS if b.page == page]
    assert (ROOT / path).read_text() in quoted, f"{page} must quote {path} whole, as it is now"


# -- the default run: links, paths, probe pages, the README ---------------------------------------
def slug(heading: str) -> str:
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", prose(path), re.M)}


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_links_paths_and_wording(page):
    text = prose(page)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"https?://", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        assert dest.exists(), f"{rel(page)}: broken link {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{rel(page)}: no heading #{anchor} in {rel(dest)}"
    for code in re.findall(r"`([^`\s]+)`", text):
        if re.fullmatch(rf"({'|'.join(REPO_DIRS)})/[\w./*-]+", code) and not is_env_id(code):
            assert glob.glob(str(ROOT / code)), f"{rel(page)}: `{code}` does not exist"
    found = MACHINE_WORDS.search(page.read_text())
    assert found is None, f"{rel(page)}: {found.group(0)!r}; say what kind of machine (a CPU-only machine, ...)"


def test_docs_index_links_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    linked = {(ROOT / "docs" / t.partition("#")[0]).resolve() for t in re.findall(r"\]\(([^)#\s]+)", index)}
    pages = {p.resolve() for p in (ROOT / "docs").rglob("*") if p.is_file() and p != ROOT / "docs" / "README.md"}
    assert not pages - linked, f"docs/README.md does not link {sorted(rel(p) for p in pages - linked)}"


def decides_table(name: str) -> list[list[str]]:
    text = (ROOT / "docs" / "probes" / f"{name}.md").read_text()
    section = text.partition("\n## What it decides\n")[2].partition("\n## ")[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|")]
    assert rows and rows[0] == ["code", "severity rule", "deciding function"], f"docs/probes/{name}.md: no table"
    return rows[2:]


@pytest.mark.parametrize("name", ["api", "replay", "timeouts", "length", "intent", "pipeline", "grpo",
                                  "exploits", "failures"])
def test_probe_page_decides_every_code(name, cli):
    from envaudit.probe import registered_probes

    assert set(cli["probes"]) == {"api", "replay", "timeouts", "length", "intent", "pipeline", "grpo",
                                  "exploits", "failures"}, "a probe was added or removed: give it a page"
    rows = decides_table(name)
    codes = registered_probes()[name].codes
    assert [r[0] for r in rows] == [f"`{c}`" for c in codes], f"one row per code, in the order of {codes}"
    for code, rule, function in rows:
        expected = f"`envaudit.probes.{name}.decide_{code.strip('`').replace('-', '_')}`"
        assert function == expected and rule, f"docs/probes/{name}.md: {code} must name {expected}"


@pytest.mark.parametrize("name", ["api", "replay", "timeouts", "length", "intent", "pipeline", "grpo",
                                  "exploits", "failures"])
def test_deciding_functions_are_the_probes_own(name):
    """The function a page names is the probe's: exported by its package and in its ``decisions``."""
    from envaudit.probe import registered_probes

    module = importlib.import_module(f"envaudit.probes.{name}")
    decisions = registered_probes()[name].decisions
    for code, _, function in decides_table(name):
        attr = function.strip("`").rpartition(".")[2]
        assert getattr(module, attr, None) is not None, f"envaudit.probes.{name} has no {attr}"
        assert decisions.get(code.strip("`")) is getattr(module, attr), \
            f"the {name} probe decides {code} with {decisions.get(code.strip('`'))}, not {attr}"


def test_readme_opens_with_the_two_commands_and_stays_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[2:6] == ["```bash", *FIRST_COMMANDS, "```"]
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move detail into docs/"
    assert FIRST_COMMANDS[1] in (ROOT / ".ci" / "run").read_text().splitlines(), ".ci/run runs the README's tests"


# -- -m slow: everything for real --------------------------------------------------------------------
def expected_codes(command: Command) -> set[int]:
    said = re.match(r"exit (\d+)\b(?! when)", command.comment)  # "# exit 1, report.json written"
    if said:
        return {int(said.group(1))}
    if command.kind == "envaudit" and "--fail-on" in command.argv and "never" in command.argv:
        return {0}
    if command.kind == "envaudit" and command.argv[1] in ("scan", "logs", "diff"):
        return {0, 1}  # 1: an incentive was found (or is new), which is what the docs show
    return {0}


def run_command(command: Command, cwd: Path) -> None:
    bindir = Path(sys.executable).parent
    argv = [a.replace("/tmp/", f"{cwd}/tmp/") for a in command.argv]
    (cwd / "tmp").mkdir(exist_ok=True)
    if command.kind == "pytest":
        cwd = ROOT  # its paths and its conftest are the repository's
        argv += ["-p", "no:cacheprovider"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
           **dict(command.env)}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=7200)
    where = f"{command.block.page}:{command.line}: {command.text}"
    assert done.returncode in expected_codes(command), \
        f"{where}\nexit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if command.kind == "envaudit" and command.argv[1] in ("scan", "logs"):
        assert "written to" in done.stdout, f"{where}: no report folder\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.timeout(4 * 3600)
@pytest.mark.parametrize("block", [b for b in SHELL_BLOCKS if any(c.kind in CHECKED for c in commands_of(b))],
                         ids=lambda b: b.id)
def test_shell_block_runs(block, tmp_path):
    cwd = workdir(tmp_path)
    shutil.copytree(ROOT / "reports", cwd / "reports")  # commands may write into it
    for b in BLOCKS:  # suite files the block names
        suite = re.match(r"# (\S+\.toml)\n", b.text) if b.page == block.page and b.lang == "toml" else None
        if suite:
            (cwd / suite.group(1)).write_text(b.text)
    skipped = []
    for command in commands_of(block):
        reason = command.not_runnable()
        if reason or command.kind not in CHECKED:
            skipped.append(f"{command.text}: {reason}")
            continue
        run_command(command, cwd)
    if skipped and all(c.not_runnable() for c in commands_of(block) if c.kind in CHECKED):
        pytest.skip("not runnable here: " + "; ".join(skipped))


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("block", [b for b in PYTHON_BLOCKS if is_slow(b)], ids=lambda b: b.id)
def test_scanning_python_block_runs(block, tmp_path):
    results = run_python([block], tmp_path)
    assert results[block.id] is None, results[block.id]


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "toml" and b.text.startswith("# suite.toml")],
                         ids=lambda b: b.id)
def test_suite_file_expands(block, tmp_path, monkeypatch):
    from envaudit.suite_file import build_entries, read_suite_file

    monkeypatch.chdir(ROOT)
    path = tmp_path / "suite.toml"
    path.write_text(block.text)
    entries = build_entries([], read_suite_file(path), {}, {}, {})
    assert len(entries) >= len(tomllib.loads(block.text)["env"])
