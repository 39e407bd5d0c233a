"""A running spend cap: stop starting attempts before reported usage could pass a budget.

An estimate checked once before a run cannot protect a user from a model that answers at
length, retries that pile up, or a resume on top of earlier spending. So spend is counted as
it happens, from the tokens every attempt reports (accepted or not: a rejected answer is paid
for too), priced per model, and added to what the ledger already holds for this run folder.

Before an attempt starts, a worst-case cost for it (its prompt, generously tokenised, plus its
full output cap) is reserved. An attempt whose worst case would take the spend past the budget
is not started and the cap is marked reached: every lane then stops starting attempts, as on a
stop request. While the budget is only tied up in reservations of attempts in flight, a new
attempt waits for them to settle instead, so the budget is used up rather than abandoned
early. Spend therefore stays at or under the budget unless a provider reports more tokens than
the worst case, and never passes it by more than the attempts in flight.

Models without prices are not counted (their usage costs nothing we know of).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path

import polars as pl

from engine.records import FOREIGN_NOTE
from engine.retry import GAVE_UP_MARK
from providers.types import ModelConfig, Outcome

#: Output tokens assumed for a model without `max_tokens` (providers' defaults run this high).
DEFAULT_OUTPUT_CAP = 8192
#: Characters per token in the worst case: far denser than English's ~4 (digits, JSON).
WORST_CHARS_PER_TOKEN = 2
#: Tokens a chat request's framing adds to its prompt, in the worst case.
FRAMING_TOKENS = 32


@dataclass(frozen=True)
class Prices:
    """US dollars per million input and output tokens."""

    in_per_mtok: float
    out_per_mtok: float

    def cost(self, tokens_in: int | None, tokens_out: int | None) -> float:
        return ((tokens_in or 0) * self.in_per_mtok + (tokens_out or 0) * self.out_per_mtok) / 1e6


def prices_of(config: ModelConfig) -> Prices | None:
    """The model's prices, or None when the spec gives neither (its spend is not counted)."""
    if config.price_in_per_mtok is None and config.price_out_per_mtok is None:
        return None
    return Prices(config.price_in_per_mtok or 0.0, config.price_out_per_mtok or 0.0)


def batch_prices_of(config: ModelConfig) -> Prices | None:
    """The model's batch API prices, or None when the spec gives none (no batch cost known).

    The spec sets both or neither (`runs.spec`), so a missing side is never taken as free.
    """
    if config.batch_price_in_per_mtok is None or config.batch_price_out_per_mtok is None:
        return None
    return Prices(config.batch_price_in_per_mtok, config.batch_price_out_per_mtok)


def worst_case_cost(
    prices: Prices, config: ModelConfig, system: str, user: str, max_tokens: int | None = None
) -> float:
    """What one attempt could cost at most: a dense prompt and every output token allowed,
    `max_tokens` where the attempt is sent with its own cap (a retry after a truncation
    doubles it: reserved at the spec's, a cap of $2.50 was passed by $0.50)."""
    return worst_case_cost_of(prices, config, len(system) + len(user), max_tokens)


def worst_case_cost_of(
    prices: Prices, config: ModelConfig, chars: int, max_tokens: int | None = None
) -> float:
    """`worst_case_cost` of a prompt known by its length alone: `chars` characters,
    system and user together, as Python's `len` counts them (`prompt_chars()` reads them
    from a plan without the texts). The same dollars, to the last bit."""
    tokens_in = chars // WORST_CHARS_PER_TOKEN + FRAMING_TOKENS
    return prices.cost(tokens_in, max_tokens or config.max_tokens or DEFAULT_OUTPUT_CAP)


def prompt_chars() -> pl.Expr:
    """Each plan row's prompt length as `worst_case_cost` counts it: the characters of its
    system and user texts (code points, as polars' `len_chars` and Python's `len` count
    them; a missing text is empty, as `engine.plan.plan_items` reads it). Priced from this,
    a resume's created batch jobs hold their worst case without their prompts in memory
    (200,000 lines of 1,500 characters are hundreds of MB as Python strings)."""
    texts = (pl.col(c).fill_null("").str.len_chars().cast(pl.Int64) for c in ("system", "user"))
    return pl.sum_horizontal(*texts)


