"""A real owner against a server that cannot stream with tools (llama-cpp-python's
chatml-function-calling): with model.stream auto the turns succeed, the text reaches
viewers as deltas, and the second turn goes straight to plain requests."""

from fakeprovider import text_reply, tool_call_reply
from fakeservers import llama_cpp_python


def calls_then_text(request: dict):
    if request["messages"][-1].get("role") == "tool":
        return text_reply("The file is not there.")
    return tool_call_reply("read_file", {"path": "missing.txt"})


async def test_turns_succeed_and_the_second_does_not_try_streaming(scene):
    async with scene(llama_cpp_python(calls_then_text)) as s:
        provider, peer, sid = s.provider, s.peer, s.session_id
        texts = []
        for n in (1, 2):
            receipt = await peer.result("prompt.submit", session_id=sid, input_id=f"in-{n}",
                                        text="what is in missing.txt?")
            done = await peer.wait_terminal(sid, receipt["admission_id"])
            assert done["outcome"] == "completed", done
            texts.append(done["result"]["text"])
            await peer.wait_event(lambda e, a=receipt["admission_id"]:
                                  e["type"] == "message.complete" and e["admission_id"] == a)
            deltas = "".join(e["payload"]["text"] for e in peer.events
                             if e["type"] == "message.delta"
                             and e["admission_id"] == receipt["admission_id"])
            assert deltas == "The file is not there."
        assert texts == ["The file is not there."] * 2
        assert all(r.get("tools") for r in provider.requests)
    # turn 1: streamed (ends after the role chunk), then plain for the tool call and
    # for the answer; turn 2: plain only
    assert [r["stream"] for r in provider.requests] == [True, False, False, False, False]
