"""`dutchbook plan SPEC`: what a campaign will ask and roughly what it will cost."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.console_lines import plural
from runs.batch_bytes import PlannedSizes
from runs.commands._errors import interrupt_says_rerun, path_given, user_errors
from runs.design import check_new_design
from runs.model_options import check_model_options
from runs.output import print_text, stdout_console, warn
from runs.planner import estimate, summarise
from runs.planning_progress import PlanningProgress
from runs.rate_floors import floor_hours, limit_floors
from runs.spec import (
    CampaignSpec,
    SpecError,
    check_batch_bytes,
    check_batch_floor,
    check_keys_read,
    hash_picked_personalities,
    load_spec,
)
from runs.units import UnitSource

#: Columns the tables get when printed to a file or a pipe (eight columns of figures).
PIPE_WIDTH = 130


def _money(value: float | None) -> str:
    """A cost, or "no price" where the spec gives none (a cost is never guessed)."""
    return "no price" if value is None else f"${value:,.2f}"


def plan(
    spec_path: Annotated[
        Path, typer.Argument(metavar="SPEC", help="campaign spec (TOML)", parser=path_given)
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="one JSON object: total, by_model, by_arm")
    ] = False,
) -> None:
    """Count queries per model and arm, with estimated tokens and cost."""
    # Rendering every prompt of a paper-scale plan takes seconds: count them on stderr.
    with interrupt_says_rerun(), user_errors(SpecError, FileNotFoundError, ValueError):
        spec = load_spec(spec_path)
        units = UnitSource.from_spec(spec)
        check_new_design(spec, units)
        # The values `run` builds each model with (a groq `reasoning_effort`, an openai
        # model's `base_url`), which plan passed and run refused; keys are not asked for.
        check_model_options(spec)
        check_keys_read(spec)
        check_batch_floor(spec)
        for line in hash_picked_personalities(spec):  # on stderr: --json's output stays one object
            warn(line)
        sized = PlannedSizes(spec)  # a batch_max_bytes is judged by the lines it cuts
        with PlanningProgress(Console(stderr=True, emoji=False), spec.name) as shown:
            rendered = estimate(spec, units, progress=shown.update, on_query=sized.on_query)
        check_batch_bytes(spec, sized.sizes)
        summary = summarise(rendered)
    if as_json:
        for model, row in summary["by_model"].items():
            row["min_hours_at_limits"] = floor_hours(spec.model(model), row)
        print_text(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
        return
    console = stdout_console()
    if not console.is_terminal:  # a file or a pipe has no width: don't squeeze the figures
        console = stdout_console(width=max(console.width, PIPE_WIDTH))
    _print_tables(console, spec.name, summary)
    for line in [*limit_floors(spec, summary), *below_batch_minimum(spec, summary)]:
        console.print(line, highlight=False, markup=False)


def below_batch_minimum(spec: CampaignSpec, summary: dict[str, Any]) -> list[str]:
    """One line per batch model with fewer queries than its provider's smallest job (Bedrock's
    100 lines): they go live at live prices with `batch_fallback = "live"`, else wait. The
    costs above count them at batch prices, and 42 such Bedrock queries went live unsaid."""
    lines = []
    for name, row in summary["by_model"].items():
        model = spec.model(name)
        if model.dispatch != "batch" or model.provider != "bedrock":  # the one with a floor
            continue
        from providers.batch_bedrock import LIMITS

        if row["queries"] >= LIMITS.min_lines:
            continue
        fate = (
            "asked live at its live prices (batch_fallback = \"live\"), which the batch cost "
            "above does not count"
            if model.batch_fallback_live
            else "they wait unasked (batch_fallback = \"live\" would ask them live)"
        )
        lines.append(
            f"{name}: {plural(row['queries'], 'query', 'queries')}, fewer than bedrock's "
            f"minimum of {LIMITS.min_lines} lines per batch job: {fate}"
        )
    return lines


def _print_tables(console: Console, name: str, summary: dict[str, Any]) -> None:
    """The by-model and by-arm tables, live and batch cost side by side, then the totals."""
    shared = summary["total"]["shared"] > 0
    for key, title in (("by_model", "model"), ("by_arm", "arm")):
        table = Table(title=f"{name}: queries by {title}")
        columns = [title, "queries", "tokens in", "tokens out (typical)", "live cost", "batch cost"]
        if key == "by_model":
            columns.insert(1, "dispatch")
        if shared:
            columns.insert(columns.index("queries") + 1, "reused")
        for col in columns:
            # Names and modes are never wrapped; on a narrow screen figures fold, never cut.
            text = col in (title, "dispatch")
            table.add_column(
                col, justify="left" if text else "right", no_wrap=text, overflow="fold"
            )
        for row_name, row in summary[key].items():
            cells = {
                title: Text(row_name),  # a name as written: "[red]m" is no markup, "m\\" one \\
                "dispatch": row.get("dispatch", ""),
                "queries": f"{row['queries']:,}",
                "reused": f"{row['shared']:,}",
                "tokens in": f"{row['tokens_in']:,}",
                "tokens out (typical)": f"{row['tokens_out']:,}",
                "live cost": _money(row["cost_usd"]),
                "batch cost": _money(row["batch_cost_usd"]),
            }
            table.add_row(*(cells[col] for col in columns))
        console.print(table)
    if shared:
        console.print(
            "reused: questions another arm asks word for word; answered once, scored in both"
        )
    total = summary["total"]
    for model, method in total["tokens_in_method"].items():
        console.print(f"tokens in for {model}: {method}", markup=False, highlight=False)
    console.print(_total_line(total), highlight=False)
    for line in [*_approximate_arms(total), *_live_priced_batch(summary["by_model"])]:
        console.print(line, markup=False, highlight=False)


def _approximate_arms(total: dict[str, Any]) -> list[str]:
    """One line per arm whose inputs the data lacks (the headline arm without headlines): its
    queries are counted and its tokens borrowed from the identity arm's prompts, and `run`
    refuses the spec. Only `--json`'s `approximate_arms` said so: the table's total read as
    a plan that could run."""
    return [
        f"{arm}: its inputs are missing ([data] headlines), so its tokens are estimated from "
        "the identity arm's prompts; `dutchbook run` refuses this spec until they are given"
        for arm in total["approximate_arms"]
    ]


def _live_priced_batch(by_model: dict[str, dict[str, Any]]) -> list[str]:
    """One line per batch model priced live only: its batch cost read "no price" while the
    spend cap, `--max-cost` and the audit count its lines at its live prices, and the total's
    "what --max-cost is checked against" is said only where that differs from the live cost."""
    return [
        f"{name}: dispatched in batch with live prices only, so --max-cost and the audit count "
        "its lines at its live prices (set its batch_price_in and batch_price_out "
        "for the provider's batch prices)"
        for name, row in by_model.items()
        if row.get("dispatch") == "batch" and row["batch_cost_usd"] is None
        and row["cost_usd"] is not None
    ]


def _total_line(total: dict[str, Any]) -> str:
    models = len(total["tokens_in_method"])
    line = (
        f"total: {plural(total['queries'], 'query', 'queries')}, "
        f"~{plural(total['tokens_in'], 'token')} in, "
        f"~{total['tokens_out']:,} out"
    )
    if not total["priced_models"] and not total["batch_priced_models"]:
        return line + "; no model has prices set, so no cost is shown"
    for label, key, priced in (
        ("live", "cost_usd", "priced_models"),
        ("batch", "batch_cost_usd", "batch_priced_models"),
    ):
        count = len(total[priced])
        if count == 0:
            line += f"; {label}: no price"
            continue
        line += (
            f"; {label} {_money(total[key])} typical, {_money(total[key + '_max'])} if every "
            f"answer used its whole output cap ({count} of {models} models priced)"
        )
    if total["planned_cost_usd"] != total["cost_usd"]:  # some model dispatches in batch
        line += (
            f"; at each model's dispatch mode {_money(total['planned_cost_usd'])} typical "
            "(what --max-cost is checked against before a request is sent), "
            f"{_money(total['planned_cost_usd_max'])} at full caps"
        )
    return line


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