#: What `engine.batch_lane` writes in the detail of every attempt a batch job carried: the
#: job named in the note that ends it ("... [batch job <id>]", `engine.settle.with_omitted`),
#: or first for a line the job never ran ("batch job <id> expired ...").
BATCH_MARK = "batch job "
#: `BATCH_MARK` where the batch lane puts it, at the start or in the closing note, which the
#: engine's own notes may follow (a reply not in the provider's format, a request given up:
#: four lines given up on their answer budget were priced live): a live attempt whose
#: provider's message merely mentions a batch job (its detail begins "HTTP") is not priced
#: as one.
BATCH_DETAIL = (
    rf"^{BATCH_MARK}|\[(?:[^\[\]]*; )?{BATCH_MARK}[^\s\[\];]+\]"
    rf"(?: {re.escape(FOREIGN_NOTE)})?(?: {re.escape(GAVE_UP_MARK)}[^\[\]]*\])?$"
)


def carried_by_batch() -> pl.Expr:
    """Whether each attempt (its `detail` column) was carried by a batch job."""
    return pl.col("detail").fill_null("").str.contains(BATCH_DETAIL)


#: A batch line's own output cap, where it was not the spec's, in its attempt's closing
#: note (`engine.retry.AnswerRetry.note`, "[retry with seed 8, max_tokens 600; batch job x]").
_CAP_NOTE = r"\[retry with [^\[\]]*max_tokens (\d+)"


#: The tag `engine.batch_lane` ends the failure detail with of a line an expired, failed or
#: cancelled batch job may have run, billed and lost: the job's results hold `lost` fewer
#: reply lines than the provider counted completed, and which of its lines without one ran
#: cannot be told ("[billed if it ran: batch job <id> lost 1 of its lines]",
#: `maybe_ran_tag`). The line's outcome is the job's (`timeout`, `provider_error`), so the
#: tag, not the words around it, is what the lane's spend cap, a resume's and the audit read
#: (`maybe_ran`, `unread_lines`): of a job's lines so tagged, its `lost` dearest.
MAYBE_RAN_MARK = "[billed if it ran: "
_MAYBE_RAN = rf"{re.escape(MAYBE_RAN_MARK)}{BATCH_MARK}([^\s\[\];]+) lost (\d+) of its lines\]"


#: How a version before the tag wrote such a line's detail (`BatchLane._absent`'s words, the
#: count in `JobLines.held`), and its job in the closing note ("[... batch job <id>]"): a
#: folder of that version resumed, or audited, counts those lines too (a tester's resume of
#: one under `--max-cost` ran on past what the lost lines had cost).
_MAYBE_RAN_WORDS = (
    r"\(or it ran, billed, and its line is lost: the results hold ([\d,]+) lines? fewer than "
    "it ran"
)
_JOB_NOTE = rf"\[[^\[\]]*{BATCH_MARK}([^\s\[\];]+)\]"


def maybe_ran_tag(job_id: str, lost: int) -> str:
    """The tag (`MAYBE_RAN_MARK`) of a line of `job_id`, which lost `lost` lines it ran."""
    return f"{MAYBE_RAN_MARK}{BATCH_MARK}{job_id} lost {lost} of its lines]"


def maybe_ran(detail: str) -> tuple[str, int] | None:
    """The job and how many lines it lost, of a detail `maybe_ran_tag` tagged (or an earlier
    version's words said so, `_MAYBE_RAN_WORDS`), else None."""
    if (found := re.search(_MAYBE_RAN, detail)) is not None:
        return found[1], int(found[2])
    words, job = re.search(_MAYBE_RAN_WORDS, detail), re.search(_JOB_NOTE, detail)
    return None if words is None or job is None else (job[1], int(words[1].replace(",", "")))


