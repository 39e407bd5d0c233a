"""Engine and provider functions stay short enough to read in one screen (issue 8).

A function longer than `LIMIT` lines (signature, docstring and body) must say why in its
docstring, in a sentence starting "(Long" or "Long", such as "(Long only by its keyword
options.)". The rest are split by job instead.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "providers")
LIMIT = 65  # "about 60"
_REASON = re.compile(r"(?:^|[\s(])Long\b")


def too_long(source: str, limit: int = LIMIT) -> list[tuple[str, int]]:
    """(name, lines) of each function in `source` over `limit` lines without a stated reason."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit and not _REASON.search(ast.get_docstring(node) or ""):
                found.append((node.name, lines))
    return found


def test_no_long_function_without_a_reason() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {name} ({lines} lines)"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for name, lines in too_long(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_length_check_can_fail() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(8))
    source = (
        f"def short():\n{body}"
        f'def long():\n    """Does much."""\n{body}'
        f'async def excused():\n    """Does much. (Long only by its cases.)"""\n{body}'
    )
    assert too_long(source, limit=9) == [("long", 10)]
