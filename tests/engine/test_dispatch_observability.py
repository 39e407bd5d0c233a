"""What a person sees: the JSON log, the concise console lines, the live table; none of
them may carry a credential."""

from __future__ import annotations

import io
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from rich.console import Console

from engine.console_lines import LINE_EVERY_S
from engine.dispatch import dispatch
from engine.lanes import LaneState, LaneStats
from engine.logs import CONSOLE_REPEATS, EngineLog
from engine.progress import LINE_LANES, LiveProgress, progress_line, render
from providers.secrets import MASK
from providers.sim.server import SimHandle

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

KEY = "sk-proj-THISISASECRETKEY1234567890"


def test_log_file_is_json_lines_and_console_concise(tmp_path: Path) -> None:
    console = io.StringIO()
    log = EngineLog(tmp_path, console=console, secrets=["hunter2-very-secret"])
    log.info("lane_started", model="m", concurrency=4)
    log.error("lane_stopped", model="m", reason="HTTP 401: bad key hunter2-very-secret")
    log.warning(
        "oops",
        api_key=KEY,
        detail=f"Authorization: Bearer {KEY}",
        url="https://x/?key=AIzaSyA1234567890123456789012",
    )
    log.close()
    lines = (tmp_path / "logs" / "engine.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["event"] for e in events] == ["lane_started", "lane_stopped", "oops"]
    assert all("ts" in e and e["level"] in {"info", "error", "warning"} for e in events)
    text = "\n".join(lines) + console.getvalue()
    assert "hunter2-very-secret" not in text and KEY not in text and "AIzaSy" not in text
    assert "lane started" not in console.getvalue()  # info stays in the file
    assert "dutchbook error: lane stopped: model m, reason " in console.getvalue()


def test_secrets_inside_sets_and_tuples_are_masked_too(tmp_path: Path) -> None:
    """The redactor walks every container a field may be: a set reached the console (its
    items joined) and the file (its repr) unmasked."""
    console = io.StringIO()
    log = EngineLog(tmp_path, console=console, secrets=["hunter2-very-secret"])
    log.warning("oops", model="m", keys={f"Bearer {KEY}"}, more=frozenset(["hunter2-very-secret"]),
                nested=({"x": (KEY,)},), shown=("plain",))  # fmt: skip
    log.close()
    text = (tmp_path / "logs" / "engine.jsonl").read_text() + console.getvalue()
    assert KEY not in text and "hunter2-very-secret" not in text
    [event] = [json.loads(line) for line in (tmp_path / "logs" / "engine.jsonl").open()]
    assert event["shown"] == ["plain"] and event["more"] == [MASK]


def test_words_leaving_other_than_by_the_log_are_masked_as_the_log_masks(tmp_path: Path) -> None:
    """A crashed lane's stop reason is an exception's text, printed by the summary and kept in
    logs/lanes.json: `EngineLog.redact` masks it with the secrets the log masks, those a
    callable declares at that moment included (a token issued mid-run)."""
    issued: list[str] = []
    log = EngineLog(None, console=None, secrets=lambda: ["hunter2-very-secret", *issued])
    issued.append("token-issued-mid-run")
    said = log.redact(
        f"internal error: TypeError: hunter2-very-secret, token-issued-mid-run, {KEY}"
    )
    assert said == f"internal error: TypeError: {MASK}, {MASK}, {MASK}"


def test_an_error_kept_off_the_console_is_still_logged_redacted(tmp_path: Path) -> None:
    console = io.StringIO()
    log = EngineLog(tmp_path, console=console, secrets=["hunter2-very-secret"])
    log.error("disk_full", echo=False, detail="no space left for hunter2-very-secret")
    log.warning("lane_halted", echo=False, model="m", reason="cancelled: stop requested")
    log.close()
    events = [json.loads(line) for line in (tmp_path / "logs" / "engine.jsonl").open()]
    assert [(e["event"], e["level"]) for e in events] == [
        ("disk_full", "error"), ("lane_halted", "warning")
    ]
    assert "hunter2-very-secret" not in events[0]["detail"]
    assert all("echo" not in e for e in events)
    assert console.getvalue() == ""


def test_a_per_request_warning_reaches_the_console_a_few_times_per_model(tmp_path: Path) -> None:
    """A model whose every answer is refused warns once per request: 11,792 console lines in
    one run. Each (event, model) is echoed `CONSOLE_REPEATS` times, then one line says where
    the rest are; the file keeps every one."""
    console = io.StringIO()
    log = EngineLog(tmp_path, console=console)
    for n in range(40):
        for model in ("a", "b"):
            log.warning("answer_retries_stopped", model=model, request_id=f"r{n}")
    log.warning("lane_paused", model="a")
    log.close()
    lines = console.getvalue().splitlines()
    for model in ("a", "b"):
        mine = [line for line in lines if f"model {model}" in line]
        assert [line.split("request id ")[-1] for line in mine[:CONSOLE_REPEATS]] == [
            f"r{n}" for n in range(CONSOLE_REPEATS)
        ]
        assert mine[CONSOLE_REPEATS:CONSOLE_REPEATS + 1] == [
            "dutchbook warning: more answer retries stopped events go only to "
            f"logs/engine.jsonl: model {model}"
        ]
    assert len(lines) == 2 * (CONSOLE_REPEATS + 1) + 1 and "lane paused" in lines[-1]
    events = (tmp_path / "logs" / "engine.jsonl").read_text().splitlines()
    assert len(events) == 81
    bare = io.StringIO()
    quiet = EngineLog(None, console=bare)
    for _ in range(CONSOLE_REPEATS + 3):
        quiet.warning("attempts_exhausted")
    assert bare.getvalue().splitlines()[CONSOLE_REPEATS:] == [
        "dutchbook warning: more attempts exhausted events are not shown"
    ]


def test_progress_table_shows_each_lane() -> None:
    a = LaneStats(model="gpt-x", provider="openai", planned=100, already_accepted=10, accepted=40)
    a.retries.by_cause["rate_limit"] = 3
    b = LaneStats(
        model="llama",
        provider="groq",
        planned=50,
        state=LaneState.STOPPED,
        message="llama (groq) stopped after 3 auth_error failures",
    )
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    console.print(render([a, b]))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "gpt-x" in out and "50/100" in out and "rate_limit 3" in out
    assert "stopped" in out and "auth_error" in out


def test_live_progress_is_inert_without_a_terminal() -> None:
    sink = io.StringIO()
    progress = LiveProgress(Console(file=sink, force_terminal=False))
    progress.start([LaneStats(model="m", provider="p")])
    progress.refresh()
    progress.stop()
    assert not progress.enabled and sink.getvalue() == ""


def test_without_a_terminal_a_line_of_progress_comes_every_minute() -> None:
    """A run paced to hours (a low tpm) said nothing in a log between its first line and its
    last: now one plain line per `LINE_EVERY_S`, and none in a shorter run."""
    now = [1000.0]
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=False, width=80)
    progress = LiveProgress(console, clock=lambda: now[0])
    # `finished` holds the lanes' own clocks still (their rates read time.monotonic).
    slow = LaneStats(model="slow-model", provider="p", planned=1_550, accepted=2, started=1.0,
                     finished=101.0, state=LaneState.RUNNING)  # fmt: skip
    done = LaneStats(model="m2", provider="p", planned=3, accepted=3, state=LaneState.DONE)
    progress.start([slow, done])
    now[0] += LINE_EVERY_S - 1
    progress.refresh()
    assert sink.getvalue() == ""
    now[0] += 1
    for _ in range(3):  # refreshed four times a second: still one line a minute
        progress.refresh()
    line = progress_line([slow, done], LINE_EVERY_S)
    assert sink.getvalue() == line + "\n"
    assert line == (
        "dispatch 1:00: slow-model 2/1,550 (0.0/s, ETA 21:30:00); m2 done 3/3 (0.0/s, ETA 0:00)"
    )
    now[0] += LINE_EVERY_S
    progress.refresh()
    progress.stop()
    assert sink.getvalue().splitlines()[1].startswith("dispatch 2:00: slow-model 2/1,550")
    # A thousand lanes are summed up, not named: the line stayed 40 KB long.
    many = [LaneStats(model=f"m{n:04d}", provider="p", planned=37, accepted=1 + n % 36,
                      started=1.0, finished=11.0) for n in range(1000)]  # fmt: skip
    many[0].state, many[0].accepted = LaneState.STOPPED, 0  # asks nothing more: no time left
    summed = progress_line(many, 61.0)
    answered = sum(1 + n % 36 for n in range(1, 1000))
    # The slowest lane still asking (1 answer in 10 s, 36 left) sets the time left: 6:00.
    assert summed == (
        f"dispatch 1:01: 1,000 models {answered:,}/37,000 ({answered / 10:.1f}/s, ETA 6:00; "
        "1 stopped, 999 waiting)"
    )
    many[1].accepted = 0  # a lane with no answer yet: its time left, so the whole, unknown
    assert "ETA ?;" in progress_line(many, 61.0)
    assert progress_line(many[:LINE_LANES], 1.0).count("; ") == LINE_LANES - 1
    quiet = io.StringIO()
    never = LiveProgress(Console(file=quiet, force_terminal=False), line_every_s=None,
                         clock=lambda: now[0])  # fmt: skip
    never.start([slow])
    now[0] += 10 * LINE_EVERY_S
    never.refresh()
    assert quiet.getvalue() == ""


