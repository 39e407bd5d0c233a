"""`dutchbook plan` prices live and batch side by side, only where prices are known (issue 13).

Every figure below is worked out by hand from the token counts and the prices in USD per
million tokens; nothing is read back from the code under test to build an expectation.
"""

from __future__ import annotations

import asyncio
import io
import re
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from runs.cli import app
from runs.commands.plan import _print_tables
from runs.pipeline import RunError, run_campaign
from runs.plan_estimate import _KEPT
from runs.planner import PlanLine, price_lines, summarise
from runs.rate_floors import FLOOR_NOTE_MINUTES, floor_hours, limit_floors, run_floors
from runs.spec import CampaignSpec, parse_spec

RAW = {
    "name": "costs",
    "data": {"stock_days": 2},
    "models": [
        # live and batch prices (Groq's gpt-oss-120b figures, batch at half)
        {"name": "a", "provider": "sim", "model": "sim-coherent", "price_in": 0.15,
         "price_out": 0.60, "batch_price_in": 0.075, "batch_price_out": 0.30,
         "dispatch": "batch"},
        # live prices only
        {"name": "b", "provider": "sim", "model": "sim-noisy", "price_in": 1.0, "price_out": 2.0},
        # no prices at all
        {"name": "c", "provider": "sim", "model": "sim-anchored"},
    ],
    "arms": [{"name": "baseline"}],
}  # fmt: skip


@pytest.fixture
def spec() -> CampaignSpec:
    return parse_spec(RAW, Path("costs.toml"), arm_names={"baseline"})


def lines() -> list[PlanLine]:
    return [
        PlanLine("a", "x", queries=10, tokens_in=2_000_000, tokens_out=500_000,
                 tokens_out_max=4_000_000),
        PlanLine("b", "x", queries=5, tokens_in=1_000_000, tokens_out=250_000,
                 tokens_out_max=1_000_000),
        PlanLine("c", "y", queries=7, tokens_in=3_000_000, tokens_out=100_000,
                 tokens_out_max=700_000),
        PlanLine("a", "y", queries=1, tokens_in=400_000, tokens_out=0, tokens_out_max=100_000),
    ]  # fmt: skip


def test_each_line_is_priced_live_and_batch_by_hand(spec: CampaignSpec) -> None:
    a_x, b_x, c_y, a_y = price_lines(spec, lines())
    # a: 2 M in x $0.15 + 0.5 M out x $0.60 = 0.30 + 0.30; cap: 0.30 + 4 M x 0.60 = 2.70
    assert a_x.cost_usd == pytest.approx(0.60, abs=1e-12)
    assert a_x.cost_usd_max == pytest.approx(2.70, abs=1e-12)
    # batch: 2 M x $0.075 + 0.5 M x $0.30 = 0.15 + 0.15; cap: 0.15 + 4 M x 0.30 = 1.35
    assert a_x.batch_cost_usd == pytest.approx(0.30, abs=1e-12)
    assert a_x.batch_cost_usd_max == pytest.approx(1.35, abs=1e-12)
    # b: 1 M x $1 + 0.25 M x $2 = 1.50; no batch price, so no batch cost (never a guess)
    assert b_x.cost_usd == pytest.approx(1.50, abs=1e-12)
    assert b_x.batch_cost_usd is None and b_x.batch_cost_usd_max is None
    assert c_y.cost_usd is None and c_y.batch_cost_usd is None
    # a on y: 0.4 M x $0.15 = 0.06 live, 0.4 M x $0.075 = 0.03 batch
    assert a_y.cost_usd == pytest.approx(0.06, abs=1e-12)
    assert a_y.batch_cost_usd == pytest.approx(0.03, abs=1e-12)
    assert [line.dispatch for line in (a_x, b_x, c_y)] == ["batch", "live", "live"]


