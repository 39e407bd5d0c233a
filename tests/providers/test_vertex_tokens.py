"""Vertex OAuth tokens: the cache refreshes only near expiry (fake clock), once across threads,
and real google-auth service-account credentials fetch a token from a local token endpoint
(an RSA key generated here; the endpoint verifies the JWT grant's signature)."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import exceptions, jwt

from providers.google_auth_tokens import (
    CLOUD_PLATFORM_SCOPE,
    REFRESH_MARGIN_S,
    TokenCache,
    TokenRefreshError,
    credentials_source,
    load_credentials,
)
from providers.types import ChatRequest, ConfigError, Failure, ModelConfig, Outcome
from providers.vertex import VertexAdapter, create_adapter
from tests.json_replies import send_json

#: google-auth's service-account grants are addressed to Google's token URL whatever
#: `token_uri` they are posted to (providers-reference §4a).
AUDIENCE = "https://oauth2.googleapis.com/token"
REQ = ChatRequest(request_id="r1", system="s", user="u", seed=1)


class FakeClock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class FakeCredentials:
    """Hands out `tok-N` valid for `lifetime_s` of the fake clock; counts refreshes."""

    def __init__(self, clock: FakeClock, lifetime_s: float = 3600.0, delay_s: float = 0.0,
                 error: Exception | None = None) -> None:
        self.clock = clock
        self.lifetime_s = lifetime_s
        self.delay_s = delay_s
        self.error = error
        self.token: str | None = None
        self.expiry: datetime | None = None
        self.calls = 0

    def refresh(self, request: Any) -> None:
        self.calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        self.token = f"tok-{self.calls}"
        moment = datetime.fromtimestamp(self.clock() + self.lifetime_s, UTC)
        self.expiry = moment.replace(tzinfo=None)  # google-auth keeps naive UTC


def test_refreshes_only_when_less_than_the_margin_is_left() -> None:
    clock = FakeClock()
    creds = FakeCredentials(clock)
    cache = TokenCache(creds, clock=clock, request_factory=lambda: None)
    assert cache.token() == "tok-1"
    clock.now += 3600 - REFRESH_MARGIN_S - 1  # 301 s left: still good
    assert cache.token() == "tok-1"
    assert creds.calls == 1
    clock.now += 2  # 299 s left: refresh before it can expire mid-request
    assert cache.token() == "tok-2"
    assert cache.token() == "tok-2"
    assert (creds.calls, cache.refreshes) == (2, 2)


def test_a_token_without_expiry_is_kept() -> None:
    clock = FakeClock()
    creds = FakeCredentials(clock)
    cache = TokenCache(creds, clock=clock, request_factory=lambda: None)
    cache.token()
    creds.expiry = None
    clock.now += 10 * 3600
    assert cache.token() == "tok-1"


def test_concurrent_callers_share_one_refresh() -> None:
    clock = FakeClock()
    creds = FakeCredentials(clock, delay_s=0.05)
    cache = TokenCache(creds, clock=clock, request_factory=lambda: None)
    results: list[str] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        results.append(cache.token())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["tok-1"] * 8
    assert creds.calls == 1


def test_a_short_lived_token_is_reused_for_most_of_its_life() -> None:
    """A token issued for less than the margin (240 s) was never fresh, so every request
    blocked on a refresh: such a token's margin is a quarter of its life."""
    clock = FakeClock()
    creds = FakeCredentials(clock, lifetime_s=240.0)
    cache = TokenCache(creds, clock=clock, request_factory=lambda: None)
    assert cache.token() == "tok-1"
    clock.now += 179  # 61 s left, more than a quarter of its life: still good
    assert cache.token() == "tok-1" and creds.calls == 1
    clock.now += 2
    assert cache.token() == "tok-2" and creds.calls == 2


def test_a_refused_token_is_dropped_once() -> None:
    """The API refused a token (401) that had not expired: the next request fetches another,
    as google-auth's AuthorizedSession does; its replacement refused in turn is kept, so a
    refused credential stops the lane as an auth error instead of refreshing in a loop."""
    clock = FakeClock()
    creds = FakeCredentials(clock)
    cache = TokenCache(creds, clock=clock, request_factory=lambda: None)
    assert cache.token() == "tok-1"
    assert cache.reject("tok-1")
    assert cache.reject("tok-1")  # another request in flight with it: dropped already
    assert cache.token() == "tok-2" and creds.calls == 2
    assert cache.reject("tok-1")  # replaced already
    assert not cache.reject("tok-2")
    assert cache.token() == "tok-2" and creds.calls == 2
    clock.now += 3600  # a token fetched as the old one expired may be dropped once again
    assert cache.token() == "tok-3"
    assert cache.reject("tok-3")
    assert cache.token() == "tok-4"


