"""Params and results of the token methods beyond token.create (list, revoke), and of
runtime.listen_tcp, which opens the TCP listener those tokens are for."""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

from .core import Model

__all__ = ["TokenInfo", "TokenListParams", "TokenListResult", "TokenRevokeParams",
           "TokenRevokeResult", "ListenTcpParams", "ListenTcpResult"]


class TokenListParams(Model):
    pass


class TokenInfo(Model):
    """A token as listed: never the token itself (the owner keeps only its hash)."""

    token_id: str
    label: str | None
    created_at: float
    expires_at: float | None  # unix seconds; null: never
    once: bool  # a one-time link token (`tether web`), not a bearer token


class TokenListResult(Model):
    tokens: list[TokenInfo]


class TokenRevokeParams(Model):
    token_id: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class TokenRevokeResult(Model):
    revoked: bool
    #: TCP connections that were using the token, closed now
    closed_connections: int


class ListenTcpParams(Model):
    #: where to listen when the owner has no TCP listener yet (default 127.0.0.1:8765;
    #: port 0 picks a free one); an owner that listens already answers with its own
    address: Annotated[str, StringConstraints(min_length=3, max_length=300)] | None = None


class ListenTcpResult(Model):
    #: the listener's ws://HOST:PORT/ (the viewer page is its /web/)
    tcp_url: str
    #: false when the owner was listening already
    opened: bool
