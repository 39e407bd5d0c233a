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
from panels.units import FamilyUnit
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
        return [
            FamilyUnit(f) for f in load_families(self.spec.data.families or FAMILIES_DIR).values()
        ]

    def check_requirements(self, arm: Arm) -> None:
        """Refuse an arm whose inputs the campaign's data lacks, before anything is sent."""
        if not self.requirements_met(arm):
            raise SpecError(
                self.spec.path,
                "data.headlines",
                f"arm {arm.name!r} needs headlines (a CSV or Parquet with date, asset, headline); "
                "the embedded default data has none",
            )

    def requirements_met(self, arm: Arm) -> bool:
        return "headlines" not in arm.requires or self.spec.data.headlines is not None

    def for_arm(self, arm: Arm, *, check: bool = True) -> Sequence[Any]:
        if check:
            self.check_requirements(arm)
        kind = arm.unit_kind
        if kind == "stock-day":
            return self.stock_days
        if kind == "date-pair":
            return self.date_pairs
        if kind == "family":
            return self.families
        raise ValueError(f"arm {arm.name!r} has an unknown unit kind {kind!r}")
