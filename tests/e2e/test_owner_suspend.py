"""An owner stopped (SIGSTOP, Ctrl-Z on `serve --foreground`) for longer than the
model timeout uses the answer that arrived meanwhile: the model is asked once."""

import asyncio
import os
import signal
import threading
from pathlib import Path

import pytest
from fakeprovider import Held, prompt_of, text_reply
from harness import until

TIMEOUT = 1.0


def stopped(pid: int) -> bool:
    # /proc/PID/stat: "pid (comm) STATE ..."; T is stopped by a signal
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize("phase", ["before-headers", "mid-stream"])
async def test_an_answer_that_arrived_during_a_stop_is_used_not_asked_again(scene, phase):
    gate = threading.Event()

    def handler(req):
        if phase == "before-headers":
            gate.wait(60)
            return text_reply("ANSWERED_ONCE")
        return Held(text_reply("ANSWERED_ONCE").message, gate)

    model = {"stream": True, "timeout_seconds": TIMEOUT, "max_retries": 2,
             "retry_backoff_seconds": 0.01}
    async with scene(handler, model=model) as s:
        provider, owner, peer, sid = s.provider, s.owner, s.peer, s.session_id
        receipt = await peer.result("prompt.submit", session_id=sid, input_id="p",
                                    text="only once")
        await until(lambda: provider.requests, "the model request")
        assert owner.proc is not None
        pid = owner.proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            await until(lambda: stopped(pid), "the owner to stop")
            gate.set()  # the answer goes out while the owner cannot read it
            await until(lambda: provider.answered, "the answer to be sent")
            # stay stopped well past the owner's timeout, so its timer is due on resume
            await asyncio.sleep(3 * TIMEOUT)
        finally:
            os.kill(pid, signal.SIGCONT)
        done = await peer.wait_terminal(sid, receipt["admission_id"])
        assert done["outcome"] == "completed", done["result"]
        assert done["result"]["text"] == "ANSWERED_ONCE"
    assert [prompt_of(r) for r in provider.requests] == ["only once"]
