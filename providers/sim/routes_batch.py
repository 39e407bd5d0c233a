"""Files and batches routes of the OpenAI-shaped providers (issue 13).

Each provider's real paths under its simulator prefix, with the same authentication as its
chat route and its own error wording: Groq at `/groq/openai/v1/{files,batches}`, DeepInfra
at `/deepinfra/v1/openai/...`, Azure both at `/azure/openai/...?api-version=` (classic) and
`/azure/openai/v1/...`, and the keyless `sim` and `openai` routes. The jobs themselves live
in `batch_jobs`; their lines are answered by the shared pipeline (`Simulator.answer_line`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from providers.sim.auth import Authenticator, azure_key_auth, bearer_auth
from providers.sim.batch_jobs import InvalidRequest, SimJob, page, render_job
from providers.sim.call import BadRequest, ChatCall
from providers.sim.faults import BatchFaultKind, FaultKind
from providers.sim.wire_openai import (
    AzureDialect,
    DeepInfraDialect,
    GroqDialect,
    OpenAIDialect,
    json_response,
    parse_chat_body,
)

if TYPE_CHECKING:
    from providers.sim.pipeline import Simulator

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class BatchRoute:
    """One provider's files and batches under one path prefix."""

    provider: str
    prefix: str
    dialect: OpenAIDialect
    auth: Authenticator | None
    #: Azure's classic URLs answer 404 without `api-version`, as its chat route does.
    needs_api_version: bool = False


def batch_routes(sim: Simulator) -> list[web.RouteDef]:
    creds = sim.state.credentials
    azure = AzureDialect()
    azure_auth = azure_key_auth(creds.azure_api_key)
    routes = [
        BatchRoute("sim", "/sim/v1", OpenAIDialect("sim"), None),
        BatchRoute("openai", "/openai/v1", OpenAIDialect("openai"), None),
        BatchRoute("groq", "/groq/openai/v1", GroqDialect(),
                   bearer_auth(creds.groq_api_key, "Invalid API Key", "Invalid API Key")),
        BatchRoute("deepinfra", "/deepinfra/v1/openai", DeepInfraDialect(),
                   bearer_auth(creds.deepinfra_api_key, "Missing authorization", "Unauthorized")),
        BatchRoute("azure", "/azure/openai", azure, azure_auth, needs_api_version=True),
        BatchRoute("azure", "/azure/openai/v1", azure, azure_auth),
    ]
    return [definition for route in routes for definition in _Handlers(sim, route).table()]


