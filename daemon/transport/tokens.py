"""TCP bearer tokens: minting, listing, revoking, checking, and the one-time exchange.

The Unix socket is the user's own door; tokens are how anything else (a TCP
client, a browser page) gets in. ``TokenService`` is the one place that mints
and checks them; the listener asks it at every TCP handshake and it tells the
listener to close the connections of a token the user revokes, or that expires
while they are open (a timer per token seen with an expiry).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from typing import Any

from tether.rpc.dispatch import Dispatcher
from tether.rpc.errors import InvalidParams, NotFound
from tether.rpc.models.tokens import TokenListParams, TokenRevokeParams
from tether.store import Store
from tether.store.tables import tokens as token_rows

from .handlers import token_hash
from .server import Call

__all__ = ["WEB_TOKEN_TTL", "TokenService", "register_token_methods"]

#: how long the token a viewer page gets in exchange for its one-time link lasts
WEB_TOKEN_TTL = 7 * 86400.0
UNIX_ONLY = {"loc": "", "msg": "accepted over the Unix socket only", "type": "transport"}


class TokenService:
    def __init__(self, db: Store) -> None:
        self._db = db
        #: called with the id of a token that was revoked or has expired, and which
        #: of the two ("revoked", "expired"): the listeners close its connections
        #: and streams, and say how many there were
        self.on_revoke: list[Callable[[str, str], int]] = []
        #: the expiry timers of tokens seen with an ``expires_at``
        self._expiry: dict[str, asyncio.TimerHandle] = {}

    async def create(self, label: str | None, ttl_seconds: float | None = None,
                     once: bool = False) -> dict[str, Any]:
        token = "tt_" + secrets.token_urlsafe(32)
        token_id = "tok_" + secrets.token_hex(6)
        now = time.time()
        expires = None if ttl_seconds is None else now + ttl_seconds
        digest = token_hash(token)
        await self._db.write(lambda c: token_rows.insert(
            c, token_id, digest, label, now, expires_at=expires, once=once))
        return {"token": token, "token_id": token_id}

    async def list(self) -> list[dict[str, Any]]:
        return await self._db.read(token_rows.list_all)

    async def revoke(self, token_id: str) -> dict[str, Any]:
        if not await self._db.write(lambda c: token_rows.revoke(c, token_id)):
            raise NotFound(f"no token {token_id!r}",
                           fields=[{"loc": "token_id", "msg": "no such token",
                                    "type": "not_found"}])
        timer = self._expiry.pop(token_id, None)
        if timer is not None:
            timer.cancel()
        return {"revoked": True, "closed_connections": self._drop(token_id, "revoked")}

    def _drop(self, token_id: str, why: str) -> int:
        return sum(hook(token_id, why) for hook in self.on_revoke)

    async def check(self, token: str) -> str | None:
        """The id of ``token`` if it is a valid bearer token now, else None.

        A token with an expiry gets a timer (once) that closes what it opened
        when that moment comes, as a revoke would."""
        digest, now = token_hash(token), time.time()
        found = await self._db.read(lambda c: token_rows.valid(c, digest, now))
        if found is None:
            return None
        token_id, expires_at = found
        if expires_at is not None and token_id not in self._expiry:
            self._expiry[token_id] = asyncio.get_running_loop().call_later(
                max(0.0, expires_at - time.time()), self._expired, token_id)
        return token_id

    def _expired(self, token_id: str) -> None:
        self._expiry.pop(token_id, None)
        self._drop(token_id, "expired")

    def close(self) -> None:
        """Cancel the expiry timers (the owner stops)."""
        for timer in self._expiry.values():
            timer.cancel()
        self._expiry.clear()

    async def exchange(self, once: str) -> dict[str, Any] | None:
        """Trade a one-time token for a fresh bearer token (None: not a live one-time token)."""
        digest, now = token_hash(once), time.time()
        if not await self._db.write(lambda c: token_rows.consume_once(c, digest, now)):
            return None
        minted = await self.create("web viewer", WEB_TOKEN_TTL)
        return {**minted, "expires_at": now + WEB_TOKEN_TTL}


def register_token_methods(d: Dispatcher, tokens: TokenService) -> None:
    """token.list and token.revoke (token.create is in handlers.py)."""

    @d.register("token.list")
    async def token_list(p: TokenListParams, call: Call) -> dict[str, Any]:
        if call.transport != "unix":
            raise InvalidParams("tokens are listed over the Unix socket only", fields=[UNIX_ONLY])
        return {"tokens": await tokens.list()}

    @d.register("token.revoke")
    async def token_revoke(p: TokenRevokeParams, call: Call) -> dict[str, Any]:
        if call.transport != "unix":
            raise InvalidParams("tokens are revoked over the Unix socket only", fields=[UNIX_ONLY])
        return await tokens.revoke(p.token_id)