def test_the_summed_time_left_is_the_slowest_lanes() -> None:
    """Lanes run side by side: the summed line said all that was left over all the rates,
    so a slow lane beside fast ones read as done (1,008 left at 8,010/s: "ETA 0:00", where
    the slow lane alone needs 100 s)."""
    slow = LaneStats(model="slow", provider="p", planned=1_100, accepted=100, started=1.0,
                     finished=11.0, state=LaneState.RUNNING)  # fmt: skip
    fast = [LaneStats(model=f"fast{n}", provider="p", planned=10_001, accepted=10_000,
                      started=1.0, finished=11.0, state=LaneState.RUNNING)
            for n in range(LINE_LANES)]  # fmt: skip
    assert progress_line([slow, *fast], 10.0).endswith("(8010.0/s, ETA 1:40; 9 running)")
    slow.state = LaneState.PROBING
    assert "ETA ?;" in progress_line([slow, *fast], 10.0)


def test_a_providers_hold_is_shown_and_counted_in_the_time_left() -> None:
    """A Retry-After of up to 600 s showed the lane as running, its rate falling, its time
    left as if it were asking. Now the hold is said, and added to the time left."""
    lane = LaneStats(model="m", provider="p", planned=1_000, accepted=300, started=1.0,
                     state=LaneState.RUNNING)  # fmt: skip
    lane.started = time.monotonic() - 100.0
    lane.held_until, lane.held_by = time.monotonic() + 299.6, "Retry-After"
    assert 299 < lane.held_now_s <= 299.6
    eta = lane.eta_s
    assert eta is not None and abs(eta - (299.6 + 700 / (300 / 100))) < 1.0  # hold + rest
    line = progress_line([lane], 100.0)
    assert ", held 4:59 more by Retry-After, ETA " in line, line
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    console.print(render([lane]))
    assert "running: held 4:59 more by Retry-After" in console.file.getvalue()  # type: ignore[attr-defined]
    lane.held_until = time.monotonic() + 0.5  # Groq's sub-second waits would flicker
    assert "held" not in progress_line([lane], 100.0)
    lane.state = LaneState.STOPPED  # a halted lane has no time left, in the line and table
    assert progress_line([lane], 100.0) == "dispatch 1:40: m stopped 300/1,000"
    assert lane.eta_s is None


