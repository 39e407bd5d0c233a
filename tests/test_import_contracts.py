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
