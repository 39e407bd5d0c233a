"""`make test-local`: real queries through a real llama-cpp-python server serving Gemma 3 270M.

Not part of `make test` (it needs the model and minutes of CPU). `python -m runs.local_model
test` starts the server and sets DUTCHBOOK_LOCAL_BASE_URL; without it these tests skip.
"""

from __future__ import annotations

import os

import pytest

from runs.local_model import BASE_URL_ENV


@pytest.fixture(scope="session")
def base_url() -> str:
    url = os.environ.get(BASE_URL_ENV)
    if not url:
        pytest.skip(f"no local server: run `make test-local` (sets {BASE_URL_ENV})")
    return url