def test_the_summary_adds_up_only_what_is_priced(spec: CampaignSpec) -> None:
    summary = summarise(price_lines(spec, lines()))
    total, by_model, by_arm = summary["total"], summary["by_model"], summary["by_arm"]
    assert total["cost_usd"] == pytest.approx(0.60 + 1.50 + 0.06, abs=1e-12)
    # b capped: 1 M x $1 + 1 M x $2 = 3.00; a on y capped: 0.06 + 0.1 M x $0.60 = 0.12
    assert total["cost_usd_max"] == pytest.approx(2.70 + 3.00 + 0.06 + 0.06, abs=1e-12)
    assert total["batch_cost_usd"] == pytest.approx(0.30 + 0.03, abs=1e-12)
    # batch cap on a/y: 0.4 M x 0.075 + 0.1 M x 0.30 = 0.03 + 0.03
    assert total["batch_cost_usd_max"] == pytest.approx(1.35 + 0.06, abs=1e-12)
    # at each model's mode: a (batch) at batch prices, b (live) at live ones, c unpriced
    assert total["planned_cost_usd"] == pytest.approx(0.30 + 0.03 + 1.50, abs=1e-12)
    assert total["planned_cost_usd_max"] == pytest.approx(1.35 + 0.06 + 3.00, abs=1e-12)
    assert total["priced_models"] == ["a", "b"]
    assert total["batch_priced_models"] == ["a"]
    assert by_model["a"]["cost_usd"] == pytest.approx(0.66, abs=1e-12)
    assert by_model["a"]["batch_cost_usd"] == pytest.approx(0.33, abs=1e-12)
    assert by_model["b"]["batch_cost_usd"] is None
    assert by_model["c"]["cost_usd"] is None and by_model["c"]["batch_cost_usd"] is None
    assert {m: v["dispatch"] for m, v in by_model.items()} == {
        "a": "batch", "b": "live", "c": "live"
    }  # fmt: skip
    assert by_arm["x"]["batch_cost_usd"] == pytest.approx(0.30, abs=1e-12)
    assert by_arm["y"]["cost_usd"] == pytest.approx(0.06, abs=1e-12)


def test_the_tables_show_both_costs_the_mode_and_no_invented_price(spec: CampaignSpec) -> None:
    out = io.StringIO()
    _print_tables(Console(file=out, width=200), "costs", summarise(price_lines(spec, lines())))
    text = out.getvalue()
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if "│" in line}
    assert "batch" in rows["a"] and "$0.66" in rows["a"] and "$0.33" in rows["a"]
    assert "live" in rows["b"] and "$1.50" in rows["b"] and "no price" in rows["b"]
    assert rows["c"].count("no price") == 2
    assert (
        "live $2.16 typical, $5.82 if every answer used its whole output cap (2 of 3 models "
        "priced); batch $0.33 typical, $1.41 if every answer used its whole output cap "
        "(1 of 3 models priced); at each model's dispatch mode $1.83 typical (what --max-cost "
        "is checked against before a request is sent), $4.41 at full caps"
    ) in " ".join(text.split())


def test_a_batch_model_priced_live_only_is_said_counted_at_live_prices(
    spec: CampaignSpec,
) -> None:
    """Its batch cost and the total read "no price", and what --max-cost is checked against
    was not said (it equals the live cost), while the cap and the audit count its lines
    live."""
    live_only = replace(spec, models=(
        replace(spec.models[0], batch_price_in_per_mtok=None, batch_price_out_per_mtok=None),
        *spec.models[1:]))  # fmt: skip
    out = io.StringIO()
    _print_tables(Console(file=out, width=200), "costs", summarise(price_lines(live_only, lines())))
    said = " ".join(out.getvalue().split())
    assert (
        "a: dispatched in batch with live prices only, so --max-cost and the audit count its "
        "lines at its live prices (set its batch_price_in and batch_price_out for the "
        "provider's batch prices)"
    ) in said
    assert "b: dispatched in batch" not in said and "c: dispatched" not in said


