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

import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.fixtures.doc_pages import (
    BLOCKS,
    CHECKED,
    COMMANDS,
    FIRST_COMMANDS,
    LANGS,
    MACHINE_WORDS,
    NOT_RUNNABLE,
    PAGES,
    QUOTES,
    REPO_DIRS,
    ROOT,
    SHELL_BLOCKS,
    Block,
    Command,
    check_envaudit,
    check_script,
    commands_of,
    exists,
    is_env_id,
    produced_by,
    prose,
    rebuilt_parser,
    rel,
    repo_paths,
)


@pytest.fixture(scope="module")
def cli():
    """envaudit's own parser and what a scan command is checked against."""
    from envaudit import cli as envaudit_cli
    from envaudit.presets import PRESETS
    from envaudit.probe import registered_probes

    return {"parser": envaudit_cli._build_parser(), "probes": set(registered_probes()), "presets": set(PRESETS)}



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
