"""Fault 6 of issue 9: a provider down for a while pauses its lane, which probes one request
at a time without charging each request an attempt, then resumes when the provider is back.

(Against a closed port, the lane used to burn every request's attempts: 1,389 attempts in
498 s and 134 requests given up.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import polars as pl
import pytest
from aiohttp import web
from typer.testing import CliRunner

from engine.audit import audit
from engine.dispatch import DispatchSummary, dispatch
from engine.lanefile import read_lane_states
from engine.outage import OutagePolicy, read_pauses
from engine.retry import RetryPolicy
from engine.scan import scan_attempts, scan_responses
from providers.sim.server import start_sim
from runs.cli import app
from runs.report_page import render_page
from tests.ports import free_port

if TYPE_CHECKING:
    from tests.engine.conftest import Kit, ServeAny

#: Three attempts per request: without the pause, seconds of refused connections exhaust them.
POLICY = RetryPolicy(max_attempts=3, base_s=0.01, cap_s=0.05)
QUICK_OUTAGE = OutagePolicy(streak=5, probe_base_s=0.05, probe_cap_s=0.2)
#: Replies the provider gives before it goes down (of the plan's 60).
UP_FOR_ANSWERS = 5


async def run_with_provider_down_for(
    tmp_path: Path, kit: type[Kit], outage: OutagePolicy, down_s: float,
    policy: RetryPolicy = POLICY,
) -> tuple[DispatchSummary, Path]:
    """Up until it has answered a few requests (a lane that never reached its server stops
    at once instead: a wrong address), down for `down_s`, then up again on the same port.

    "A few answered" is waited for, not a fixed half second: a loaded machine can take
    longer than that to start the dispatch."""
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("sim-a", 60))
    config, adapter = kit.sim_model("sim-a", root, concurrency=4, rpm=1_200)
    run_dir = tmp_path / "run"
    done = asyncio.Event()

    async def provider_goes_down_and_comes_back() -> None:
        handle = await start_sim(port=port)
        async with asyncio.timeout(30):
            while handle.counts().get("answered.sim", 0) < UP_FOR_ANSWERS:
                await asyncio.sleep(0.01)
        await handle.stop()
        await asyncio.sleep(down_s)
        handle = await start_sim(port=port)
        await done.wait()
        await handle.stop()

    outage_task = asyncio.create_task(provider_goes_down_and_comes_back())
    await asyncio.sleep(0.05)
    try:
        summary = await dispatch(
            plan, run_dir, {"sim-a": config}, {"sim-a": adapter}, policy=policy, outage=outage,
            log_console=None,
        )  # fmt: skip
    finally:
        done.set()
        await outage_task
    return summary, run_dir


@pytest.mark.timeout(60)
async def test_a_lane_pauses_and_probes_while_its_provider_is_down(
    tmp_path: Path, kit: type[Kit]
) -> None:
    summary, run_dir = await run_with_provider_down_for(tmp_path, kit, QUICK_OUTAGE, 1.5)
    assert summary.complete
    responses = scan_responses(run_dir).collect()
    assert responses.height == responses["request_id"].n_unique() == 60
    attempts = scan_attempts(run_dir).collect()
    refused = attempts.filter(pl.col("outcome") == "connection_error").height
    assert refused >= QUICK_OUTAGE.streak  # the failures that showed it down, then probes
    # Probes go one at a time with a doubling wait (0.05, 0.1, 0.2, 0.2, ...): over 1.5 s that
    # is a dozen or so, not every worker hammering the closed port.
    assert refused <= QUICK_OUTAGE.streak + 4 + 1.5 / 0.05
    pauses = read_pauses(run_dir)
    assert len(pauses) >= 1 and pauses[0]["model"] == "sim-a" and pauses[0]["probes"] >= 1
    assert "connection_error failures in a row" in pauses[0]["cause"]
    lanes = read_lane_states(run_dir)
    assert lanes is not None and lanes["lanes"]["sim-a"]["pauses"] == len(pauses)
    events = (run_dir / "logs" / "engine.jsonl").read_text()
    assert '"lane_paused"' in events and '"lane_resumed"' in events
    # The pause quotes the failure that made it, address included: its line said only
    # "12 connection_error failures in a row".
    [paused, *_] = [e for e in map(orjson.loads, events.splitlines())
                    if e["event"] == "lane_paused"]  # fmt: skip
    assert paused["last_failure"].startswith("connection refused by http://127.0.0.1:"), paused
    shown = audit(run_dir)
    assert shown.pauses == pauses and shown.to_dict()["pauses"] == pauses
    assert shown.pause_lines()[0].startswith(f"sim-a paused {len(pauses)} time")
    # The report's page shows them too (it showed only the retry sentence and table); the
    # lane finished, so nothing is said about it ending early.
    assert shown.notes() == [f"{line}." for line in shown.pause_lines()]
    page = render_page({"rows": []}, [], run_dir, audit_sentence=shown.sentence,
                       audit_notes=shown.notes())  # fmt: skip
    assert f"<li>{html.escape(shown.notes()[0])}</li>" in page


@pytest.mark.timeout(60)
async def test_without_the_pause_the_same_outage_exhausts_attempts(
    tmp_path: Path, kit: type[Kit]
) -> None:
    never = OutagePolicy(streak=10_000)
    # Nor the grace for refused connections after replies (`Lane._charged`), which alone
    # would carry the requests through this outage too.
    no_grace = dataclasses.replace(POLICY, rate_limit_grace_s=0.0)
    summary, run_dir = await run_with_provider_down_for(tmp_path, kit, never, 1.5, no_grace)
    assert not summary.complete
    assert read_pauses(run_dir) == []


@pytest.mark.timeout(60)
async def test_refused_connections_after_replies_are_not_charged_so_a_short_outage_passes(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Without the pause, the grace alone (`RetryPolicy.rate_limit_grace_s`: a refused
    connection within a minute of a reply is not charged) carries every request through."""
    never = OutagePolicy(streak=10_000)
    summary, run_dir = await run_with_provider_down_for(tmp_path, kit, never, 1.5)
    assert summary.complete and read_pauses(run_dir) == []
    refused = scan_attempts(run_dir).filter(pl.col("outcome") == "connection_error").collect()
    assert refused.group_by("request_id").len()["len"].max() >= POLICY.max_attempts  # type: ignore[operator]


