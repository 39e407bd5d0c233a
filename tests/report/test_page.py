"""`report/index.html` is one self-contained page, and `dutchbook report DIR` rebuilds it
from a run folder without a call."""

from __future__ import annotations

import base64
import errno
import html
import math
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import IO, Any

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from engine.audit import audit
from runs.cli import app
from runs.report_page import CSP, render_page, write_page

PNG = b"\x89PNG\r\n\x1a\n"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self.meta: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in {"src", "href", "srcset", "action", "data", "poster"} and value:
                self.urls.append((tag, name, value))
        if tag == "meta":
            self.meta.append(dict(attrs))


def _parse(page: str) -> _Links:
    parser = _Links()
    parser.feed(page)
    return parser


def test_the_page_holds_everything_it_shows(figures_run: Path) -> None:
    page = (figures_run / "report" / "index.html").read_text(encoding="utf-8")
    parsed = _parse(page)
    assert {"script", "link", "iframe", "object", "embed"}.isdisjoint(parsed.tags)
    assert "@import" not in page and "url(" not in page
    csp = [m for m in parsed.meta if m.get("http-equiv") == "Content-Security-Policy"]
    assert [m["content"] for m in csp] == [CSP]
    assert "default-src 'none'" in CSP
    images = [v for tag, name, v in parsed.urls if tag == "img"]
    assert len(images) == 8
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)
    # The only other links are relative ones to the report's own files and anchors.
    for tag, _name, url in parsed.urls:
        if tag == "img":
            continue
        assert not re.match(r"^[a-z][a-z0-9+.-]*:|^//", url), url
        assert url.startswith("#") or (figures_run / "report" / url).is_file(), url
    assert '<meta name="viewport"' in page
    for title in (
        "Leaderboard",
        "Every arm and model",
        "Repeated elicitation",
        "Question families",
    ):
        assert f"<h2>{title}</h2>" in page
    assert "Simulated forecasters:" in page and "sim-noisy" in page
    sentence = audit(figures_run).sentence
    assert "retry attempts across" in sentence
    assert f'<p class="audit">{html.escape(sentence)}</p>' in page


def test_left_out_figures_are_named_with_their_reason_and_text_is_escaped(tmp_path: Path) -> None:
    summary = {
        "rows": [
            {
                "model": "<b>m</b>",
                "arm": "baseline",
                "scored": True,
                "units": 3,
                "profit": {"mean": 0.01, "lo": 0.0, "hi": 0.02},
            }
        ],
        "models": {"<b>m</b>": {"coverage": 1.0}},
    }
    figures = [
        {
            "number": 3,
            "key": "horizons",
            "title": "Assets and horizons",
            "path": None,
            "caption": None,
            "omitted": "neither the two-asset arm nor a horizon arm was run",
        }
    ]
    page = render_page(summary, figures, tmp_path, spec={"name": "x"}, audit_sentence="9 < 10")
    assert "1 model · 1 arm · " in page
    assert "Figure 3 (Assets and horizons) is left out: neither the two-asset arm" in page
    assert "<img" not in page and "<figure" not in page
    assert "&lt;b&gt;m&lt;/b&gt;" in page and "<b>m</b>" not in page
    assert '<p class="audit">9 &lt; 10</p>' in page


def test_a_model_described_in_the_spec_is_described_on_the_page(tmp_path: Path) -> None:
    summary: dict[str, Any] = {"rows": [], "models": {}}
    spec = {
        "name": "x",
        "models": [
            {"name": "gemma", "provider": "openai", "about": "a 270M <base> model"},
            {"name": "plain", "provider": "openai"},
        ],
    }
    page = render_page(summary, [], tmp_path, spec=spec, audit_sentence=None)
    assert '<p class="about"><strong>gemma:</strong> a 270M &lt;base&gt; model</p>' in page
    assert page.count('class="about"') == 1
    assert "0 models · 0 arms" in page
    assert "Simulated forecasters:" not in page


