"""A Vertex token the API refuses (401 UNAUTHENTICATED) before it expires: the lane's next
attempt carries a fresh one and the refused request is asked again, as google-auth's
AuthorizedSession refreshes and retries; a credential whose every token is refused still
stops the lane as an auth error, without a refresh loop."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from engine.dispatch import dispatch
from engine.lanes import LaneState
from engine.retry import RetryPolicy
from providers.google_auth_tokens import TokenCache
from providers.types import ModelConfig
from providers.vertex import VertexAdapter

if TYPE_CHECKING:
    from tests.engine.conftest import Handler, Kit, ServeAny

FAST = RetryPolicy(max_attempts=4, base_s=0.01, cap_s=0.05)


class Issuer:
    """A google-auth-like credential issuing `tok-N`, each valid an hour."""

    def __init__(self) -> None:
        self.calls = 0
        self.token: str | None = None
        self.expiry: datetime | None = None
        self._lock = threading.Lock()

    def refresh(self, request: Any) -> None:
        with self._lock:
            self.calls += 1
            self.token = f"tok-{self.calls}"
            self.expiry = (datetime.now(UTC) + timedelta(hours=1)).replace(tzinfo=None)


def gemini_api(refused: set[str] | None) -> Handler:
    """A Gemini endpoint refusing the tokens in `refused` (None: every token)."""

    async def handle(request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if refused is None or token in refused:
            error = {"code": 401, "status": "UNAUTHENTICATED",
                     "message": "Request had invalid authentication credentials."}
            return web.json_response({"error": error}, status=401)
        answer = {"role": "model", "parts": [{"text": '{"probability": 0.5}'}]}
        return web.json_response({
            "candidates": [{"content": answer, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1},
            "modelVersion": "gemini-2.5-flash", "responseId": "r",
        })

    return handle


async def run(tmp_path: Path, kit: type[Kit], root: str, n: int) -> tuple[Any, Issuer]:
    plan = kit.write_plan(tmp_path / "plan.parquet",
                          kit.plan_rows("v", n, grouped_every=0))  # fmt: skip
    config = ModelConfig(name="v", provider="vertex", model="gemini-2.5-flash", project="p",
                         location="us-central1", base_url=root, concurrency=2)
    issuer = Issuer()
    adapter = VertexAdapter(config, {}, tokens=TokenCache(issuer, request_factory=lambda: None))
    summary = await dispatch(plan, tmp_path / "run", {"v": config}, {"v": adapter},
                             policy=FAST, log_console=None)  # fmt: skip
    return summary, issuer


async def test_a_refused_token_is_replaced_and_its_requests_asked_again(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    summary, issuer = await run(tmp_path, kit, await serve_any(gemini_api({"tok-1"})), 6)
    lane = summary.lanes["v"]
    assert summary.complete and lane.state is LaneState.DONE and lane.accepted == 6
    assert lane.gave_up == 0 and issuer.calls == 2
    assert 1 <= lane.retries.by_cause["auth_error"] <= 2  # one per request in flight


async def test_a_credential_whose_tokens_are_all_refused_still_stops_the_lane(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    summary, issuer = await run(tmp_path, kit, await serve_any(gemini_api(None)), 6)
    lane = summary.lanes["v"]
    assert lane.state is LaneState.STOPPED and "auth_error" in lane.message
    assert issuer.calls == 2  # the first token dropped once, its replacement kept
