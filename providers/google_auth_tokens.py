"""OAuth access tokens for Vertex AI through google-auth, cached and refreshed ahead of expiry.

Every Vertex request carries `Authorization: Bearer <token>`. Fetching a token is a blocking
HTTP call to the credential's token endpoint (a service-account file's `token_uri`, or the
gcloud / metadata endpoints behind Application Default Credentials), so it must not happen
per request: `TokenCache` hands out the cached token and refreshes it only when fewer than
`REFRESH_MARGIN_S` seconds remain (a quarter of a shorter-lived token's life), under a lock so
that concurrent builders refresh once. A token the API refuses before it expires is dropped
once (`reject`), so the next request fetches another, as google-auth's `AuthorizedSession`
refreshes on a 401.

Because a refresh blocks, the engine may call an adapter's `build` in a worker thread
(`asyncio.to_thread`); this module is thread-safe for that.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from providers.types import ConfigError

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
#: Refresh when less than this is left: a token must outlive the request it is sent with,
#: including queueing, a slow reply and the engine's client timeout.
REFRESH_MARGIN_S = 300.0
#: The margin of a token issued for less than four margins, as a share of its life: such a
#: token (240 s, say) was never fresh, and every request blocked on a refresh. A quarter keeps
#: it in use for three quarters of its life; a request that outlives it is refused with 401,
#: and `reject` has the next one fetch another.
SHORT_TOKEN_MARGIN_SHARE = 0.25
#: Seconds a token-endpoint call may take before we give up on it.
TOKEN_HTTP_TIMEOUT_S = 30.0
CREDENTIALS_FILE_ENV = "GOOGLE_APPLICATION_CREDENTIALS"


class RefreshableCredentials(Protocol):
    """The part of `google.auth.credentials.Credentials` the cache uses."""

    token: str | None
    expiry: datetime | None

    def refresh(self, request: Any) -> None: ...


class TokenRefreshError(RuntimeError):
    """A token could not be fetched; `retryable` says whether trying again may help.

    The message names where the credential came from (`credentials_source`) and, for a
    refusal, the token endpoint's OAuth error code (`invalid_grant`) only: google-auth's own
    messages can quote the token endpoint's reply, which we do not pass on.
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class _TimeoutRequest:
    """google-auth's urllib3 transport with a default timeout (google-auth sets none)."""

    def __init__(self, timeout_s: float) -> None:
        import urllib3
        from google.auth.transport.urllib3 import Request

        self._inner = Request(urllib3.PoolManager(retries=False))  # type: ignore[no-untyped-call]
        self._timeout_s = timeout_s

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> Any:
        return self._inner(
            url, method=method, body=body, headers=headers,
            timeout=timeout or self._timeout_s, **kwargs,
        )


def default_request_factory() -> Any:
    """The transport token refreshes go through (urllib3: `requests` is not installed)."""
    return _TimeoutRequest(TOKEN_HTTP_TIMEOUT_S)


def _expiry_epoch(expiry: datetime | None) -> float | None:
    """google-auth keeps expiry as a naive UTC datetime; None means it never said."""
    if expiry is None:
        return None
    if expiry.tzinfo is None:
        expiry = expiry.replace(tzinfo=UTC)
    return expiry.timestamp()


def credentials_source(credentials: Any, path: str = "") -> str:
    """Where `credentials` came from, as a refusal opens with it (docs/providers.md: every
    adapter's auth failure does): the key file `GOOGLE_APPLICATION_CREDENTIALS` names (its
    `path`), else Application Default Credentials, from the metadata server (on Google
    Cloud) or gcloud's application-default login. A refusal said only google-auth's class
    name ("token refresh for Credentials was refused"), which every kind shares."""
    if path:
        return f"credentials from {CREDENTIALS_FILE_ENV} ({path})"
    if type(credentials).__module__.startswith("google.auth.compute_engine"):
        return "Application Default Credentials from the metadata server"
    return "Application Default Credentials (gcloud auth application-default login)"