@pytest.mark.parametrize("name", ["[red]m[/red]x", "m\\"])
def test_a_model_name_that_reads_as_markup_is_shown_as_written(
    spec: CampaignSpec, name: str
) -> None:
    """`[red]m[/red]x` was drawn as a red "mx" in the table and in "tokens in for mx" (and a
    `[link=...]` name as a bare link): every other command shows the name as written. Its
    first mend, markup escaped, showed `m\\` with its trailing backslash twice."""
    marked = replace(spec, models=(replace(spec.models[0], name=name),))
    line = PlanLine(name, "x", queries=3, tokens_in=10, tokens_out=5, tokens_out_max=9)
    out = io.StringIO()
    _print_tables(Console(file=out, width=200), "costs", summarise(price_lines(marked, [line])))
    text = out.getvalue()
    assert f"│ {name} " in text and f"{name}\\" not in text
    assert f"tokens in for {name}: " in text


def test_unpriced_plans_say_so_instead_of_showing_a_cost(spec: CampaignSpec) -> None:
    bare = replace(spec, models=tuple(replace(m, price_in_per_mtok=None, price_out_per_mtok=None,
                                              batch_price_in_per_mtok=None,
                                              batch_price_out_per_mtok=None)
                                      for m in spec.models))  # fmt: skip
    out = io.StringIO()
    _print_tables(Console(file=out, width=200), "costs", summarise(price_lines(bare, lines())))
    assert "no model has prices set, so no cost is shown" in " ".join(out.getvalue().split())


def test_a_saved_estimate_keeps_tokens_not_costs_or_modes() -> None:
    # Costs and the dispatch mode come from the spec of each resume (both may change).
    assert "tokens_in" in _KEPT and "tokens_out_max" in _KEPT
    assert not {"cost_usd", "batch_cost_usd", "batch_cost_usd_max", "dispatch"} & set(_KEPT)


def test_max_cost_checks_the_estimate_at_each_models_dispatch_mode(tmp_path: Path) -> None:
    # Batch prices above the live ones (legal, if odd) tell the two estimates apart: the live
    # one fits under --max-cost 1, the batch one does not, and the model dispatches in batch.
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "maxcost"\n[data]\nstock_days = 2\n[[models]]\nname = "m"\nprovider = "sim"\n'
        'model = "sim-coherent"\ndispatch = "batch"\nprice_in = 0.001\nprice_out = 0.001\n'
        "batch_price_in = 1000\nbatch_price_out = 1000\n[[arms]]\nname = \"baseline\"\n",
        encoding="utf-8",
    )
    with pytest.raises(RunError, match=r"estimated cost \$[\d,.]+ exceeds --max-cost \$1\.00"):
        asyncio.run(run_campaign(spec, tmp_path / "run", max_cost=1.0, progress=False,
                                 console=Console(file=io.StringIO())))  # fmt: skip
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_rate_limits_that_hold_a_model_to_hours_are_said_by_hand() -> None:
    """A `tpm` of 50 (meant as 50,000) held 155 queries to about seven hours, and nothing
    said so before the run. By hand, from the lines above: b asks 5 queries of 1,250,000
    tokens in all; at tpm 10,000 that is 125 minutes, at rpm 2 two and a half. c (3,100,000 tokens)
    at rpm 60 alone needs 7 / 60 of a minute: under an hour, no line. a is in batch."""
    raw = {
        **RAW,
        "models": [
            {**RAW["models"][0], "tpm": 2.0},  # type: ignore[index]
            {**RAW["models"][1], "rpm": 2.0, "tpm": 10_000.0},  # type: ignore[index]
            {**RAW["models"][2], "rpm": 60.0},  # type: ignore[index]
        ],
    }
    spec = parse_spec(raw, Path("costs.toml"), arm_names={"baseline"})
    summary = summarise(price_lines(spec, lines()))
    assert limit_floors(spec, summary) == [
        "at its rate limits (rpm 2, tpm 10,000), b needs at least 2:05 (hours:minutes) for its "
        "5 queries"
    ]
    # A fractional rpm paces whole requests: 1.5 sends 1 a minute, so 5 queries at rpm 1.5
    # and tpm 1e9 take 5 minutes (3:20 at 1.5), 75 queries an hour and a quarter.
    one = {**RAW["models"][1], "rpm": 1.5, "tpm": 1e9}  # type: ignore[index]
    slow = parse_spec({**RAW, "models": [one]}, Path("costs.toml"), arm_names={"baseline"})
    row = {"queries": 75, "tokens_in": 0, "tokens_out": 0, "dispatch": "live"}
    assert floor_hours(slow.models[0], row) == pytest.approx(75 / 60)


