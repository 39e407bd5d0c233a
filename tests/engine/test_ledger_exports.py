"""`engine.ledger` keeps the readers' names importable from it (docs/interfaces.md, engine:
"`engine.ledger` re-exports the names above, so both import paths work")."""

from __future__ import annotations

import engine.ledger
import engine.scan


def test_scan_ledger_is_importable_from_engine_ledger() -> None:
    from engine.ledger import scan_ledger

    assert scan_ledger is engine.scan.scan_ledger
    assert "scan_ledger" in engine.ledger.__all__
