"""A command's output as the model sees it: capped, the head and tail kept, the cut said."""

from __future__ import annotations

import codecs
from collections import deque

__all__ = ["Capture", "Ring", "cap"]


def cap(text: str, limit: int) -> str:
    """``text`` if it fits ``limit`` characters, else its head and tail with a note
    of how much was cut between them."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    tail = limit - head
    return (f"{text[:head]}\n[... {len(text) - head - tail} characters cut; "
            f"the start and end are shown ...]\n{text[-tail:]}")


class Capture:
    """Output read as it arrives, held in bounded memory: the first ``head`` and last
    ``tail`` characters, and how many there were."""

    def __init__(self, limit: int) -> None:
        self._head_max = limit * 2 // 5
        self._tail_max = limit - self._head_max
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.head = ""
        self.tail = ""
        self.total = 0

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        self.total += len(text)
        room = self._head_max - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = (self.tail + text)[-self._tail_max:]

    def text(self) -> str:
        self.feed(b"", final=True)
        cut = self.total - len(self.head) - len(self.tail)
        if cut <= 0:
            return self.head + self.tail
        return (f"{self.head}\n[... {cut} characters cut; the start and end are shown ...]\n"
                f"{self.tail}")


class Ring:
    """The newest ``size`` bytes of a process's output, and the offset they start at."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._chunks: deque[bytes] = deque()
        self._held = 0
        self.written = 0  # bytes ever written

    def write(self, data: bytes) -> None:
        self._chunks.append(data)
        self._held += len(data)
        self.written += len(data)
        while self._held - len(self._chunks[0]) >= self.size:
            self._held -= len(self._chunks.popleft())

    @property
    def start(self) -> int:
        """The offset of the oldest byte still held."""
        return self.written - self._held

    def read(self, offset: int | None = None, limit: int | None = None) -> tuple[str, int, int]:
        """(text, from, to): the held bytes from ``offset`` (default: the oldest), at
        most ``limit`` of them; ``from`` > ``offset`` when older bytes were dropped."""
        data = b"".join(self._chunks)
        begin = self.start if offset is None else max(offset, self.start)
        chunk = data[begin - self.start:]
        if limit is not None:
            chunk = chunk[:limit]
        return chunk.decode("utf-8", "replace"), begin, begin + len(chunk)

    def tail(self, chars: int) -> str:
        data = b"".join(self._chunks)[-chars * 4:]
        return data.decode("utf-8", "replace")[-chars:]