def test_plan_says_the_floor_and_its_json_carries_it(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from runs.cli import app

    path = tmp_path / "slow.toml"
    path.write_text(
        'name = "slow"\nseed = 1\n[[models]]\nname = "sim"\nprovider = "sim"\n'
        'model = "sim-coherent"\ntpm = 50\n[[arms]]\nname = "families/isolated"\n',
        encoding="utf-8",
    )
    said = CliRunner().invoke(app, ["plan", str(path)])
    assert said.exit_code == 0, said.output
    assert "at its rate limits (tpm 50), sim needs at least " in said.stdout
    row = json.loads(CliRunner().invoke(app, ["plan", str(path), "--json"]).stdout)["by_model"]
    hours = (row["sim"]["tokens_in"] + row["sim"]["tokens_out"]) / 50 / 60
    assert row["sim"]["min_hours_at_limits"] == pytest.approx(hours) and hours > 1


def test_plan_prints_a_fine_tunes_name_as_written(tmp_path: Path) -> None:
    """rich turned `:cat:` in `ft:gpt-4o-mini:acme:cat:x` (a fine-tune's id, a natural
    model name) into an emoji: the commands' consoles now write emoji codes as written."""
    name = "ft:gpt-4o-mini:acme:cat:x"
    spec = tmp_path / "s.toml"
    spec.write_text(
        f'name = "s"\n[data]\nstock_days = 2\n[[models]]\nname = "{name}"\nprovider = "sim"\n'
        'model = "sim-noisy"\n[[arms]]\nname = "baseline"\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["plan", str(spec)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"tokens in for {name}: " in result.output
    assert f"│ {name} " in result.output


def test_an_estimate_over_the_cap_is_said_with_decimals_enough_to_see_it() -> None:
    """An estimate of $0.0158 over a cap of $0.0151 read "$0.02 exceeds --max-cost $0.02"."""
    from engine.spend import beside_cap, dollars_apart, typed_dollars

    assert dollars_apart(0.0158, 0.0151) == ("$0.0158", "$0.0151")
    assert dollars_apart(1234.5, 1.0) == ("$1,234.50", "$1.00")
    assert dollars_apart(0.0158, -0.0 + 0.0) == ("$0.02", "$0.00")
    # a cap that is not 0 is not said as $0.00 (a review's `--max-cost 0.0000001`)
    assert dollars_apart(0.0123, 0.0000001) == ("$0.01230000", "$0.00000010")
    assert dollars_apart(0.0123, 0.00001) == ("$0.012300", "$0.000010")
    # what is left under a cap is computed: its float's seventeen digits are not shown
    assert dollars_apart(0.0058123, 0.8 - 0.7942) == ("$0.005812", "$0.005800")
    # a cap far below the estimate: cents tell them apart (not the cap's seven decimals)
    assert beside_cap(0.0123, 0.0000001) == ("$0.01", "$0.0000001")
    assert beside_cap(0.0123, 0.00001) == ("$0.01", "$0.00001")
    # `--max-cost 1e-20` said "estimated cost $0.01586500000000000063": float noise
    assert beside_cap(0.015865, 1e-20) == ("$0.02", "$0.00000000000000000001")
    # a cap of many decimals near it: the estimate's own digits and three at most
    assert beside_cap(0.1, 0.09999999999999) == ("$0.10", "$0.09999999999999")
    # no zeros past the estimate's own digits (a reviewer's "$0.000000100")
    assert beside_cap(1e-7, 1e-9) == ("$0.0000001", "$0.000000001")
    assert typed_dollars(0.015) == "$0.015" and typed_dollars(1234.5) == "$1,234.50"


@pytest.mark.parametrize(
    ("cost", "cap", "said"),
    [
        # "estimated cost $0.02 exceeds --max-cost $0.01": cents misprinted the cap
        (0.0158, 0.015, ("$0.016", "$0.015")),
        (0.0151, 0.015, ("$0.0151", "$0.015")),  # $0.015 beside $0.015 does not read apart
        (0.01501, 0.015, ("$0.01501", "$0.015")),
        (2.0, 1.999, ("$2.00", "$1.999")),
        (1e-9, 0.0, ("$0.000000001", "$0.00")),
    ],
)
def test_the_cap_is_said_as_given_and_the_estimate_above_it(
    cost: float, cap: float, said: tuple[str, str]
) -> None:
    from engine.spend import beside_cap

    assert beside_cap(cost, cap) == said


def test_a_cap_of_a_tenth_of_a_cent_is_said_as_given(tmp_path: Path) -> None:
    """`--max-cost 0.012` read "--max-cost $0.0120" (and 0.015 "$0.01")."""
    code, output = _priced_run(tmp_path, "0.012")
    assert code == 2, output
    assert "exceeds --max-cost $0.012; nothing was sent" in output, output
    assert re.search(r"estimated cost \$0\.0\d\d exceeds", output), output  # the cap's decimals


def _priced_run(tmp_path: Path, max_cost: str) -> tuple[int, str]:
    """`dutchbook run` of a small priced simulator campaign with `--max-cost max_cost`."""
    from typer.testing import CliRunner

    from runs.cli import app

    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "capped"\n[data]\nstock_days = 2\n[[models]]\nname = "m"\nprovider = "sim"\n'
        'model = "sim-coherent"\nprice_in = 1.0\nprice_out = 2.0\n[[arms]]\nname = "baseline"\n',
        encoding="utf-8",
    )
    done = CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "run"),
                                    "--max-cost", max_cost])  # fmt: skip
    return done.exit_code, done.output