UNAUTHENTICATED = json.dumps({"error": {"code": 401, "status": "UNAUTHENTICATED", "message":
                                        "Request had invalid authentication credentials."}})


@pytest.mark.parametrize("model_id", ["gemini-2.5-flash",
                                      "meta/llama-4-maverick-17b-128e-instruct-maas"])
def test_a_401_drops_the_token_once_and_is_retried(model_id: str) -> None:
    clock = FakeClock()
    creds = FakeCredentials(clock)
    config = ModelConfig(name="v", provider="vertex", model=model_id, project="p",
                         location="us-central1")
    tokens = TokenCache(creds, clock=clock, request_factory=lambda: None)
    adapter = VertexAdapter(config, {}, tokens=tokens)
    assert adapter.build(REQ).headers["Authorization"] == "Bearer tok-1"
    denied = adapter.parse(403, {}, UNAUTHENTICATED.replace("UNAUTHENTICATED",
                                                            "PERMISSION_DENIED").encode())
    assert isinstance(denied, Failure) and not denied.stale_credential  # a right, not a token
    first = adapter.parse(401, {}, UNAUTHENTICATED.encode())
    assert isinstance(first, Failure) and first.outcome is Outcome.AUTH_ERROR
    assert first.stale_credential and first.retryable
    assert adapter.build(REQ).headers["Authorization"] == "Bearer tok-2"
    second = adapter.parse(401, {}, UNAUTHENTICATED.encode())
    assert isinstance(second, Failure) and not second.stale_credential
    assert not second.retryable
    assert adapter.build(REQ).headers["Authorization"] == "Bearer tok-2" and creds.calls == 2


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (exceptions.RefreshError(  # type: ignore[no-untyped-call]
            "invalid_grant: SECRET-ish detail", retryable=False), False),
        (exceptions.RefreshError("internal_failure", retryable=True),  # type: ignore[no-untyped-call]
         True),
        (exceptions.TransportError("connection refused to oauth2"),  # type: ignore[no-untyped-call]
         True),
    ],
)
def test_refresh_failures_are_classified_without_their_text(error: Exception,
                                                            retryable: bool) -> None:
    clock = FakeClock()
    cache = TokenCache(FakeCredentials(clock, error=error), clock=clock,
                       request_factory=lambda: None)
    with pytest.raises(TokenRefreshError) as caught:
        cache.token()
    assert caught.value.retryable is retryable
    assert "SECRET" not in str(caught.value) and "oauth2" not in str(caught.value)
    assert caught.value.__cause__ is None


# ----------------------------------------------------------------------------- real google-auth


class TokenEndpoint:
    """A local OAuth token endpoint that checks the JWT-bearer grant's RS256 signature."""

    def __init__(self, public_pem: str) -> None:
        self.public_pem = public_pem
        self.grants: list[dict[str, Any]] = []
        self.fail_with: tuple[int, dict[str, str]] | None = None
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                send_json(self, *endpoint.answer(form))

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        if self.fail_with is not None:
            return self.fail_with
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return 400, {"error": "unsupported_grant_type"}
        try:
            claims = jwt.decode(  # type: ignore[no-untyped-call]
                form["assertion"][0], certs=self.public_pem, audience=AUDIENCE)
        except (ValueError, exceptions.GoogleAuthError):
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        self.grants.append(claims)
        return 200, {"access_token": f"ya29.local-{len(self.grants)}", "expires_in": 3600,
                     "token_type": "Bearer"}


@pytest.fixture(scope="module")
def rsa_key() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


@pytest.fixture
def endpoint(rsa_key: tuple[str, str]) -> Iterator[TokenEndpoint]:
    server = TokenEndpoint(rsa_key[1])
    yield server
    server.server.shutdown()
    server.server.server_close()


