"""The units a campaign asks about: stock-days, same-date pairs of stocks, question families.

Sampling happens once per campaign (seeded) and is shared by every arm, so arms are compared on
the same stock-days, as in the paper.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from panels import data as panel_data
from panels.arms import Arm
from panels.families import FAMILIES_DIR, load_families
from runs.spec import CampaignSpec, SpecError


@dataclass
class UnitSource:
    spec: CampaignSpec
    _cache: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec: CampaignSpec) -> UnitSource:
        return cls(spec)

    @cached_property
    def returns(self) -> Any:
        return panel_data.load_returns(self.spec.data.returns)

    @cached_property
    def headlines(self) -> Any:
        if self.spec.data.headlines is None:
            return None
        return panel_data.load_headlines(self.spec.data.headlines)

    @cached_property
    def stock_days(self) -> Sequence[Any]:
        return panel_data.sample_stock_days(
            self.returns, self.spec.data.stock_days, self.spec.seed, headlines=self.headlines
        )

    @cached_property
    def date_pairs(self) -> Sequence[Any]:
        return panel_data.sample_date_pairs(self.stock_days)

    @cached_property
    def families(self) -> Sequence[Any]:
        return load_families(self.spec.data.families or FAMILIES_DIR)

    def check_requirements(self, arm: Arm) -> None:
        """Refuse an arm whose inputs the campaign's data lacks, before anything is sent."""
        needs = set(getattr(arm, "requires", ()) or ())
        if "headlines" in needs and self.spec.data.headlines is None:
            raise SpecError(
                self.spec.path, "data.headlines",
                f"arm {arm.name!r} needs headlines (a CSV or Parquet with date, asset, headline); "
                "the embedded default data has none",
            )

    def for_arm(self, arm: Arm) -> Sequence[Any]:
        self.check_requirements(arm)
        kind = arm.unit_kind
        if kind == "stock-day":
            return self.stock_days
        if kind == "date-pair":
            return self.date_pairs
        if kind == "family":
            return self.families
        raise ValueError(f"arm {arm.name!r} has an unknown unit kind {kind!r}")

    def lookup(self, arm: Arm, unit_id: str) -> Any:
        key = f"{arm.unit_kind}:{unit_id}"
        if not self._cache:
            for kind, units in (
                ("stock-day", self.stock_days if self._needs("stock-day") else ()),
                ("date-pair", self.date_pairs if self._needs("date-pair") else ()),
                ("family", self.families if self._needs("family") else ()),
            ):
                for u in units:
                    self._cache[f"{kind}:{u.id}"] = u
        return self._cache[key]

    def _needs(self, kind: str) -> bool:
        from panels.arms import ARMS

        return any(ARMS[a.name].unit_kind == kind for a in self.spec.arms)