@dataclass(frozen=True)
class Unread:
    """One model's batch lines the provider ran, and billed, whose result the run could not
    read, their tokens unknown: `damaged_batch_result` attempts (a result file that dropped
    the line, cut it short, or wrote it unreadable), and the lines an expired, failed or
    cancelled job ran and lost (`MAYBE_RAN_MARK`). Each is charged at its worst case, as the
    batch lane's spend cap keeps it (`engine.batch_lane.BatchLane._charged`): its prompt,
    densely tokenised (`worst_case_cost_of`), and its whole output cap: an upper bound."""

    #: The lines: the damaged ones and, of each job that lost lines, as many as it lost.
    lines: int = 0
    #: The damaged lines' prompts' worst-case tokens (from the plan's texts).
    tokens_in: int = 0
    #: The output caps their attempts' notes name (a retry's own), and how many lines were
    #: sent at the spec's cap instead.
    noted_out: int = 0
    at_spec_cap: int = 0
    #: Per job that lost lines it may have run: how many it lost, and the worst-case prompt
    #: tokens and noted output cap (None: the spec's) of each of its lines that may be them.
    #: Which ran cannot be told: the `lost` dearest are charged.
    maybe: tuple[tuple[int, tuple[tuple[int, int | None], ...]], ...] = ()

    def cost(self, prices: Prices, max_tokens: int | None) -> float:
        """Their worst case at `prices`, the lines sent at the spec's cap at `max_tokens`."""
        cap = max_tokens or DEFAULT_OUTPUT_CAP
        damaged = prices.cost(self.tokens_in, self.noted_out + self.at_spec_cap * cap)
        dearest = [
            usd for lost, lines in self.maybe
            for usd in sorted((prices.cost(t, out or cap) for t, out in lines), reverse=True)[:lost]
        ]  # fmt: skip
        return math.fsum([damaged, *dearest])


def unread_lines(attempts: pl.LazyFrame, plan_path: Path) -> dict[str, Unread]:
    """Per model, `Unread` of `attempts` (columns request_id, model, outcome, tokens_in,
    tokens_out, detail), each line's prompt read from the plan at `plan_path` (a row the plan
    lacks counts its framing alone)."""
    damaged = pl.col("outcome") == Outcome.DAMAGED_BATCH_RESULT.value
    detail = pl.col("detail")
    worded = detail.str.contains(_MAYBE_RAN_WORDS)  # an earlier version's, with no tag
    job = pl.coalesce(detail.str.extract(_MAYBE_RAN, 1),
                      pl.when(worded).then(detail.str.extract(_JOB_NOTE, 1)))
    lost_count = pl.coalesce(
        detail.str.extract(_MAYBE_RAN, 2),
        detail.str.extract(_MAYBE_RAN_WORDS, 1).str.replace_all(",", ""),
    ).cast(pl.Int64)
    lost = (
        attempts.filter(
            (damaged | detail.str.contains(_MAYBE_RAN) | worded) & carried_by_batch()
            & (pl.col("tokens_in").fill_null(0) == 0) & (pl.col("tokens_out").fill_null(0) == 0)
        )
        .select("request_id", "model",
                detail.str.extract(_CAP_NOTE, 1).cast(pl.Int64).alias("cap"),
                pl.when(~damaged).then(job).alias("job"), lost_count.alias("lost"))
        .collect()
    )  # fmt: skip
    if lost.is_empty():
        return {}
    worst_in = pl.col("chars").fill_null(0) // WORST_CHARS_PER_TOKEN + FRAMING_TOKENS
    lost = lost.join(_plan_chars(plan_path, lost["request_id"]), on=["request_id", "model"],
                     how="left").with_columns(worst_in.alias("tokens_in"))
    per_model = (
        lost.filter(pl.col("job").is_null())
        .group_by("model")
        .agg(pl.len().alias("lines"), pl.col("tokens_in").sum(),
             pl.col("cap").sum().alias("noted_out"), pl.col("cap").null_count().alias("at_cap"))
    )  # fmt: skip
    out = {
        str(model): Unread(int(n), int(tokens_in), int(noted or 0), int(at_cap))
        for model, n, tokens_in, noted, at_cap in per_model.iter_rows()
    }
    return _with_maybe_ran(out, lost.filter(pl.col("job").is_not_null()))


def _plan_chars(plan_path: Path, ids: pl.Series) -> pl.DataFrame:
    """The prompt length (`prompt_chars`) of the plan's rows of `ids`, by request and model."""
    if not plan_path.exists():
        return pl.DataFrame(
            schema={"request_id": pl.String, "model": pl.String, "chars": pl.Int64})
    return (
        pl.scan_parquet(plan_path)
        .filter(pl.col("request_id").is_in(ids.unique().implode()))
        .select("request_id", "model", prompt_chars().alias("chars"))
        .collect()
    )