def write_service_account(path: Path, private_pem: str, token_uri: str) -> Path:
    path.write_text(json.dumps({
        "type": "service_account",
        "project_id": "sa-project",
        "private_key_id": "test-key-1",
        "private_key": private_pem,
        "client_email": "forecaster@sa-project.iam.gserviceaccount.com",
        "client_id": "1234567890",
        "token_uri": token_uri,
    }))
    return path


def vertex_config(**kw: Any) -> ModelConfig:
    base: dict[str, Any] = {"name": "gemini", "provider": "vertex", "model": "gemini-3.5-flash",
                            "location": "us-central1"}
    base.update(kw)
    return ModelConfig(**base)


def test_service_account_token_is_fetched_once_and_reused(
    tmp_path: Path, rsa_key: tuple[str, str], endpoint: TokenEndpoint
) -> None:
    sa = write_service_account(tmp_path / "sa.json", rsa_key[0], endpoint.url)
    adapter = VertexAdapter(vertex_config(), {"GOOGLE_APPLICATION_CREDENTIALS": str(sa)})
    assert "/projects/sa-project/" in adapter.url  # project from the key file
    assert endpoint.grants == []  # loading the file does no network I/O
    for _ in range(3):
        request = adapter.build(REQ)
        assert request.headers["Authorization"] == "Bearer ya29.local-1"
    assert len(endpoint.grants) == 1
    claims = endpoint.grants[0]
    assert claims["iss"] == "forecaster@sa-project.iam.gserviceaccount.com"
    assert claims["scope"] == CLOUD_PLATFORM_SCOPE
    assert claims["exp"] - claims["iat"] == 3600


def test_service_account_token_is_refreshed_near_expiry(
    tmp_path: Path, rsa_key: tuple[str, str], endpoint: TokenEndpoint
) -> None:
    sa = write_service_account(tmp_path / "sa.json", rsa_key[0], endpoint.url)
    credentials, project = load_credentials({"GOOGLE_APPLICATION_CREDENTIALS": str(sa)}, "m")
    assert project == "sa-project"
    clock = FakeClock(time.time())
    cache = TokenCache(credentials, clock=clock)
    assert cache.token() == "ya29.local-1"
    clock.now += 3600 - REFRESH_MARGIN_S - 30
    assert cache.token() == "ya29.local-1"
    clock.now += 60
    assert cache.token() == "ya29.local-2"
    assert len(endpoint.grants) == 2


def test_key_files_name_the_project_and_bad_files_are_config_errors(
    tmp_path: Path, rsa_key: tuple[str, str]
) -> None:
    sa = write_service_account(tmp_path / "sa.json", rsa_key[0], "http://127.0.0.1:9/t")
    adapter = create_adapter(vertex_config(), {"GOOGLE_APPLICATION_CREDENTIALS": str(sa)})
    assert "/projects/sa-project/" in adapter.url
    external = tmp_path / "external.json"
    external.write_text(json.dumps({"type": "external_account", "audience": "x"}))
    broken = tmp_path / "broken.json"
    broken.write_text(rsa_key[0])  # a bare PEM, not a key file
    for path in (tmp_path / "absent.json", external, broken):
        with pytest.raises(ConfigError, match="GOOGLE_APPLICATION_CREDENTIALS") as caught:
            create_adapter(vertex_config(), {"GOOGLE_APPLICATION_CREDENTIALS": str(path)})
        assert rsa_key[0].splitlines()[1] not in str(caught.value)


def test_a_key_the_endpoint_does_not_trust_is_refused(tmp_path: Path, endpoint: TokenEndpoint,
                                                      rsa_key: tuple[str, str]) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    stranger = other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()).decode()
    sa = write_service_account(tmp_path / "sa.json", stranger, endpoint.url)
    adapter = VertexAdapter(vertex_config(), {"GOOGLE_APPLICATION_CREDENTIALS": str(sa)})
    with pytest.raises(TokenRefreshError) as caught:
        adapter.build(REQ)
    assert caught.value.retryable is False
    assert "Invalid JWT" not in str(caught.value)
    assert endpoint.grants == []


