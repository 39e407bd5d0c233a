"""Routes for the cloud providers: Bedrock Converse, Vertex (Gemini and OpenAI), OAuth.

They differ from the OpenAI-compatible ones mainly in authentication: Bedrock requests are
SigV4-verified against the configured AWS keys (or carry a Bedrock API key), and Vertex
requests must carry an access token this simulator issued from its own token endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

import orjson
from aiohttp import web

from providers.sim.auth import issued_token_auth, sigv4_or_key_auth
from providers.sim.call import ChatCall
from providers.sim.oauth import GOOGLE_TOKEN_URI, JWT_BEARER, GrantError, verify_assertion
from providers.sim.wire_bedrock import BedrockDialect, parse_converse_body
from providers.sim.wire_openai import VertexOpenAIDialect, parse_chat_body
from providers.sim.wire_vertex import VERTEX_UNAUTHENTICATED, VertexDialect, parse_generate_body

if TYPE_CHECKING:
    from providers.sim.pipeline import SimState, Simulator

def cloud_routes(sim: Simulator) -> list[web.RouteDef]:
    """Bedrock Converse, Vertex Gemini and Vertex OpenAI (through `Simulator.serve`), and the
    OAuth token endpoint Vertex clients get their tokens from."""
    state = sim.state
    bedrock_auth = sigv4_or_key_auth(state.credentials)
    vertex_auth = issued_token_auth(state.tokens, VERTEX_UNAUTHENTICATED)
    bedrock = BedrockDialect()
    vertex = VertexDialect()
    vertex_openai = VertexOpenAIDialect()

    async def converse(request: web.Request) -> web.StreamResponse:
        model_id = request.match_info["model_id"]

        def parse(body: bytes) -> ChatCall:
            return parse_converse_body(model_id, body)

        return await sim.serve(request, bedrock, bedrock_auth, parse)

    async def generate_content(request: web.Request) -> web.StreamResponse:
        model = request.match_info["model"]

        def parse(body: bytes) -> ChatCall:
            return parse_generate_body(model, body)

        return await sim.serve(request, vertex, vertex_auth, parse)

    async def vertex_chat(request: web.Request) -> web.StreamResponse:
        def parse(body: bytes) -> ChatCall:
            return parse_chat_body("vertex", body)

        return await sim.serve(request, vertex_openai, vertex_auth, parse)

    vertex_base = "/vertex/{version:v1|v1beta1}/projects/{project}/locations/{location}"
    return [
        web.post("/bedrock/model/{model_id:.+}/converse", converse),
        web.post(vertex_base + "/publishers/google/models/{model}:generateContent",
                 generate_content),
        web.post(vertex_base + "/endpoints/openapi/chat/completions", vertex_chat),
        web.post("/oauth2/token", _token_endpoint(state)),
    ]


def _token_endpoint(state: SimState) -> Callable[[web.Request], Awaitable[web.Response]]:
    """Google's OAuth token endpoint: a JWT-bearer assertion signed by the fake service
    account buys an access token that `issued_token_auth` accepts."""
    creds = state.credentials

    async def token(request: web.Request) -> web.Response:
        form = parse_qs((await request.read()).decode("utf-8", "replace"))
        grant = (form.get("grant_type") or [""])[0]
        try:
            if grant != JWT_BEARER:
                raise GrantError("unsupported_grant_type", f"Invalid grant_type: {grant}")
            assertion = (form.get("assertion") or [""])[0]
            verify_assertion(
                assertion, creds.sa_public_key, creds.sa_client_email,
                (f"{state.root_url}/oauth2/token", GOOGLE_TOKEN_URI), time.time(),
            )
        except GrantError as exc:
            state.counts["oauth.rejected"] += 1
            return web.Response(
                body=orjson.dumps({"error": exc.error, "error_description": exc.description}),
                status=exc.status, content_type="application/json")
        access, ttl = state.tokens.issue()
        state.counts["tokens_issued"] += 1
        return web.Response(
            body=orjson.dumps({"access_token": access, "expires_in": ttl,
                               "token_type": "Bearer"}),
            content_type="application/json")

    return token
