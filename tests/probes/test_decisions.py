"""Each finding code a probe emits is decided in exactly one place: ``decide_<code>``.

Read from the probes' source: inside a probe's modules, a ``Finding`` is created, and a
``Severity`` chosen, only within the function that decides that code, and the probe's table
(``Probe.decisions``) names that function for every code it declares; the docs page of each probe
lists the same functions.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from envaudit.probe import BUILTIN, decision_name, registered_probes

ROOT = Path(__file__).resolve().parents[2]
PROBES = sorted(BUILTIN)


def probe_files(name: str) -> list[Path]:
    folder = ROOT / "probes" / name
    return sorted(folder.rglob("*.py")) if folder.is_dir() else [ROOT / "probes" / f"{name}.py"]


def _constants(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            out[node.targets[0].id] = node.value.value
    return out


def _code_of(call: ast.Call, constants: dict[str, str]) -> str | None:
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "code"), None)
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.Name):
        return constants.get(arg.id)
    return None


def _is_named(func: ast.expr, name: str) -> bool:
    return (isinstance(func, ast.Name) and func.id == name) or (isinstance(func, ast.Attribute) and func.attr == name)


def decision_sites(source: str) -> list[tuple[str, int, str | None, list[str]]]:
    """``(what, line, code, enclosing functions)`` for every ``Finding(...)`` call, every
    ``Severity.X`` and every ``replace(..., severity=...)`` in one module's source."""
    tree = ast.parse(source)
    constants = _constants(tree)
    sites: list[tuple[str, int, str | None, list[str]]] = []

    def visit(node: ast.AST, chain: list[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            chain = [*chain, node.name]
        if isinstance(node, ast.Call) and _is_named(node.func, "Finding"):
            sites.append(("Finding", node.lineno, _code_of(node, constants), chain))
        elif isinstance(node, ast.Call) and _is_named(node.func, "replace") and any(
                k.arg == "severity" for k in node.keywords):
            sites.append(("replace(severity=)", node.lineno, None, chain))
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Severity"
              and isinstance(node.ctx, ast.Load)):
            sites.append(("Severity", node.lineno, None, chain))
        for child in ast.iter_child_nodes(node):
            visit(child, chain)

    visit(tree, [])
    return sites


def misplaced(source: str, codes: tuple[str, ...]) -> list[str]:
    """What in ``source`` creates a finding or sets a severity outside the deciding functions."""
    deciders = {decision_name(c): c for c in codes}
    wrong = []
    for what, line, code, chain in decision_sites(source):
        inside = [deciders[f] for f in chain if f in deciders]
        if what == "Finding":
            if code is None:
                wrong.append(f"line {line}: Finding(...) whose code is neither a literal nor a module constant")
            elif code not in inside:
                wrong.append(f"line {line}: a {code!r} finding created in {'.'.join(chain) or 'module level'}, "
                             f"not in {decision_name(code)}")
        elif not inside:
            wrong.append(f"line {line}: {what} in {'.'.join(chain) or 'module level'}, outside every decide_* function")
    return wrong


@pytest.mark.parametrize("name", PROBES)
def test_every_code_has_one_deciding_function_in_the_probes_table(name):
    probe = registered_probes([name])[name]
    assert sorted(probe.decisions) == sorted(probe.codes)
    package = importlib.import_module(f"envaudit.probes.{name}")
    for code, decide in probe.decisions.items():
        assert decide.__name__ == decision_name(code)
        assert getattr(package, decision_name(code)) is decide, f"envaudit.probes.{name} must expose {decide.__name__}"


@pytest.mark.parametrize("name", PROBES)
def test_findings_are_created_and_graded_only_where_their_code_is_decided(name):
    codes = registered_probes([name])[name].codes
    wrong = {str(f.relative_to(ROOT)): misplaced(f.read_text(), codes) for f in probe_files(name)}
    assert {f: w for f, w in wrong.items() if w} == {}


@pytest.mark.parametrize("name", PROBES)
def test_the_probes_docs_page_lists_its_deciding_functions(name):
    page = ROOT / "docs" / "probes" / f"{name}.md"
    text = page.read_text()
    for code in registered_probes([name])[name].codes:
        assert f"envaudit.probes.{name}.{decision_name(code)}" in text, f"{page} does not list {code!r}'s function"


def test_shared_probe_modules_decide_nothing():
    for f in sorted((ROOT / "probes" / "_shared").rglob("*.py")):
        assert misplaced(f.read_text(), ()) == [], f


def test_the_checker_finds_what_is_misplaced():
    source = '''
CODE = "timeout-rewarded"

def decide_timeout_rewarded(x):
    return Finding(CODE, Severity.WARN, "t", "s", {}, [], "f")

def helper(x):
    return Finding("timeout-rewarded", Severity.FAIL, "t", "s", {}, [], "f")

def decide_length_bias(f):
    return dataclasses.replace(f, severity=Severity.INFO)

def computed(code):
    return Finding(code=code)
'''
    wrong = misplaced(source, ("timeout-rewarded",))
    assert [w.split(":")[0] for w in wrong] == ["line 8", "line 8", "line 11", "line 11", "line 14"]
    assert "not in decide_timeout_rewarded" in wrong[0]
    assert misplaced(source.split("def helper")[0], ("timeout-rewarded",)) == []
    assert decision_name("reward-without-success") == "decide_reward_without_success"
