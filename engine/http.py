"""Sending one built request and turning transport trouble into a classified `Failure`.

Adapters only see replies that arrived; refused connections, resets and client timeouts
never reach them, so this is the one place those become `connection_error` and `timeout`.
Details keep the exception's kind and the host, never the query string (some providers put
keys there) nor headers.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Mapping
from urllib.parse import urlsplit

import aiohttp
import yarl

from providers.base import Adapter
from providers.types import Completion, Failure, HttpRequest, Outcome


def _where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _unreachable(exc: Exception, cause: OSError, url: str) -> Failure:
    """A connection that never opened: refused (nothing listens there) or a name that does not
    resolve are marked `unreachable`, with the URL and what to check, so a lane whose server is
    down says so at once instead of spending every query's attempts."""
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
    return Failure(
        Outcome.CONNECTION_ERROR, f"{type(exc).__name__} ({cause.errno}) talking to {where}"
    )


#: Distinct URLs `HttpClient` keeps parsed (a campaign has one or a few per model).
_URL_CACHE = 256


class HttpClient:
    """One aiohttp session shared by every lane (connection reuse, one loop)."""

    def __init__(self, *, max_connections: int = 0) -> None:
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._urls: dict[str, yarl.URL] = {}

    def _timeout(self, seconds: float) -> aiohttp.ClientTimeout:
        """One immutable timeout object per distinct value, not one per request."""
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            timeout = self._timeouts[seconds] = aiohttp.ClientTimeout(total=seconds)
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
        self, request: HttpRequest, timeout_s: float
    ) -> tuple[int, Mapping[str, str], bytes] | Failure:
        """The raw reply, or a transport `Failure` (connection error or client timeout)."""
        session = self._session
        if session is None:
            raise RuntimeError("HttpClient used outside `async with`")
        try:
            async with session.request(
                request.method,
                self._url(request.url),
                headers=request.headers,
                data=request.body,
                timeout=self._timeout(timeout_s),
            ) as reply:
                body = await reply.read()
                return reply.status, reply.headers, body
        except TimeoutError:
            return Failure(
                Outcome.TIMEOUT, f"no reply within {timeout_s:g}s from {_where(request.url)}"
            )
        except aiohttp.ClientConnectorError as exc:
            return _unreachable(exc, exc.os_error, request.url)
        except aiohttp.ClientError as exc:
            return Failure(
                Outcome.CONNECTION_ERROR, f"{type(exc).__name__} talking to {_where(request.url)}"
            )
        except OSError as exc:
            return _unreachable(exc, exc, request.url)

    async def send(
        self, adapter: Adapter, request: HttpRequest, timeout_s: float
    ) -> Completion | Failure:
        """Fetch and let the adapter classify the reply."""
        raw = await self.fetch(request, timeout_s)
        if isinstance(raw, Failure):
            return raw
        status, headers, body = raw
        return adapter.parse(status, headers, body)


__all__ = ["HttpClient"]
