"""A batch job's file moves as long as the link needs: its timeout bounds each wait.

A chat call's `timeout_s` bounded the whole call of every batch control call too, so a job's
input or results file (100-200 MB at paper scale) on a link slower than 1.7 MB/s timed out
after two minutes, and was sent again from its start, for ever.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from aiohttp import web

from engine.http import HttpClient
from providers.types import Failure, HttpRequest, Outcome

if TYPE_CHECKING:
    from tests.engine.conftest import ServeAny

CHUNKS = 6


async def _slow_file(request: web.Request) -> web.StreamResponse:
    """A results file of six lines, one every 0.15 s: 0.9 s in all, never 0.4 s idle."""
    reply = web.StreamResponse()
    await reply.prepare(request)
    for number in range(CHUNKS):
        await reply.write(b'{"custom_id": "r%d"}\n' % number)
        await asyncio.sleep(0.15)
    await reply.write_eof()
    return reply


async def test_a_transfer_that_keeps_moving_is_not_cut_at_the_calls_timeout(
    serve_any: ServeAny,
) -> None:
    url = f"{await serve_any(_slow_file)}/files/1/content"
    request = HttpRequest("GET", url, {}, b"")
    async with HttpClient() as http:
        whole = await http.fetch(request, 0.4, idle=True)
        cut = await http.fetch(request, 0.4)
    assert not isinstance(whole, Failure) and whole[2].count(b"\n") == CHUNKS
    assert isinstance(cut, Failure) and cut.outcome is Outcome.TIMEOUT


async def test_a_transfer_that_stalls_still_times_out(serve_any: ServeAny) -> None:
    async def stalled(request: web.Request) -> web.StreamResponse:
        reply = web.StreamResponse()
        await reply.prepare(request)
        await reply.write(b'{"custom_id": "r0"}\n')
        await asyncio.sleep(1.5)
        return reply

    url = f"{await serve_any(stalled)}/files/1/content"
    async with HttpClient() as http:
        raw = await http.fetch(HttpRequest("GET", url, {}, b""), 0.3, idle=True)
    assert isinstance(raw, Failure) and raw.outcome is Outcome.TIMEOUT
    assert raw.detail.startswith("no data for 0.3s from "), raw.detail


async def test_a_transfer_past_its_whole_time_says_so_not_that_no_data_came(
    serve_any: ServeAny, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hour's bound, met while bytes still came, was said as "no data for 0.4s"."""
    import engine.http

    monkeypatch.setattr(engine.http, "TRANSFER_TOTAL_S", 0.5)
    url = f"{await serve_any(_slow_file)}/files/1/content"
    async with HttpClient() as http:
        raw = await http.fetch(HttpRequest("GET", url, {}, b""), 0.4, idle=True)
    assert isinstance(raw, Failure) and raw.outcome is Outcome.TIMEOUT
    assert raw.detail.startswith("not done within 0.5s from "), raw.detail