def test_a_hold_going_on_is_counted_once_in_the_time_left() -> None:
    """The time a Retry-After had lasted went into the rate while what was left of it was
    added too: a lane 100 s in and half done said 200 s left from the hold's start to its
    end. The rate leaves the hold going on out; once it ended, it is in the rate, as the
    lane's pace (`test_a_lane_held_often_is_told_its_pace_over_the_wall_time`)."""
    now = [1_000.0]
    lane = LaneStats(model="m", provider="p", planned=200, accepted=100, started=900.0,
                     state=LaneState.RUNNING, clock=lambda: now[0])  # fmt: skip
    lane.held(1_100.0, "Retry-After")  # 100 s, from now
    for after_s in (0.0, 50.0, 99.0):
        now[0] = 1_000.0 + after_s
        assert lane.rate_per_s == 1.0  # the rate before the hold, not falling
        assert lane.eta_s == pytest.approx((100.0 - after_s) + 100.0)  # the hold left, then 100
    lane.held(1_150.0, "Retry-After")  # made longer while it lasts: it began when it began
    assert lane.held_since == 1_000.0 and lane.held_so_far_s == 99.0
    now[0] = 1_149.9
    assert lane.eta_s == pytest.approx(0.1 + 100.0)
    now[0] = 1_150.0  # ended: its 150 s are in the rate now, 100 answers in 250 s
    assert lane.rate_per_s == pytest.approx(100 / 250)
    assert lane.eta_s == pytest.approx(100 / (100 / 250))
    now[0] = 1_200.0
    assert lane.held_now_s == lane.held_so_far_s == 0.0 and lane.held_total_s == 150.0
    assert lane.rate_per_s == pytest.approx(100 / 300)
    lane.held(1_210.0, "a rate-limit reset")  # a new hold begins now
    now[0] = 1_205.0
    assert lane.held_since == 1_200.0 and lane.held_total_s == 155.0
    assert lane.rate_per_s == pytest.approx(100 / 300)  # its 5 s so far left out
    assert lane.eta_s == pytest.approx(5.0 + 100 / (100 / 300))


