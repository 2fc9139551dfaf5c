"""session.list through the real owner: paging is exact while sessions are in use.

The order is newest-created first, and a page's cursor names a place in that
order that no turn can move (docs/decisions.md, "Sessions"), so a session that
gets a turn while a client pages neither disappears nor shows up twice.
"""

from __future__ import annotations

import base64
from collections import Counter

import orjson
from fakeprovider import text_reply


async def test_paging_lists_each_session_once_while_unlisted_sessions_get_turns(scene):
    async with scene(lambda request: text_reply("ok")) as s:
        peer, first = s.peer, s.session_id
        made = [first]
        for i in range(199):
            made.append((await peer.result("session.create", title=f"s{i}"))["session_id"])

        listed: list[dict] = []
        cursor = None
        turned: list[str] = []
        while True:
            params = {"limit": 50} if cursor is None else {"limit": 50, "cursor": cursor}
            page = await peer.result("session.list", **params)
            listed += page["sessions"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
            # two sessions the client has not seen yet get a turn between pages:
            # the audit's case, in which they used to jump ahead of the cursor
            seen = {s["session_id"] for s in listed}
            for sid in [s for s in reversed(made) if s not in seen][:2]:
                turned.append(sid)
                receipt = await peer.result("prompt.submit", session_id=sid,
                                            input_id="turn", text="hi")
                done = await peer.wait_terminal(sid, receipt["admission_id"])
                assert done["outcome"] == "completed", done

    counts = Counter(s["session_id"] for s in listed)
    assert set(counts) == set(made), "a session that existed throughout is missing"
    assert all(n == 1 for n in counts.values()), [s for s, n in counts.items() if n > 1]
    assert len(set(turned)) == 6
    created = [s["created_at"] for s in listed]
    assert created == sorted(created, reverse=True), "newest-created first"
    # the sessions that had a turn say so, wherever the order put them
    assert {s["session_id"] for s in listed if s["message_count"] == 2} == set(turned)


async def test_a_cursor_the_owner_did_not_issue_is_invalid_params(scene):
    def b64(value: object) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).decode()

    async with scene(lambda request: text_reply("ok")) as sc:
        peer = sc.peer
        for cursor in ["not base64!", b64({"a": 1, "b": 2}), b64(["x", "y"]),
                       b64([1.5]), b64([True, "ses_x"]), b64(None), "\u00e9"]:
            reply = await peer.call("session.list", cursor=cursor)
            assert reply.get("error", {}).get("message") == "invalid_params", (cursor, reply)
        # the last page says it is the last, even when it is full
        page = await peer.result("session.list", limit=1)
        assert len(page["sessions"]) == 1 and page["next_cursor"] is None


async def test_an_untitled_session_is_titled_by_its_first_prompt(scene, tmp_path):
    long_line = "please look at the flaky upload test in the storage module " * 3
    async with scene(lambda request: text_reply("ok")) as sc:
        peer = sc.peer
        untitled = (await peer.result("session.create", cwd=str(tmp_path)))["session_id"]
        titled = (await peer.result("session.create", title="my name"))["session_id"]
        for sid, text in ((untitled, "\n\n  fix   the build\nthen run the tests"),
                          (titled, "something else"), (untitled, "a second prompt")):
            r = await peer.result("prompt.submit", session_id=sid, input_id=text, text=text)
            await peer.wait_terminal(sid, r["admission_id"])
        long_one = (await peer.result("session.create"))["session_id"]
        r = await peer.result("prompt.submit", session_id=long_one, input_id="l",
                              text=long_line)
        await peer.wait_terminal(long_one, r["admission_id"])
        listed = {s["session_id"]: s for s in
                  (await peer.result("session.list", limit=10))["sessions"]}
    assert listed[untitled]["title"] == "fix the build"  # the first line, not the second prompt
    assert listed[untitled]["cwd"] == str(tmp_path)
    assert listed[titled]["title"] == "my name"
    title = listed[long_one]["title"]
    assert title.endswith("…") and len(title) <= 80 and long_line.startswith(title[:-1]), title
