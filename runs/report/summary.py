"""`report/summary.json` has a stable shape users can script against (schema
"dutchbook.report/1"; every NaN or missing number is null; an *interval* is
`{"mean", "lo", "hi"}`, a 95% date-clustered percentile bootstrap):

- `schema`, `coverage_floor`, `bootstrap_replicates`, `seed` (the spec's; its decimal digits
  in a string past 64 bits, `json_seed`), `level` (0.95),
  `baseline_arm`, `thresholds` ([0.001, 0.005, 0.01]), `arbitrage_free_cents` (0.05).
- `rows`: one object per (model, arm): `model`, `arm`, `norm` ("inf" paper arms, "l1"
  family arms), `status` ("scored" | "below_coverage_floor" | "no_answers"), `scored`,
  `coverage` (share of the arm's planned queries answered; for a family arm, of its
  families in each pass with every statement answered), `units` (scored (unit, set)
  values, each averaged over passes; both orders of a two-asset date pair are one unit of
  its "full" and "marginals" rows, as the paper averages them), `clusters` (distinct dates
  or families), `profit` (interval), `brier` (interval or null), `at_least`
  (`{"0.001": {"units", "share"}, ...}`: units whose profit is at least the threshold, the
  paper's 4.1 counts), `arbitrage_free` (family arms: interval over families of the share
  with profit <= 0.05 + `runs.report.data.THRESHOLD_SLACK`, the certificate's 1e-9, else
  null; `at_least` counts profits >= the threshold less that slack),
  `vs_baseline` (`{"mean", "lo", "hi", "excludes_zero", "units"}`, `lo`, `hi` and
  `excludes_zero` null where no interval is drawn, fewer than two dates: paired difference with
  the baseline arm on the same stock-days, set `h1` (one asset's marginals in the two-asset
  arm, "two-asset A" or "B", on that asset's day); null for the baseline, family arms,
  rows of several panels ("horizon/2 full", "... marginals"), a baseline not scored, or
  without common units), `vs_marginals` (the same shape: a joint-events row, "... full",
  against its own arm's marginals on the same units, the paper's within-horizon comparison;
  null elsewhere or when the marginals are not scored; added in a later version of schema
  1), `below_floor_in` (`{"arm", "coverage"}`: a family arm's row left unscored because the
  model is under the floor on another family arm, that arm and its coverage; null elsewhere;
  added in a later version of schema 1, also on each `families` entry). Unscored rows carry
  null statistics: never a number.
- `models`: `{model: {"coverage": share of all its planned queries answered, "provider",
  "simulated"}}` (additive: `provider` as the run's spec names it, null where the spec does
  not name the model; `simulated` true where the local simulator answered it, its provider
  `sim` or the run a rehearsal, or any of its replies naming the simulator as the model
  answering, `runs.report.models.simulated_models`; additive: `simulator_replies`,
  `{"simulator", "replies"}`: of its replies naming a model (`attempts.model_reported`), how
  many named the simulator, fewer than all where it answered in part; null where none did).
- `across_models`: on the baseline arm, scored models only: `arm`, `models` (names),
  `units` (units common to all of them, used for the pairwise counts),
  `spearman_profit_brier` (on the models' mean profit and mean Brier), `pairs`,
  `profit_pairs_excluding_zero`, `brier_pairs_excluding_zero` (null when undefined: fewer
  than two models, or fewer than two common dates, where no interval is drawn);
  additive: `spearman_not_computed` (present where `spearman_profit_brier` is null: why, in
  words, such as "needs at least 3 models; 2 here", `runs.report.data.MIN_SPEARMAN_MODELS`:
  the rank correlation of two models is +1 or -1 whatever they are; "no model was scored on
  the baseline arm" where `models` is empty, the arm not run or every model under the
  coverage floor); additive:
  `pairs_not_counted` (present when `pairs` is over
  `runs.report.data.MAX_PAIRS`, 20,000: why the two counts, and `units`, are null).
- `repeated_elicitation`: null when not computed (see `runs.report.repeated`); else a list,
  one object per scored (model, arm) with at least two passes: `model`, `arm`, `passes`,
  `units`, `single_pass_mean` (mean over units of the mean single-pass profit, the row's
  `profit.mean`), `by_k` (`[{"k", "mean", "lo", "hi"}]`, k = 1..passes: profit after
  averaging each event's answers over the first k passes). By convexity the k = passes value
  is never above `single_pass_mean` when every pass answered the same events (with answers
  missing, the averaged sets hold events a single pass lacked, and it can be). By arm, then
  by model name (`runs.report.data.arm_model_rank`; before, in the scores' own order).
- `families`: one object per (model, family arm): `model`, `arm`, `families`, `coverage`,
  `status`, `scored`, `arbitrage_free` (interval or null), `future` and `controls`
  (additive: `{"families", "arbitrage_free"}` of the families about the future and of the
  controls, whose exact answers are known, apart; null when not scored or a family's kind
  is unknown), `rule` (the coverage rule), `below_floor_in` (as on `rows`);
  in the benchmark's ranking (`runs.report.data.family_rank`): by arm, scored first, by the
  arbitrage-free rate, highest first (before, by model name within each arm).
- `linked_vs_dispersed` (added in a later version of schema 1): the paper's Appendix D
  comparison, one object per (model, kind of set) where both the linked and the dispersed
  row are scored and share units, by model name then kind: `model`, `kind` ("assets": the
  "linked (assets)" and "dispersed (assets)" rows; "days" likewise), and the paired
  difference linked - dispersed of per-unit profit on the units both scored, shaped as
  `vs_baseline` (`{"mean", "lo", "hi", "excludes_zero", "units"}`, a date-clustered
  interval); empty where none is (`runs.report.data.linked_vs_dispersed`; figure 5 draws it).
- `figures`: `{"profit_brier": path or null, "arms": path or null, "note": str or null}`
  and one key per figure of `runs.report_figures.FIGURES` (`books`, `leaderboard`, ...,
  `audit`: path or null; `report/figures.json` says why a figure was left out); paths
  relative to the run folder; a note says why no figure at all was drawn; `missing_glyphs`:
  the characters of the figures' text that no installed font has ("" for none).
- `audit_sentence`: the paper's retry sentence (`runs.audit`; the full audit is
  `report/audit.json`, the object `dutchbook audit --json` prints without its `live` and
  `warnings`).
- `provenance` (`runs.report.provenance`; added in a later version of schema 1, so a reader
  of older files finds none): `campaign`, `parser` and `parser_from` (the parser that made
  the answers now in the folder, "strict" or "lenient", and "spec" or the last `dutchbook
  reparse`, recorded in `logs/reparses.jsonl` from this version on; `parser` "mixed" where a
  run after a reparse asked with the spec's other parser, `parser_from` saying which;
  "unknown" where the last reparse was stopped before it said it had replaced the answers),
  `spec_sha256` (of the folder's `spec.toml`), `planned_with` and `reported_with` (dutchbook
  versions), `inputs` (`{name: sha256}` of every input file the plan was built from, as
  `design.json` records them),
  `first_attempt_at` and `last_attempt_at` (the first and the last attempt's start, UTC, to
  the second, written "YYYY-MM-DD HH:MM:SS": a space, not a `T`, and no zone, unlike the
  ISO times with `+00:00` elsewhere, `status --json`'s `last_attempt_at` among them; kept so,
  since scripts read it), `runs` (`dutchbook run`
  processes that got past planning: the first run and its resumes), (additive)
  `runs_with_attempts` (those of them that sent at least one attempt: a run of a finished
  folder sends none; the provenance sentence says "in 1 of 3 runs (the first and 2 resumes;
  the other 2 sent none)" where they differ), and (additive)
  `rehearsal` (true where every answer is the local simulator's: `--rehearse`,
  `runs.rehearsal`) and `scores_sha256` (`{file name: sha256}` of `scores.parquet` and,
  where there is one, `averaged.parquet`, as the report read them: `dutchbook status` says
  when they have changed since). Null where not known.
"""

