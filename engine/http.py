"""Sending one built request and turning transport trouble into a classified `Failure`.

Adapters only see replies that arrived; refused connections, resets and client timeouts
never reach them, so this is the one place those become `connection_error` and `timeout`.
One that came once the server took the connection (a reply that could not be read or was cut
short, a reset) is a `BrokenReply`: a lane tells a server answering badly from one not there.
Details keep the exception's kind and the host, never the query string (some providers put
keys there) nor headers.

A live reply's body is read up to `MAX_REPLY_BYTES` (after decompression): a chat completion
is kilobytes, and a server that sends more (a misrouted download, a decompression bomb, a
proxy's endless error page) would otherwise be held whole in memory once per request in
flight. Measured before the cap: replies of 300 MB at concurrency 16 took a run's memory to
about 1 GB, each downloaded in full three times before its answer budget ran out.

Redirects of a request that carries a prompt are not followed (`_redirected`): a 3xx is a
failure naming where it pointed. A GET (a batch job's poll or result download) follows up to
`MAX_REDIRECTS` hops (`_next_hop`), its credential headers left behind on another host, as a
storage service's signed download link needs.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

import aiohttp
import yarl
from aiohttp import hdrs

from providers.base import Adapter
from providers.secrets import redact_failure
from providers.types import Completion, Failure, HttpRequest, Outcome


def _where(url: str) -> str:
    """The URL without its query (a signed link's signature) or a user and password (a
    redirect's `Location` may hold them; a spec's `base_url` may not, `providers.urls`)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


#: OpenSSL's reasons for a handshake with a server that does not speak TLS (a plain-HTTP
#: port): WRONG_VERSION_NUMBER, and RECORD_LAYER_FAILURE from OpenSSL 3.2 on.
NOT_TLS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"})


def _unreachable(exc: Exception, cause: OSError, url: str) -> Failure:
    """A connection that never opened: refused (nothing listens there), a name that does not
    resolve or a TLS handshake that failed are marked `unreachable`, with the URL and what to
    check, so a lane whose server is down says so at once instead of spending every query's
    attempts."""
    where = _where(url)
    if isinstance(cause, ConnectionRefusedError) or cause.errno == errno.ECONNREFUSED:
        return Failure(
            Outcome.CONNECTION_ERROR,
            f"connection refused by {where}: is the server running, on this host and port?",
            unreachable=True,
        )
    if isinstance(cause, socket.gaierror):
        return Failure(
            Outcome.CONNECTION_ERROR,
            f"cannot resolve the host of {where}: is base_url spelled right?",
            unreachable=True,
        )
    if isinstance(cause, ssl.SSLError):
        # Said as "ClientConnectorSSLError (1)" before. An https base_url at a plain-HTTP port
        # or a certificate not trusted here fails every try alike: unreachable, said at once.
        # Another TLS alert (a server's internal error, a bad record in transit, one backend
        # mid-rotation) may pass: it is retried as a connection error.
        lasting = isinstance(cause, ssl.SSLCertVerificationError) or cause.reason in NOT_TLS
        why = getattr(cause, "verify_message", None) or cause.reason or type(cause).__name__
        return Failure(
            Outcome.CONNECTION_ERROR,
            f"TLS handshake with {where} failed ({why}): does the server speak https there"
            " (else base_url starts http://), with a certificate this machine trusts?",
            unreachable=lasting,
        )
    return Failure(
        Outcome.CONNECTION_ERROR, f"{type(exc).__name__} ({cause.errno}) talking to {where}"
    )


#: How much of aiohttp's reason a transport failure's detail keeps.
_WHY_CHARS = 120


def _why(exc: aiohttp.ClientError) -> str:
    """aiohttp's reason, " (Too many headers received)", or the system's for a connection
    error, " (Connection reset by peer)", or "": without it a reply whose headers were too
    long, or whose body fell short of its Content-Length, read only "ClientResponseError",
    and a reset "ClientOSError". Its message alone, never `str(exc)`, which holds the URL (some
    providers put keys in the query); on one line and cut short (a bad status line's message
    quotes the bytes that came instead)."""
    source = exc if isinstance(exc, aiohttp.ClientResponseError) else exc.__cause__
    message = getattr(source, "message", None)
    if not isinstance(message, str) and isinstance(exc, OSError) and exc.errno:
        # The system's words for its errno ("Connection reset by peer"), never its own
        # strerror: aiohttp puts the URL there ("Can not write request body for <url>").
        message = os.strerror(exc.errno)
    words = " ".join(message.split()) if isinstance(message, str) else ""
    return f" ({words[:_WHY_CHARS]})" if words else ""


