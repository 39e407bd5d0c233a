"""The one shared reading of HTTP statuses, and each provider's exceptions to it."""

from __future__ import annotations

import pytest

from providers.base import status_outcome
from providers.types import Outcome


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (429, Outcome.RATE_LIMIT), (408, Outcome.TIMEOUT), (401, Outcome.AUTH_ERROR),
        (403, Outcome.AUTH_ERROR), (500, Outcome.PROVIDER_ERROR), (503, Outcome.PROVIDER_ERROR),
        (504, Outcome.PROVIDER_ERROR), (400, Outcome.BAD_REQUEST), (404, Outcome.BAD_REQUEST),
        (498, Outcome.BAD_REQUEST), (302, Outcome.BAD_REQUEST),
    ],
)
def test_the_common_reading(status: int, outcome: Outcome) -> None:
    assert status_outcome(status) is outcome


def test_each_provider_names_only_its_exceptions() -> None:
    assert status_outcome(498, rate_limits=(498,)) is Outcome.RATE_LIMIT  # Groq flex capacity
    assert status_outcome(504, timeouts=(504,)) is Outcome.TIMEOUT  # Vertex DEADLINE_EXCEEDED
    assert status_outcome(424, provider_errors=(424,)) is Outcome.PROVIDER_ERROR  # Bedrock
    assert status_outcome(200, otherwise=Outcome.PROVIDER_ERROR) is Outcome.PROVIDER_ERROR
