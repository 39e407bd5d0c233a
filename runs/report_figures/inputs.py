"""What the figures are drawn from: the report's summary plus lazy views of the run folder.

Most figures read `summary.json`'s shape only. Two need rows the summary does not keep (the
Dutch books themselves, families by shape), and figure 5 the linked and dispersed scores of a
summary written before its `linked_vs_dispersed`, read lazily and filtered before collecting,
so a paper-scale campaign never loads its whole scores table for a picture; the audit figure
reads the audit's own timeline (`engine.audit.attempt_timeline`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from engine.console_lines import plural
from runs.planned_families import FamilyInfo, family_info

BASELINE_ARM = "baseline"
#: What `FigureInputs.from_run` can read beyond the scores and forecasts: the families'
#: shapes (figure 6) and the audit's timeline of attempts (figure 8).
FAMILIES, TIMELINE = "families", "timeline"
READS: frozenset[str] = frozenset({FAMILIES, TIMELINE})
FAMILY_ARM_PREFIX = "families/"
ARBITRAGE_FREE_CENTS = 0.05


@dataclass(frozen=True)
class FigureInputs:
    """The report summary (schema `dutchbook.report/1`) and, optionally, the run's tables.

    Any table may be None (a summary alone still draws figures 2, 3, 4 and 7); a figure whose
    table is missing is left out with its reason.
    """

    summary: Mapping[str, Any]
    scores: pl.LazyFrame | None = None
    forecasts: pl.LazyFrame | None = None
    #: `engine.audit.attempt_timeline`'s frame: attempts per time bin, model and outcome.
    timeline: pl.DataFrame | None = None
    families: Mapping[str, FamilyInfo] = field(default_factory=dict)

    @classmethod
    def from_run(
        cls,
        run_dir: Path,
        summary: Mapping[str, Any],
        families: Mapping[str, FamilyInfo] | None = None,
        reads: Collection[str] = READS,
    ) -> FigureInputs:
        """Lazy scans of a run folder's `scores.parquet`, `forecasts.parquet` and attempts.

        `reads` (of `READS`) limits what is read beyond the two scans to what the figures to
        be drawn use (`runs.report_figures.reads_of`): a figure worker drawing figure 1 alone
        would otherwise spend a quarter of a second on families and the audit's timeline."""
        scores = run_dir / "scores.parquet"
        forecasts = run_dir / "forecasts.parquet"
        if families is None:
            families = family_info(run_dir) if FAMILIES in reads else {}
        return cls(
            summary=summary,
            scores=pl.scan_parquet(scores) if scores.exists() else None,
            forecasts=pl.scan_parquet(forecasts) if forecasts.exists() else None,
            timeline=_timeline(run_dir) if TIMELINE in reads else None,
            families=families,
        )

    @property
    def rows(self) -> list[Mapping[str, Any]]:
        """The summary's (model, arm) rows that were scored, with a profit interval."""
        return [r for r in self.summary.get("rows", []) if r.get("scored") and r.get("profit")]

    @property
    def models(self) -> tuple[str, ...]:
        """Every model the report names, sorted: the summary's models, its rows' and its
        repeated cells'. The figures' one list of models (`_style.model_styles`), so a model
        has one colour in all of them; figures drawn before the repeated section was computed
        see the same list (its cells are rows')."""
        summary = self.summary
        named = {str(m) for m in summary.get("models") or {}}
        for key in ("rows", "repeated_elicitation"):
            named.update(str(r["model"]) for r in summary.get(key) or [] if "model" in r)
        return tuple(sorted(named))

    @property
    def simulated(self) -> tuple[str, ...]:
        """The models the local simulator answered, as the summary's `models` says (each
        figure carries a line naming them: `_style.footer`)."""
        models = self.summary.get("models") or {}
        said = (str(m) for m, v in models.items() if isinstance(v, Mapping) and v.get("simulated"))
        return tuple(sorted(said))

    @property
    def simulated_in_part(self) -> dict[str, tuple[int, int]]:
        """Those of `simulated` the simulator answered in part, with their counts."""
        from runs.report.models import in_part_of  # `runs.report` imports this package

        return in_part_of(self.summary.get("models") or {})

    def scored_scores(self) -> pl.LazyFrame | None:
        """The scores of (model, arm) cells the report scored: a model under the coverage
        floor is not scored, so no figure may show its partial answers as incoherence."""
        if self.scores is None:
            return None
        pairs = pl.DataFrame(
            sorted({(str(r["model"]), str(r["arm"]).split(" ", 1)[0]) for r in self.rows}),
            schema={"model": pl.String, "arm": pl.String},
            orient="row",
        )
        return self.scores.join(pairs.lazy(), on=["model", "arm"], how="semi")

    def not_scored(self, arm: Callable[[str], bool], where: str = "on them") -> str | None:
        """Why no model is scored on the arms `arm` picks (of the summary's row labels) when
        some of them ran: None when none ran or some model is scored there. The summary keeps
        a row of every (model, arm), scored or not; a figure that looked at scored rows alone
        said family arms that had run, every model under the coverage floor, were "not run"."""
        ran = [r for r in self.summary.get("rows") or [] if arm(str(r.get("arm", "")))]
        if not ran or any(r.get("scored") for r in ran):
            return None
        # Here, not at the top: `runs.report` imports this package (its writer draws the
        # figures), and a worker's warm-up imports this package first (`runs.figure_workers`).
        from runs.report.data import STATUS_NO_ANSWERS
        from runs.report.wording import floor_text

        answered = {str(r["model"]) for r in ran if r.get("status") != STATUS_NO_ANSWERS}
        silent = {str(r["model"]) for r in ran} - answered
        floor = self.summary.get("coverage_floor")
        under = f"under the {floor_text(float(floor)) + ' ' if floor else ''}coverage floor"
        said = [f"{plural(len(answered), 'model')} {under}"] if answered else []
        said += [f"{plural(len(silent), 'model')} with no answers there"] if silent else []
        return f"no model was scored {where} ({', '.join(said)})"

    @property
    def baseline_arm(self) -> str:
        return str(self.summary.get("baseline_arm") or BASELINE_ARM)

    @property
    def reps(self) -> int:
        return int(self.summary.get("bootstrap_replicates") or 20_000)

    @property
    def seed(self) -> int:
        return int(self.summary.get("seed") or 0)

    @property
    def arbitrage_free_cents(self) -> float:
        return float(self.summary.get("arbitrage_free_cents") or ARBITRAGE_FREE_CENTS)


#: Time bins of the audit figure across the campaign's span.
TIMELINE_BINS = 40


def _timeline(run_dir: Path) -> pl.DataFrame | None:
    """Attempts over time by outcome, counted as the audit counts them (one definition of a
    retry: `engine.audit`)."""
    if not (run_dir / "attempts").is_dir() and not (run_dir / "journal").is_dir():
        return None
    from engine.audit import attempt_timeline

    return attempt_timeline(run_dir, bins=TIMELINE_BINS)
