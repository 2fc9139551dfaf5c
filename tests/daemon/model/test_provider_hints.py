"""A failed model request says where it went and what likely fixes it: a 404 on a base_url
without /v1, a refused connection naming the address, an HTML error page summarised."""

from __future__ import annotations

import socket

import httpx
import pytest
from fakeprovider import FakeProvider, Status

from tether.daemon.model.provider import OpenAIProvider, ProviderError

USER = [{"role": "user", "content": "hello"}]
HTML_501 = ("<!DOCTYPE html><html><head><title>Error response</title></head><body>"
            "<h1>Error response</h1><p>Error code: 501</p><p>Message: Unsupported method "
            "('POST').</p>" + "<p>filler</p>" * 200 + "</body></html>")


async def fail(client: httpx.AsyncClient, base_url: str) -> ProviderError:
    provider = OpenAIProvider(client, name="custom", base_url=base_url, api_key=None,
                              max_retries=0, backoff_base=0.001, backoff_cap=0.01)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(messages=USER, tools=None, model="m")
    return caught.value


async def test_a_404_on_a_base_url_without_v1_shows_the_url_and_suggests_v1(client):
    with FakeProvider(lambda req: Status(404, '{"detail": "Not Found"}')) as fake:
        base = fake.url.removesuffix("/v1")
        err = await fail(client, base)
    assert err.reason == "not_found"
    assert f"POST {base}/chat/completions" in err.detail, err.detail
    assert "missing `/v1`" in err.detail, err.detail


async def test_a_404_with_v1_does_not_suggest_it(client):
    with FakeProvider(lambda req: Status(404, '{"detail": "no such model"}')) as fake:
        err = await fail(client, fake.url)
    assert "/v1`" not in err.detail and "model" in err.detail, err.detail


async def test_connection_refused_names_the_address(client):
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = await fail(client, f"http://127.0.0.1:{port}/v1")
    assert err.reason == "connection_error"
    assert f"connection refused by 127.0.0.1:{port}" in err.detail, err.detail
    assert "is the model server running" in err.detail


async def test_an_html_error_page_is_summarised_not_dumped(client):
    with FakeProvider(lambda req: Status(501, HTML_501)) as fake:
        err = await fail(client, fake.url)
    assert "HTTP 501" in err.detail
    assert "an HTML page titled 'Error response'" in err.detail, err.detail
    assert "<" not in err.detail and "filler" not in err.detail, err.detail
    assert "does not implement chat completions" in err.detail
