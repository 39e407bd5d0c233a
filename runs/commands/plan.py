"""`dutchbook plan SPEC`: what a campaign will ask and roughly what it will cost."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table

from runs.commands._errors import user_errors
from runs.planner import estimate, summarise
from runs.spec import SpecError, load_spec
from runs.units import UnitSource


def _money(value: float | None) -> str:
    return "—" if value is None else f"${value:,.2f}"


def plan(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="campaign spec (TOML)")],
    as_json: Annotated[
        bool, typer.Option("--json", help="one JSON object: total, by_model, by_arm")
    ] = False,
) -> None:
    """Count queries per model and arm, with estimated tokens and cost."""
    # Rendering every prompt of a paper-scale plan takes seconds: say so on stderr.
    with user_errors(SpecError, FileNotFoundError, ValueError):
        spec = load_spec(spec_path)
        with Console(stderr=True).status(f"planning {spec.name}: rendering every query..."):
            summary = summarise(estimate(spec, UnitSource.from_spec(spec)))
    if as_json:
        typer.echo(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
        return
    console = Console()
    shared = summary["total"]["shared"] > 0
    for key, title in (("by_model", "model"), ("by_arm", "arm")):
        table = Table(title=f"{spec.name}: queries by {title}")
        columns = [title, "queries", "tokens in", "tokens out (typical)", "cost (typical)"]
        if shared:
            columns.insert(2, "reused")
        for col in columns:
            table.add_column(col, justify="left" if col == title else "right")
        for name, row in summary[key].items():
            cells = [
                name,
                f"{row['queries']:,}",
                f"{row['tokens_in']:,}",
                f"{row['tokens_out']:,}",
                _money(row["cost_usd"]),
            ]
            if shared:
                cells.insert(2, f"{row['shared']:,}")
            table.add_row(*cells)
        console.print(table)
    if shared:
        console.print(
            "reused: questions another arm asks word for word; answered once, scored in both"
        )
    total = summary["total"]
    for model, method in total["tokens_in_method"].items():
        console.print(f"tokens in for {model}: {method}", highlight=False)
    console.print(
        f"total: [bold]{total['queries']:,}[/] queries, ~{total['tokens_in']:,} tokens in, "
        f"~{total['tokens_out']:,} out; cost {_money(total['cost_usd'])} typical, "
        f"{_money(total['cost_usd_max'])} if every answer used its whole output cap"
        + ("" if total["priced_models"] else " (no model has prices set)")
    )


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