def test_an_unreachable_token_endpoint_is_retryable(tmp_path: Path,
                                                    rsa_key: tuple[str, str]) -> None:
    probe = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = probe.server_address[1]
    probe.server_close()  # nothing listens there now
    sa = write_service_account(tmp_path / "sa.json", rsa_key[0], f"http://127.0.0.1:{port}/t")
    adapter = VertexAdapter(vertex_config(), {"GOOGLE_APPLICATION_CREDENTIALS": str(sa)})
    with pytest.raises(TokenRefreshError) as caught:
        adapter.build(REQ)
    assert caught.value.retryable is True


def test_secrets_stay_out_of_reprs_errors_and_details(
    tmp_path: Path, rsa_key: tuple[str, str], endpoint: TokenEndpoint
) -> None:
    """The private key, and the access tokens it buys, never show in anything printable."""
    sa = write_service_account(tmp_path / "sa.json", rsa_key[0], endpoint.url)
    adapter = VertexAdapter(vertex_config(), {"GOOGLE_APPLICATION_CREDENTIALS": str(sa)})
    request = adapter.build(REQ)
    token = "ya29.local-1"
    key_body = rsa_key[0].splitlines()[1]  # a line of the base64 key material
    echo = json.dumps({"error": {"code": 401, "status": "UNAUTHENTICATED",
                                 "message": f"Bearer {token} was rejected"}}).encode()
    failure = adapter.parse(401, {}, echo)
    assert failure.outcome is Outcome.AUTH_ERROR  # type: ignore[union-attr]
    printable = [repr(adapter), str(adapter), repr(request), repr(failure),
                 repr(adapter._token_cache()), repr(vars(adapter))]
    for text in printable:
        assert token not in text
        assert key_body not in text
    assert token not in failure.detail  # type: ignore[union-attr]


def test_a_refused_key_file_is_named_with_the_endpoints_error_code(
    tmp_path: Path, endpoint: TokenEndpoint, rsa_key: tuple[str, str]
) -> None:
    """A tester's token endpoint answered 400 `invalid_grant`: the refusal said "token refresh
    for Credentials was refused by the token endpoint", google-auth's class name, where every
    adapter's auth failure opens with where its credential came from."""
    sa = write_service_account(tmp_path / "sa.json", rsa_key[0], endpoint.url)
    endpoint.fail_with = (400, {"error": "invalid_grant", "error_description": "Bad grant."})
    adapter = VertexAdapter(vertex_config(), {"GOOGLE_APPLICATION_CREDENTIALS": str(sa)})
    with pytest.raises(TokenRefreshError) as caught:
        adapter.build(REQ)
    assert str(caught.value) == (
        f"credentials from GOOGLE_APPLICATION_CREDENTIALS ({sa}): refused by the token "
        "endpoint (invalid_grant)"
    )


def _adc(credentials: object) -> Any:
    return lambda scopes: (credentials, None)


@pytest.mark.parametrize(
    ("reply", "said"),
    [({"error": "invalid_grant", "error_description": "Token has been expired or revoked."},
      " (invalid_grant)"),
     ({"error": "ya29.not an error code"}, ""),  # not an error code: not said
     ({"error": "rapt_required"}, " (rapt_required)"),
     ({"error": "c3f2a9c61d0b84e7fa5c2e91b6d4087f3c1e5a2b"}, ""),  # a secret's shape, no code
     ({"error": "invalid_grant_for_user_alice"}, ""),
     (None, "")],
)
def test_a_refused_default_credential_is_named_as_such(
    monkeypatch: pytest.MonkeyPatch, reply: dict[str, str] | None, said: str
) -> None:
    args = ("invalid_grant: Token has been expired or revoked.", *([reply] if reply else []))
    refused = FakeCredentials(FakeClock(), error=exceptions.RefreshError(*args))  # type: ignore[no-untyped-call]
    monkeypatch.setattr("google.auth.default", _adc(refused))
    adapter = VertexAdapter(vertex_config(project="p"), {})
    with pytest.raises(TokenRefreshError) as caught:
        adapter.build(REQ)
    assert str(caught.value) == (
        "Application Default Credentials (gcloud auth application-default login): refused by "
        f"the token endpoint{said}"
    )


def test_metadata_server_credentials_are_named_so() -> None:
    from google.auth import compute_engine

    assert credentials_source(compute_engine.Credentials()) == (  # type: ignore[no-untyped-call]
        "Application Default Credentials from the metadata server"
    )