#: The OAuth error codes a token endpoint's refusal is said with: RFC 6749 5.2's, with
#: `access_denied` (its 4.1.2.1), google-auth's reauthentication ones (`invalid_rapt`,
#: `rapt_required`, google.oauth2.reauth) and those it retries (`internal_failure`,
#: `server_error`, `temporarily_unavailable`, google.oauth2._client). Nothing else the
#: endpoint sent is said: any lower-case word was, and a proxy at a key file's `token_uri`
#: could send a 40-character hex secret as its "code".
_OAUTH_ERROR_CODES = frozenset({
    "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
    "unsupported_grant_type", "invalid_scope", "access_denied", "invalid_rapt",
    "rapt_required", "internal_failure", "server_error", "temporarily_unavailable",
})  # fmt: skip


def _refusal_code(exc: Exception) -> str | None:
    """The token endpoint's OAuth error code in a google-auth `RefreshError`, which carries
    the endpoint's parsed reply as its second argument; None when it holds none."""
    reply = exc.args[1] if len(exc.args) > 1 else None
    code = reply.get("error") if isinstance(reply, dict) else None
    return code if isinstance(code, str) and code in _OAUTH_ERROR_CODES else None


class TokenCache:
    """One credential's access token, refreshed when fewer than `margin_s` seconds remain.
    `source` says where the credential came from in a refresh's failure (`credentials_source`
    of the credential, when not given)."""

    def __init__(
        self,
        credentials: RefreshableCredentials,
        *,
        clock: Callable[[], float] = time.time,
        margin_s: float = REFRESH_MARGIN_S,
        request_factory: Callable[[], Any] = default_request_factory,
        source: str | None = None,
    ) -> None:
        self._credentials = credentials
        self._source = source or credentials_source(credentials)
        self._clock = clock
        self._margin_s = margin_s
        self._request_factory = request_factory
        self._request: Any = None
        self._lock = threading.Lock()
        self.refreshes = 0
        #: Seconds the current token was issued for, when this cache fetched it.
        self._lifetime_s: float | None = None
        #: A token the API refused, dropped until the next refresh replaces it.
        self._dropped: str | None = None
        #: Whether the current token replaced a refused one (it is not dropped in its turn).
        self._replacement = False
        #: Guards the two above: `reject` runs on the event loop (an adapter's `parse`) and
        #: must not wait for `_lock`, held through a refresh's blocking call.
        self._rejections = threading.Lock()

    def __repr__(self) -> str:
        return f"TokenCache({type(self._credentials).__name__}, refreshes={self.refreshes})"

    @property
    def quota_project_id(self) -> str | None:
        """The project billed for quota, when the credential names one (`x-goog-user-project`)."""
        value = getattr(self._credentials, "quota_project_id", None)
        return value if isinstance(value, str) and value else None

    def _fresh(self) -> bool:
        token = self._credentials.token
        if not token or token == self._dropped:
            return False
        expires = _expiry_epoch(self._credentials.expiry)
        if expires is None:
            return True
        margin = self._margin_s
        if self._lifetime_s is not None:
            margin = min(margin, self._lifetime_s * SHORT_TOKEN_MARGIN_SHARE)
        return expires - self._clock() > margin

    def reject(self, token: str) -> bool:
        """The API refused `token` (HTTP 401): whether the next request carries another.

        The current token is dropped, so the next `token()` fetches a new one, unless it was
        itself fetched to replace a refused one: then the credential, not the token, is what
        is refused, and the refusals stand as auth errors (a loop of refreshes helps no one).
        A token fetched as the last one neared expiry may be dropped once again.
        """
        with self._rejections:
            if token != self._credentials.token or token == self._dropped:
                return True  # replaced, or dropped by a refusal of another request sent with it
            if self._replacement:
                return False
            self._dropped = token
            return True

    def token(self) -> str:
        """A token valid for at least `margin_s` more seconds (a quarter of its life, for
        one issued for less than four margins) and not refused; may block to refresh."""
        if self._fresh():
            return str(self._credentials.token)
        with self._lock:
            if not self._fresh():  # another thread may have refreshed while we waited
                self._refresh()
            return str(self._credentials.token)

    def _refresh(self) -> None:
        from google.auth import exceptions

        if self._request is None:
            self._request = self._request_factory()
        source = self._source
        try:
            self._credentials.refresh(self._request)
        except exceptions.RefreshError as exc:
            retryable = bool(getattr(exc, "retryable", False))
            code = _refusal_code(exc)
            raise TokenRefreshError(
                f"{source}: refused by the token endpoint" + (f" ({code})" if code else ""),
                retryable=retryable,
            ) from None
        except exceptions.TransportError:
            raise TokenRefreshError(
                f"{source}: the token endpoint could not be reached", retryable=True
            ) from None
        if not self._credentials.token:
            raise TokenRefreshError(
                f"{source}: the token endpoint returned no token", retryable=True
            )
        self.refreshes += 1
        with self._rejections:
            self._replacement, self._dropped = self._dropped is not None, None
        expires = _expiry_epoch(self._credentials.expiry)
        self._lifetime_s = None if expires is None else expires - self._clock()


