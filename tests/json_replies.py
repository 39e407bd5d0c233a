"""A JSON reply from a test's `http.server` handler: the few lines each threaded fake server
(a token endpoint, a renaming proxy) would otherwise write again."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def send_json(handler: BaseHTTPRequestHandler, status: int, reply: Any) -> None:
    """`reply` as JSON under `status`, with its length (the client reads no further)."""
    data = json.dumps(reply).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