def test_a_lane_held_often_is_told_its_pace_over_the_wall_time() -> None:
    """A `flaky` rehearsal's lane, held by a Retry-After most of every second while its
    attempts in flight still came back, said "1,951/6,312 (666.0/s, ETA 0:07)" a minute in
    and "ETA 0:04" at two, where it went at 30/s and took 219 s: its holds were left out
    of the rate, the seconds it answered in all but gone. The rate is the answers over the
    wall time they took; on a fake clock, 30 answers a second, each second held 0.9 s."""
    start = 1_000.0  # a monotonic clock's (0 is no time: `held_since` unset)
    now = [start]
    lane = LaneStats(model="m", provider="p", planned=6_312, started=start,
                     state=LaneState.RUNNING, clock=lambda: now[0])  # fmt: skip
    answers_per_s, held_s = 30, 0.9
    for second in range(60):
        lane.held(start + second + held_s, "Retry-After")
        for answer in range(answers_per_s):
            now[0] = start + second + (answer + 1) / answers_per_s
            lane.accepted += 1
    assert lane.elapsed_s == 60.0 and lane.held_now_s == 0.0
    assert lane.held_total_s == pytest.approx(60 * held_s)
    assert lane.rate_per_s == pytest.approx(answers_per_s)
    assert lane.eta_s == pytest.approx((6_312 - 1_800) / answers_per_s)
    assert "(30.0/s, ETA 2:30)" in progress_line([lane], now[0])