@dataclass(frozen=True)
class BrokenReply(Failure):
    """A connection error after the server took the connection: a reply aiohttp could not
    read (a bad status line, too many headers), a body cut short, or the connection closed or
    reset with the request sent. The server is there and answering badly, unlike one refused,
    unresolved or silent until the timeout; a lane that had no reply but these says so
    (`engine.lanes`), not "is the server up?"."""


#: aiohttp's errors that come once a connection is open (`ClientConnectorError`, a
#: `ClientOSError` too, is caught before them).
_AFTER_CONNECT = (
    aiohttp.ClientResponseError,
    aiohttp.ClientPayloadError,
    aiohttp.ServerDisconnectedError,
    aiohttp.ClientOSError,
    aiohttp.ClientConnectionResetError,
)


def _client_error(exc: aiohttp.ClientError, url: str) -> Failure:
    """A transport failure other than a connection not opened: a `BrokenReply` when the
    server took the connection (`_AFTER_CONNECT`)."""
    detail = f"{type(exc).__name__}{_why(exc)} talking to {_where(url)}"
    kind = BrokenReply if isinstance(exc, _AFTER_CONNECT) else Failure
    return kind(Outcome.CONNECTION_ERROR, detail)


#: The most bytes of one live reply's body that are read (decompressed), so replies hold at
#: most this much memory per request in flight. Far above any completion the engine asks
#: for (a reply of 64,000 output tokens is well under 1 MiB).
MAX_REPLY_BYTES = 16 * 2**20


def _declared_within(reply: aiohttp.ClientResponse, limit: int) -> bool | None:
    """Whether a body of declared length and no content coding fits `limit`; None when its
    decoded length is not known before reading (chunked, or compressed)."""
    length = reply.content_length
    if length is None or hdrs.CONTENT_ENCODING in reply.headers:
        return None
    return length <= limit