def test_a_right_to_left_name_in_a_sentence_keeps_the_sentence_in_order(tmp_path: Path) -> None:
    """A name in Hebrew or Arabic took the text beside it into its right-to-left run in the
    browser: the audit's "מודל: 24 requests given up ..." read "24 :מודל requests given up",
    and the simulated models' list swapped two such names about their comma. In our
    sentences such a name is now isolated (`<bdi>`); other names are written as they were."""
    hebrew, arabic = "\u05de\u05d5\u05d3\u05dc", "\u0646\u0645\u0648\u0630\u062c"
    spec = {
        "name": "x",
        "models": [
            {"name": hebrew, "provider": "sim", "model": "sim-noisy", "about": "a model"},
            {"name": arabic, "provider": "sim", "model": "sim-coherent"},
            {"name": "m<1>", "provider": "sim", "model": "sim-coherent"},
        ],
    }
    table = pl.DataFrame({"scope": ["model", "model"], "name": [hebrew, "m<1>"]})
    notes = [f"{hebrew}: 24 requests given up with the answer-failure budget spent.", "m<1>: 2."]
    page = render_page(
        {"rows": []}, [], tmp_path, spec=spec, audit_sentence="s", audit_table=table,
        audit_notes=notes,
    )  # fmt: skip
    listed = f"m&lt;1&gt;, <bdi>{hebrew}</bdi>, <bdi>{arabic}</bdi> answered from the local"
    assert f"<strong>Simulated forecasters:</strong> {listed}" in page
    assert f'<p class="about"><strong><bdi>{hebrew}</bdi>:</strong> a model</p>' in page
    assert f"<li><bdi>{hebrew}</bdi>: 24 requests given up" in page
    assert "<li>m&lt;1&gt;: 2.</li>" in page