def _with_maybe_ran(out: dict[str, Unread], tagged: pl.DataFrame) -> dict[str, Unread]:
    """`out` with the lines of `tagged` (`MAYBE_RAN_MARK`, columns model, job, lost,
    tokens_in, cap) in each model's `Unread.maybe`: of each job, as many lines as it lost."""
    jobs = (
        tagged.group_by("model", "job", maintain_order=True)
        .agg(pl.col("lost").max(), pl.col("tokens_in"), pl.col("cap"))
    )
    for model, _, lost, tokens_in, caps in jobs.iter_rows():
        lines = tuple(zip(tokens_in, caps, strict=True))
        prior = out.get(str(model), Unread())
        out[str(model)] = replace(prior, lines=prior.lines + min(int(lost), len(lines)),
                                  maybe=(*prior.maybe, (int(lost), lines)))
    return out


def batch_attempt_prices(config: ModelConfig) -> Prices | None:
    """What a line a batch job carried costs: the batch prices, else the live ones (an upper
    bound), as the batch lane reserves and settles them; None for a live model."""
    if config.dispatch != "batch":
        return None
    return batch_prices_of(config) or prices_of(config)


def recorded_spend(run_dir: Path | str, models: Mapping[str, ModelConfig]) -> float:
    """Dollars the ledger's attempts of priced `models` cost (earlier runs of this folder):
    attempts a batch job carried (`carried_by_batch`) at the model's batch prices
    (else its live ones, as the batch lane counts them), other attempts at the live prices."""
    live = {name: p for name, c in models.items() if (p := prices_of(c)) is not None}
    # Any model may hold batch attempts (its dispatch may have changed since): price them at
    # its batch prices where known; the detail column is read only when that can matter.
    batch = {name: p for name, c in models.items() if (p := batch_prices_of(c) or prices_of(c))}
    if not batch:  # `batch` holds every model `live` does
        return 0.0
    from engine.scan import scan_attempts  # the ledger is only read when prices are set

    split = any(c.dispatch == "batch" or batch_prices_of(c) for c in models.values())
    columns = ["model", "tokens_in", "tokens_out"] + (
        ["request_id", "outcome", "detail"] if split else [])
    in_batch = carried_by_batch() if split else pl.lit(False)
    try:
        usage = (
            scan_attempts(run_dir, columns=columns)
            .filter(pl.col("model").is_in(list(batch)))
            .group_by("model", in_batch.alias("in_batch"))
            .agg(pl.col("tokens_in").sum(), pl.col("tokens_out").sum())
            .collect()
        )
        # Lines billed whose result could not be read, at their worst case (`Unread`).
        unread = unread_lines(
            scan_attempts(run_dir, columns=columns).filter(pl.col("model").is_in(list(batch))),
            Path(run_dir) / "plan.parquet",
        ) if split else {}
    except (FileNotFoundError, pl.exceptions.ComputeError):
        return 0.0
    total = 0.0
    for model, carried, tokens_in, tokens_out in usage.rows():
        prices = (batch if carried else live).get(model)
        if prices is not None:
            total += prices.cost(tokens_in, tokens_out)
    return total + sum(
        lines.cost(batch[model], models[model].max_tokens) for model, lines in unread.items()
    )


#: How a lane stopped by the cap begins its reason (`SpendCap.message`; the audit asks).
SPEND_CAP_REACHED = "spend cap reached"


def dollars(value: float) -> str:
    """To a hundredth of a cent under $1, where a test campaign's costs lie, else to the cent."""
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def dollars_apart(first: float, second: float) -> tuple[str, str]:
    """Two amounts in dollars with decimals enough to tell them apart (to cents at least),
    and to show an amount that is not 0 as none: an estimate of $0.0158 over a cap of $0.0151
    read "$0.02 exceeds --max-cost $0.02", and a cap of $0.0000001 "--max-cost $0.00". For
    amounts the run computed (what is left under a cap); a cap the user typed beside an
    estimate is `beside_cap`'s."""
    for places in (2, 4, 6, 8):
        pair = (f"${first:,.{places}f}", f"${second:,.{places}f}")
        if pair[0] != pair[1] and not any(
            value and float(text[1:].replace(",", "")) == 0
            for value, text in zip((first, second), pair, strict=True)
        ):
            return pair
    return f"${first:,.2f}", f"${second:,.2f}"  # apart by less than that: cents will do


