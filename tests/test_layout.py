"""envaudit's import graph has no circle, and no module imports another module's private names.

DESIGN.md ("Where the pieces live"): no import circles; STYLE.md: no module imports another
module's private (``_name``) names. The graph is read from the source (``ast``), not from what an
interpreter happened to import: every ``import`` and ``from ... import`` of ``envaudit/``,
``probes/`` (as ``envaudit.probes``) and ``envs/`` (as ``envaudit.envs``), imports inside functions
included, relative imports resolved. Imports of other packages are not edges.

How an import becomes an edge:

- ``import a.b.c`` and ``from a.b.c import name``: an edge to ``a.b.c`` (the longest prefix that is
  one of our modules), not to ``a`` and ``a.b`` as well, although Python runs their ``__init__``
  too: counting those would tie every module to ``envaudit/__init__.py``, which re-exports the
  public API, and turn the whole package into one false circle;
- ``from pkg import sub`` where ``pkg/sub.py`` (or ``pkg/sub/``) exists: an edge to ``pkg.sub``;
- ``from pkg import name`` where ``pkg/__init__.py`` hands ``name`` out lazily (a module-level
  ``__getattr__`` and a table of name -> submodule, as ``envaudit/reporting/__init__.py`` has): an
  edge to the submodule that defines it, since that is the module the importer gets (and a circle
  through it is real). The ``__init__`` itself gets no edge from its table: it imports nothing
  when it is imported, so a table listing a module that imports the package is no circle;
- imports under ``if TYPE_CHECKING:`` are no edges: they never run, and they are how a module names
  a type from above without importing it;
- ``importlib.import_module("...")`` is not followed (its argument is data: the adapters' and
  probes' registries).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"envaudit": ROOT / "envaudit", "envaudit.probes": ROOT / "probes", "envaudit.envs": ROOT / "envs"}
"""Package name -> its folder, as ``pyproject.toml``'s ``package-dir`` maps them."""


# -- the graph ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Import:
    """One import statement's edge: who imports, what, where, which names."""

    source: str
    target: str
    line: int
    names: tuple[str, ...]


def module_files(packages: Mapping[str, Path]) -> dict[str, Path]:
    """Module name -> file for every ``.py`` under the package folders (``pkg/__init__.py`` is ``pkg``)."""
    out: dict[str, Path] = {}
    for package, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def lazy_table(tree: ast.Module, package: str, modules: Mapping[str, Path]) -> dict[str, str]:
    """Name -> submodule of an ``__init__`` that hands names out through a module-level
    ``__getattr__``: every module-level dict literal of strings whose values name our modules."""
    if not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body):
        return {}
    table: dict[str, str] = {}
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(value, ast.Dict):
            continue
        for key, target in zip(value.keys, value.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(target, ast.Constant)
                    and isinstance(key.value, str) and isinstance(target.value, str)):
                continue
            for module in (f"{package}.{target.value}", target.value):
                if module in modules:
                    table[key.value] = module
                    break
    return table


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _ours(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is one of our modules."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def resolve_from(source: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module name ``from ... import`` reads from (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    package = source if is_package(path) else source.rpartition(".")[0]
    base = package.split(".")
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def parse_all(modules: Mapping[str, Path]) -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(), filename=str(path)) for name, path in modules.items()}


def imports(modules: Mapping[str, Path], trees: Mapping[str, ast.Module] | None = None) -> list[Import]:
    """Every edge of the import graph, imports inside functions included."""
    trees = trees or parse_all(modules)
    lazy = {name: lazy_table(tree, name, modules) for name, tree in trees.items() if is_package(modules[name])}
    out: list[Import] = []
    for source, tree in trees.items():
        skip = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _ours(alias.name, modules)
                    if target and target != source:
                        out.append(Import(source, target, node.lineno, (alias.name,)))
            elif isinstance(node, ast.ImportFrom):
                base = resolve_from(source, modules[source], node)
                by_target: dict[str, list[str]] = {}
                for alias in node.names:
                    if f"{base}.{alias.name}" in modules:  # from pkg import submodule
                        target = f"{base}.{alias.name}"
                    elif alias.name in lazy.get(base, {}):  # a name the package hands out lazily
                        target = lazy[base][alias.name]
                    else:
                        target = _ours(base, modules)
                    if target and target != source:
                        by_target.setdefault(target, []).append(alias.name)
                out.extend(Import(source, t, node.lineno, tuple(n)) for t, n in by_target.items())
    return out