class _Handlers:
    def __init__(self, sim: Simulator, route: BatchRoute) -> None:
        self.sim = sim
        self.route = route
        self.store = sim.state.batches

    def table(self) -> list[web.RouteDef]:
        p = self.route.prefix
        return [
            web.post(f"{p}/files", self._guarded(self.upload)),
            web.get(f"{p}/files", self._guarded(self.list_files)),
            web.get(f"{p}/files/{{file_id}}", self._guarded(self.get_file)),
            web.get(f"{p}/files/{{file_id}}/content", self._guarded(self.content)),
            web.post(f"{p}/batches", self._guarded(self.create)),
            web.get(f"{p}/batches", self._guarded(self.list_jobs)),
            web.get(f"{p}/batches/{{batch_id}}", self._guarded(self.get_job)),
            web.post(f"{p}/batches/{{batch_id}}/cancel", self._guarded(self.cancel)),
        ]

    def _guarded(self, action: Handler) -> Handler:
        """Count, authenticate, check the API version, and word any refusal as the provider."""
        route = self.route

        async def handle(request: web.Request) -> web.StreamResponse:
            counts = self.sim.state.counts
            counts[f"batch.requests.{route.provider}"] += 1
            try:
                if route.auth is not None:
                    route.auth(request, b"")  # none of these schemes signs the body
                if route.needs_api_version and not request.query.get("api-version"):
                    raise BadRequest("Resource not found", status=404, kind="not_found")
                refused = self._control_fault()
                return refused if refused is not None else await action(request)
            except BadRequest as exc:
                counts["batch.refused" if exc.kind != "auth" else "auth_rejected"] += 1
                return route.dialect.error(exc)
            except InvalidRequest as exc:
                counts["batch.refused"] += 1
                kind = "not_found" if exc.status == 404 else "bad_request"
                return route.dialect.error(BadRequest(exc.message, status=exc.status, kind=kind))

        return handle

    def _control_fault(self) -> web.Response | None:
        """An injected control-plane fault: the call is refused before it does anything."""
        state = self.sim.state
        kind = state.faults.draw_control()
        if kind is None:
            return None
        state.counts[f"fault.{kind.value}"] += 1
        state.counts[f"fault_by_provider.{self.route.provider}.{kind.value}"] += 1
        if kind is BatchFaultKind.CONTROL_RATE_LIMIT:
            return self.route.dialect.rate_limited(state.retry_after_s)
        return self.route.dialect.server_error()

    # ----- files ---------------------------------------------------------------------
    async def upload(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        purpose, upload = form.get("purpose"), form.get("file")
        if not isinstance(purpose, str) or not purpose:
            raise BadRequest("'purpose' is a required property", param="purpose")
        if not isinstance(upload, web.FileField):
            raise BadRequest("'file' is a required property", param="file")
        content = upload.file.read()
        stored = self.store.add_file(self.route.provider, upload.filename, purpose, content)
        return json_response(stored.render())

    async def list_files(self, request: web.Request) -> web.StreamResponse:
        files = self.store.list_files(self.route.provider, request.query.get("purpose"))
        limit = _limit(request, 10_000)
        return json_response(page((f.render() for f in files), request.query.get("after"), limit))

    async def get_file(self, request: web.Request) -> web.StreamResponse:
        stored = self.store.file(self.route.provider, request.match_info["file_id"])
        return json_response(stored.render())

    async def content(self, request: web.Request) -> web.StreamResponse:
        stored = self.store.file(self.route.provider, request.match_info["file_id"])
        return web.Response(body=stored.content, content_type="application/octet-stream")

    # ----- batches -------------------------------------------------------------------
    async def create(self, request: web.Request) -> web.StreamResponse:
        try:
            payload: Any = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            raise BadRequest("We could not parse the JSON body of your request.") from None
        job = self.store.create(self.route.provider, payload, self._answer)
        if job.fault is BatchFaultKind.CREATE_DELAY:
            # The job exists; its id reaches the client only after the delay (a kill in it
            # is a kill between upload and a recorded job: `find` must recover it).
            await asyncio.sleep(self.sim.state.faults.profile.batch_create_delay_s)
        return json_response(render_job(job))

    async def list_jobs(self, request: web.Request) -> web.StreamResponse:
        jobs = self.store.list_jobs(self.route.provider)
        for job in jobs:
            self._advance(job)
        rows = (render_job(job) for job in jobs)
        return json_response(page(rows, request.query.get("after"), _limit(request, 100)))

    async def get_job(self, request: web.Request) -> web.StreamResponse:
        job = self.store.job(self.route.provider, request.match_info["batch_id"])
        self._advance(job)
        return json_response(render_job(job))

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        job = self.store.job(self.route.provider, request.match_info["batch_id"])
        self._advance(job)
        self.store.cancel(job)
        return json_response(render_job(job))

    def _advance(self, job: SimJob) -> None:
        self.store.advance(job, self.sim.state.faults.profile.batch_seconds)

    def _answer(self, body: bytes, fault: FaultKind | None) -> tuple[int, dict[str, str], bytes]:
        route = self.route

        def parse(raw: bytes) -> ChatCall:
            return parse_chat_body(route.provider, raw)

        return self.sim.answer_line(route.dialect, parse, route.dialect.validate, body, fault)


def _limit(request: web.Request, most: int) -> int:
    raw = request.query.get("limit")
    if raw is None:
        return min(20, most) if most <= 100 else most
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest("'limit' must be an integer", param="limit") from None
    if not 1 <= value <= most:
        raise BadRequest(f"'limit' must be between 1 and {most}", param="limit")
    return value
