"""Fake credentials the simulator accepts, and nothing else does.

Rehearsing a campaign must exercise the same credential paths as a paid run (bearer keys,
SigV4, a service-account JWT grant) without any real secret existing. Every value here is
deliberately fake and labelled so: the RSA key was generated for the simulator alone and
is trusted by no one but `providers.sim`. It is fixed (not generated per run) so that a
standalone `dutchbook serve-sim` and a separate rehearsing process agree on it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the one method that reads the key: 19 ms every run paid
    from cryptography.hazmat.primitives.asymmetric import rsa

#: A test-only RSA key for the simulated Google service account. Not a real credential.
SIM_SERVICE_ACCOUNT_KEY_PEM = """\
-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDUBwAcs4041xf3
xYs9b3iSvzYo4IJ7CADb4IO8mfyc2woDIHZcO+nvI2/IsP8y6hKpq8QLc/k1HE9Z
8g/Or02QLMTh3yVX36eEKnmyRPlwZXasy+TKyVCfy380Ry+omt629jdI5vONIO/C
eriA6poP1Alh2jH3NPgyDbq65J7ALp/i3rM6C7lUdRQCoVMWtszKXJTQdexgcJXc
64X3zCA8h4/3tgQAsEp/+Xt5RVcpNBXT36eaTeQJHJS9wGSaslyzSo4TUk+Gna14
GA2Zpl1R8bfH+KAQWmF+/hAo26Rd9qUXccTSihUBAmI4UaDTU5ixgGFwtw1op5qH
l2qykiS/AgMBAAECggEANEyTwQCjDYm03keKbHmCBsSGkferB7j2KUZMiGl9T52R
7yqDN4YJ0pRtntXV5ROqzdJSFbciGfElO50DPCqumakJWWOm/PFsiyPFB+2Oj6Rf
bQkQItsceYYDFvyWK2MkG4JJKcDaA45DxbdqqlXz8YKOW+Yr2/vjWslbLX12ERYc
JzyLK0d+6aI7BlspWv1GYarNTmMnt0Uy23FjXJ2x4ioYH2wJu9DTp3Po7V/X1ifA
+uX3l3kA+rOnfKpx40LcD6RNxuJTH2sJBwALkxAYlihblqas18oZBDlm/SPnlsBs
HkKhwnAPr0IZ1eL47J1un9pLmjTIM9+Z6VlPZLWfzQKBgQDqH9GyNC3KlYxD5JFu
uCyRtwPPm0At30mpossrl0L17ujOLq/TrcrIgNB1demGnBiWIfgOLBxHo1qOFfyg
jZC8ScAcK8yFJqrEeFEr3NU9XupFc28ByZ2vQbq44oeOCZXRDHH2crVraSxhbr5l
VxMjWEqa+odUHMzTISgt7ZQa8wKBgQDn1qEO3dac/UUktIDC3Y1WMitD9S9QIqSa
zZLDxFOhiUBumvpXQGIPWJ4uel8MwKUW5YH8jtzC6GmN2g26WS5GTeae7HhGM7tR
bCSPQs3iSX7fEb6G7zAIyXRJhzoUn+67BtyuYE8CzyWyflMXQjjqpIU11mzAAiXs
0F4C/adqBQKBgDCezwN9Bo1tpSVsUC94G/le0nHIwflEx51s61hwHz3HkZ1P4L/K
9bPR3HioNgj4Xbq/7y2yR2UxLVsYgdAt1gLkJfsztVNphkkq22CKidYm4evuXv02
C4Mb2VUP5iq/Hte9B+WwSLC3tLm/L9cH0Dek3El3AaecG4U0+40eK4W1AoGAQ6Xh
+weKHubcLRiqVbH2EseyzjKV6qkhJLaFc7AuwvzcmymHkLwNoPK3vVIhuAPiaCrx
4fMBwbG1UxnkVZK+KO+EMq1HbxybNOf8Rv00PCo75fU0hgT3HClEUEwwC2Kbc2FO
NWeOxoARPOMVdbzyBK2a3RnDQ8ecr1whgnfnSM0CgYEA2H41sPDh4XKkHwYB5GSn
G/K+bcjmB4xvVY69M/TufrB3QI2cJwM6wHK1xohfLqfwDiwZPXejbNvSs9Zoopc2
BVwpbtr7M08s6RuNg81OfZfDQO4gi8KATuhBRUVtjXX2SKsZUKRdWMyaZQ9QmGRp
wJ0Nbwncrn8BWb8m4AmkZz4=
-----END PRIVATE KEY-----
"""

#: Name of the service-account file `rehearse_model` writes into a work directory.
SERVICE_ACCOUNT_FILENAME = "sim-service-account.json"


@dataclass(frozen=True)
class SimCredentials:
    """The secrets one simulator instance accepts; swap any field to test rejection."""

    groq_api_key: str = "gsk_SIMULATED_groq_key_not_real_0000000000"
    deepinfra_api_key: str = "SIMULATED-deepinfra-token-not-real"
    azure_api_key: str = "SIMULATEDazurekey00000000000000000"
    openai_api_key: str = "sk-SIMULATED-openai-key-not-real"
    aws_access_key_id: str = "AKIASIMULATED0000000"
    aws_secret_access_key: str = "SIMULATED/secret/access/key/not/real/000000"
    aws_session_token: str | None = None
    bedrock_api_key: str = "ABSKSIMULATEDbedrockapikeynotreal"
    sa_client_email: str = "dutchbook-sim@sim-project.iam.gserviceaccount.com"
    sa_private_key_id: str = "sim-key-0001"
    sa_private_key_pem: str = SIM_SERVICE_ACCOUNT_KEY_PEM
    gcp_project: str = "sim-project"

    def __repr__(self) -> str:  # never print secrets, even fake ones, by habit
        return "SimCredentials(<redacted>)"

    @cached_property
    def sa_public_key(self) -> rsa.RSAPublicKey:
        """The public half the token endpoint verifies JWT assertions with."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = serialization.load_pem_private_key(self.sa_private_key_pem.encode(), None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise TypeError("the simulated service account needs an RSA key")
        return key.public_key()

    def service_account_info(self, token_uri: str) -> dict[str, str]:
        """A service-account key file body whose `token_uri` points at the simulator."""
        return {
            "type": "service_account",
            "project_id": self.gcp_project,
            "private_key_id": self.sa_private_key_id,
            "private_key": self.sa_private_key_pem,
            "client_email": self.sa_client_email,
            "client_id": "100000000000000000001",
            "auth_uri": token_uri.rsplit("/", 1)[0] + "/auth",
            "token_uri": token_uri,
        }

    def write_service_account(self, workdir: Path, token_uri: str) -> Path:
        """Write the key file (mode 0600, like a real one) and return its path."""
        workdir.mkdir(parents=True, exist_ok=True)
        path = workdir / SERVICE_ACCOUNT_FILENAME
        path.write_text(json.dumps(self.service_account_info(token_uri), indent=2))
        path.chmod(0o600)
        return path

    def export_lines(self, root_url: str) -> list[str]:
        """Shell `export` lines a user can paste to rehearse against a standalone simulator."""
        lines = [
            f"export GROQ_API_KEY={self.groq_api_key}",
            f"export DEEPINFRA_API_KEY={self.deepinfra_api_key}",
            f"export AZURE_OPENAI_API_KEY={self.azure_api_key}",
            f"export AWS_ACCESS_KEY_ID={self.aws_access_key_id}",
            f"export AWS_SECRET_ACCESS_KEY={self.aws_secret_access_key}",
            "export AWS_REGION=us-east-1",
            f"export AWS_BEARER_TOKEN_BEDROCK={self.bedrock_api_key}  # optional: API-key auth",
            f"# Vertex: write a service-account file with token_uri={root_url}/oauth2/token",
            "#   (providers.sim.rehearse.rehearse_model does this for you)",
        ]
        return lines


DEFAULT_CREDENTIALS = SimCredentials()
