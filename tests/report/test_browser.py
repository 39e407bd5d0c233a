"""The report page in a real browser: headless Chromium opens `report/index.html` at a
laptop's and a phone's width, and the test checks that it rendered (title, headings, a
screenshot that is not blank), that every image decoded, that the page is no wider than a
phone, and that the browser requested nothing but the file itself and its inline images.

Skipped only when no Chromium is installed (CI installs Debian's `chromium`; see .ci/run).
Set DUTCHBOOK_SCREENSHOTS=DIR to keep the screenshots for a human look.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cdp_browser import chromium_page, find_chromium

CHROMIUM = find_chromium()
if CHROMIUM is None and os.environ.get("DUTCHBOOK_REQUIRE_CHROMIUM"):
    # CI installs Chromium (.ci/run) and sets this: there, a missing browser is a failure.
    raise RuntimeError("DUTCHBOOK_REQUIRE_CHROMIUM is set but no Chromium is on PATH")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium on PATH (apt-get install chromium); the browser check needs it",
)

VIEWPORTS = {"laptop": (1280, 800, False), "phone": (390, 844, True)}

IMAGES = """
Array.from(document.images).map(img => ({
  complete: img.complete, width: img.naturalWidth, height: img.naturalHeight,
  shown: img.getBoundingClientRect().width, alt: img.alt,
  box: img.parentElement.getBoundingClientRect().width,
  data: img.currentSrc.startsWith('data:image/png;base64,')
}))
"""
LAYOUT = """
({title: document.title, h1: document.querySelector('h1')?.textContent,
  figures: document.querySelectorAll('figure').length,
  tables: document.querySelectorAll('table').length,
  scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth})
"""

#: Each table wider than its box, scrolled to its end: how far its first row's label cell
#: (`td.key`) stands from the box's left edge (0 while it stays in place).
PINNED = """
Array.from(document.querySelectorAll('.scroll'))
  .filter(box => box.scrollWidth > box.clientWidth + 1)
  .map(box => {
    box.scrollLeft = box.scrollWidth;
    const cell = box.querySelector('tbody td.key');
    return cell ? cell.getBoundingClientRect().left - box.getBoundingClientRect().left : null;
  })
"""


async def _inspect(page_path: Path, shots: Path, full_page: bool = False) -> dict[str, Any]:
    assert CHROMIUM is not None
    found: dict[str, Any] = {}
    async with chromium_page(CHROMIUM) as page:
        for name, (width, height, mobile) in VIEWPORTS.items():
            await page.open(page_path.resolve().as_uri(), width, height, mobile)
            found[name] = {
                "images": await page.evaluate(IMAGES),
                "layout": await page.evaluate(LAYOUT),
                "requests": list(page.requests),
                "failed": list(page.failed),
            }
            await page.screenshot(shots / f"{name}.png")
            if full_page:  # slow on a tall page: only when a human asked to look
                await page.screenshot(shots / f"{name}-full.png", full_page=True)
            found[name]["pinned"] = await page.evaluate(PINNED)
    return found


def _distinct_colours(path: Path) -> int:
    import matplotlib.image as mpimg

    pixels = mpimg.imread(path)[..., :3].reshape(-1, 3)
    return len(np.unique((pixels * 255).astype(np.uint8), axis=0))


def test_report_page_renders_offline_in_chromium(figures_run: Path, tmp_path: Path) -> None:
    page_path = figures_run / "report" / "index.html"
    keep = os.environ.get("DUTCHBOOK_SCREENSHOTS")
    found = asyncio.run(_inspect(page_path, tmp_path, full_page=bool(keep)))
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for shot in tmp_path.glob("*.png"):
            shutil.copy(shot, Path(keep) / shot.name)
    for name, seen in found.items():
        layout = seen["layout"]
        assert layout["title"] == "dutchbook report: figures", name
        assert layout["h1"].startswith("Coherence report"), name
        assert layout["figures"] == 8 and layout["tables"] >= 3, name
        # Responsive: nothing makes the page wider than the window (tables scroll in a box).
        assert layout["scrollWidth"] <= layout["innerWidth"], (name, layout)
        images = seen["images"]
        assert len(images) == 8, name
        for img in images:
            assert img["data"] and img["complete"], (name, img["alt"])
            assert img["width"] > 300 and img["height"] > 100, (name, img)
            # On a phone a figure keeps a readable width and scrolls sideways in its box.
            assert 0 < img["box"] <= layout["innerWidth"], (name, img)
            assert img["shown"] >= min(img["width"], 640 if name == "phone" else 1), (name, img)
        # Nothing was fetched: the page itself, and its inline images decoded from data: URIs.
        outside = [u for u in seen["requests"] if not u.startswith("data:")]
        assert outside == [page_path.resolve().as_uri()], (name, outside)
        assert seen["failed"] == [], name
        assert _distinct_colours(tmp_path / f"{name}.png") > 50, f"{name} screenshot looks blank"
        # A table wider than its box keeps its label column in place while scrolled: the
        # audit's table is wider than a laptop's box, and every table but one a phone's.
        pinned = seen["pinned"]
        assert pinned and all(p is not None and 0 <= p <= 2 for p in pinned), (name, pinned)


def test_the_browser_check_sees_a_page_that_reaches_out(tmp_path: Path) -> None:
    """The control: a page with one remote image is caught (requested, and it never loads)."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!doctype html><html><head><title>bad</title></head><body><h1>x</h1>"
        '<img src="http://example.invalid/pixel.png" alt="remote"></body></html>',
        encoding="utf-8",
    )
    found = asyncio.run(_inspect(bad, tmp_path))
    for name, seen in found.items():
        outside = [u for u in seen["requests"] if not u.startswith("data:")]
        assert "http://example.invalid/pixel.png" in outside, name
        assert seen["failed"], name
        assert [img["width"] for img in seen["images"]] == [0], name
