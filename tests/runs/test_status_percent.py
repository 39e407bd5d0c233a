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
    assert _eta(entry, live=True) == "5:00"  # spelled as the progress line spells it
    assert _eta({**entry, "lane_state": "probing"}, live=True) == "?"
    assert _eta({**entry, "lane_state": "probing"}, live=False) == ""


def test_a_live_lanes_hold_is_shown_and_counted_and_a_halted_lane_has_no_time_left() -> None:
    """A Retry-After hold showed as "running" with a time left that ignored it; a stopped
    lane in a live run showed a time left it would never use."""
    from runs.commands.status import _eta, _lane_text

    entry = {"planned": 1_000, "accepted": 400, "rate_per_s": 2.0, "lane_state": "running",
             "lane_held_s": 120.4, "lane_held_by": "Retry-After"}  # fmt: skip
    assert _eta(entry, live=True) == "7:00"
    assert _lane_text(entry, "live") == "running: held 2:00 more by Retry-After"
    assert _lane_text(entry, "died") == "running when the run died"  # the hold is long gone
    assert _lane_text({**entry, "lane_held_s": 0.4}, "live") == "running"
    stopped = {**entry, "lane_state": "stopped", "lane_message": "m stopped: 401 bad key"}
    assert _eta(stopped, live=True) == ""
    assert _lane_text(stopped, "live") == "stopped: m stopped: 401 bad key"
    probing = {**entry, "lane_state": "probing", "lane_message": "provider down (503)"}
    assert _lane_text(probing, "died") == "probing when the run died: provider down (503)"


def test_the_time_left_is_in_the_json_and_unknown_is_said_as_the_progress_line_says_it() -> None:
    """`status --json` carried no time left where the table showed one; a lane with no answer
    yet showed a blank where the progress line shows "?"."""
    from engine.console_lines import duration
    from engine.lanes import LaneState, LaneStats
    from runs.commands.status import _eta, lane_eta_s

    entry = {"planned": 1_000, "accepted": 400, "rate_per_s": 2.0, "lane_state": "running",
             "lane_held_s": 60.0}  # fmt: skip
    assert lane_eta_s(entry, live=True) == 360.0 and _eta(entry, live=True) == "6:00"
    fresh = {**entry, "accepted": 0, "rate_per_s": 0.0}
    lane = LaneStats(model="m", provider="p", planned=1_000, state=LaneState.RUNNING,
                     started=1.0, finished=11.0)  # fmt: skip
    assert _eta(fresh, live=True) == duration(lane.eta_s) == "?"
    assert lane_eta_s(fresh, live=True) is None
    for unknown in ({**entry, "lane_state": "probing"}, {**entry, "lane_state": "stopped"},
                    {**entry, "planned": None}):  # fmt: skip
        assert lane_eta_s(unknown, live=True) is None
    assert lane_eta_s(entry, live=False) is None  # no run is asking
    assert lane_eta_s({**entry, "lane_state": "done"}, live=True) == 0.0


def test_a_done_lanes_time_left_is_said_as_the_live_table_and_the_json_say_it() -> None:
    """`status` left a done lane's ETA blank while the live table showed 0:00 and `--json`'s
    `eta_s` was 0."""
    from engine.console_lines import duration
    from engine.lanes import LaneState, LaneStats
    from runs.commands.status import _eta, lane_eta_s

    done = {"planned": 56, "accepted": 44, "rate_per_s": 2.0, "lane_state": "done",
            "lane_gave_up": 12}  # fmt: skip
    lane = LaneStats(model="m", provider="p", planned=56, accepted=44, state=LaneState.DONE)
    assert lane_eta_s(done, live=True) == lane.eta_s == 0.0
    assert _eta(done, live=True) == duration(lane.eta_s) == "0:00"
    assert _eta(done, live=False) == ""  # no run is asking: `eta_s` is null
    running = {**done, "lane_state": "running"}  # stale: the run is gone
    assert _eta(running, live=False) == _eta({**done, "planned": None}, live=True) == ""