def test_report_command_rebuilds_the_page_from_the_folder(
    figures_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "copy"
    shutil.copytree(figures_run, run)
    shutil.rmtree(run / "report")
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    assert f"report: {run / 'report' / 'index.html'}" in result.output.replace("\n", "")
    summary = orjson.loads((run / "report" / "summary.json").read_bytes())
    assert summary["figures"]["audit"] == "report/fig8_audit.png"
    page = (run / "report" / "index.html").read_text(encoding="utf-8")
    assert page.count("<img") == 8
    # The same folder gives the same page (figures are deterministic given the data).
    before = page
    write_page(run)
    assert (run / "report" / "index.html").read_text(encoding="utf-8") == before


class _FillsTheDisk:
    """A file whose first write gets half its bytes onto the disk, then finds no room."""

    def __init__(self, handle: IO[Any]) -> None:
        self.handle = handle

    def __enter__(self) -> _FillsTheDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()

    def write(self, data: Any) -> int:
        self.handle.write(data[: len(data) // 2])
        self.handle.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_page_the_disk_cuts_short_leaves_no_temporary(
    figures_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk left `report/index.tmp` (167-209 KB of the page) in the scarce room.
    run = tmp_path / "copy"
    shutil.copytree(figures_run, run)
    report = run / "report"
    before = (report / "index.html").read_bytes()
    real_open = Path.open

    def open_on_a_full_disk(path: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(path, mode, *args, **kwargs)
        return _FillsTheDisk(handle) if "w" in mode and path.parent == report else handle

    monkeypatch.setattr(Path, "open", open_on_a_full_disk)
    with pytest.raises(OSError) as raised:
        write_page(run)
    assert raised.value.errno == errno.ENOSPC
    assert [p.name for p in report.iterdir() if p.name.endswith(".tmp")] == []
    assert (report / "index.html").read_bytes() == before


def test_report_command_on_a_folder_that_is_not_a_run_fails_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "not a run folder" in lines[0], result.output
    assert "Traceback" not in result.output


def test_the_header_names_the_metric_and_clusters_of_the_arms_run(tmp_path: Path) -> None:
    """The paper's arms: profit per unit stake, dates resampled; question families: L1
    profit, whole families resampled (their units' cluster); both when both were run. The
    header names the metric, the guide under it the clusters (`test_the_page_says_the_
    bootstrap_once`)."""

    def header(*arms: tuple[str, str]) -> str:
        rows = [{"model": "m", "arm": arm, "norm": norm, "scored": True} for arm, norm in arms]
        page = render_page({"rows": rows, "models": {}}, [], tmp_path, spec={"name": "x"})
        return page.split('<p class="meta">', 1)[1].split("</ul>", 1)[0]

    paper = header(("baseline", "inf"))
    assert "arbitrage profit per unit stake (lower is more coherent)" in paper
    assert "resample whole clusters (dates)" in paper
    assert "L1" not in paper and "family" not in paper
    families = header(("families/isolated", "l1"), ("families/joint", "l1"))
    assert "L1 arbitrage profit (lower is more coherent)" in families
    assert "resample whole clusters (families)" in families
    assert "per unit stake" not in families
    both = header(("baseline", "inf"), ("families/joint", "l1"))
    assert (
        "arbitrage profit, per unit stake on the stock-return arms and in the L1 metric on the "
        "question-family arms (lower is more coherent)"
    ) in both
    assert (
        "(dates on the stock-return arms, families on the family arms)"
    ) in both


def test_the_page_says_the_bootstrap_once(tmp_path: Path) -> None:
    """The header said "95% intervals from a bootstrap of 2,000 replicates (seed 7)
    clustered by date" above a guide saying "Intervals are 95% percentile bootstraps that
    resample whole clusters (dates)": the page said it twice, in two wordings. It says it
    once, in the guide, with the replicates and seed, as leaderboard.txt's legend does."""
    from runs.report.wording import bootstrap_draws, reading_guide

    row = {"model": "m", "arm": "baseline", "norm": "inf", "scored": True, "clusters": 3,
           "profit": {"mean": 0.01, "lo": 0.005, "hi": 0.015}}  # fmt: skip
    summary = {"rows": [row], "models": {}, "bootstrap_replicates": 2_000, "seed": "<7>"}
    page = render_page(summary, [], tmp_path, spec={"name": "x"})
    header = page.split('<p class="meta">', 1)[1].split("</p>", 1)[0]
    assert "bootstrap" not in header and "clustered" not in header
    guide = reading_guide(["baseline"], draws=bootstrap_draws(2_000, "<7>"))
    said = next(item for item in guide if "bootstrap" in item)
    assert "bootstraps of 2,000 replicates (seed <7>)" in said
    assert f"<li>{html.escape(said)}</li>" in page
    assert page.count("bootstrap") == 1


@pytest.mark.parametrize("name", ["summary.json", "report.md", "leaderboard.txt", "figures.json"])
def test_a_report_file_the_disk_cuts_short_is_left_as_it_was(
    figures_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The report's own files were written in place: a full disk (or a kill) left
    summary.json cut short, which a script reading it met until the next report."""
    run = tmp_path / "copy"
    shutil.copytree(figures_run, run)
    report = run / "report"
    before = (report / name).read_bytes()
    real_open = Path.open

    def open_on_a_full_disk(path: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(path, mode, *args, **kwargs)
        return _FillsTheDisk(handle) if "w" in mode and name in path.name else handle

    monkeypatch.setattr(Path, "open", open_on_a_full_disk)
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 6, result.output
    assert [p.name for p in report.iterdir() if p.name.endswith(".tmp")] == []
    assert (report / name).read_bytes() == before


def test_the_leaderboard_shows_the_baseline_arms_coverage(tmp_path: Path) -> None:
    """A referee: a row read "not scored: coverage 91% under the floor | 93%", the last
    column being the model's coverage over every arm, not the baseline's the floor judged."""
    from runs.report.data import ArmRow
    from runs.report.tables import _render_plain, model_ranking
    from scoring.stats import Interval

    summary = {
        "baseline_arm": "baseline",
        "coverage_floor": 0.92,
        "rows": [
            {"model": "low", "arm": "baseline", "scored": False, "units": 6, "coverage": 0.91,
             "status": "below_coverage_floor"},
            {"model": "high", "arm": "baseline", "scored": True, "units": 6, "coverage": 0.952,
             "profit": {"mean": 0.01, "lo": 0.0, "hi": 0.02}},
        ],
        "models": {"low": {"coverage": 0.93}, "high": {"coverage": 0.93}},
    }
    page = render_page(summary, [], tmp_path, spec={"name": "x"}, audit_sentence="")
    leaderboard = page.split("<h2>Leaderboard</h2>", 1)[1].split("</table>", 1)[0]
    assert "<td>91%</td>" in leaderboard.replace(' class="num"', "")
    assert "95%" in leaderboard and "93%" not in leaderboard
    rows = [ArmRow("high", "baseline", "inf", 6, 3, 0.952, "scored", Interval(0.01, 0.0, 0.02)),
            ArmRow("low", "baseline", "inf", 6, 3, 0.91, "below_coverage_floor")]
    text = _render_plain(model_ranking(rows))
    assert "95%" in text and "91%" in text and "93%" not in text


def test_the_audit_tables_costs_are_shown_as_the_audit_shows_them(tmp_path: Path) -> None:
    """A referee: the page's "cost $" column was rounded to cents, so two models' 0.20 and
    0.08 stood over a total of 0.29, where `dutchbook audit` read $0.2034, $0.0821, $0.2854."""
    table = pl.DataFrame(
        {
            "scope": ["model", "model", "all"],
            "name": ["a", "b", "all"],
            "requests": [10, 10, 20],
            "latency_p50_ms": [12.345, 6.0, 9.0],
            "cost_usd": [0.2034, 0.0821, 0.2854 + 1.5],
        }
    )
    page = render_page({"rows": []}, [], tmp_path, audit_sentence="s", audit_table=table)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page)
    assert [c for c in cells if c.startswith(("0.", "1."))] == ["0.2034", "0.0821", "1.79"]
    assert "12.35" in cells  # other numbers as before


def test_the_audit_tables_causes_follow_the_retry_attempts_in_words(tmp_path: Path) -> None:
    """A referee: the retry causes, last and under code names that could not wrap
    ("rate_limit"), were the columns a laptop's page hid off to the side."""
    table = pl.DataFrame(
        {
            "scope": ["model", "all"], "name": ["a", "all"], "requests": [10, 10],
            "retry_attempts": [5, 5], "given_up": [0, 0], "latency_p50_ms": [12.0, 12.0],
            "retries.rate_limit": [3, 3], "retries.provider_error": [2, 2],
            "retries.timeout": [0, 0],  # no retry of this cause: no column
        }
    )  # fmt: skip
    _, headers, cells = _audit_table_on_the_page(tmp_path, table)
    assert headers == ["model", "requests", "retry attempts", "rate limit", "provider error",
                       "given up", "p50 ms"]  # fmt: skip
    assert cells[:7] == ["a", "10", "5", "3", "2", "0", "12.00"]


def _audit_table_on_the_page(
    tmp_path: Path, table: pl.DataFrame
) -> tuple[str, list[str], list[str]]:
    """The page of a report with only `table` as its audit table: the page, its headers, its
    cells."""
    page = render_page({"rows": []}, [], tmp_path, audit_sentence="s", audit_table=table)
    return (page, re.findall(r"<th[^>]*>([^<]*)</th>", page),
            re.findall(r"<td[^>]*>([^<]*)</td>", page))  # fmt: skip


def test_the_audit_tables_rows_add_up_where_requests_were_not_answered_or_given_up(
    tmp_path: Path,
) -> None:
    """A row of requests neither accepted nor given up ("10 | 4 accepted | given up 1") could
    not be added up: each count that makes up the rest is a column after "given up" where
    some row has one, and none where no row has."""
    table = pl.DataFrame(
        {
            "scope": ["model", "model", "all"], "name": ["a", "b", "all"],
            "requests": [10, 10, 20], "accepted": [4, 10, 14], "given_up": [1, 0, 1],
            "not_attempted": [2, 0, 2], "answers_missing": [3, 0, 3],
            "answers_rejected_on_reparse": [0, 0, 0], "latency_p50_ms": [1.0, 1.0, 1.0],
        }
    )  # fmt: skip
    page, headers, cells = _audit_table_on_the_page(tmp_path, table)
    assert headers == ["model", "requests", "accepted", "given up", "not attempted",
                       "answers missing", "p50 ms"]  # fmt: skip
    assert cells[:7] == ["a", "10", "4", "1", "2", "3", "1.00"]
    assert "requests not yet asked, requests whose accepted answers left" in page


def test_a_long_name_wraps_in_its_cell_and_short_ones_do_not(tmp_path: Path) -> None:
    """A tester's 100-character model name pushed every number of the audit table out of
    its box (cells never wrapped) and widened the page (prose did not break it)."""
    from runs.report_page import STYLE, WRAPPED_CHARS

    long_name, short_name = "X" * 100, "m" * WRAPPED_CHARS
    table = pl.DataFrame(
        {"scope": ["model", "model"], "name": [long_name, short_name], "requests": [1, 2]}
    )
    page = render_page({"rows": []}, [], tmp_path, audit_sentence="s", audit_table=table)
    assert f'<td class="text long key">{long_name}</td>' in page
    assert f'<td class="text key">{short_name}</td>' in page
    assert "td.long { white-space: normal; overflow-wrap: anywhere;" in STYLE
    assert "p, li, h1, figcaption { overflow-wrap: anywhere; }" in STYLE


def test_the_page_says_the_figures_shorten_long_names_when_one_is_long(tmp_path: Path) -> None:
    from runs.report_figures._style import NAME_CHARS

    figures = [{"number": 2, "key": "leaderboard", "title": "t", "path": "fig2.png",
                "caption": "c", "omitted": None}]  # fmt: skip
    (tmp_path / "fig2.png").write_bytes(PNG)
    said = "The figures draw a name longer than"
    for name, shortened in (("m" * NAME_CHARS, False), ("m" * (NAME_CHARS + 1), True)):
        summary = {"rows": [{"model": name, "arm": "baseline", "scored": True, "units": 1,
                             "profit": {"mean": 0.01, "lo": 0.0, "hi": 0.02}}]}  # fmt: skip
        page = render_page(summary, figures, tmp_path, spec={"name": "x"})
        assert (said in page) is shortened


def test_a_family_model_exactly_at_the_floor_is_said_at_or_under_it(tmp_path: Path) -> None:
    """A referee: the families table said "coverage 91% under the floor" of a model whose
    68 of 74 family-passes sat exactly at a floor of 68/74 (the family rule leaves out one
    at the floor too), and the rule's sentence named only "under"."""
    floor = 68 / 74
    families = [{"arm": "families/isolated", "model": "m", "families": 37, "scored": False,
                 "coverage": floor, "status": "below_coverage_floor"}]
    rows = [{"model": "m", "arm": "families/isolated", "scored": False, "units": 37,
             "coverage": floor, "status": "below_coverage_floor"},
            {"model": "m", "arm": "baseline", "scored": False, "units": 6, "coverage": 0.5,
             "status": "below_coverage_floor"}]
    summary = {"baseline_arm": "baseline", "coverage_floor": floor, "rows": rows,
               "families": families}
    page = render_page(summary, [], tmp_path, spec={"name": "x"}, audit_sentence="")
    table = page.split("<h2>Question families</h2>", 1)[1].split("</table>", 1)[0]
    # At the floor, shown as the floor is (68/74: four decimals); it read "91.8918%", under
    # the "91.8919%" the page gives as the floor.
    assert "coverage floor 91.8919%" in page
    assert "not scored: coverage 91.8919% at or under the floor" in table
    assert "coverage 50.0000% under the floor" in page  # a stock arm's rule is "under"
    assert "A model under the coverage floor (on a family arm, at or under it" in page


def test_report_md_says_the_family_floor_rule_where_a_family_arm_is_reported() -> None:
    from runs.report.tables import floor_sentence
    from runs.report.wording import FAMILY_FLOOR_WORDS

    assert floor_sentence(0.9, ["baseline", "families/isolated"]) == (
        f"A model under the coverage floor (90%){FAMILY_FLOOR_WORDS} is not scored."
    )
    assert floor_sentence(0.9, ["baseline"]) == (
        "A model under the coverage floor (90%) is not scored."
    )


def test_an_interval_that_straddles_zero_keeps_its_signs() -> None:
    """A second referee: a difference of -2e-6 to +4e-6 read "+0.00000 [+0.00000, +0.00000]",
    as if the interval held no negative value; only float noise (within the LP certificate's
    1e-9 of 0) reads as 0."""
    from runs.report.tables import _fmt_signed_iv
    from runs.report_page import _iv
    from scoring.stats import Interval

    small = {"mean": 1e-6, "lo": -2e-6, "hi": 4e-6}
    assert _iv(small, signed=True) == "+0.00000 [-0.00000,\u00a0+0.00000]"
    assert _fmt_signed_iv(Interval(1e-6, -2e-6, 4e-6)) == "+0.00000 [-0.00000, +0.00000]"
    assert _iv({"mean": -3e-10, "lo": -5e-10, "hi": 1e-10}, signed=True) == (
        "+0.00000 [+0.00000,\u00a0+0.00000]"
    )


def test_a_difference_of_float_noise_around_zero_is_shown_as_zero() -> None:
    """A referee: "−0.00000 [−0.00000, +0.00000]" for a difference of -7.6e-18, an exact 0."""
    from runs.report.tables import _fmt_iv, _fmt_signed_iv
    from runs.report_page import _iv
    from scoring.stats import Interval

    noise = {"mean": -7.6e-18, "lo": -1e-17, "hi": 2e-18}
    # (the page's: a no-break space inside the brackets, where a narrow cell may not break)
    assert _iv(noise, signed=True) == "+0.00000 [+0.00000,\u00a0+0.00000]"
    assert _iv(noise) == "0.00000 [0.00000,\u00a00.00000]"
    interval = Interval(-7.6e-18, -1e-17, 2e-18)
    assert _fmt_signed_iv(interval) == "+0.00000 [+0.00000, +0.00000]"
    assert _fmt_iv(interval) == "0.00000 [0.00000, 0.00000]"
    assert _iv({"mean": -0.3, "lo": -0.4, "hi": -0.2}, signed=True) == (
        "-0.30000 [-0.40000,\u00a0-0.20000]"
    )


def test_a_referee_finds_the_terms_the_clusters_and_the_figures_data(figures_run: Path) -> None:
    """A referee: the page defined neither its score nor "units", "Brier" or "the paper"; the
    intervals rested on five date clusters it did not show; each figure's alt text repeated
    its title alone; and printed, the wide tables lost their right-hand columns."""
    from runs.report.wording import bootstrap_draws, reading_guide

    page = (figures_run / "report" / "index.html").read_text(encoding="utf-8")
    summary = orjson.loads((figures_run / "report" / "summary.json").read_bytes())
    draws = bootstrap_draws(summary["bootstrap_replicates"], summary["seed"])
    items = reading_guide((r["arm"] for r in summary["rows"]), draws=draws)
    listed = "".join(f"<li>{html.escape(item)}</li>" for item in items)
    assert f'<ul class="guide">{listed}</ul>' in page
    guide = " ".join(items)
    for term in ("Profit: the largest gain a bookie is sure of", "A unit is one set",
                 "Brier: the mean squared error", "Arbitrage-free: the share of families",
                 "Dutch Books for Language Models"):  # fmt: skip
        assert term in guide, term
    md = (figures_run / "report" / "report.md").read_text(encoding="utf-8")
    # report.md defines them alike, its bootstrap with the replicates and seed
    assert guide in " ".join(md.split()) and draws in page
    assert "at most $0.05, the family benchmark's leaderboard score" in guide
    assert reading_guide([]) == []  # no rows: no term to define (it read "probabilities, ;")
    every = page.split("<h2>Every arm and model</h2>", 1)[1].split("</table>", 1)[0]
    assert '<th scope="col">units</th><th scope="col">clusters</th>' in every
    baseline = next(r for r in summary["rows"] if r["arm"] == "baseline" and r["scored"])
    assert f"<td>{baseline['units']}</td><td>{baseline['clusters']}</td>" in every
    alt = page.split('alt="Figure 2:', 1)[1].split('"', 1)[0]
    assert alt == (
        " Model leaderboard: incoherence and accuracy. Its values are in the Leaderboard table."
    )
    assert "@media print" in page and ".scroll { overflow: visible; border: 0; }" in page


def test_a_tables_label_columns_stay_on_a_phone(tmp_path: Path) -> None:
    """At 375 px the arm and model columns filled the screen and scrolled away with the
    numbers: the first two words columns (`key`) stay, 6.9rem each, their words wrapped; at
    any width the first stays (the browser's check, tests/report/test_browser.py, scrolls)."""
    from runs.report_page import STYLE, _key_columns

    assert _key_columns({0, 1}) == {0: " key", 1: " key"}
    assert _key_columns({1}) == {1: " key"}  # the leaderboard's: its rank is no label
    assert _key_columns({0, 2}) == {0: " key"}  # side by side only
    wide, phone = STYLE.split("@media (max-width: 640px)")
    assert "th.key, td.key { position: sticky; left: 0;" in wide
    assert "th.key + th.key, td.key + td.key { position: static; }" in wide
    assert "th.key + th.key, td.key + td.key { position: sticky; left: 6.9rem;" in phone


def test_figure_5s_alt_text_names_the_linked_table_only_where_the_page_has_it(
    tmp_path: Path,
) -> None:
    """Figure 5's alt text always sent a reader to "the Linked against dispersed sets table",
    which the page leaves out where summary.json's `linked_vs_dispersed` is empty (only the
    linked arm ran, or one of the two rows is under the coverage floor) or absent (a summary
    written before it)."""
    from runs.report_page import render_page

    (tmp_path / "fig5_linked.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    figure = {"number": 5, "key": "linked", "title": "Linked against dispersed event sets",
              "path": "fig5_linked.png", "caption": ""}  # fmt: skip
    entry = {"model": "m", "kind": "days", "mean": 0.01, "lo": 0.0, "hi": 0.02,
             "excludes_zero": False, "units": 4}  # fmt: skip
    rows = "the linked and dispersed rows of the Every arm and model table."
    for summary, table in (({"linked_vs_dispersed": [entry]}, True),
                           ({"linked_vs_dispersed": []}, False), ({}, False)):  # fmt: skip
        page = render_page(summary, [figure], tmp_path)
        alt = html.unescape(page.split('alt="', 1)[1].split('"', 1)[0])
        assert alt.endswith(f" Its values are in {rows}") is not table, summary
        assert ("<h2>Linked against dispersed sets</h2>" in page) is table
        assert ("the Linked against dispersed sets table" in alt) is table


def test_a_one_date_difference_on_the_page_shows_its_missing_ends() -> None:
    """One date gives no interval: the page's difference cells (vs baseline, vs marginals,
    linked - dispersed) gave the mean alone where leaderboard.txt gives "[—, —]"."""
    from runs.report_page import _iv

    one_date = {"mean": 0.01, "lo": None, "hi": None}
    assert _iv(one_date, signed=True) == "+0.01000 [—,\u00a0—]"


def test_a_one_date_profit_and_brier_on_the_page_read_as_leaderboard_txt(tmp_path: Path) -> None:
    """A profit and a Brier of one date, whose bootstrap cannot be computed, were the mean
    alone on the page ("0.01500"), where leaderboard.txt and report.md read "0.01500 [—, —]":
    every view spells them alike (`runs.report.wording.interval_text`)."""
    from runs.report.tables import _fmt_iv
    from scoring.stats import Interval

    profit = {"mean": 0.015, "lo": None, "hi": None}
    brier = {"mean": 0.21, "lo": None, "hi": None}
    row = {"model": "m", "arm": "baseline", "norm": "inf", "scored": True, "units": 2,
           "clusters": 1, "coverage": 1.0, "profit": profit, "brier": brier}  # fmt: skip
    page = render_page({"rows": [row], "models": {}}, [], tmp_path, spec={"name": "x"})
    nbsp = "\u00a0"
    for section in ("<h2>Leaderboard</h2>", "<h2>Every arm and model</h2>"):
        table = page.split(section, 1)[1].split("</table>", 1)[0]
        assert f"<td>0.01500 [—,{nbsp}—]</td>" in table, section
        assert f"<td>0.2100 [—,{nbsp}—]</td>" in table, section
    assert _fmt_iv(Interval(0.015, math.nan, math.nan)) == "0.01500 [—, —]"


def test_an_interval_end_that_is_no_number_reads_as_missing() -> None:
    """A summary.json interval whose end is not a number (a hand-edited or foreign file) ended
    the page in a TypeError once every interval went through `interval_text` (a reviewer's);
    the page reads summary.json's numbers defensively elsewhere."""
    from runs.report_page import _iv

    assert _iv({"mean": 0.015, "lo": "0.01", "hi": None}) == "0.01500 [—,\u00a0—]"
    assert _iv({"mean": 0.015, "lo": math.inf, "hi": 0.02}) == "0.01500 [—,\u00a00.02000]"


def test_names_moved_or_left_by_the_page_stay_importable() -> None:
    """Extend, don't rename: `bootstrap_words` (the page's header no longer says it) and
    `runs.design.NOT_FAMILY_FILES_SHOWN` (moved to `panels.families`) are documented names."""
    import runs.design
    from panels.families import NOT_FAMILY_FILES_SHOWN
    from runs.report.wording import bootstrap_words

    assert runs.design.NOT_FAMILY_FILES_SHOWN == NOT_FAMILY_FILES_SHOWN
    assert bootstrap_words(20_000, 7, ["baseline"]) == (
        "95% intervals from a bootstrap of 20,000 replicates (seed 7) clustered by date"
    )
