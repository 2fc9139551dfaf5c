"""The nodes a client connects to over TCP: one URL, or several nodes of a fleet.

A fleet is several owner processes serving one PostgreSQL database: any node
answers for any session, and a token minted on one works on all. ``Nodes``
keeps the list and the failover order: a connect tries the nodes in order from
the last one that worked; after a lost connection the next node comes first
(the one that failed is tried last, once the others were). ``dial`` opens the
WebSocket to one node; ``Failures`` says what a round of failed attempts means.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .discovery import OwnerUnavailable

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

__all__ = ["MAX_FRAME_BYTES", "Failures", "Nodes", "attempt_errors", "dial", "parse_urls"]

#: largest frame the client accepts; a snapshot of a long session is one frame
MAX_FRAME_BYTES = 256 * 1024 * 1024


def attempt_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a failed connection attempt may raise. websockets' own only when
    it is loaded: a process that never imported it (a one-shot command's blocking
    client, blocking.py) cannot meet them, and looking them up would load it."""
    errors: tuple[type[BaseException], ...] = (OwnerUnavailable, OSError, TimeoutError)
    loaded = sys.modules.get("websockets.exceptions")
    return errors if loaded is None else (*errors, loaded.InvalidHandshake)


def parse_urls(url: str | Sequence[str] | None) -> list[str]:
    """One URL, a comma-separated string of them, or a list (whose items may be
    comma-separated too) -> the URLs in order, blanks and repeats left out."""
    if url is None:
        return []
    parts = url.split(",") if isinstance(url, str) else [p for u in url for p in u.split(",")]
    out: list[str] = []
    for part in (p.strip() for p in parts):
        if part and part not in out:
            out.append(part)
    return out


class Nodes:
    """The URLs of the nodes, and which one to try first."""

    def __init__(self, urls: list[str]) -> None:
        if not urls:
            raise ValueError("no node URL given")
        self.urls = urls
        self.current = 0  # the node that worked last (the first one until then)

    @property
    def url(self) -> str:
        return self.urls[self.current]

    def order(self, *, moving_on: bool) -> list[str]:
        """Every node once: from the current one, or (after losing it) from the next."""
        start = (self.current + 1) % len(self.urls) if moving_on else self.current
        return self.urls[start:] + self.urls[:start]

    def worked(self, url: str) -> None:
        self.current = self.urls.index(url)


async def dial(url: str, token: str | None) -> ClientConnection:
    """The WebSocket to one node's TCP listener, with the bearer token."""
    from websockets.asyncio.client import connect

    headers = {"Authorization": f"Bearer {token}"} if token else None
    return await connect(url, additional_headers=headers, max_size=MAX_FRAME_BYTES,
                         compression=None, proxy=None, open_timeout=10)


class Failures:
    """The failed connection attempts of one round, one per node, and what they mean.

    A failure is final when repeating it on that node is pointless: the owner
    refused (HTTP 4xx: token, origin, path) or cannot be started. The rest
    (unreachable, overloaded, still starting) may pass, so a round ending with
    one of them is repeated until the caller's deadline.
    """

    def __init__(self) -> None:
        self.items: list[tuple[str | None, bool, OwnerUnavailable]] = []

    def add(self, exc: BaseException, url: str | None) -> None:
        """Record the failure of an attempt on node ``url`` (None: the home's owner)."""
        self.items.append((url, *_meaning(exc, url)))

    @property
    def final(self) -> bool:
        return all(final for _, final, _ in self.items)

    def error(self) -> OwnerUnavailable:
        """The one error to report: a single node's own, else one naming each node
        (``refused`` only if every node refused)."""
        if len(self.items) == 1:
            return self.items[0][2]
        reason = ("refused" if all(e.reason == "refused" for _, _, e in self.items)
                  else "unreachable")
        detail = "no node answered: " + "; ".join(f"{url}: {e.detail}"
                                                  for url, _, e in self.items)
        hint = ("check the token: one minted on any node of the fleet works on all"
                if reason == "refused" else "check that the nodes run, and the URLs")
        return OwnerUnavailable(reason, detail, hint)


def _meaning(exc: BaseException, url: str | None) -> tuple[bool, OwnerUnavailable]:
    """(final, the error to report) for one failed attempt."""
    if isinstance(exc, OwnerUnavailable):
        return exc.reason != "start_timeout", exc
    loaded = sys.modules.get("websockets.exceptions")
    if loaded is not None and isinstance(exc, loaded.InvalidStatus):
        status = exc.response.status_code
        if 400 <= status < 500:
            body = exc.response.body.decode(errors="replace").strip()
            return True, OwnerUnavailable("refused", f"the owner refused the connection "
                                          f"(HTTP {status}): {body}",
                                          "check the URL and the token")
        return False, OwnerUnavailable("unreachable", f"the owner answered HTTP {status}",
                                       "try again later")
    # the owner went away between discovery and connect, is restarting, or
    # refused the handshake (overloaded)
    return False, OwnerUnavailable(
        "unreachable", f"cannot connect to the owner: {exc}",
        "`tether status` shows whether it runs; `tether logs`, its log"
        if url is None else "check that the owner runs and listens there (`tether serve --tcp`)")
