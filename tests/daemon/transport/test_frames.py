"""The transport's own text frames: the bytes websockets would send for them."""

from __future__ import annotations

import pytest
from websockets.frames import Frame, Opcode

from tether.daemon.transport.server import text_frame


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 65535, 65536, 70_000, 1 << 20])
def test_a_text_frame_is_what_websockets_serializes(size: int) -> None:
    # each length encoding (7 bits, 16 bits, 64 bits) and both sides of its bounds
    payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    assert text_frame(payload) == Frame(Opcode.TEXT, payload).serialize(
        mask=False, extensions=[])


def test_a_text_frame_parses_back_to_its_payload() -> None:
    from websockets.streams import StreamReader

    payload = '{"jsonrpc":"2.0","id":1,"result":{"ok":"é"}}'.encode()
    reader = StreamReader()
    reader.feed_data(text_frame(payload))
    parser = Frame.parse(reader.read_exact, mask=False, max_size=None, extensions=[])
    try:
        next(parser)
    except StopIteration as done:
        frame = done.value
    assert (frame.opcode, frame.fin, frame.data) == (Opcode.TEXT, True, payload)
