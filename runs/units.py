"""The units a campaign asks about: stock-days, same-date pairs of stocks, question families.

Sampling happens once per campaign (seeded) and is shared by every arm, so arms are compared on
the same stock-days, as in the paper.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from engine.console_lines import plural
from panels import data as panel_data
from panels.arms import ARMS, Arm
from panels.families import (
    FAMILIES_DIR,
    Family,
    FamilyError,
    hidden_entries,
    load_families,
    names_shown,
)
from panels.units import FamilyUnit
from runs.spec import CampaignSpec, SpecError

#: Largest Dutch-book profit (L1 norm) a control's exact answers may admit: the LP's own
#: tolerance, far below what a typo or a rounded 1/6 (0.1667 gives 3e-5) leaves.
CONTROL_TOLERANCE = 1e-6


def check_control_coherent(family: Family) -> None:
    """A control family's `exact` answers must themselves be coherent.

    Controls are the benchmark's yardstick: a model that states the exact answers should
    score zero. Checked with the scoring LP (panels cannot import scoring, so the check is
    here, where a campaign's families are loaded before anything is sent).
    """
    import numpy as np

    import scoring

    exact = family.exact
    if not exact:
        return
    from scoring.dutch_book import UncertifiedError

    probs = np.array([exact.get(i, np.nan) for i in family.ids], dtype=np.float64)
    try:
        profit = float(scoring.dutch_books(family.panel().incidence, probs, norm="l1").profit[0])
    except UncertifiedError as error:  # a traceback, where it ran (a run, `plan`, `score`)
        said = error.says(f"the exact answers of control family {family.id!r}")
        raise FamilyError(
            str(family.path or family.id),
            f"{said}, and a control not known coherent is refused (please report it with this "
            "file)",
        ) from error
    if profit > CONTROL_TOLERANCE:
        raise FamilyError(
            str(family.path or family.id),
            f"control family {family.id!r} is incoherent: its exact answers admit a Dutch book "
            f"with profit {profit:.6g} (L1); a control must be coherent (check the values, "
            "and write fractions such as 1/6 to full precision)",
        )


@dataclass
class UnitSource:
    spec: CampaignSpec
    #: Hidden family files read all the same: those the run folder's design records
    #: (`runs.design.hidden_families`).
    keep: frozenset[str] = frozenset()

    @classmethod
    def from_spec(cls, spec: CampaignSpec, keep: frozenset[str] = frozenset()) -> UnitSource:
        """The units of `spec`; for a run folder, `keep` the hidden family files an earlier
        build read there (`runs.design.hidden_families`), so it resumes and scores as it was
        planned."""
        return cls(spec, keep)

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
        """The seeded sample; a sample the data cannot give names what to change: the
        spec's `data.stock_days` when too many are asked for, its anchor dates when their
        window holds none, else the returns file (the sampler is given tables, not files,
        and its messages named neither)."""
        returns, headlines, data = self.returns, self.headlines, self.spec.data
        windowed = data.anchor_from is not None or data.anchor_to is not None
        try:
            return panel_data.sample_stock_days(
                returns, data.stock_days, self.spec.seed, headlines=headlines,
                window=(data.anchor_from, data.anchor_to), pairs=self._asks_pairs,
            )
        except panel_data.TooFewDates as exc:
            wider = " (or a wider data.anchor_from to data.anchor_to)" if windowed else ""
            raise SpecError(
                self.spec.path,
                "data.stock_days",
                f"an even number of at most {exc.most:,} with this data and seed{wider}: {exc}",
            ) from None
        except panel_data.DataError as exc:
            if windowed and isinstance(exc, panel_data.NoStockDay):  # the window to change
                first, last = returns["date"].min(), returns["date"].max()
                raise SpecError(
                    self.spec.path,
                    "data.anchor_from" if data.anchor_from is not None else "data.anchor_to",
                    f"a window of anchor dates holding stock-days of the returns, which run "
                    f"from {first} to {last}: {exc}",
                ) from None
            where = data.returns or panel_data.EMBEDDED_RETURNS
            also = ""
            if isinstance(exc, panel_data.NoStockDay) and data.headlines is not None:
                also = f" (headlines from {data.headlines})"
            raise panel_data.DataError(f"{where}: {exc}{also}") from None

    @property
    def _asks_pairs(self) -> bool:
        """Whether an arm of the design asks the two stocks of a date together (their dates
        must line up, `panels.data.sample_stock_days`'s `pairs`): the whole design's arms,
        which a resume, `score` and `report` share, so each draws the same sample."""
        return any(
            entry.name in ARMS and ARMS[entry.name].unit_kind == "date-pair"
            for entry in self.spec.arms
        )

    @cached_property
    def date_pairs(self) -> Sequence[Any]:
        return panel_data.sample_date_pairs(self.stock_days)

    @cached_property
    def families(self) -> Sequence[Any]:
        folder = self.spec.data.families or FAMILIES_DIR
        families = load_families(folder, self.keep)
        if not families:
            raise SpecError(
                self.spec.path,
                "data.families",
                f"a folder holding at least one family file (*.toml); {folder} has none"
                + _hidden_said(folder),
            )
        for family in families.values():
            if family.control:
                check_control_coherent(family)
        return [FamilyUnit(f) for f in families.values()]

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


def _hidden_said(folder: Path) -> str:
    """What "has none" adds for a folder holding hidden entries, which are no families
    (`panels.families.family_files`): a folder holding only `.h.toml` was said to have none,
    with no word of it, and its writer looked for a typo in the path."""
    hidden = hidden_entries(folder)
    if not hidden:
        return ""
    return (
        f"; {plural(len(hidden), 'hidden entry', 'hidden entries')} passed over (a name "
        f"starting with \".\" is not read as a family): {names_shown(hidden)}"
    )