def test_a_lane_that_gave_requests_up_is_not_said_done() -> None:
    """A lane whose every request was given up read "done" in the lane column beside its 56
    pending failures: read as success. Said as dispatch's progress line says it."""
    from runs.commands.status import _lane_text

    entry = {"planned": 56, "accepted": 0, "rate_per_s": 0.0, "lane_state": "done",
             "lane_gave_up": 56}  # fmt: skip
    # The state alone: the row's done/planned and pending failures hold the counts.
    assert _lane_text(entry, "finished") == "gave up"
    assert _lane_text({**entry, "accepted": 44, "lane_gave_up": 12}, "live") == "done in part"
    assert _lane_text({**entry, "accepted": 56, "lane_gave_up": 0}, "live") == "done"
    assert _lane_text({**entry, "lane_gave_up": None}, "stopped") == "done"  # an older run's


def test_counts_of_one_are_said_in_the_singular() -> None:
    """"1 attempts, 1 retries over 1 requests" and "1 request(s) failed and are" (said now in
    the audit's words: "retry attempts across")."""
    import io

    from rich.console import Console

    from runs.commands.status import render

    summary = {
        "run_dir": "r", "state": "died", "planned": 2, "accepted": 1, "attempts": 1,
        "retries": 1, "requests_retried": 1, "last_attempt_at": None, "attempts_last_minute": 0,
        "journal_segments": 1, "in_flight": 1, "models": {}, "retries_by_cause": {},
        "pending_failures": {
            "total": 1, "permanent": 1, "by_outcome": {"auth_error": 1}, "failed": 1,
            "failed_by_outcome": {"auth_error": 1},
            "examples": [{"request_id": "q1", "model": "m", "attempts": 1,
                          "outcome": "auth_error", "detail": "bad key"}],
        },
        "sentence": "",
    }  # fmt: skip
    out = io.StringIO()
    render(summary, Console(file=out, width=300, color_system=None))
    said = out.getvalue()
    assert "1 attempt, 1 retry attempt across 1 request, " in said
    summary |= {"retries_by_cause": {"provider_error": 1, "rate_limit": 2}, "models": {"m": {
        "planned": 2, "accepted": 1, "attempts": 1, "retries": 1, "failed": 1}}}
    out = io.StringIO()
    render(summary, Console(file=out, width=300, color_system=None))
    said = out.getvalue()  # the cause and its column in the audit's words
    [header] = [line for line in said.splitlines() if "done/planned" in line]
    assert "retry attempts" in header and "│ rate limits " in said, said
    assert said.index("rate limits") < said.index("provider errors")  # largest first
    assert "not yet answered (1 permanent): authentication errors 1" in said
    assert "1 journal segment not yet compacted" in said
    assert "1 request failed and is not yet answered" in said
    assert "q1 [m] after 1 attempt: auth_error bad key" in said
    assert "1 attempt in flight now" in said


def test_an_example_whose_detail_begins_with_its_outcome_says_it_once() -> None:
    """A tester's `status`: "after 1 attempt: interrupted interrupted: dispatched but no
    result before the process stopped"; and the run's lane line said "686/2232 done" where
    its progress line said "678/2,232"."""
    import io

    from rich.console import Console

    from engine.dispatch import _lane_line
    from engine.lanes import LaneState, LaneStats
    from engine.unresolved import INTERRUPTED_DETAIL
    from runs.commands.status import _say_failures

    pending = {
        "failed": 2, "permanent": 1, "failed_by_outcome": {"interrupted": 1, "auth_error": 1},
        "examples": [
            {"request_id": "q1", "model": "m", "attempts": 1, "outcome": "interrupted",
             "detail": INTERRUPTED_DETAIL},
            {"request_id": "q2", "model": "m", "attempts": 1, "outcome": "auth_error",
             "detail": "bad key"},
        ],
    }  # fmt: skip
    out = io.StringIO()
    _say_failures(pending, Console(file=out, width=300, color_system=None))
    said = out.getvalue()
    assert f"q1 [m] after 1 attempt: {INTERRUPTED_DETAIL}\n" in said
    assert "q2 [m] after 1 attempt: auth_error bad key\n" in said
    lane = LaneStats(model="m", provider="sim", planned=2232, accepted=686,
                     state=LaneState.CANCELLED)  # fmt: skip
    assert _lane_line("m", lane) == "  m: cancelled, 686/2,232 done"
