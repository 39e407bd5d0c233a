"""Client-side helpers for the simulator tests: request bodies, AWS signing, tokens."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from providers.sim.credentials import SimCredentials

CLOUD_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def chat_body(model: str = "sim-coherent", user: str = "hello", **extra: Any) -> dict[str, Any]:
    """A minimal OpenAI chat-completions body."""
    return {
        "model": model,
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": user}],
        **extra,
    }


def converse_body(user: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": [{"text": user}]}],
            "system": [{"text": "sys"}], **extra}


def bedrock_url(root: str, model_id: str) -> str:
    return f"{root}/bedrock/model/{quote(model_id, safe='')}/converse"


def botocore_signed(
    url: str, body: bytes, access_key: str, secret: str, token: str | None = None,
    region: str = "us-east-1",
) -> dict[str, str]:
    """Headers botocore's own signer produces for a Converse POST (the oracle)."""
    request = AWSRequest(method="POST", url=url, data=body,
                         headers={"Content-Type": "application/json"})
    signer = SigV4Auth(Credentials(access_key, secret, token), "bedrock", region)
    signer.add_auth(request)
    return {k: v for k, v in request.headers.items()}


def signed_with(creds: SimCredentials, url: str, body: bytes, **kw: Any) -> dict[str, str]:
    return botocore_signed(url, body, creds.aws_access_key_id, creds.aws_secret_access_key, **kw)
