"""Fixtures for the simulator tests: a running simulator and an HTTP session per test."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from providers.sim.credentials import DEFAULT_CREDENTIALS, SimCredentials
from providers.sim.server import SimHandle, start_sim

# promptkit lives next to the tests (importlib import mode: no package to import it from).
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
async def sim() -> AsyncIterator[SimHandle]:
    handle = await start_sim()
    try:
        yield handle
    finally:
        await handle.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    timeout = aiohttp.ClientTimeout(total=2.0)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        yield session


@pytest.fixture
def creds() -> SimCredentials:
    return DEFAULT_CREDENTIALS
