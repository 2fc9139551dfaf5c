"""The rpc method handlers: thin glue from validated params to the services.

Each handler gets the params model and a ``Call`` (the connection's viewer,
which listener it came from, and hooks to run once the reply is queued). A
storage failure anywhere below becomes ``storage_unavailable`` here, in
``translate``, the one place the store's errors meet the wire.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tether.rpc import models as m
from tether.rpc.dispatch import Dispatcher
from tether.rpc.errors import InvalidParams, NotFound, RpcError, StorageUnavailable
from tether.rpc.models import sessions as ms
from tether.rpc.names import PROVIDER_NAMES
from tether.rpc.protocol import PROTOCOL
from tether.store import StorageError, Store
from tether.store.tables import tokens as token_rows

from ..config.turn import TOOLSETS
from ..engine.turns import TurnRunner
from ..ledger.admissions import AdmissionService
from ..ledger.events import EventBus
from ..runtime.supervisor import Supervisor
from ..sessions.admin import SessionAdmin
from ..sessions.service import SessionService
from .peers import guard as peer_guard
from .server import Call

__all__ = ["Identity", "build_dispatcher", "token_hash", "translate", "CAPABILITIES"]

CAPABILITIES = ["admissions.v1", "events.replay", "delegation.inline", "delegation.background",
                "prompt.cancel", "tokens", "approvals", "tools.terminal", "tools.files",
                "process.notify"]
#: the invalid_params ``fields`` entry of a method refused over TCP: no param is
#: wrong, the transport is (every invalid_params names its fields)
UNIX_ONLY = {"loc": "", "msg": "accepted over the Unix socket only", "type": "transport"}
#: how long session.interrupt waits for the stopped turn to record its outcome
INTERRUPT_WAIT_SECONDS = 10.0


def token_hash(token: str) -> str:
    """What state.db keeps of a TCP token: its SHA-256, never the token."""
    return hashlib.sha256(token.encode()).hexdigest()


def translate(exc: Exception) -> RpcError | None:
    """The wire error of a failure the store raised (None: not the store's)."""
    if isinstance(exc, StorageError):
        return StorageUnavailable(f"the state database failed: {exc.detail}",
                                  storage_reason=exc.reason)
    if isinstance(exc, sqlite3.IntegrityError):
        return StorageUnavailable(f"the state database failed: {exc}",
                                  storage_reason="constraint")
    return None


@dataclass(frozen=True)
class Identity:
    """Who this owner is, as runtime.describe says."""

    version: str
    instance_id: str
    epoch: int
    #: settings.turn_defaults of the owner's configuration
    turn_defaults: dict[str, str | None]
    #: the boundary around the agent's commands (toolsets/sandbox.py Sandbox.describe)
    sandbox: str = "none"
    #: sandbox.mode and approvals.mode of the configuration (an ACP editor shows them)
    sandbox_mode: str = "workspace-write"
    approvals_mode: str = "ask"


def build_dispatcher(*, identity: Identity, db: Store, bus: EventBus,
                     sessions: SessionService, admissions: AdmissionService,
                     turns: TurnRunner, supervisor: Supervisor,
                     check_results: bool = False,
                     admin: SessionAdmin | None = None,
                     mcp: Callable[[], list[dict[str, Any]]] | None = None,
                     register: Sequence[Callable[[Dispatcher], None]] = ()) -> Dispatcher:
    """The dispatcher with every method's handler; ``register`` adds the handlers a
    feature keeps in its own package (cron/handlers.py)."""
    # the agent's own processes may not answer approvals, mint tokens, schedule jobs
    d = Dispatcher(check_results=check_results, translate=translate, guard=peer_guard)

    @d.register("runtime.describe")
    async def describe(p: m.RuntimeDescribeParams, call: Call) -> dict[str, Any]:
        return {"protocol": PROTOCOL, "version": identity.version,
                "instance_id": identity.instance_id, "epoch": identity.epoch,
                "pid": os.getpid(), "capabilities": CAPABILITIES,
                "providers": list(PROVIDER_NAMES), "toolsets": list(TOOLSETS),
                "turn_defaults": identity.turn_defaults, "sandbox": identity.sandbox,
                "sandbox_mode": identity.sandbox_mode,
                "approvals_mode": identity.approvals_mode,
                "mcp_servers": mcp() if mcp is not None else []}

    @d.register("ping")
    async def ping(p: m.PingParams, call: Call) -> dict[str, Any]:
        return {"pong": True}

    @d.register("runtime.shutdown")
    async def shutdown(p: m.RuntimeShutdownParams, call: Call) -> dict[str, Any]:
        if call.transport != "unix":
            raise InvalidParams("runtime.shutdown is only accepted over the Unix socket",
                                fields=[UNIX_ONLY])
        supervisor.stop_requested.set()
        return {"draining": True}

    @d.register("token.create")
    async def token_create(p: m.TokenCreateParams, call: Call) -> dict[str, Any]:
        if call.transport != "unix":
            raise InvalidParams("tokens are minted over the Unix socket only",
                                fields=[UNIX_ONLY])
        token = "tt_" + secrets.token_urlsafe(32)
        token_id = "tok_" + secrets.token_hex(6)
        digest = token_hash(token)
        now = time.time()
        expires = None if p.ttl_seconds is None else now + p.ttl_seconds
        await db.write(lambda c: token_rows.insert(
            c, token_id, digest, p.label, now, expires_at=expires, once=bool(p.once)))
        return {"token": token, "token_id": token_id}

    @d.register("session.create")
    async def session_create(p: m.SessionCreateParams, call: Call) -> dict[str, Any]:
        snap, release = await sessions.create(p, call.viewer)
        call.after_reply.append(release)
        return snap

    @d.register("session.resume")
    async def session_resume(p: m.SessionResumeParams, call: Call) -> dict[str, Any]:
        snap, release = await sessions.snapshot(p.session_id, p.after_seq, call.viewer)
        call.after_reply.append(release)
        return snap

    @d.register("session.list")
    async def session_list(p: m.SessionListParams, call: Call) -> dict[str, Any]:
        return await sessions.list(p.limit, p.cursor)

    @d.register("session.events.since")
    async def events_since(p: m.SessionEventsSinceParams, call: Call) -> dict[str, Any]:
        return await sessions.events_since(p.session_id, p.after_seq, p.limit)

    @d.register("session.detach")
    async def session_detach(p: m.SessionDetachParams, call: Call) -> dict[str, Any]:
        if p.session_id in call.viewer.sessions:
            # decided and done before any await: a session.resume pipelined after
            # this request must find its own subscription intact
            bus.unsubscribe(call.viewer, p.session_id)
            return {"ok": True}
        # idempotent: detaching a session this connection does not follow is a no-op
        # (nothing to unsubscribe, so nothing may be, whatever arrives meanwhile)
        if not await sessions.exists(p.session_id):
            raise NotFound(f"no session {p.session_id!r}", session_id=p.session_id)
        return {"ok": True}

    @d.register("session.interrupt")
    async def session_interrupt(p: m.SessionInterruptParams, call: Call) -> dict[str, Any]:
        if not await sessions.exists(p.session_id):
            raise NotFound(f"no session {p.session_id!r}", session_id=p.session_id)
        aid = await turns.stop_and_wait(p.session_id, None, INTERRUPT_WAIT_SECONDS)
        return {"interrupted": aid is not None, "admission_id": aid}

    @d.register("prompt.submit", refine=admissions.oversize)
    async def prompt_submit(p: m.PromptSubmitParams, call: Call) -> dict[str, Any]:
        return await admissions.submit(p)

    @d.register("prompt.receipt")
    async def prompt_receipt(p: m.PromptReceiptParams, call: Call) -> dict[str, Any]:
        return await admissions.receipt(p.session_id, p.admission_id, p.input_id)

    @d.register("prompt.cancel")
    async def prompt_cancel(p: m.PromptCancelParams, call: Call) -> dict[str, Any]:
        return await admissions.cancel(p.session_id, p.admission_id)

    @d.register("prompt.resolve_unknown")
    async def prompt_resolve(p: m.PromptResolveUnknownParams, call: Call) -> dict[str, Any]:
        return await admissions.resolve_unknown(p.session_id, p.admission_id)

    # session management (session_admin.py)
    session_admin = admin or SessionAdmin(sessions.journal, sessions.scheduler, sessions.prices)

    @d.register("session.rename")
    async def session_rename(p: ms.SessionRenameParams, call: Call) -> dict[str, Any]:
        return await session_admin.rename(p.session_id, p.title)

    @d.register("session.delete")
    async def session_delete(p: ms.SessionDeleteParams, call: Call) -> dict[str, Any]:
        own = 1 if p.session_id in call.viewer.sessions else 0
        return await session_admin.delete(p.session_id, force=p.force,
                                          attached=bus.subscribers(p.session_id) - own)

    @d.register("session.prune")
    async def session_prune(p: ms.SessionPruneParams, call: Call) -> dict[str, Any]:
        return await session_admin.prune(p.older_than_seconds, p.dry_run)

    @d.register("session.lookup")
    async def session_lookup(p: ms.SessionLookupParams, call: Call) -> dict[str, Any]:
        return await session_admin.lookup(p.prefix, p.last)

    for add in register:
        add(d)
    missing = d.unhandled()
    if missing:
        raise RuntimeError(f"methods without a handler: {missing}")
    return d
