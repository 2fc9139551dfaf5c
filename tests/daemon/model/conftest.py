"""The model client's tests: ``client`` runs a test on both paths of a request."""

from __future__ import annotations

import httpx
import pytest

from tether.daemon.model.transport import model_client


@pytest.fixture(params=["own", "httpx"])
async def client(request):
    """The owner's client, whose plain-http posts skip httpx (transport.py), and httpx's."""
    async with (model_client() if request.param == "own" else httpx.AsyncClient()) as c:
        yield c