def beside_cap(estimate: float, cap: float) -> tuple[str, str]:
    """An estimate beside a cap the user gave (`--max-cost`): the cap as given, with
    decimals enough to show it exactly (cents at least), and the estimate with as few
    decimals as its own digits or the cap's need, until the two read in their true order and
    an amount that is not 0 reads as none. Both rounded alike to cents, an estimate of
    $0.0158 over a cap of $0.015 read "$0.02 exceeds --max-cost $0.01", misprinting the
    user's own cap. Only for a typed cap: a computed amount (0.8 - 0.7942) has seventeen
    digits to show. A cap far below the
    estimate (under a thousandth of it) leaves the estimate the fewest decimals that read
    apart from it, from cents, and none is ever shown past the estimate's own digits:
    `--max-cost 1e-20` said "estimated cost $0.01586500000000000063", float noise, and
    1e-7 beside 1e-9 "$0.000000100"."""
    if not (math.isfinite(estimate) and math.isfinite(cap)):
        return f"${estimate:,.2f}", f"${cap:,.2f}"
    typed, places = _as_typed(cap)
    _, own = _as_typed(estimate)  # past these, the float's binary digits: noise
    order = (estimate > cap) - (estimate < cap)
    start = 2 if cap * 1000 < estimate else min(places, own)
    for shown_places in range(start, max(start, own) + 1):  # at `own` it reads as it is
        shown = Decimal(f"{estimate:.{shown_places}f}")
        if (shown > typed) - (shown < typed) == order and (shown != 0 or estimate == 0):
            return f"${estimate:,.{shown_places}f}", f"${typed:,.{places}f}"
    return f"${estimate:,.{own}f}", f"${typed:,.{places}f}"  # apart by less than that


def typed_dollars(cap: float) -> str:
    """A cap the user gave, in dollars as given (cents at least): `dollars` said
    `--max-cost 0.00001` as "$0.0000"."""
    if not math.isfinite(cap):
        return f"${cap:,.2f}"
    typed, places = _as_typed(cap)
    return f"${typed:,.{places}f}"


def _as_typed(cap: float) -> tuple[Decimal, int]:
    """`cap` as the shortest text that reads back as it (as typed), and its decimals (two at
    least)."""
    typed = Decimal(repr(cap))
    exponent = typed.as_tuple().exponent
    return typed, max(2, -exponent if isinstance(exponent, int) else 0)


#: What a live attempt's reservation is, in the cap's stop line.
ATTEMPT_RESERVED = (
    "attempt", "its prompt and its whole output cap: a lower max_tokens reserves less"
)