def test_max_cost_inf_is_no_cap(tmp_path: Path) -> None:
    """It ran as a cap of infinity: "spend: $0.0148 of the $inf cap"."""
    code, output = _priced_run(tmp_path, "inf")
    assert code == 0, output
    assert "$inf" not in output and "spend: " not in output, output


def test_max_cost_minus_zero_is_zero(tmp_path: Path) -> None:
    """It was said "--max-cost $-0.00"."""
    code, output = _priced_run(tmp_path, "-0")
    assert code == 2, output
    assert "exceeds --max-cost $0.00; nothing was sent" in output, output


def test_an_arm_whose_inputs_are_missing_is_said_beside_the_total(tmp_path: Path) -> None:
    """The headline arm without headlines: `plan` printed a total as for a spec that runs,
    and only `--json`'s `approximate_arms` said its tokens were borrowed and `run` would
    refuse it."""
    spec = tmp_path / "headline.toml"
    spec.write_text(
        'name = "hl"\n[[models]]\nname = "m"\nprovider = "sim"\nmodel = "sim-coherent"\n'
        '[[arms]]\nname = "headline"\n',
        encoding="utf-8",
    )
    planned = CliRunner().invoke(app, ["plan", str(spec)], terminal_width=200)
    assert planned.exit_code == 0, planned.output
    assert (
        "headline: its inputs are missing ([data] headlines), so its tokens are estimated from "
        "the identity arm's prompts; `dutchbook run` refuses this spec until they are given"
    ) in " ".join(planned.output.split())
    ran = CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "out")])
    assert ran.exit_code == 2 and "data.headlines" in ran.output


BEDROCK_BATCH = """
name = "cl"
seed = 3
[data]
stock_days = 2
[[models]]
name = "sonnet"
provider = "bedrock"
model = "anthropic.claude-3-5-sonnet-20240620-v1:0"
dispatch = "batch"
batch_bucket = "s3://dutchbook-batch/runs"  # `plan` builds the batch client
batch_role_arn = "arn:aws:iam::123456789012:role/batch"
[[arms]]
name = "baseline"
"""


