"""From a spec to plan rows: models x arms x units x passes x queries.

Request ids are content-addressed: a hash of the campaign, the model, the pass and the exact
messages sent. Planning the same spec twice gives the same ids (resume is "plan minus
accepted"), and a question that two arms ask word for word is asked and paid for once — the
paper's linked and dispersed sets are scored on answers from the two-asset and horizon-2 arms,
which is how its total comes to 365,100.

Two files come out: `plan.parquet` (one row per distinct query: what the engine sends) and
`plan_members.parquet` (one row per arm's view of a query: how answers map back to arms,
units and events). Rows are written in bounded batches, never held whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from engine.console_lines import plural
from engine.durable import written_whole
from engine.frames import frame_from_columns
from engine.plan import PLAN_SCHEMA
from engine.spend import Prices, batch_prices_of, prices_of
from panels.arms import ARMS, Arm, Query
from providers.types import ModelConfig
from runs.plan_checksums import file_sha256, record_checksums
from runs.spec import ArmEntry, CampaignSpec, SpecError
from runs.tokens import estimator as token_estimator
from runs.units import UnitSource

MEMBER_SCHEMA: dict[str, Any] = {
    "request_id": pl.String,
    "model": pl.String,
    "arm": pl.String,
    "unit": pl.String,
    "pass": pl.Int32,
    "events": pl.List(pl.String),
    "keys": pl.List(pl.String),
}
#: Rows buffered (as Python rows, then one frame) before a part is written: the plan's peak.
#: Measured writing the paper's plan (365,100 rows), one session: 20,000 rows peaked at 429 MB
#: RSS, 5,000 at 292 MB, in the same CPU time (20.0 vs 21.2 s user).
BATCH_ROWS = 5_000
#: Rows per Parquet row group of the plan files. The paper's plan holds 830 MB of prompt
#: text (8.8 MB compressed); merging its parts with polars' default row groups peaked at
#: 904 MB, with groups of 2,000 rows at 387 MB (measured on that plan), and readers that
#: slice the plan read less per slice.
ROW_GROUP_ROWS = 2_000
#: Typical completion size per requested key when a model answers tersely (JSON + a little text).
TYPICAL_OUTPUT_TOKENS_PER_KEY = 24
#: How often `estimate` reports its count (`runs.planning_progress`): the paper's campaign
#: renders about 25,000 queries a second here, so a few reports a second, at no cost.
PROGRESS_EVERY = 5_000


# Every id and seed below is the SHA-256 of its parts' str() joined by "\x1f" (`_digest`).
# The three computed per query spell that join as an f-string: the same bytes (str() of an
# int or a str is its format), without a generator per call, which planning pays 3 times a
# query. A test pins them to `_digest` and to values planned before, since a resume finds
# its answers by these ids.


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()


def content_digest(query: Query) -> str:
    """What identifies a question: the exact messages and the keys asked for."""
    keys = ",".join(query.keys)
    return hashlib.sha256(f"{query.system}\x1f{query.user}\x1f{keys}".encode()).hexdigest()


def _memo_digest(digest_of: dict[tuple[str, str, tuple[str, ...]], str], query: Query) -> str:
    """`content_digest(query)`, remembered in `digest_of` by the text it hashes."""
    key = (query.system, query.user, query.keys)
    digest = digest_of.get(key)
    if digest is None:
        digest = digest_of[key] = content_digest(query)
    return digest


def request_id(
    campaign: str, model: str, pass_index: int, query: Query, digest: str | None = None
) -> str:
    digest = digest or content_digest(query)
    text = f"{campaign}\x1f{model}\x1f{pass_index}\x1f{digest}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def render_seed(campaign_seed: int, arm: str, unit: str, pass_index: int) -> int:
    """Seed for what an arm randomises while rendering (grouped arms' question order)."""
    return int.from_bytes(_digest(campaign_seed, arm, unit, pass_index)[:4], "big") & 0x7FFFFFFF


def request_seed(
    campaign_seed: int, pass_index: int, query: Query, digest: str | None = None
) -> int:
    """The seed sent to the provider: task-specific and different per pass (Appendix C)."""
    digest = digest or content_digest(query)
    hashed = hashlib.sha256(f"{campaign_seed}\x1f{pass_index}\x1f{digest}".encode()).digest()
    return int.from_bytes(hashed[:4], "big") & 0x7FFFFFFF


def arm_of(entry: ArmEntry, spec: CampaignSpec) -> Arm:
    try:
        return ARMS[entry.name]
    except KeyError:
        raise SpecError(
            spec.path, "arms", f"an arm from the catalogue, not {entry.name!r}"
        ) from None


class PlannedQuery(NamedTuple):
    """One arm's view of one query (a tuple: planning makes one per query, and a frozen
    dataclass's field-by-field construction was a tenth of planning's time)."""

    model: ModelConfig
    arm: str
    unit: str
    pass_index: int
    query: Query
    request_id: str
    seed: int


def iter_queries(spec: CampaignSpec, units: UnitSource) -> Iterator[PlannedQuery]:
    """Every arm's view of every query, in spec order (duplicates across arms included)."""
    for entry in spec.arms:
        arm = arm_of(entry, spec)
        models = spec.models_for(entry)
        for unit in units.for_arm(arm):
            # A unit's passes often ask the same questions word for word (an isolated family
            # asks its statements every pass): their digests are hashed once per unit.
            digest_of: dict[tuple[str, str, tuple[str, ...]], str] = {}
            for pass_index in range(entry.passes):
                queries = arm.queries(
                    unit, pass_index, render_seed(spec.seed, arm.name, unit.id, pass_index)
                )
                digests = [_memo_digest(digest_of, q) for q in queries]
                seeds = [
                    request_seed(spec.seed, pass_index, q, d)
                    for q, d in zip(queries, digests, strict=True)
                ]
                for model in models:
                    for q, digest, seed in zip(queries, digests, seeds, strict=True):
                        yield PlannedQuery(
                            model=model,
                            arm=arm.name,
                            unit=unit.id,
                            pass_index=pass_index,
                            query=q,
                            request_id=request_id(spec.name, model.name, pass_index, q, digest),
                            seed=seed,
                        )


def distinct_queries(
    spec: CampaignSpec, units: UnitSource
) -> Iterator[tuple[PlannedQuery, bool]]:
    """`iter_queries`, each with whether it is the first to ask its request id (the plan holds
    that one; the others are arms sharing it)."""
    seen: set[str] = set()
    for pq in iter_queries(spec, units):
        first = pq.request_id not in seen
        if first:
            seen.add(pq.request_id)
        yield pq, first


class _PartWriter:
    """Writes frames to numbered Parquet parts, then one file through a streaming sink."""

    def __init__(self, folder: Path, schema: dict[str, Any]) -> None:
        self.folder, self.schema = folder, schema
        self.parts = 0
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)

    def write(self, frame: pl.DataFrame) -> None:
        frame.write_parquet(
            self.folder / f"part-{self.parts:05d}.parquet", row_group_size=ROW_GROUP_ROWS
        )
        self.parts += 1

    @contextlib.contextmanager
    def written(self, target: Path) -> Iterator[str]:
        """Merge the parts into `target`: yields the merged file's sha256 once it is written
        whole, and `target` takes it when the `with` ends (a failure inside leaves neither)."""
        # Through the durable writer: a file a full disk cut short leaves no temporary (of up
        # to the plan's size) in the run folder.
        with written_whole(target) as tmp:
            if self.parts == 0:
                pl.DataFrame(schema=self.schema).write_parquet(tmp)
            else:
                pl.scan_parquet(str(self.folder / "*.parquet")).sink_parquet(
                    tmp, row_group_size=ROW_GROUP_ROWS
                )
            yield file_sha256(tmp)
        shutil.rmtree(self.folder, ignore_errors=True)