class SpendCap:
    """The budget shared by every lane of one dispatch (see the module docstring)."""

    def __init__(self, budget_usd: float, spent_before_usd: float = 0.0) -> None:
        if budget_usd < 0:
            raise ValueError("a spend cap cannot be negative")
        self.budget_usd = budget_usd
        self.spent_before_usd = spent_before_usd
        self.spent_now_usd = 0.0  # settled attempts of this dispatch
        self.reserved_usd = 0.0  # worst cases of attempts in flight
        #: Worst cases of batch jobs left at the provider when their lane halted (`commit`):
        #: they run and bill, and this dispatch will not see what they cost.
        self.committed_usd = 0.0
        self.in_flight = 0
        self.reached = False
        #: The worst case of the attempt that did not fit when the cap was reached by it,
        #: and what that attempt was (a batch job's lines are reserved together).
        self.unfit_usd: float | None = None
        self.unfit_what = ATTEMPT_RESERVED
        self._changed = asyncio.Event()

    @property
    def spent_usd(self) -> float:
        return self.spent_before_usd + self.spent_now_usd

    def message(self) -> str:
        """"spend cap reached: $X of $Y", and when an attempt's worst case did not fit, why:
        a cap between a campaign's typical and worst cost stopped after one answer at 3% of
        the budget, saying only "reached", and every resume stopped so."""
        said = f"{SPEND_CAP_REACHED}: {dollars(self.spent_usd)} of {dollars(self.budget_usd)}"
        if self.committed_usd:
            said += self.committed_words()
        if self.unfit_usd is None:
            return said
        left = max(0.0, self.budget_usd - self.spent_usd - self.committed_usd)
        what, why = self.unfit_what
        unfit, room = dollars(self.unfit_usd), dollars(left)
        if unfit == room:  # "up to $0.0058 ..., more than the $0.0058 left" (a tester's)
            unfit, room = dollars_apart(self.unfit_usd, left)
        return (
            f"{said}; the next {what} could cost up to {unfit} ({why}), more than the {room} left"
        )

    def committed_words(self) -> str:
        """", and up to $X more held by batch jobs not yet collected" where `commit` took room
        (said beside the spend, which does not count it), else nothing."""
        if not self.committed_usd:
            return ""
        held = dollars(self.committed_usd)
        return f", and up to {held} more held by batch jobs not yet collected"

    def _reach(self) -> None:
        self.reached = True
        self._changed.set()

    async def reserve(
        self, worst_usd: float, what: tuple[str, str] = ATTEMPT_RESERVED,
        on_wait: Callable[[], None] | None = None,
    ) -> bool:
        """Hold `worst_usd` for an attempt about to start; False once the cap is reached.
        `what`: the attempt, and what its worst case is made of, as the stop line says them;
        `on_wait`, called once if it must wait for room that others hold."""
        while True:
            if self.reached:
                return False
            if self.spent_usd + self.committed_usd + worst_usd > self.budget_usd:
                self.unfit_usd, self.unfit_what = worst_usd, what
                self._reach()
                return False
            taken = self.spent_usd + self.committed_usd + self.reserved_usd
            if taken + worst_usd <= self.budget_usd:
                self.reserved_usd += worst_usd
                self.in_flight += 1
                return True
            # The room is held by attempts in flight: their real cost decides.
            self._changed.clear()
            if on_wait is not None:
                on_wait()
                on_wait = None
            await self._changed.wait()

    def hold(self, worst_usd: float) -> None:
        """Hold `worst_usd` for work that runs and bills whatever the cap says (a batch job an
        earlier run created), so that nothing new starts on room it may take: `settle` it
        with what it cost, or `release` it if it never runs."""
        self.reserved_usd += worst_usd
        self.in_flight += 1
        self._changed.set()

    def settle(self, worst_usd: float, actual_usd: float) -> None:
        """An attempt finished: replace its reservation by what it reportedly cost (past the
        budget where a provider reported more than the worst case: the cap is then reached)."""
        self.spent_now_usd += actual_usd
        if self.spent_usd >= self.budget_usd:
            self.reached = True
        self.release(worst_usd)

    def commit(self, worst_usd: float, *, held: bool = True) -> None:
        """Work that runs and bills though this dispatch will not see what it cost (a created
        batch job left at the provider when its lane halted): its worst case stays taken from
        the cap for the rest of the dispatch, its hold or reservation released (`held`; False:
        it had none, as a batch model now asked live has for its jobs). Released, its room went
        to a live lane beside it, and the job's bill passed the cap ($0.0170 of $0.0128); kept
        as a reservation, that lane waited for it for ever."""
        self.committed_usd += worst_usd
        if held:
            self.release(worst_usd)
        else:
            self._changed.set()

    def release(self, worst_usd: float) -> None:
        """An attempt reserved for was not sent after all."""
        self.in_flight -= 1
        # Recomputed from zero when idle, so float drift can never leave phantom reservations.
        self.reserved_usd = max(0.0, self.reserved_usd - worst_usd) if self.in_flight else 0.0
        self._changed.set()


def unpriced(models: Iterable[ModelConfig]) -> list[str]:
    """Names of models whose spend a cap cannot count (a batch model with batch prices only
    is counted: its jobs are)."""
    return sorted(
        c.name for c in models if prices_of(c) is None and batch_attempt_prices(c) is None
    )


__all__ = [
    "BATCH_DETAIL",
    "BATCH_MARK",
    "DEFAULT_OUTPUT_CAP",
    "MAYBE_RAN_MARK",
    "Prices",
    "SpendCap",
    "Unread",
    "batch_attempt_prices",
    "batch_prices_of",
    "dollars",
    "maybe_ran",
    "maybe_ran_tag",
    "prices_of",
    "prompt_chars",
    "recorded_spend",
    "unpriced",
    "unread_lines",
    "worst_case_cost",
    "worst_case_cost_of",
]
