"""The daemon under test is SANDLOT_URL with the key SANDLOT_API_KEY
(go test ./e2e/sdk starts `sandlot serve` and sets both)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sandlot  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def daemon() -> None:
    if not os.environ.get("SANDLOT_URL") or not os.environ.get("SANDLOT_API_KEY"):
        pytest.fail("SANDLOT_URL and SANDLOT_API_KEY must name a running sandlot serve (go test ./e2e/sdk sets them)")


@pytest.fixture
def client() -> Iterator[sandlot.Client]:
    with sandlot.Client() as c:
        yield c


@pytest.fixture
def conversation(client: sandlot.Client) -> Iterator[Callable[[], str]]:
    """Makes conversation ids and ends them after the test, to stay under the tenant's context limit."""
    made: list[str] = []

    def new() -> str:
        made.append(f"py-{uuid.uuid4()}")
        return made[-1]

    yield new
    for c in made:
        client.end_conversation(c)