def _from_file(path: str, scopes: Sequence[str]) -> tuple[Any, str | None]:
    """Service-account or gcloud user credentials from a key file, built explicitly.

    google-auth's generic loader also accepts external-account configurations that run
    commands or fetch URLs; a key file is user input, so only the two plain kinds are taken.
    """
    from google.oauth2 import credentials as user_credentials
    from google.oauth2 import service_account

    with open(path, encoding="utf-8") as handle:
        info = json.load(handle)
    if not isinstance(info, dict):
        raise ValueError("not a JSON object")
    kind = info.get("type")
    if kind == "service_account":
        credentials = service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
            info, scopes=list(scopes)
        )
        project = info.get("project_id")
    elif kind == "authorized_user":
        credentials = user_credentials.Credentials.from_authorized_user_info(  # type: ignore[no-untyped-call]
            info, scopes=list(scopes)
        )
        project = info.get("quota_project_id")
    else:
        raise ValueError(f"unsupported credential type {kind!r}")
    return credentials, project if isinstance(project, str) and project else None


def load_credentials(
    env: Mapping[str, str], model_name: str, scopes: Sequence[str] = (CLOUD_PLATFORM_SCOPE,)
) -> tuple[Any, str | None]:
    """Credentials and their project: the file `GOOGLE_APPLICATION_CREDENTIALS` names in
    `env` (a service-account key or a gcloud user file), else Application Default Credentials.

    Loading a file does no network I/O; `google.auth.default()` may probe the metadata server,
    so call this lazily when no file is named.
    """
    import google.auth
    from google.auth import exceptions

    path = env.get(CREDENTIALS_FILE_ENV, "").strip()
    try:
        if path:
            return _from_file(path, scopes)
        credentials, project = google.auth.default(scopes=list(scopes))
    except (OSError, ValueError, KeyError, exceptions.GoogleAuthError) as exc:
        # The exception text may quote the file (a private key); name only its kind.
        where = f"the file {CREDENTIALS_FILE_ENV} names" if path else "Default Credentials"
        raise ConfigError(
            f"model {model_name!r}: Google credentials from {where} could not be loaded "
            f"({type(exc).__name__}); set {CREDENTIALS_FILE_ENV} to a service-account file "
            "or run `gcloud auth application-default login`"
        ) from None
    return credentials, project if isinstance(project, str) and project else None


__all__ = [
    "CLOUD_PLATFORM_SCOPE",
    "CREDENTIALS_FILE_ENV",
    "REFRESH_MARGIN_S",
    "TokenCache",
    "TokenRefreshError",
    "credentials_source",
    "load_credentials",
]
