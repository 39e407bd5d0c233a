"""report.md reads names and messages as text: a model named `<b>x</b>` was bold on GitHub,
an `about` line could carry an `<img>`, and a provider's message with a line break ended
the audit's table. Checked against markdown-it (an independent CommonMark parser, with GFM
tables and strikethrough): what `runs.markdown` writes renders as exactly its characters."""

from __future__ import annotations

import html
import random
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from runs.markdown import table, text
from tests.runs.quiet_campaign import run_quietly

PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
#: Pieces that make markup, alone and in the shapes that matter (links, tags, entities,
#: emphasis inside and around words), with plain letters and a CJK character between.
PIECES = [*"ab1 _*`<>&|~[]()!#\\-+.:/=\"'", "\n", "\r\n", "&amp;", "<b>", "</b>", "1.", "2)",
          "---", "# ", "> ", "+ ", "===",
          "<img src=x>", "[a](b)", "![i](j)", "模", "_x_", "**", "__init__",
          "<http://a.b>"]  # fmt: skip


def _strings(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        s = "".join(rnd.choice(PIECES) for _ in range(rnd.randint(1, 10)))
        one_line = re.sub(r"[\r\n]+", " ", s)
        # Markdown folds runs of spaces and trims a paragraph's ends; so does HTML
        if one_line.strip() == one_line and "  " not in one_line:
            out.append(s)
    return out


def _as_rendered(s: str) -> str:
    """What a renderer must show for `s`: its characters on one line, HTML-escaped."""
    return html.escape(re.sub(r"[\r\n]+", " ", s), quote=False)


@pytest.mark.parametrize("seed", [1, 2])
def test_text_renders_as_its_characters_in_a_paragraph(seed: int) -> None:
    for s in _strings(1_500, seed):
        rendered = PARSER.render(f"x {text(s)} y").strip().replace("&quot;", '"')
        assert rendered == f"<p>x {_as_rendered(s)} y</p>", s


@pytest.mark.parametrize("seed", [5, 6])
def test_text_that_begins_a_paragraph_or_list_item_renders_as_its_characters(seed: int) -> None:
    """Where a line begins, `# x` is a heading, `1. x` a list and `> x` a quote."""
    for s in _strings(1_500, seed):
        as_block = text(s, starts_block=True)
        paragraph = PARSER.render(as_block).strip().replace("&quot;", '"')
        assert paragraph == f"<p>{_as_rendered(s)}</p>", s
        item = PARSER.render(f"- {as_block}").replace("&quot;", '"')
        assert item == f"<ul>\n<li>{_as_rendered(s)}</li>\n</ul>\n", s


@pytest.mark.parametrize("seed", [3, 4])
def test_a_table_cell_renders_as_its_characters(seed: int) -> None:
    for s in _strings(1_500, seed):
        rendered = PARSER.render("\n".join(table(["name", "n"], [[s, "1"]])) + "\n")
        cells = re.findall(r"<td[^>]*>(.*?)</td>", rendered, re.S)
        assert [c.replace("&quot;", '"') for c in cells] == [_as_rendered(s), "1"], s


def test_plain_words_and_intervals_are_left_as_written() -> None:
    """Escapes only where markup could start: a reader of the raw file sees `rate_limit`
    and `0.1 [0.05, 0.2]`, not a wall of backslashes."""
    for plain in ("rate_limit", "auth_error failures", "0.1 [0.05, 0.2]", "50%", "$1.20",
                  "gpt-4o-mini", "模型-α"):  # fmt: skip
        assert text(plain) == plain


NAME = "<b>bold</b> | m_1_"
ABOUT = 'a model <img src=x onerror="alert(1)">\n# not a heading'
SPEC = f"""
name = "markup"
seed = 3
[data]
stock_days = 2
[[models]]
name = {NAME!r}
provider = "sim"
model = "sim-noisy"
about = {ABOUT!r}
[[arms]]
name = "baseline"
"""


def test_a_campaigns_report_md_shows_names_and_about_lines_as_text(tmp_path: Path) -> None:
    run_dir = run_quietly(tmp_path, "markup", SPEC)
    source = (run_dir / "report" / "report.md").read_text(encoding="utf-8")
    rendered = PARSER.render(source)
    assert "<b>" not in rendered and "<img" not in rendered  # no tag from the spec's text
    assert rendered.count(html.escape(NAME, quote=False)) >= 3  # leaderboard, audit, models
    assert "<h1>not a heading</h1>" not in rendered and "# not a heading" in rendered
    # each table still has the columns its header has (a `|` in a name splits no cell)
    for rows in re.findall(r"<table>(.*?)</table>", rendered, re.S):
        row_cells = re.findall(r"<tr>(.*?)</tr>", rows, re.S)
        widths = {len(re.findall(r"<t[hd]", row)) for row in row_cells}
        assert len(widths) == 1, rows