def graph(edges: Iterable[Import]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for e in edges:
        out.setdefault(e.source, set()).add(e.target)
        out.setdefault(e.target, set())
    return out


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every circle of a directed graph: its strongly connected components of two or more nodes
    (a node importing itself is no circle), each sorted, the list sorted (Tarjan, iterative)."""
    succ = {n: sorted(set(vs)) for n, vs in graph.items()}
    for vs in list(succ.values()):
        for v in vs:
            succ.setdefault(v, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            for j in range(i, len(succ[node])):
                nxt = succ[node][j]
                if nxt not in index:
                    work.append((node, j + 1))
                    work.append((nxt, 0))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
    return sorted(found)


def a_cycle(graph: Mapping[str, Iterable[str]], members: list[str]) -> list[str]:
    """One shortest loop through the first member of a circle, staying inside it: [a, b, ..., a]."""
    inside = set(members)
    start = members[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if nxt in inside and nxt not in previous:
                    previous[nxt] = node
                    nxt_frontier.append(nxt)
        frontier = nxt_frontier
    raise AssertionError(f"{members} is not a circle")


def describe_circles(edges: list[Import], modules: Mapping[str, Path], root: Path) -> list[str]:
    """Each circle as text: one loop file -> file, then every import that ties it (file:line: names)."""
    g = graph(edges)

    def rel(module: str) -> str:
        return str(modules[module].relative_to(root))

    out = []
    for n, members in enumerate(circles(g), 1):
        loop = " -> ".join(rel(m) for m in a_cycle(g, members))
        ties = [f"    {rel(e.source)}:{e.line} -> {rel(e.target)}: {', '.join(e.names)}"
                for e in sorted(edges, key=lambda e: (e.source, e.line, e.target))
                if e.source in members and e.target in members]
        out.append(f"circle {n} ({len(members)} files): {loop}\n" + "\n".join(ties))
    return out


# -- private names --------------------------------------------------------------------------------
def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(modules: Mapping[str, Path], trees: Mapping[str, ast.Module] | None = None,
                    root: Path = ROOT) -> list[str]:
    """``from X import _name`` of another module's private name, and ``alias._name`` on an imported
    module or function of ours, under /work/shared/tools/private_imports.py's rules: a private
    *module* of the importer's own folder may be imported (``from . import _common``), and a module
    may import from itself (an ``__init__`` from its own package)."""
    trees = trees or parse_all(modules)
    bad: list[str] = []
    for source, tree in trees.items():
        path = modules[source]
        folder_package = source if is_package(path) else source.rpartition(".")[0]
        where = str(path.relative_to(root))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = resolve_from(source, path, node)
                if not (node.level or base.split(".")[0] == "envaudit"):
                    continue
                for alias in node.names:
                    if not _private(alias.name):
                        if alias.name[:1].islower():
                            aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                        continue
                    own_folder_module = base == folder_package and f"{base}.{alias.name}" in modules
                    same_folder_namesake = (base.rpartition(".")[0] == folder_package
                                            and base.rpartition(".")[2] == alias.name)
                    itself = base == source
                    if own_folder_module or same_folder_namesake or itself:
                        continue
                    bad.append(f"{where}:{node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "envaudit" and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and _private(node.attr)):
                bad.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr} ({aliases[node.value.id]})")
    return sorted(bad, key=lambda b: (b.split(":")[0], int(b.split(":")[1])))


# -- the tests --------------------------------------------------------------------------------------
def test_envaudit_has_no_import_circle():
    modules = module_files(PACKAGES)
    found = describe_circles(imports(modules), modules, ROOT)
    assert not found, ("import circles (DESIGN.md: 'No import circles'); move what the lower module "
                       "needs below both, or let the caller pass it in:\n" + "\n".join(found))


def test_no_module_imports_another_modules_private_names():
    bad = private_imports(module_files(PACKAGES))
    assert not bad, (f"{len(bad)} imports of another module's private names (STYLE.md: 'No module imports "
                     "another module's private (_name) names'); give the name a public one where it is "
                     "defined, or move it to the module that uses it:\n" + "\n".join(bad))


def test_the_graph_reads_the_packages_and_their_imports():
    modules = module_files(PACKAGES)
    assert {"envaudit.scan", "envaudit.probes.timeouts", "envaudit.envs.registry", "envaudit.reporting"} <= set(modules)
    edges = {(e.source, e.target) for e in imports(modules)}
    assert len(edges) > 200 and ("envaudit.scan", "envaudit.probe_host") in edges
    assert not [e for e in edges if e[0] == "envaudit.reporting" and e[1] != "envaudit.reporting.load"]


def test_circles_of_a_hand_made_graph():
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert circles({"a": {"a"}}) == []  # importing itself is no circle
    g = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert circles(g) == [["a", "b", "c"], ["d", "e"]]
    assert a_cycle(g, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    assert a_cycle(g, ["d", "e"]) == ["d", "e", "d"]
    long = {str(i): {str(i + 1)} for i in range(5000)} | {"5000": {"0"}}  # no recursion limit
    assert [len(c) for c in circles(long)] == [5001]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_planted_circle_and_private_import_are_found(tmp_path):
    """A small tree in the layout's shape: a circle through a function-level relative import and
    one through a lazy re-export are found; a lazy table alone, a TYPE_CHECKING import and a private
    module of the importer's own folder are not faults."""
    _write(tmp_path / "envaudit", {
        "__init__.py": "",
        "low.py": "def f():\n    from .high import g\n    return g\n",
        "high.py": "from envaudit.low import f\nfrom envaudit import _helpers\n",
        "_helpers.py": "def _secret():\n    pass\n",
        "user.py": "from envaudit._helpers import _secret\nfrom envaudit import low as low_mod\nlow_mod._x\n",
        "pkg/__init__.py": ("import importlib\n_LAZY = {'thing': 'impl'}\n"
                            "def __getattr__(name):\n    return importlib.import_module('envaudit.pkg.impl')\n"),
        "pkg/impl.py": "import envaudit.pkg\nfrom envaudit.probes import p\nthing = 1\n",
        "pkg/base.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from envaudit.top import T\n",
        "top.py": "from envaudit.pkg.base import *\n",
        "ring/__init__.py": "",
        "ring/a.py": "from envaudit.pkg import thing\n",
    })
    _write(tmp_path / "probes", {"__init__.py": "", "p.py": "from envaudit.ring import a\n"})
    modules = module_files({"envaudit": tmp_path / "envaudit", "envaudit.probes": tmp_path / "probes"})
    edges = imports(modules)
    found = circles(graph(edges))
    assert found == [["envaudit.high", "envaudit.low"],
                     ["envaudit.pkg.impl", "envaudit.probes.p", "envaudit.ring.a"]]
    text = describe_circles(edges, modules, tmp_path)
    assert text[0].startswith("circle 1 (2 files): envaudit/high.py -> envaudit/low.py -> envaudit/high.py")
    assert "    envaudit/low.py:2 -> envaudit/high.py: g" in text[0]
    assert private_imports(modules, root=tmp_path) == [
        "envaudit/user.py:1: from envaudit._helpers import _secret",
        "envaudit/user.py:3: low_mod._x (envaudit.low)",
    ]


def test_every_package_folder_is_listed_in_pyproject():
    """``pyproject.toml`` lists its packages by name: a folder left out installs in editable mode
    (its parent's folder is on the path) but is missing from a wheel."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {name for name, path in module_files(PACKAGES).items() if path.name == "__init__.py"}
    assert folders - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - folders == set(), "these listed packages have no folder with an __init__.py"