def test_the_time_left_is_never_shorter_than_the_lanes_own_limits_allow() -> None:
    """140 queries at rpm 2: `plan` said "needs at least 1:10", the live line a minute in
    "ETA 45:47" (0.048/s observed, its holds left out) and `status` 25:44, where some 68
    minutes were left. The time left is counted no faster than the lane's `rpm` and `tpm`
    allow; a lane slower than its limits keeps its own rate, and its other rules hold."""
    from engine.lanefile import lane_states
    from engine.status import lane_eta_s

    now = [1_060.0]
    lane = LaneStats(model="m", provider="p", planned=140, accepted=3, started=1_000.0,
                     state=LaneState.RUNNING, rpm=2.0, clock=lambda: now[0])  # fmt: skip
    assert lane.rate_per_s == pytest.approx(0.05)  # faster than rpm 2's 1/30 a second
    assert lane.limit_rate_per_s == pytest.approx(1 / 30)
    assert lane.eta_s == pytest.approx(137 * 30.0)  # 68:30, not 45:40
    # a fractional limit paces whole requests (`engine.limits.whole_per_minute`): rpm 10.5
    # sends 10 a minute, and its time left counts them so
    assert replace(lane, rpm=10.5).limit_rate_per_s == pytest.approx(10 / 60)
    lane.held(1_090.0, "Retry-After")  # what is left of a hold comes first, as before
    assert lane.eta_s == pytest.approx(30.0 + 137 * 30.0)
    # The same number in `logs/lanes.json` and in `status` read from it.
    written = lane_states([lane])["lanes"]["m"]
    assert lane.eta_s is not None and written["eta_s"] == round(lane.eta_s, 1)
    entry = {"planned": 140, "accepted": 3, "lane_state": "running",
             "rate_per_s": written["rate_per_s"], "lane_held_s": written["held_s"],
             "lane_limit_rate_per_s": written["limit_rate_per_s"]}  # fmt: skip
    assert lane_eta_s(entry, live=True) == pytest.approx(lane.eta_s, abs=0.1)
    now[0] = 1_090.0
    slow = LaneStats(model="s", provider="p", planned=140, accepted=3, started=10.0,
                     state=LaneState.RUNNING, rpm=2.0, clock=lambda: now[0])  # fmt: skip
    assert slow.eta_s == pytest.approx(137 / (3 / 1_080.0))  # slower than rpm 2: its own rate
    # tpm: at the tokens its attempts took on average (4,000 at tpm 60,000: 15 a minute).
    tokens = LaneStats(model="t", provider="p", planned=140, accepted=3, started=1_030.0,
                       state=LaneState.RUNNING, tpm=60_000.0, clock=lambda: now[0])  # fmt: skip
    assert tokens.limit_rate_per_s is None and tokens.eta_s == pytest.approx(137 / 0.05)
    for used in (3_000, 5_000, 4_000):
        tokens.book_tokens(used)
    assert tokens.limit_rate_per_s == pytest.approx(0.25)  # not slower than 0.05: unchanged
    tokens.rpm = 2.0  # the slower of the two limits
    assert tokens.eta_s == pytest.approx(137 * 30.0)
    # The documented rules stand: done is 0, no answer yet or a provider down is not known.
    assert LaneStats(model="d", provider="p", planned=9, state=LaneState.DONE, rpm=2.0).eta_s == 0
    fresh = LaneStats(model="f", provider="p", planned=9, started=1.0, rpm=2.0,
                      state=LaneState.RUNNING, clock=lambda: now[0])  # fmt: skip
    assert fresh.eta_s is None
    fresh.state = LaneState.PROBING
    assert fresh.eta_s is None


def test_an_outage_is_left_out_of_the_rate_and_told_as_such() -> None:
    """A lane probing a provider down for three minutes said "2.3/s, ETA 9:58", falling
    every minute; after it came back, the rate still counted the pause. While down, the line
    says for how long and gives no time left; once up, the rate leaves the pauses out."""
    lane = LaneStats(model="m", provider="p", planned=1_000, accepted=300, started=1.0,
                     finished=301.0, state=LaneState.PROBING)  # fmt: skip
    lane.paused_s, lane.paused_since = 50.0, 121.0  # 50 s down before, down since 120 s in
    assert lane.paused_now_s == 180.0
    assert lane.rate_per_s == 300 / (300 - 50 - 180)
    assert lane.eta_s is None
    assert progress_line([lane], 300.0) == "dispatch 5:00: m probing 300/1,000 (provider down 3:00)"
    lane.state, lane.paused_since, lane.paused_s = LaneState.RUNNING, 0.0, 230.0
    assert lane.rate_per_s == 300 / 70 and lane.eta_s == 700 / (300 / 70)
    assert progress_line([lane], 300.0) == "dispatch 5:00: m 300/1,000 (4.3/s, ETA 2:43)"