#: What only the plan holds, beside the columns it shares with the members (`PlanWriter`).
_PLAN_ONLY_SCHEMA = {name: PLAN_SCHEMA[name] for name in ("seed", "system", "user")}


class PlanWriter:
    """`plan.parquet` and `plan_members.parquet` from queries as they are rendered.

    Rows go to numbered parts under `staging` (bounded batches, never the whole plan held);
    `commit` merges each file's parts into the run folder atomically, members first, so a
    folder with `plan.parquet` has both. The staging folder may lie outside the run folder:
    `dutchbook run` writes the parts while it estimates, before it holds the folder's lock,
    and commits them once it does (`runs.pipeline`), so prompts are rendered once per run.

    A batch is converted to a frame once: the plan's part is the members' rows that first
    ask their request id, with the plan's own columns beside them, rather than the shared
    columns (lists of events and keys among them) converted twice. The parts are written by
    a thread of the writer's own (polars writes without the GIL) while the next batch
    renders; at most one batch is in writing, and its error (a full disk) is raised by the
    next `flush` or by `commit`. Measured on the 46,500-query family campaign of
    `bench.whole_run`, estimate and commit in one process, 12 alternated pairs each: the
    single conversion took 0.92x the time of the writer before it, and with the thread too
    0.84x (docs/performance.md).
    """

    def __init__(self, staging: Path) -> None:
        self.staging = staging
        self.plan = _PartWriter(staging / ".plan-parts", PLAN_SCHEMA)
        self.members = _PartWriter(staging / ".member-parts", MEMBER_SCHEMA)
        self._rows: list[tuple[Any, ...]] = []  # members' rows
        self._first: list[bool] = []
        self._plan_only: list[tuple[int, str, str]] = []  # of the rows that are first
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dutchbook-plan")
        self._writing: Future[None] | None = None

    def add(self, pq: PlannedQuery, first: bool) -> None:
        """One arm's view of a query; `first` when no earlier query had its request id."""
        query = pq.query
        self._rows.append(
            (pq.request_id, pq.model.name, pq.arm, pq.unit, pq.pass_index, query.events,
             query.keys)
        )  # fmt: skip
        self._first.append(first)
        if first:
            self._plan_only.append((pq.seed, query.system, query.user))
        if len(self._rows) >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        """The rows added so far, as one part of each file."""
        if not self._rows:
            return
        # Column-wise (engine.frames): row-wise frames cost more than the rest of planning.
        members = frame_from_columns(_columns(MEMBER_SCHEMA, self._rows), MEMBER_SCHEMA)
        plan = pl.concat(
            [
                members.filter(pl.Series(self._first, dtype=pl.Boolean)),
                frame_from_columns(_columns(_PLAN_ONLY_SCHEMA, self._plan_only), _PLAN_ONLY_SCHEMA),
            ],
            how="horizontal",
        ).select(list(PLAN_SCHEMA))
        self._rows, self._first, self._plan_only = [], [], []
        self._wait_for_writes()
        self._writing = self._writer.submit(self._write_parts, members, plan)

    def _write_parts(self, members: pl.DataFrame, plan: pl.DataFrame) -> None:
        self.members.write(members)
        if plan.height:
            self.plan.write(plan)

    def _wait_for_writes(self) -> None:
        """The parts being written, done (their error, such as a full disk, raised here)."""
        if self._writing is not None:
            writing, self._writing = self._writing, None
            writing.result()

    def close(self) -> None:
        """Stop writing without committing (the staging folder may be removed next): waits
        for the part being written, whose error no longer matters."""
        with contextlib.suppress(Exception):
            self._wait_for_writes()
        self._writer.shutdown()

    def remove_parts(self) -> None:
        """The parts written so far, removed (after `close`)."""
        for parts in (self.plan, self.members):
            shutil.rmtree(parts.folder, ignore_errors=True)

    def commit(self, run_dir: Path) -> Path:
        """Both files into `run_dir`, atomically each; returns the plan's path."""
        try:
            self.flush()
            self._wait_for_writes()
        finally:
            self.close()
        run_dir.mkdir(parents=True, exist_ok=True)
        # Both written and hashed, their checksums kept, then the members committed, then the
        # plan: a folder with a plan has the members and the checksums of both, and a kill
        # before the plan leaves none that could read as damaged (`runs.plan_checksums`).
        with (  # left last to first: the members are committed, then the plan
            self.plan.written(run_dir / "plan.parquet") as plan,
            self.members.written(run_dir / "plan_members.parquet") as members,
        ):
            record_checksums(run_dir, {"plan_members.parquet": members, "plan.parquet": plan})
        return run_dir / "plan.parquet"


