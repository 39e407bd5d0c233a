"""Bedrock, Vertex and OAuth routes (being added)."""

from __future__ import annotations

from typing import Any

from aiohttp import web


def cloud_routes(sim: Any) -> list[web.RouteDef]:
    del sim
    return []