class _ClosedPipe(io.StringIO):
    """An output whose reader went away (`dutchbook run ... | head -1`): every write fails."""

    writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        raise BrokenPipeError(32, "Broken pipe")


def test_a_progress_line_the_output_refuses_never_stops_the_run() -> None:
    """Printed through rich, a closed pipe became SystemExit inside the event loop and ended
    a run mid-dispatch in tracebacks. The line is dropped, and no more are tried."""
    now = [0.0]
    pipe = _ClosedPipe()
    progress = LiveProgress(Console(file=pipe, force_terminal=False), clock=lambda: now[0])
    progress.start([LaneStats(model="m", provider="p", planned=3)])
    for _ in range(3):
        now[0] += LINE_EVERY_S
        progress.refresh()  # raises nothing
    progress.stop()
    assert pipe.writes == 1


async def test_dispatch_drives_progress_and_logs_summary(
    tmp_path: Path, sim: SimHandle, kit: type[Kit]
) -> None:
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("sim-coherent", 20))
    config, adapter = kit.sim_model("sim-coherent", sim.root_url)
    sink = io.StringIO()
    progress = LiveProgress(Console(file=sink, force_terminal=True, width=160), force=True)
    summary = await dispatch(
        plan,
        tmp_path / "run",
        {config.name: config},
        {config.name: adapter},
        progress=progress,
        log_console=None,
    )
    assert summary.complete
    assert "20/20" in sink.getvalue() and "sim-coherent" in sink.getvalue()
    events = [json.loads(x) for x in (tmp_path / "run/logs/engine.jsonl").read_text().splitlines()]
    names = [e["event"] for e in events]
    assert names[0] == "dispatch_started" and "lane_finished" in names and "summary" in names
    assert any("20 answers accepted" in e.get("line", "") for e in events)