async def test_gate_while_up_passes_at_once_and_while_down_probes() -> None:
    """Up, every attempt passes as no probe through one shared context; down, the first
    attempt after the backoff is a probe, and the gate waits no more once up again."""
    from engine.outage import Outage
    from providers.types import Outcome

    pauses: list[str] = []
    outage = Outage(QUICK_OUTAGE, on_pause=pauses.append, on_resume=lambda pause: None)
    halted = lambda: False  # noqa: E731
    assert outage.gate(halted) is outage.gate(halted)
    async with outage.gate(halted) as probe:
        assert probe is False
    for _ in range(QUICK_OUTAGE.streak):
        outage.on_failure(Outcome.CONNECTION_ERROR, probe=False)
    assert outage.down and pauses
    async with outage.gate(halted) as probe:
        assert probe is True
    outage.on_success()
    async with outage.gate(halted) as probe:
        assert probe is False


def test_foreign_replies_count_as_an_outage_and_a_models_bad_answers_do_not() -> None:
    """A reply not in the provider's format (`foreign`, the lane's choice: only after one in
    the format) is a broken gateway's, as a 5xx is; an answer the parser rejects is the
    model's, an `invalid_response` of the paper's Appendix C, and ends any streak."""
    from engine.outage import Outage
    from providers.types import Outcome

    causes: list[str] = []
    outage = Outage(QUICK_OUTAGE, on_pause=causes.append, on_resume=lambda pause: None)
    for _ in range(3 * QUICK_OUTAGE.streak):
        assert not outage.on_failure(Outcome.INVALID_RESPONSE, probe=False)
    assert not outage.down
    for _ in range(QUICK_OUTAGE.streak - 1):
        outage.on_failure(Outcome.PROVIDER_ERROR, probe=False)
    assert outage.on_failure(Outcome.INVALID_RESPONSE, probe=False, foreign=True)
    assert outage.down and causes[0].startswith("5 replies not in the provider's format")
    # A probe answered in the format, however unusable, ends the pause; a foreign one not.
    assert outage.on_failure(Outcome.INVALID_RESPONSE, probe=True, foreign=True)
    assert outage.down
    assert not outage.on_failure(Outcome.INVALID_RESPONSE, probe=True)
    assert not outage.down


