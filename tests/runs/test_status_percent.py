"""`status`: never shows a run that is not done as 100% (issue 9); its time left."""

from __future__ import annotations

import pytest

from runs.commands.status import percent_done


@pytest.mark.parametrize(
    ("done", "planned", "shown"),
    [(532, 534, "99.6%"), (533, 534, "99.8%"), (534, 534, "100%"), (0, 534, "0%"),
     (267, 534, "50%"), (9_999, 10_000, "99.9%"), (99_999, 100_000, "99.9%"), (1, 3, "33.3%")],
)  # fmt: skip
def test_percent_done_rounds_down(done: int, planned: int, shown: str) -> None:
    assert percent_done(done, planned) == shown


def test_a_live_lanes_time_left_is_not_told_while_its_provider_is_down() -> None:
    from runs.commands.status import _eta

    entry = {"planned": 1_000, "accepted": 400, "rate_per_s": 2.0, "lane_state": "running"}
    assert _eta(entry, live=True) == "0:05:00"
    assert _eta({**entry, "lane_state": "probing"}, live=True) == "?"
    assert _eta({**entry, "lane_state": "probing"}, live=False) == ""