from __future__ import annotations

from typing import Any

from runs.report.data import (
    ARBITRAGE_FREE_CENTS,
    BASELINE_ARM,
    LEVEL,
    SCHEMA,
    THRESHOLDS,
    ReportData,
    clean_json,
)


def json_seed(seed: int) -> int | str:
    """The campaign's seed as `summary.json` holds it: a number, or its decimal digits in a
    string past 64 bits (a spec takes any seed, numpy's 128-bit entropy among them, which
    orjson cannot write: such a folder's report ended in a traceback every time)."""
    return seed if seed < 2**64 else str(seed)


def _replies(data: ReportData, model: str) -> dict[str, int] | None:
    """A model's `simulator_replies` entry: null where no reply named the simulator."""
    replies = data.simulator_replies.get(model)
    return None if replies is None else {"simulator": replies.simulator, "replies": replies.replies}


def build_summary(data: ReportData, figures: dict[str, Any] | None = None) -> dict[str, Any]:
    """`summary.json`'s object (NaN as None); `figures` as `write_figures` returned it."""
    summary: dict[str, Any] = clean_json(
        {
            "schema": SCHEMA,
            "coverage_floor": data.floor,
            "bootstrap_replicates": data.reps,
            "seed": json_seed(data.seed),
            "level": LEVEL,
            "baseline_arm": BASELINE_ARM,
            "thresholds": list(THRESHOLDS),
            "arbitrage_free_cents": ARBITRAGE_FREE_CENTS,
            "rows": [r.to_json() for r in data.rows],
            "models": {
                m: {
                    "coverage": c,
                    "provider": data.providers.get(m),
                    "simulated": m in data.simulated,
                    "simulator_replies": _replies(data, m),
                }
                for m, c in sorted(data.model_coverage.items())
            },
            "across_models": data.across_models,
            "repeated_elicitation": data.repeated,
            "families": data.families,
            "linked_vs_dispersed": data.linked_vs_dispersed,
            "figures": figures or {"profit_brier": None, "arms": None, "note": None},
        }
    )
    return summary
