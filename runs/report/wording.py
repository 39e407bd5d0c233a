"""How the report names what it measured, from the rows of the arms that were run.

The paper's arms score profit per unit stake (sup norm) and resample dates; the family
benchmark's arms score in its L1 metric and resample whole families (a family unit's
cluster is the family itself). A report that names one when only the other was run
misleads its reader, so the page and the terminal say it from the rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: One report row's arm and norm ("inf" or "l1"): `arm_norms` makes them from the summary's rows.
ArmNorm = tuple[str, str | None]


def arm_norms(rows: Iterable[Mapping[str, Any]]) -> list[ArmNorm]:
    """The (arm, norm) of each of the summary's rows."""
    return [(str(r.get("arm", "")), r.get("norm")) for r in rows]


def metric_words(rows: Iterable[ArmNorm]) -> str:
    """'arbitrage profit per unit stake', 'L1 arbitrage profit', or both named."""
    norms = {norm for _, norm in rows}
    if norms and norms <= {"l1"}:
        return "L1 arbitrage profit"
    if "l1" in norms:
        return "arbitrage profit per unit stake, question families' in L1"
    return "arbitrage profit per unit stake"


def cluster_words(rows: Iterable[ArmNorm]) -> str:
    """What the bootstrap resampled: 'clustered by date', 'by family', or both named."""
    families = {arm.startswith("families/") for arm, _ in rows}
    if families == {True}:
        return "clustered by family"
    if True in families:
        return "clustered by date, question families' by family"
    return "clustered by date"