def _columns(schema: dict[str, Any], rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """Rows (values in `schema`'s order) as one list per column."""
    if not rows:
        return {name: [] for name in schema}
    return dict(zip(schema, map(list, zip(*rows, strict=True)), strict=True))


def queries_before_sharing(spec: CampaignSpec, units: UnitSource) -> int:
    """How many queries the spec asks for, counting a query two arms share twice: an upper
    bound of the plan's rows, known without rendering a prompt (milliseconds where planning
    the paper's campaign takes seconds)."""
    return sum(count for _, count in _queries_by_arm(spec, units))


def _queries_by_arm(spec: CampaignSpec, units: UnitSource) -> list[tuple[str, int]]:
    """Each arm entry's description (for a message) and its queries over passes and models."""
    counts = []
    for index, entry in enumerate(spec.arms):
        arm = arm_of(entry, spec)
        per_pass = sum(arm.query_count(unit) for unit in units.for_arm(arm, check=False))
        models = len(spec.models_for(entry))
        what = (
            f"arms[{index}] ({entry.name}): {_count(entry.passes, 'pass', 'passes')} x "
            f"{plural(per_pass, 'query', 'queries')} x {plural(models, 'model')}"
        )
        counts.append((what, per_pass * entry.passes * models))
    return counts


#: The most queries one campaign may ask: a guard against a typo such as `passes =
#: 1000000000`, which would otherwise plan for weeks in silence. Far above the paper's sweep
#: (365,100 queries, planned in about 20 s on the development machine, 2 cores); planning
#: this many would take about 40 minutes there.
MAX_CAMPAIGN_QUERIES = 50_000_000


class CampaignTooLarge(ValueError):
    """A spec asking more than `MAX_CAMPAIGN_QUERIES` queries (nothing was planned)."""


def check_campaign_size(spec: CampaignSpec, units: UnitSource) -> None:
    """Refuse, before rendering a prompt, a campaign above `MAX_CAMPAIGN_QUERIES`."""
    counts = _queries_by_arm(spec, units)
    total = sum(count for _, count in counts)
    if total > MAX_CAMPAIGN_QUERIES:
        largest = max(counts, key=lambda pair: pair[1])[0]
        raise CampaignTooLarge(
            f"{spec.name} asks {_count(total, 'query', 'queries')}, more than the "
            f"{MAX_CAMPAIGN_QUERIES:,} a campaign may ask (the paper's sweep asks 365,100); "
            f"the largest is {largest}: "
            "check its passes and [data], or split the campaign into several specs"
        )


def _count(number: int, one: str, many: str) -> str:
    """`plural(number, one, many)`, or its length when the number is longer than a line:
    `passes` with 400 digits was refused with two numbers of 400 digits."""
    digits = len(str(number))
    return plural(number, one, many) if digits <= 24 else f"a {digits:,}-digit number of {many}"


def write_plan(spec: CampaignSpec, run_dir: Path, units: UnitSource | None = None) -> Path:
    """Write `plan.parquet` and `plan_members.parquet` atomically; returns the plan's path."""
    if units is None:
        from runs.design import folder_units  # only here: callers mostly pass `units`

        units = folder_units(spec, run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    writer = PlanWriter(run_dir)
    try:
        for pq, first in distinct_queries(spec, units):
            writer.add(pq, first)
        return writer.commit(run_dir)
    except BaseException:
        # Its parts are staged in the run folder itself: a full disk (or a stop) must not
        # leave up to the plan's size of them in the room the user frees to run again.
        writer.close()
        writer.remove_parts()
        raise


@dataclass
class PlanLine:
    """Distinct queries and their estimated tokens and cost for one (model, arm).

    A query another arm already asks is counted under the first arm that asks it.
    """

    model: str
    arm: str
    queries: int = 0
    shared: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_out_max: int = 0
    cost_usd: float | None = None
    cost_usd_max: float | None = None
    #: The same tokens at the model's batch API prices (None without batch prices).
    batch_cost_usd: float | None = None
    batch_cost_usd_max: float | None = None
    #: The model's `dispatch` setting ("live" or "batch"), from the spec in use.
    dispatch: str = "live"
    approximate: bool = False
    #: How `tokens_in` was counted (`runs.tokens`): "exact: ..." or "rough: ...".
    tokens_method: str = ""


def estimate(
    spec: CampaignSpec,
    units: UnitSource | None = None,
    plan: PlanWriter | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_query: Callable[[PlannedQuery], None] | None = None,
) -> list[PlanLine]:
    """Exact query counts (after sharing) and token estimates from the rendered prompts.

    Arms whose inputs are missing (the headline arm without headlines) cannot be rendered; they
    are counted exactly and their tokens estimated from the identity arm, marked approximate.
    `plan`, when given, receives every rendered query too (the plan, written in the same
    pass); it needs every arm rendered, so a spec with such arms raises ValueError.
    `progress`, when given, is called with (rendered, total) every `PROGRESS_EVERY` queries
    and once at the end: arm views of the queries rendered so far, shared ones counted per
    arm, against how many there are (`queries_before_sharing` of the arms rendered).
    `on_query`, when given, is called with each query the plan holds (the first to ask its
    request id), as rendered: `runs.batch_bytes` sizes batch lines from them.
    """
    units = units or UnitSource.from_spec(spec)
    check_campaign_size(spec, units)
    counters = {
        m.name: token_estimator(m.tokenizer, fold_system=m.fold_system) for m in spec.models
    }
    lines: dict[tuple[str, str], PlanLine] = {}
    ready = [e for e in spec.arms if units.requirements_met(arm_of(e, spec))]
    pending = [e for e in spec.arms if e not in ready]
    if plan is not None and pending:
        raise ValueError(f"cannot plan arms whose inputs are missing: {pending[0].name}")
    ready_spec = _with_arms(spec, ready)
    total = queries_before_sharing(ready_spec, units) if progress is not None else 0
    rendered = 0
    for rendered, (pq, first) in enumerate(distinct_queries(ready_spec, units), 1):
        if progress is not None and rendered % PROGRESS_EVERY == 0:
            progress(rendered, total)
        if plan is not None:
            plan.add(pq, first)
        line = lines.setdefault((pq.model.name, pq.arm), PlanLine(pq.model.name, pq.arm))
        if not first:
            line.shared += 1
            continue
        line.queries += 1
        if on_query is not None:
            on_query(pq)
        line.tokens_in += counters[pq.model.name].prompt_tokens(pq.query.system, pq.query.user)
        line.tokens_out += len(pq.query.keys) * TYPICAL_OUTPUT_TOKENS_PER_KEY
        line.tokens_out_max += pq.model.max_tokens or 8192
    if progress is not None:
        progress(rendered, total)
    for entry in pending:
        arm = arm_of(entry, spec)
        proxy = ARMS["identity"]
        for unit in units.for_arm(arm, check=False):
            count = arm.query_count(unit) * entry.passes
            sample = proxy.queries(unit, 0, 0)
            for model in spec.models_for(entry):
                counter = counters[model.name]
                tokens = sum(counter.prompt_tokens(q.system, q.user) for q in sample)
                line = lines.setdefault(
                    (model.name, arm.name), PlanLine(model.name, arm.name, approximate=True)
                )
                line.queries += count
                line.tokens_in += round(tokens / max(len(sample), 1) * count)
                line.tokens_out += count * TYPICAL_OUTPUT_TOKENS_PER_KEY
                line.tokens_out_max += count * (model.max_tokens or 8192)
    for line in lines.values():
        line.tokens_method = counters[line.model].label
    return price_lines(spec, list(lines.values()))


#: PlanLine fields `price_lines` sets from the spec in use (operational: a resume may change them).
PRICED_FIELDS = ("cost_usd", "cost_usd_max", "batch_cost_usd", "batch_cost_usd_max", "dispatch")


def price_lines(spec: CampaignSpec, lines: list[PlanLine]) -> list[PlanLine]:
    """Set each line's live and batch costs from its tokens at the spec's prices (None where
    a price is unknown) and its model's dispatch mode."""
    for line in lines:
        model = spec.model(line.model)
        live, batch = prices_of(model), batch_prices_of(model)
        line.cost_usd = _cost(live, line.tokens_in, line.tokens_out)
        line.cost_usd_max = _cost(live, line.tokens_in, line.tokens_out_max)
        line.batch_cost_usd = _cost(batch, line.tokens_in, line.tokens_out)
        line.batch_cost_usd_max = _cost(batch, line.tokens_in, line.tokens_out_max)
        line.dispatch = model.dispatch
    return lines


def _with_arms(spec: CampaignSpec, arms: Sequence[ArmEntry]) -> CampaignSpec:
    from dataclasses import replace

    return replace(spec, arms=tuple(arms))


def _cost(prices: Prices | None, tokens_in: int, tokens_out: int) -> float | None:
    return None if prices is None else prices.cost(tokens_in, tokens_out)


def _add(total: float | None, value: float | None) -> float | None:
    """A sum over the priced lines only: None while none is priced."""
    return total if value is None else (total or 0.0) + value


def summarise(lines: Sequence[PlanLine]) -> dict[str, Any]:
    """The `--json` shape of `dutchbook plan`: totals, by model and by arm.

    Costs are sums over the lines whose prices are known (`priced_models` and
    `batch_priced_models` say which models they cover); None where no line is priced.
    """

    def fold(key: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for line in lines:
            name = getattr(line, key)
            acc = out.setdefault(
                name,
                {
                    "queries": 0,
                    "shared": 0,
                    "tokens_in": 0,
                    "tokens_out": 0,
                    "cost_usd": None,
                    "batch_cost_usd": None,
                },
            )
            if key == "model":
                acc["dispatch"] = line.dispatch
            acc["queries"] += line.queries
            acc["shared"] += line.shared
            acc["tokens_in"] += line.tokens_in
            acc["tokens_out"] += line.tokens_out
            acc["cost_usd"] = _add(acc["cost_usd"], line.cost_usd)
            acc["batch_cost_usd"] = _add(acc["batch_cost_usd"], line.batch_cost_usd)
        return out

    def total(field: str) -> float | None:
        acc: float | None = None
        for line in lines:
            acc = _add(acc, getattr(line, field))
        return acc

    def planned(suffix: str) -> float | None:
        # Each line at the price its model will be charged: batch prices for a batch model
        # that has them, else the live ones (an upper bound; the spend cap counts the same way).
        acc: float | None = None
        for line in lines:
            batch = getattr(line, "batch_cost_usd" + suffix)
            at_mode = batch if line.dispatch == "batch" and batch is not None else None
            acc = _add(acc, at_mode if at_mode is not None else getattr(line, "cost_usd" + suffix))
        return acc

    return {
        "total": {
            "queries": sum(line.queries for line in lines),
            "shared": sum(line.shared for line in lines),
            "tokens_in": sum(line.tokens_in for line in lines),
            "tokens_out": sum(line.tokens_out for line in lines),
            "cost_usd": total("cost_usd"),
            "cost_usd_max": total("cost_usd_max"),
            "batch_cost_usd": total("batch_cost_usd"),
            "batch_cost_usd_max": total("batch_cost_usd_max"),
            "planned_cost_usd": planned(""),
            "planned_cost_usd_max": planned("_max"),
            "priced_models": sorted({line.model for line in lines if line.cost_usd is not None}),
            "batch_priced_models": sorted(
                {line.model for line in lines if line.batch_cost_usd is not None}
            ),
            "approximate_arms": sorted({line.arm for line in lines if line.approximate}),
            # How each model's input tokens were counted: "exact: ..." or "rough: ...".
            "tokens_in_method": {line.model: line.tokens_method for line in lines},
        },
        "by_model": fold("model"),
        "by_arm": fold("arm"),
    }