def test_default_console_is_the_current_stderr(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    log = EngineLog(tmp_path)
    log.warning("lane_paused", model="m", reason="quota")
    log.info("quiet_detail", model="m")
    log.close()
    err = capsys.readouterr().err
    assert "lane paused: model m, reason quota" in err and "quiet detail" not in err


def test_attempts_recovered_as_interrupted_are_said_in_a_sentence(tmp_path: Path) -> None:
    """A resume after a kill said `dutchbook warning: interrupted_recovered attempts=16`,
    the log's own spelling, on the console; the file keeps the event and its count."""
    import asyncio
    import os

    from engine.ledger import Ledger
    from tests.engine.conftest import T0, plan_rows, write_plan

    plan = write_plan(tmp_path / "plan.parquet", plan_rows("alpha", 2))
    ledger = Ledger.open(tmp_path)
    for row in plan_rows("alpha", 2):
        ledger.record_dispatch(row["request_id"], 1, "alpha", "sim", T0)
    assert ledger._writer is not None and ledger._writer._fd is not None
    assert ledger._lock_fd is not None
    os.close(ledger._writer._fd)  # killed: no result, no compaction
    os.close(ledger._lock_fd)
    ledger._writer = ledger._lock_fd = None
    console = io.StringIO()
    asyncio.run(dispatch(plan, tmp_path, {}, {}, log_console=console))
    assert console.getvalue().splitlines() == [
        "dutchbook warning: 2 attempts were in flight when an earlier run of this folder "
        "stopped without their replies: they are recorded as interrupted, and their requests "
        "are asked again"
    ]
    events = [json.loads(line) for line in (tmp_path / "logs" / "engine.jsonl").open()]
    recovered = [e for e in events if e["event"] == "interrupted_recovered"]
    assert len(recovered) == 1 and recovered[0]["attempts"] == 2


def test_a_summary_of_one_of_each_says_each_in_the_singular() -> None:
    """The summary said "1 answers accepted", "1 attempts, 1 retry attempts", "through 1
    batch jobs", "1 credential failures", "1 plan rows skipped"."""
    from engine.console_lines import plural
    from engine.dispatch import DispatchSummary

    lane = LaneStats("m", "sim", planned=2, accepted=1, attempts=2, dispatch="batch",
                     jobs_collected=1, state=LaneState.DONE)  # fmt: skip
    lane.retries.by_cause["rate_limit"] = 1
    lane.retries.unsent = 1
    said = "\n".join(DispatchSummary(lanes={"m": lane}, unconfigured={"x": 1}).lines())
    assert said.startswith("1 answer accepted in ")
    assert "2 attempts, 1 retry attempt)" in said
    assert "through 1 batch job," in said and "1 credential failure before sending" in said
    assert "x: 1 plan row skipped" in said
    assert [plural(n, "query", "queries") for n in (0, 1, 2_000)] == [
        "0 queries", "1 query", "2,000 queries"
    ]


def test_a_lane_that_gave_requests_up_is_not_said_done() -> None:
    """A lane whose every request was given up (a simulator model whose every reply failed)
    read "done" in the table, the progress line and the summary, beside "56 gave up": read
    as success. Its state stays `done` (`logs/lanes.json`); what is said names what was
    answered, in the words `dutchbook status` uses (`engine.console_lines.lane_state_said`)."""
    from engine.dispatch import DispatchSummary

    none = LaneStats(model="m", provider="sim", planned=56, state=LaneState.DONE,
                     started=1.0, finished=11.0)  # fmt: skip
    none.retries.answer_budget_spent = 56
    part = LaneStats(model="n", provider="sim", planned=56, accepted=44, state=LaneState.DONE,
                     started=1.0, finished=11.0)  # fmt: skip
    part.retries.exhausted, part.gave_up = 10, 2
    whole = LaneStats(model="w", provider="sim", planned=3, accepted=3, state=LaneState.DONE)
    assert progress_line([none, part, whole], 60.0) == (
        "dispatch 1:00: m gave up: none of 56 answered; "
        "n done in part: 44 of 56 answered, 12 gave up; w done 3/3 (0.0/s, ETA 0:00)"
    )
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    console.print(render([none, part, whole]))
    table = console.file.getvalue()  # type: ignore[attr-defined]
    # The table's state cell says the state alone; done/planned beside it holds the counts.
    rows = {cells[1]: line for line in table.splitlines() if (cells := line.split())[1:2]}
    assert "gave up" in rows["m"] and "0/56" in rows["m"] and "answered" not in rows["m"]
    assert "done in part" in rows["n"] and "44/56" in rows["n"] and "answered" not in rows["n"]
    # Its retries cell counts every request given up, the permanent failures' too (2 of 12).
    assert "(gave up 56)" in rows["m"] and "(gave up 12)" in rows["n"]
    summed = progress_line([none, part, *[whole] * LINE_LANES], 60.0)
    assert summed.endswith("(4.4/s, ETA 0:00; 8 done, 1 done in part, 1 gave up)"), summed
    said = DispatchSummary(lanes={"m": none, "n": part}).lines()
    assert said[1].startswith("  m: gave up, 0/56 done,"), said
    assert said[2].startswith("  n: done in part, 44/56 done,"), said


def test_the_lanes_file_carries_each_lanes_time_left() -> None:
    """`logs/lanes.json` had the rate but not the time left the live table shows."""
    from engine.lanefile import lane_states

    asking = LaneStats(model="a", provider="p", planned=100, accepted=40, started=1.0,
                       finished=21.0, state=LaneState.RUNNING)  # fmt: skip
    fresh = LaneStats(model="b", provider="p", planned=100, state=LaneState.RUNNING)
    lanes = lane_states([asking, fresh])["lanes"]
    assert lanes["a"]["eta_s"] == 30.0 and lanes["b"]["eta_s"] is None
