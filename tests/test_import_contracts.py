"""The one-way data flow of design.md, checked two independent ways.

1. An AST walk over our own sources (no tool in between that could be misconfigured).
2. import-linter with the contracts in pyproject.toml, run on the real tree and on a
   deliberately broken copy, so we know the contracts can fail.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("panels", "providers", "engine", "scoring", "runs")
ALLOWED: dict[str, set[str]] = {
    "panels": set(),
    "providers": set(),
    "scoring": set(),
    "engine": {"providers"},
    "runs": {"panels", "providers", "engine", "scoring"},
}


def project_imports(path: Path) -> set[str]:
    """Top-level project packages a module imports (absolute imports; relative ones stay inside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update(n.split(".")[0] for n in names if n.split(".")[0] in PACKAGES)
    return found


def violations(root: Path) -> list[str]:
    bad: list[str] = []
    for package, allowed in ALLOWED.items():
        for path in sorted((root / package).rglob("*.py")):
            for imported in project_imports(path) - allowed - {package}:
                bad.append(f"{path.relative_to(root)} imports {imported}")
    return bad


def test_every_package_respects_the_data_flow() -> None:
    assert violations(ROOT) == []


def test_the_ast_check_catches_a_violation(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "scoring" / "bad.py").write_text("from runs import cli\nimport engine.x\n")
    (tmp_path / "engine" / "bad.py").write_text("import runs\n")
    assert sorted(violations(tmp_path)) == [
        "engine/bad.py imports runs",
        "scoring/bad.py imports engine",
        "scoring/bad.py imports runs",
    ]


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.skip("lint-imports is not installed in this environment")
    return subprocess.run(
        [str(exe), "--config", str(root / "pyproject.toml")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=240,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


def test_import_linter_contracts_hold() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_linter_contracts_can_fail(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "providers" / "leak.py").write_text("import engine\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "providers" in result.stdout


def module_graph(root: Path) -> dict[str, set[str]]:
    """Project module -> project modules it imports (TYPE_CHECKING imports included)."""
    modules = {
        ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): path
        for package in PACKAGES
        for path in (root / package).rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    child = f"{node.module}.{alias.name}"
                    edges.add(child if child in modules else node.module)
        graph[name] = {m for m in edges if m in modules and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others() -> None:
    """The tree reads top-down: no import cycle between modules, even for type checking."""
    assert cycles(module_graph(ROOT)) == []


def test_the_cycle_check_catches_a_cycle(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "providers" / "a.py").write_text("from providers.b import x\n")
    (tmp_path / "providers" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from providers import a\n"
    )
    (tmp_path / "providers" / "c.py").write_text("import providers.a\n")
    assert cycles(module_graph(tmp_path)) == [["providers.a", "providers.b"]]


def test_every_package_imports_first_in_a_fresh_interpreter() -> None:
    """A package imported before any other of ours: the module graph above does not see the
    import of a parent package's `__init__`, and `runs.report_figures` imported first (as a
    figure worker's warm-up does) once failed halfway through a cycle through `runs.report`,
    which the warm-up swallowed, losing its head start."""
    packages = sorted(
        ".".join(path.parent.relative_to(ROOT).parts)
        for package in PACKAGES
        for path in (ROOT / package).rglob("__init__.py")
    )
    children = {
        name: subprocess.Popen(
            [sys.executable, "-c", f"import {name}"], cwd=ROOT, stderr=subprocess.PIPE, text=True
        )
        for name in packages
    }
    failed = {name: child.communicate()[1][-300:] for name, child in children.items()
              if child.wait() != 0}  # fmt: skip
    assert "runs.report_figures" in packages and failed == {}
