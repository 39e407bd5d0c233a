"""The shipped specs plan what they claim: the paper's 365,100 elicitations, arm by arm."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import tomllib
from pathlib import Path

import orjson
import pytest

from runs.planner import estimate, summarise
from runs.spec import load_spec

SPECS = Path(__file__).resolve().parents[2] / "runs" / "specs"
WORKHORSE = "gpt-oss-120b"


@pytest.fixture(scope="module")
def paper() -> dict[str, object]:
    return summarise(estimate(load_spec(SPECS / "paper.toml")))


def test_the_paper_spec_plans_the_papers_total(paper: dict[str, object]) -> None:
    total, by_model, by_arm = paper["total"], paper["by_model"], paper["by_arm"]
    assert total["queries"] == 365_100  # type: ignore[index]
    assert by_model[WORKHORSE]["queries"] == 345_500  # type: ignore[index]  # Appendix C
    others = {m: v["queries"] for m, v in by_model.items() if m != WORKHORSE}  # type: ignore[attr-defined]
    assert len(others) == 14 and set(others.values()) == {14 * 100}
    expected = {
        "statistics": 7_000,
        "instructions": 7_000,
        "identity": 7_000,
        "headline": 7_000,
        "complement-pairs": 3_500,
        "relation-poor-pairs": 3_500,
        "full-panel": 500,
        "unresolved/2": 7_000,
        "two-asset": 22_000,
        "horizon/2": 26_000,
        "horizon/3": 61_000,
        "horizon/4": 124_000,
        "linked": 0,
        "dispersed": 0,
    }
    for arm, queries in expected.items():
        assert by_arm[arm]["queries"] == queries, arm  # type: ignore[index]
    assert by_arm["baseline"]["queries"] == 7_000 + 19_600  # type: ignore[index]
    # linked and dispersed questions are all asked already by two-asset and horizon/2
    assert by_arm["linked"]["shared"] == by_arm["dispersed"]["shared"] == 44 * 100 * 5  # type: ignore[index]
    assert total["approximate_arms"] == ["headline"]  # type: ignore[index]  # no headlines shipped


PRICE_KEYS = ("price_in", "price_out", "batch_price_in", "batch_price_out")


def test_the_paper_specs_commented_window_is_the_papers(tmp_path: Path) -> None:
    """Uncommented, as its comment says to do with the paper's data, the window loads as the
    paper's anchor dates (section 3: August 15 to December 23, 2025)."""
    text = (SPECS / "paper.toml").read_text(encoding="utf-8")
    for key in ("anchor_from", "anchor_to"):
        assert text.count(f"# {key} = ") == 1
        text = text.replace(f"# {key} = ", f"{key} = ")
    spec = tmp_path / "paper.toml"
    spec.write_text(text, encoding="utf-8")
    data = load_spec(spec).data
    assert (data.anchor_from, data.anchor_to) == (dt.date(2025, 8, 15), dt.date(2025, 12, 23))


def test_every_price_in_the_paper_spec_carries_its_date_and_source() -> None:
    raw = tomllib.loads((SPECS / "paper.toml").read_text(encoding="utf-8"))
    priced = [m for m in raw["models"] if any(k in m for k in PRICE_KEYS)]
    assert priced, "the paper spec enters at least the prices it could find"
    for model in priced:
        assert model.get("price_date") and model.get("price_source"), model["name"]
    # load_spec checks the date is a real YYYY-MM-DD date and the source a line with a host
    spec = load_spec(SPECS / "paper.toml")
    for model in spec.models:
        has_price = model.price_in_per_mtok is not None or model.batch_price_in_per_mtok is not None
        assert has_price == (model.price_date is not None), model.name


def test_the_paper_plan_prices_the_workhorse_at_its_spec_prices(paper: dict[str, object]) -> None:
    spec = load_spec(SPECS / "paper.toml")
    work = spec.model(WORKHORSE)
    row = paper["by_model"][WORKHORSE]  # type: ignore[index]
    assert work.price_in_per_mtok is not None and work.price_out_per_mtok is not None
    assert work.batch_price_in_per_mtok is not None and work.batch_price_out_per_mtok is not None
    live = (
        row["tokens_in"] * work.price_in_per_mtok + row["tokens_out"] * work.price_out_per_mtok
    ) / 1e6
    batch = (
        row["tokens_in"] * work.batch_price_in_per_mtok
        + row["tokens_out"] * work.batch_price_out_per_mtok
    ) / 1e6
    assert row["cost_usd"] == pytest.approx(live, rel=1e-12)
    assert row["batch_cost_usd"] == pytest.approx(batch, rel=1e-12)
    unpriced = {m.name for m in spec.models if m.price_in_per_mtok is None}
    for name in unpriced:  # no price entered, no cost shown
        assert paper["by_model"][name]["cost_usd"] is None, name  # type: ignore[index]
    total = paper["total"]
    assert total["batch_priced_models"] == sorted(  # type: ignore[index]
        m.name for m in spec.models if m.batch_price_in_per_mtok is not None
    )


def test_the_comment_account_adds_up_to_the_same_total() -> None:
    text = (SPECS / "paper.toml").read_text(encoding="utf-8")
    assert "365,100" in text and "345,500" in text


def test_quickstart_and_families_specs_load_and_plan() -> None:
    quick = summarise(estimate(load_spec(SPECS / "quickstart.toml")))
    assert quick["total"]["queries"] > 1_000
    assert all(name.startswith("sim-") for name in quick["by_model"])
    families = summarise(estimate(load_spec(SPECS / "families.toml")))
    per_model = {m: v["queries"] for m, v in families["by_model"].items()}
    # ~160 calls per model: every statement alone plus each family once (37 families)
    assert len(set(per_model.values())) == 1
    assert 150 <= next(iter(per_model.values())) <= 200


def test_plan_json_from_the_command_line() -> None:
    exe = Path(sys.executable).with_name("dutchbook")
    out = subprocess.run(
        [str(exe), "plan", str(SPECS / "quickstart.toml"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    data = orjson.loads(out.stdout)
    assert set(data) == {"total", "by_model", "by_arm"}
    # issue 13 extends, never renames: batch costs beside live ones, each model's mode
    assert {"cost_usd", "batch_cost_usd", "batch_priced_models"} <= set(data["total"])
    assert all(row["dispatch"] == "live" for row in data["by_model"].values())
    assert all(row["batch_cost_usd"] is None for row in data["by_model"].values())  # unpriced
    assert data["total"]["queries"] == sum(v["queries"] for v in data["by_arm"].values())
