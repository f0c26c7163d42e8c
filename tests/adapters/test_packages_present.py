"""No adapter test module may skip silently in CI: the package it exercises must be there.

Every ``tests/adapters/test_*.py`` that needs an ecosystem package skips without it
(``pytest.importorskip``), so that a user's partial install still runs the rest. In CI a skip would
hide an adapter that is no longer tested, so each such module runs in one of the two venvs, and
there its package must be installed:

- in the dev venv (``.venv``, ``pip install -e '.[dev]'``), whose ``[dev]`` extra lists the
  package: this module fails here, instead of the adapter's tests skipping, when it is missing;
- in the second venv (``.venv-alt``: OpenEnv and GEM, whose pins cannot share the dev venv), where
  ``.ci/run`` runs the modules it lists and fails on any skip.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DISTRIBUTION = {"reasoning_gym": "reasoning-gym", "textarena": "textarena", "skyrl_gym": "skyrl-gym",
                "verifiers": "verifiers", "openenv": "openenv", "gem": "gem-llm"}
"""Import name -> the distribution the extras list."""


def module_skips() -> dict[str, str]:
    """Test module -> the package its module-level ``pytest.importorskip`` needs."""
    out = {}
    for path in sorted(HERE.glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            value = node.value if isinstance(node, (ast.Expr, ast.Assign)) else None
            if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "importorskip" and value.args and isinstance(value.args[0], ast.Constant)):
                out[f"tests/adapters/{path.name}"] = str(value.args[0].value)
                break
    return out


def alt_tests() -> set[str]:
    """The modules ``.ci/run`` runs in the second venv (where a skip fails CI)."""
    text = (ROOT / ".ci" / "run").read_text()
    listed = re.search(r"alt_tests=\(([^)]*)\)", text)
    assert listed, ".ci/run no longer lists its alt_tests=(...)"
    assert re.search(r'skipped.*!= "0"', text), ".ci/run no longer fails when an alt test skips"
    return {str(p.relative_to(ROOT)) for entry in listed.group(1).split() for p in ROOT.glob(entry)}


def extra(name: str) -> set[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][name]
    return {re.split(r"[<>=!\[; ]", d, maxsplit=1)[0] for d in deps}


def test_every_adapter_module_that_can_skip_runs_where_its_package_is_installed():
    skips = module_skips()
    assert {"tests/adapters/test_textarena.py", "tests/adapters/test_gem.py"} <= set(skips)  # the scan finds them
    alt, dev = alt_tests(), extra("dev")
    alt_extras = extra("openenv") | extra("gem")
    for module, package in skips.items():
        top = package.split(".")[0]
        dist = DISTRIBUTION.get(top)
        assert dist is not None, f"{module} skips without {package!r}: add it to DISTRIBUTION and to a CI venv"
        if module in alt:
            assert dist in alt_extras, f"{module} runs in .venv-alt, whose extras lack {dist}"
        else:
            assert dist in dev, (f"{module} skips without {package!r}, which the [dev] extra does not install: "
                                 "add it there, or run the module in .venv-alt (.ci/run's alt_tests)")


def test_the_dev_venvs_adapter_packages_are_installed_here():
    if importlib.util.find_spec("gem") is not None:  # the second venv: .ci/run checks its skips itself
        return
    skips = module_skips()
    missing = {module: package for module, package in skips.items()
               if module not in alt_tests() and importlib.util.find_spec(package.split(".")[0]) is None}
    assert not missing, (f"these adapter tests would skip: {missing}; install the dev extra "
                         "(pip install -e '.[dev]')")
    assert importlib.util.find_spec("verifiers.v1") is not None  # test_verifiers.py needs the v1 API