async def _read_counted(reply: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """The body, read chunk by chunk and counted as decoded, and whether it was read whole.
    Once longer than `limit`, nothing more is read and only its first `ERROR_HEAD_BYTES`
    are returned (the chunks read are not joined: up to `limit` bytes per request in
    flight); the connection is then closed rather than reused."""
    chunks: list[bytes] = []
    total = 0
    async for chunk in reply.content.iter_any():
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            head = bytearray()
            for part in chunks:
                head += part[: ERROR_HEAD_BYTES - len(head)]
                if len(head) == ERROR_HEAD_BYTES:
                    break
            return bytes(head), False
    return b"".join(chunks), True


#: How much of an error reply longer than the limit is kept, for its failure's detail.
ERROR_HEAD_BYTES = 300


def _cut_off(head: bytes, limit: int) -> bytes:
    """What an adapter gets of an error reply longer than `limit`: a note saying so, first
    (details are shortened from their end), then the start of the body."""
    note = f"[reply body longer than {limit:,} bytes; only its start was read] "
    return note.encode() + head[:ERROR_HEAD_BYTES]


def _too_long(status: int, url: str, limit: int) -> Failure:
    return Failure(
        Outcome.INVALID_RESPONSE,
        f"reply body longer than {limit:,} bytes from {_where(url)}: not read further",
        http_status=status,
        foreign=True,
        too_long=True,
    )


#: Hops a GET follows (`_next_hop`), each with the whole timeout; a longer chain is a failure.
MAX_REDIRECTS = 5
#: The only headers a GET takes to another origin (`_next_hop`): a storage host's signed link
#: carries its own credential, and S3 refuses a presigned request with an unsigned `x-amz-*`
#: header; every other header (keys, tokens, signatures, a GCP project id) stays behind.
PORTABLE_HEADERS = frozenset({"accept", "accept-encoding", "user-agent"})


def _next_hop(
    reply: aiohttp.ClientResponse, request: HttpRequest, hops: int
) -> HttpRequest | Failure:
    """The request a 3xx to a GET leads to, or the failure saying why it is not followed: a
    request with a body (a prompt), no readable `Location`, too many hops, a scheme other
    than http(s), https to http, or a user and password in the URL. On another origin (a
    batch result's signed download link on a storage host), only `PORTABLE_HEADERS` go."""
    here, location = reply.url, reply.headers.get(hdrs.LOCATION)
    prompt = request.method != "GET"
    if not location:
        return _redirected(reply, None, "no Location", prompt=prompt)
    try:  # the server's URL, taken as written (a signed link's query is checked as sent)
        target = here.join(yarl.URL(location, encoded=True))
        moved = target.origin() != here.origin()  # an odd host name raises only when read
        url = str(target)  # and a port that is not a number, or out of range, when spelled
    except ValueError:  # UnicodeError among them: an IDNA host that does not decode
        return _redirected(reply, None, "an unreadable Location", prompt=prompt)
    why = (
        "the request and its credential go to base_url only; if the API moved there, "
        "set base_url to it"
        if prompt
        else _unfollowed(here, target, hops)
    )
    if why is not None:
        return _redirected(reply, url, why, prompt=prompt)
    headers = request.headers
    if moved:
        headers = {k: v for k, v in headers.items() if k.lower() in PORTABLE_HEADERS}
    return replace(request, url=url, headers=headers)


def _unfollowed(here: yarl.URL, target: yarl.URL, hops: int) -> str | None:
    """Why a GET's hop from `here` to `target` is not taken, or None to take it."""
    if hops >= MAX_REDIRECTS:
        return f"more than {MAX_REDIRECTS} hops"
    if target.scheme not in ("http", "https"):
        return f"a download goes by http(s), not {target.scheme or 'no scheme'}"
    if (here.scheme, target.scheme) == ("https", "http"):
        return "from https to http"
    if target.user is not None or target.password is not None:
        return "a user and password in the URL"
    return None


def _redirected(
    reply: aiohttp.ClientResponse, target: str | None, why: str, *, prompt: bool
) -> Failure:
    """A 3xx not followed (`_next_hop`), and why. aiohttp would resend the request, its
    prompt and every credential header but `Authorization` (Azure's `api-key`, AWS's session
    token) to whatever host `Location` names; no API this engine speaks answers a prompt so.

    One to a request with a `prompt` (a POST) is a `bad_request`: it fails the same way on
    every try (most often an `http://` base_url the server moves to `https://`), so a lane of
    them stops at once (`PERMANENT`) and the requests keep their answer-failure budget for
    when base_url is mended; as an `invalid_response` each try spent that budget, which lasts
    across resumes, and a tiny campaign's requests were given up for good. A GET's hop not
    taken (a batch job's poll or download) is an `invalid_response`, retried as before."""
    to = "" if target is None else f" to {_where(target)}"
    return Failure(
        Outcome.BAD_REQUEST if prompt else Outcome.INVALID_RESPONSE,
        f"HTTP {reply.status} redirect{to} from {_where(str(reply.url))}: not followed ({why})",
        http_status=reply.status,
        foreign=not prompt,
    )


#: Distinct URLs `HttpClient` keeps parsed (a campaign has one or a few per model).
_URL_CACHE = 256


#: The whole of one `fetch(..., idle=True)` at most: an hour, about 200 MB at 55 KB/s.
TRANSFER_TOTAL_S = 3600.0


def _waited(exc: TimeoutError, timeout_s: float, idle: bool) -> str:
    """What a timeout waited for: with `idle`, a server silent for `timeout_s` (aiohttp's
    `ServerTimeoutError`, a read or a connect), else the whole call's time, which is the
    hour of `TRANSFER_TOTAL_S` at least for a transfer still moving."""
    if not idle:
        return f"no reply within {timeout_s:g}s"
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return f"no data for {timeout_s:g}s"
    return f"not done within {max(timeout_s, TRANSFER_TOTAL_S):g}s"


class HttpClient:
    """One aiohttp session shared by every lane (connection reuse, one loop)."""

    def __init__(self, *, max_connections: int = 0) -> None:
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        #: A chat call's whole-call timeouts, and a batch transfer's (`idle`), by seconds.
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._idle_timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._urls: dict[str, yarl.URL] = {}

    def _timeout(self, seconds: float, idle: bool = False) -> aiohttp.ClientTimeout:
        """One immutable timeout object per distinct value, not one per request. `idle`: the
        seconds bound each wait for the server (to connect, for the next bytes), and the
        whole call gets `TRANSFER_TOTAL_S` at least (`fetch`)."""
        if not idle:  # every chat request: one lookup by its float
            timeout = self._timeouts.get(seconds)
            if timeout is None:
                timeout = self._timeouts[seconds] = aiohttp.ClientTimeout(total=seconds)
            return timeout
        timeout = self._idle_timeouts.get(seconds)
        if timeout is None:
            timeout = self._idle_timeouts[seconds] = aiohttp.ClientTimeout(
                total=max(seconds, TRANSFER_TOTAL_S), sock_connect=seconds, sock_read=seconds
            )
        return timeout

    def _url(self, url: str) -> yarl.URL:
        """One parsed URL per distinct string: a model's URL is the same for every request,
        and parsing it each time cost microseconds a request. Bounded, should URLs vary."""
        parsed = self._urls.get(url)
        if parsed is None:
            if len(self._urls) >= _URL_CACHE:
                self._urls.clear()
            # Verbatim: the URL is already percent-encoded and (Bedrock) signed as is; a
            # plain str lets yarl decode `%3A` and the server's signature check fails.
            parsed = self._urls[url] = yarl.URL(url, encoded=True)
        return parsed

    async def __aenter__(self) -> HttpClient:
        connector = aiohttp.TCPConnector(limit=self._max_connections, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(
            connector=connector, auto_decompress=True, trust_env=False
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch(
        self, request: HttpRequest, timeout_s: float, max_bytes: int | None = None, hops: int = 0,
        *, idle: bool = False,
    ) -> tuple[int, Mapping[str, str], bytes] | Failure:
        """The raw reply, or a transport `Failure` (connection error or client timeout).

        `timeout_s` bounds the whole call; with `idle`, each wait for the server instead
        (connecting, or the next bytes of the reply), the whole call `TRANSFER_TOTAL_S`: a
        batch job's input or results file (100-200 MB for a paper-scale job) took longer
        than a chat call's two minutes on a link below 1.7 MB/s, failed, and was sent again
        from its start, for ever.

        With `max_bytes`, a body longer than that is not read further: a success status
        becomes an `invalid_response` failure, an error status reaches the caller with a
        note saying so and the body's first `ERROR_HEAD_BYTES` (its status still classifies
        it; the detail shows what the server began to say). A redirect is followed only by a
        GET (`_next_hop`; `hops` already followed), each hop with the whole timeout."""
        session = self._session
        if session is None:
            raise RuntimeError("HttpClient used outside `async with`")
        try:
            async with session.request(
                request.method,
                self._url(request.url),
                headers=request.headers,
                data=request.body,
                timeout=self._timeout(timeout_s, idle),
                allow_redirects=False,
            ) as reply:
                if 300 <= reply.status < 400:
                    moved = _next_hop(reply, request, hops)
                    if isinstance(moved, Failure):
                        return moved
                    await reply.release()  # the connection back to the pool for the next hop
                    return await self.fetch(moved, timeout_s, max_bytes, hops + 1, idle=idle)
                # Nearly every reply declares a length within the limit: read at once.
                if max_bytes is None or (fits := _declared_within(reply, max_bytes)):
                    return reply.status, reply.headers, await reply.read()
                body, whole = (
                    await _read_counted(reply, max_bytes) if fits is None else (b"", False)
                )
                if whole:
                    return reply.status, reply.headers, body
                if reply.status < 400:
                    return _too_long(reply.status, request.url, max_bytes)
                # Its start, for the failure's detail (declared too long: read it now).
                head = body or await reply.content.read(ERROR_HEAD_BYTES)
                return reply.status, reply.headers, _cut_off(head, max_bytes)
        except TimeoutError as exc:
            waited = _waited(exc, timeout_s, idle)
            return Failure(Outcome.TIMEOUT, f"{waited} from {_where(request.url)}")
        except aiohttp.ClientConnectorError as exc:
            return _unreachable(exc, exc.os_error, request.url)
        except aiohttp.ClientError as exc:
            return _client_error(exc, request.url)
        except OSError as exc:
            return _unreachable(exc, exc, request.url)

    async def send(
        self, adapter: Adapter, request: HttpRequest, timeout_s: float
    ) -> Completion | Failure:
        """Fetch (at most `MAX_REPLY_BYTES` of body) and let the adapter classify the reply.
        A failure made here (a bad status line, a redirect's target) quotes what the server
        sent, which can hold the key it was sent: redacted as the adapter's own are."""
        raw = await self.fetch(request, timeout_s, MAX_REPLY_BYTES)
        if isinstance(raw, Failure):
            return redact_failure(raw, adapter.secrets())
        status, headers, body = raw
        return adapter.parse(status, headers, body)


__all__ = ["MAX_REPLY_BYTES", "BrokenReply", "HttpClient"]