@pytest.mark.timeout(60)
async def test_a_lane_whose_provider_never_replies_stops_after_its_probes(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A server that takes connections and never answers (a black-holed address, a hung
    proxy) gives timeouts, not refusals: the lane used to pause and probe it for ever, so
    the run never ended. Now it stops after `unanswered_probes` failed probes, saying what
    to check, and the rest of the run ends as for any stopped lane."""
    held: list[asyncio.StreamWriter] = []

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # the request is read by no one; no byte is ever sent back

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("silent", 20))
    config, adapter = kit.sim_model(
        "silent", f"http://127.0.0.1:{port}", concurrency=4, timeout_s=0.2
    )
    outage = OutagePolicy(streak=5, probe_base_s=0.05, probe_cap_s=0.2, unanswered_probes=3)
    run_dir = tmp_path / "run"
    try:
        summary = await dispatch(
            plan, run_dir, {"silent": config}, {"silent": adapter}, policy=POLICY,
            outage=outage, log_console=None,
        )  # fmt: skip
    finally:
        server.close()
        for writer in held:
            writer.close()
    lane = summary.lanes["silent"]
    assert not summary.complete and lane.accepted == 0
    assert lane.state.value == "stopped"
    assert "no reply from its provider since this command started" in lane.message
    assert "3 probes failed" in lane.message and "timeout_s (0.2s)" in lane.message
    attempts = scan_attempts(run_dir).collect()
    assert set(attempts["outcome"]) == {"timeout"}
    # A lane that never had an answer pauses after `unanswered_streak` (3) timeouts, not
    # `streak` (5 here, 12 by default); then 3 probes and nothing else. The tries queued for
    # a slot when it went down used to be sent anyway, a timeout each (22 a lane, not 15,
    # against a real black hole with the defaults: 44 minutes).
    assert attempts.height == outage.unanswered_streak + 3
    events = (run_dir / "logs" / "engine.jsonl").read_text(encoding="utf-8")
    assert events.count('"no_answer_yet"') == 1  # said at the first timeout, once
    pauses = read_pauses(run_dir)
    assert [(p["probes"], p["ended"]) for p in pauses] == [(3, "lane stopped while down")]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("down_for_s", [0.4, 60.0])
async def test_a_provider_that_only_ever_errs_stops_its_lane_after_a_while_down(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny, down_for_s: float
) -> None:
    """A gateway answering 502 from the first request was probed for ever: the run never
    ended. A lane that has had no successful reply now stops once its probes failed and it
    has been down `unanswered_down_s`; until then it keeps probing (a provider restarting)."""

    async def bad_gateway(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "upstream down"}}, status=502)

    root = await serve_any(bad_gateway)
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("gw", 10))
    config, adapter = kit.sim_model("gw", root, route="v1", concurrency=4)
    outage = OutagePolicy(
        streak=5, probe_base_s=0.05, probe_cap_s=0.1, unanswered_down_s=down_for_s
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(3.0, stop.set)  # the long case: a user's Ctrl-C
    summary = await dispatch(
        plan, tmp_path / "run", {"gw": config}, {"gw": adapter}, policy=POLICY,
        outage=outage, stop_event=stop, log_console=None,
    )  # fmt: skip
    lane = summary.lanes["gw"]
    probes = read_pauses(tmp_path / "run")[0]["probes"]
    events = (tmp_path / "run" / "logs" / "engine.jsonl").read_text(encoding="utf-8")
    assert '"no_answer_yet"' not in events  # it replies, with errors: the pause says so
    if down_for_s < 1:
        assert lane.state.value == "stopped" and not stop.is_set()
        assert lane.message.startswith("gw (openai): no successful reply from its provider")
        assert "the last: " in lane.message and "502" in lane.message, lane.message
        assert "is the provider up, and the model id right?" in lane.message
        assert probes >= outage.unanswered_probes
    else:  # three failed probes were not enough: it probed on until the stop
        assert lane.state.value == "cancelled" and stop.is_set()
        assert probes > outage.unanswered_probes


def test_a_damaged_pauses_file_is_read_as_far_as_it_can_be(tmp_path: Path) -> None:
    """A line of `logs/pauses.jsonl` that parses but is not a pause (`7`, from a damaged
    disk) ended the audit, and so the report, in an AttributeError; a pause whose seconds
    were not a number, in a ValueError."""
    from engine.ledger import Ledger

    with Ledger.open(tmp_path):
        pass  # an empty ledger: the audit reads the pauses beside it
    (tmp_path / "logs").mkdir(exist_ok=True)
    (tmp_path / "logs" / "pauses.jsonl").write_bytes(
        b'{"model": "m", "seconds": 30.5, "probes": 3}\n7\n[]\n"x"\n'
        b'{"model": "m", "seconds": "abc", "probes": "x"}\n{"model": "m", "secon\n'
    )
    pauses = read_pauses(tmp_path)
    assert [p["seconds"] for p in pauses] == [30.5, "abc"]  # the objects, as written
    assert audit(tmp_path).pause_lines() == [
        "m paused 2 times for 30s while its provider was down (3 probes; "
        "no request was charged an attempt meanwhile)"
    ]


def test_one_pause_of_one_probe_is_said_in_the_singular(tmp_path: Path) -> None:
    """A lane stopped at its first probe (`max_down_s`) read "(1 probes; ...)"."""
    from engine.ledger import Ledger

    with Ledger.open(tmp_path):
        pass
    (tmp_path / "logs").mkdir(exist_ok=True)
    pause = b'{"model": "m", "seconds": 2.4, "probes": 1}\n'
    (tmp_path / "logs" / "pauses.jsonl").write_bytes(pause)
    assert audit(tmp_path).pause_lines() == [
        "m paused 1 time for 2s while its provider was down (1 probe; "
        "no request was charged an attempt meanwhile)"
    ]


async def test_max_down_s_cuts_the_probe_backoff_short_and_says_when_it_is_reached() -> None:
    """With `max_down_s`, a probe goes as the lane has been down that long, not after the
    backoff's next step (here 5 s), and `down_too_long` says the lane may stop; without it,
    a lane is never down too long. A `max_down_s` of 0 or less is no policy."""
    from engine.outage import Outage
    from providers.types import Outcome

    slow = OutagePolicy(streak=1, probe_base_s=5.0, probe_cap_s=5.0)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="max_down_s None or > 0"):
            dataclasses.replace(slow, max_down_s=bad)
    never = Outage(slow, on_pause=lambda cause: None, on_resume=lambda pause: None)
    never.on_failure(Outcome.CONNECTION_ERROR, probe=False)
    assert never.down and not never.down_too_long
    outage = Outage(dataclasses.replace(slow, max_down_s=0.3), on_pause=lambda cause: None,
                    on_resume=lambda pause: None)  # fmt: skip
    outage.on_failure(Outcome.CONNECTION_ERROR, probe=False)
    assert outage.down and not outage.down_too_long
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with asyncio.timeout(3), outage.gate(lambda: False) as probe:
        assert probe is True
    assert 0.25 <= loop.time() - began < 2.0  # at max_down_s, not after probe_base_s
    assert outage.down_s >= 0.3 and outage.down_too_long
    assert outage.on_failure(Outcome.CONNECTION_ERROR, probe=True)  # still not charged
    outage.on_success()
    assert not outage.down and not outage.down_too_long


@pytest.mark.timeout(60)
async def test_a_lane_down_longer_than_its_max_down_s_stops_and_a_resume_finishes(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A provider that answered and then went down was probed for ever, even where its user
    would rather give up (a local server gone for good, overnight): the run sat "probing"
    and never ended. With the model's `max_down_s` the lane stops once down that long, in
    one line saying so, the pause recorded as for any stop; the same folder resumes."""
    from engine.status import status

    port = free_port()
    root = f"http://127.0.0.1:{port}"
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("sim-a", 60))
    # The backoff's first wait (30 s) would outlast the test: the probe goes at max_down_s.
    slow_probes = OutagePolicy(streak=5, probe_base_s=30.0, probe_cap_s=60.0)
    config, adapter = kit.sim_model("sim-a", root, concurrency=4, rpm=1_200, max_down_s=0.5)
    run_dir = tmp_path / "run"
    handle = await start_sim(port=port)

    async def goes_down_for_good() -> None:
        async with asyncio.timeout(30):
            while handle.counts().get("answered.sim", 0) < UP_FOR_ANSWERS:
                await asyncio.sleep(0.01)
        await handle.stop()

    down = asyncio.create_task(goes_down_for_good())
    async with asyncio.timeout(30):
        summary = await dispatch(
            plan, run_dir, {"sim-a": config}, {"sim-a": adapter}, policy=POLICY,
            outage=slow_probes, log_console=None,
        )  # fmt: skip
    await down
    lane = summary.lanes["sim-a"]
    assert not summary.complete and lane.state.value == "stopped"
    assert lane.message.startswith("sim-a (openai) stopped after its provider was down 0:0")
    assert "past its max_down_s of 0.5s" in lane.message and "1 probe failed" in lane.message
    assert "connection refused by http://127.0.0.1:" in lane.message
    # "`dutchbook run` on the same folder", typed so, is refused: the spec is wanted
    assert lane.message.endswith(f"`dutchbook run SPEC --out {run_dir}` resumes it")
    [pause] = read_pauses(run_dir)
    assert pause["ended"] == "lane stopped while down" and pause["probes"] == 1
    assert pause["seconds"] >= 0.5
    lanes = read_lane_states(run_dir)
    assert lanes is not None and lanes["lanes"]["sim-a"]["state"] == "stopped"
    assert lanes["lanes"]["sim-a"]["pauses"] == 1
    events = [e["event"] for e in map(orjson.loads, (run_dir / "logs" / "engine.jsonl")
                                      .read_bytes().splitlines())]  # fmt: skip
    assert events.count("lane_paused") == 1 and "lane_stopped" in events
    shown = status(run_dir)["models"]["sim-a"]
    assert shown["lane_state"] == "stopped" and shown["lane_message"] == lane.message
    [said] = audit(run_dir).lane_end_lines()
    assert "its lane stopped after its provider was down 0:0" in said, said
    # Its requests failed two or three times before the stop, not `max_attempts`: the audit
    # called them given up by the run's max_attempts, where status calls them pending.
    shown = CliRunner().invoke(app, ["audit", str(run_dir)], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    assert "max_attempts" not in shown.stdout, shown.stdout
    note = shown.stdout.splitlines()[1]  # under the title (a warning of no plan on stderr)
    assert note.startswith("sim-a's lane stopped (after its provider was down 0:0"), note
    assert "past its max_down_s of 0.5s): a request counted as given up is one not " in note
    assert "asks again unless its answer-failure budget is spent" in note
    answered = scan_responses(run_dir).collect().height
    assert UP_FOR_ANSWERS <= answered < 60
    # Nothing is lost: the same folder, its provider back, asks only what is left.
    async with await start_sim(port=port):
        again = await dispatch(
            plan, run_dir, {"sim-a": config}, {"sim-a": adapter}, policy=POLICY,
            outage=slow_probes, log_console=None,
        )  # fmt: skip
    assert again.complete
    responses = scan_responses(run_dir).collect()
    assert responses.height == responses["request_id"].n_unique() == 60


@pytest.mark.timeout(60)
async def test_max_down_s_stops_a_lane_whose_provider_only_ever_erred_before_its_own_rule(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    """A lane that never had a successful reply waits `unanswered_down_s` (five minutes by
    default) for a gateway's 502s to end; its model's `max_down_s` is the user's shorter
    limit, and stops it with that lane's own words (what to check)."""

    async def bad_gateway(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "upstream down"}}, status=502)

    root = await serve_any(bad_gateway)
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("gw", 10))
    config, adapter = kit.sim_model("gw", root, route="v1", concurrency=4, max_down_s=0.4)
    outage = OutagePolicy(streak=5, probe_base_s=0.05, probe_cap_s=0.1, unanswered_down_s=60)
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(10.0, stop.set)  # without max_down_s: Ctrl-C
    summary = await dispatch(
        plan, tmp_path / "run", {"gw": config}, {"gw": adapter}, policy=POLICY,
        outage=outage, stop_event=stop, log_console=None,
    )  # fmt: skip
    lane = summary.lanes["gw"]
    assert lane.state.value == "stopped" and not stop.is_set(), lane.message
    assert lane.message.startswith("gw (openai): no successful reply from its provider")
    [pause] = read_pauses(tmp_path / "run")
    assert 0.4 <= pause["seconds"] < 10 and pause["ended"] == "lane stopped while down"