@pytest.mark.parametrize(
    ("fallback", "fate"),
    [("", "they wait unasked (batch_fallback = \"live\" would ask them live)"),
     ('batch_fallback = "live"\n', "asked live at its live prices (batch_fallback = \"live\"), "
                                   "which the batch cost above does not count")],
)
def test_plan_says_a_batch_model_below_its_providers_smallest_job(
    tmp_path: Path, fallback: str, fate: str
) -> None:
    """A Bedrock batch model of 28 queries (its jobs hold 100 lines at least) was shown at
    batch prices, with no word that its queries would go live, or wait."""
    spec = tmp_path / "cl.toml"
    text = BEDROCK_BATCH.replace('dispatch = "batch"\n', f'dispatch = "batch"\n{fallback}')
    spec.write_text(text, encoding="utf-8")
    shown = CliRunner().invoke(app, ["plan", str(spec)])
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.stdout.split())
    assert (f"sonnet: 28 queries, fewer than bedrock's minimum of 100 lines per batch job: "
            f"{fate}") in said  # fmt: skip


def test_a_floor_of_minutes_is_said_not_only_of_hours() -> None:
    """`runs/specs/families.toml` rehearsed for six and a half minutes at one model's
    `rpm = 30` (192 queries), and `plan` said nothing: it spoke only at an hour or more.
    By hand: 192 queries at rpm 30 take 6.4 minutes, past `FLOOR_NOTE_MINUTES`; at rpm 60,
    3.2 minutes, under it."""
    assert 3.2 < FLOOR_NOTE_MINUTES < 6.4
    one = {**RAW["models"][1], "rpm": 30.0}  # type: ignore[index]
    spec = parse_spec({**RAW, "models": [one]}, Path("costs.toml"), arm_names={"baseline"})
    name = spec.models[0].name
    row = {"queries": 192, "tokens_in": 0, "tokens_out": 0, "dispatch": "live"}
    summary = {"by_model": {name: row}}
    assert limit_floors(spec, summary) == [
        f"at its rate limits (rpm 30), {name} needs at least 0:06 (hours:minutes) for its "
        "192 queries"
    ]
    assert run_floors(spec, summary, rehearse=True) == [
        f"at its rate limits (rpm 30), {name} needs at least 0:06 (hours:minutes) for its "
        "192 queries; a rehearsal keeps the spec's rate limits"
    ]
    faster = parse_spec(
        {**RAW, "models": [{**one, "rpm": 60.0}]}, Path("costs.toml"), arm_names={"baseline"}
    )
    assert limit_floors(faster, summary) == []


def test_a_rehearsal_says_its_floor_once_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --rehearse` said nothing of the floor either: a user took the six minutes for a
    stall. The floor is lowered to 0 here so that a fast limit (rpm 6,000) is said without
    a test of minutes; a resume, whose figures would count what is answered, says none."""
    import runs.rate_floors

    monkeypatch.setattr(runs.rate_floors, "FLOOR_NOTE_MINUTES", 0.0)
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "paced"\nseed = 2\n[data]\nstock_days = 2\n[[models]]\nname = "w"\n'
        'provider = "groq"\nmodel = "openai/gpt-oss-120b"\nrpm = 6000\n'
        '[[arms]]\nname = "baseline"\n',
        encoding="utf-8",
    )
    said = []
    for _ in range(2):
        console = Console(file=io.StringIO(), width=200)
        asyncio.run(run_campaign(spec, tmp_path / "out", rehearse=True, console=console,
                                 progress=False))  # fmt: skip
        said.append(console.file.getvalue())  # type: ignore[attr-defined]
    floor = re.compile(
        r"at its rate limits \(rpm 6,000\), w needs at least 0:00 \(hours:minutes\) for its "
        r"\d+ queries; a rehearsal keeps the spec's rate limits"
    )
    assert floor.search(said[0]), said[0]
    assert "at its rate limits" not in said[1]
