"""Routes for the OpenAI-shaped providers: generic, sim, Groq, DeepInfra and Azure.

They share one body parser and differ in authentication (none, a bearer key, Azure's
`api-key` header or bearer) and in the dialect that words their replies and errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web

from providers.sim.auth import azure_key_auth, bearer_auth
from providers.sim.call import BadRequest, ChatCall
from providers.sim.wire_openai import (
    AzureDialect,
    DeepInfraDialect,
    GroqDialect,
    OpenAIDialect,
    parse_chat_body,
)

if TYPE_CHECKING:
    from providers.sim.pipeline import Simulator

def openai_routes(sim: Simulator) -> list[web.RouteDef]:
    creds = sim.state.credentials
    generic = OpenAIDialect("openai")
    simulated = OpenAIDialect("sim")
    groq = GroqDialect()
    deepinfra = DeepInfraDialect()
    azure = AzureDialect()
    groq_auth = bearer_auth(creds.groq_api_key, "Invalid API Key", "Invalid API Key")
    deepinfra_auth = bearer_auth(
        creds.deepinfra_api_key, "Missing authorization", "Unauthorized"
    )

    azure_auth = azure_key_auth(creds.azure_api_key)

    def chat(provider: str) -> Callable[[bytes], ChatCall]:
        return lambda body: parse_chat_body(provider, body)

    async def openai_chat(request: web.Request) -> web.StreamResponse:
        return await sim.serve(request, generic, None, chat("openai"), generic.validate)

    async def sim_chat(request: web.Request) -> web.StreamResponse:
        return await sim.serve(request, simulated, None, chat("sim"), simulated.validate)

    async def groq_chat(request: web.Request) -> web.StreamResponse:
        return await sim.serve(request, groq, groq_auth, chat("groq"), groq.validate)

    async def deepinfra_chat(request: web.Request) -> web.StreamResponse:
        return await sim.serve(
            request, deepinfra, deepinfra_auth, chat("deepinfra"), deepinfra.validate
        )

    async def azure_deployment_chat(request: web.Request) -> web.StreamResponse:
        deployment = request.match_info["deployment"]

        def parse(body: bytes) -> ChatCall:
            if not request.query.get("api-version"):
                raise BadRequest("Resource not found", status=404, kind="not_found")
            return parse_chat_body("azure", body, model_override=deployment)

        return await sim.serve(request, azure, azure_auth, parse, azure.validate)

    async def azure_v1_chat(request: web.Request) -> web.StreamResponse:
        return await sim.serve(request, azure, azure_auth, chat("azure"), azure.validate)

    return [
        web.post("/openai/v1/chat/completions", openai_chat),
        web.post("/sim/v1/chat/completions", sim_chat),
        web.post("/groq/openai/v1/chat/completions", groq_chat),
        web.post("/deepinfra/v1/openai/chat/completions", deepinfra_chat),
        web.post("/azure/openai/deployments/{deployment}/chat/completions", azure_deployment_chat),
        web.post("/azure/openai/v1/chat/completions", azure_v1_chat),
    ]
