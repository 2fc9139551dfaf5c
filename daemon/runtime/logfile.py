"""The owner's log file, rotated by size without asking the file system per line.

The standard library's `RotatingFileHandler` checks, before every line, that
the file is a regular one (two ``stat`` calls), seeks to its end and asks where
that is, and formats the line twice. The owner writes a few lines per turn
(ledger/activity.py), so that was most of what a line cost. `LogFile` learns the
file's size and kind once, when it opens it, counts what it writes, and
formats each line once; it rotates as the standard handler does
(``owner.log`` → ``owner.log.1`` …, ``backupCount`` kept). Only the owner
writes its log, so the count stays true.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import stat
from typing import Any

__all__ = ["LogFile"]


class LogFile(logging.handlers.RotatingFileHandler):
    def __init__(self, filename: str | os.PathLike[str], *, max_bytes: int,
                 backups: int) -> None:
        self._size = 0
        # a file that is not a regular one (/dev/null, a pipe) is never rotated
        self._regular = True
        super().__init__(filename, maxBytes=max_bytes, backupCount=backups,
                         encoding="utf-8")

    def _open(self) -> Any:
        stream = super()._open()
        info = os.fstat(stream.fileno())
        self._regular = stat.S_ISREG(info.st_mode)
        self._size = info.st_size
        return stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
            size = len(line.encode("utf-8")) if not line.isascii() else len(line)
            if self._regular and self.maxBytes > 0 and self._size + size >= self.maxBytes \
                    and self._size > 0:
                self.doRollover()  # reopens: _open sets the new size (0)
            if self.stream is None:
                self.stream = self._open()
            self.stream.write(line)
            self.flush()
            self._size += size
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - logging must not fail the owner
            self.handleError(record)
