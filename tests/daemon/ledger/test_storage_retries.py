"""Writes the owner owes after an acknowledgement, while the store refuses them.

The services run in-process on a real state.db whose writer the storage fault
hook (tests/faults.py) switches to read-only and back, as the e2e storage
suite does to the real owner; here the windows can be held exactly.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from faults import StorageFault

from tether.bench import InstantProvider
from tether.daemon.ledger import rules as ledger
from tether.store.tables import admissions as admission_rows
from tether.store.tables import events as event_rows
from tether.store.tables import messages as message_rows

SID = "ses_000000000000000000000002"


async def test_a_refused_turn_start_runs_once_the_store_heals(wire, tmp_path: Path):
    fault = tmp_path / "fault"
    async with wire({"demo": InstantProvider()}) as parts:
        await parts.new_session(SID)
        payload = ledger.encode_payload(ledger.canonical_payload("go", True, {}, None))
        await parts.db.write(lambda c: admission_rows.insert_new(
            c, admission_id="adm_go", target_session_id=SID, principal_id="local",
            request_id="go", payload_json=payload, payload_digest=ledger.digest(payload),
            owner_epoch=1, now=1.0))
        parts.db.before_group = StorageFault(str(fault))
        fault.write_text("readonly")
        parts.scheduler.enqueue(SID, "adm_go")
        parts.turns.pump()
        # well past several refused attempts: the turn keeps its place, nothing ran
        await asyncio.sleep(1.0)
        row = await parts.db.read(lambda c: admission_rows.get(c, "adm_go"))
        assert row["status"] == "queued"
        assert parts.scheduler.running.get(SID) == "adm_go"  # the session waits for it
        assert await parts.db.read(lambda c: message_rows.list_for(c, SID)) == []

        fault.write_text("")
        await asyncio.wait_for(parts.turns.wait(SID, "adm_go", 30), 30)
        row = await parts.db.read(lambda c: admission_rows.get(c, "adm_go"))
        assert (row["status"], row["outcome"]) == ("terminal", "completed")
        said = await parts.db.read(lambda c: message_rows.list_for(c, SID))
        assert [m["role"] for m in said] == ["user", "assistant"]  # started once
        starts = await parts.db.read(
            lambda c: event_rows.payloads_of_type(c, SID, "message.start"))
        assert len(starts) == 1
