"""Fixtures for the local-model tests: a fake llama-cpp-python server on 127.0.0.1."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

# llamafake lives next to the tests (importlib import mode: no package to import it from).
sys.path.insert(0, str(Path(__file__).parent))

from llamafake import FakeLlama, serve


@pytest.fixture
async def llama() -> AsyncIterator[FakeLlama]:
    async for state in serve(FakeLlama()):
        yield state
