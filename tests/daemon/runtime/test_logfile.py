"""The owner's log file (daemon/runtime/logfile.py): rotated by the size it counts."""

from __future__ import annotations

import logging
from pathlib import Path

from tether.daemon.runtime.logfile import LogFile


def logger_to(handler: logging.Handler, name: str) -> logging.Logger:
    log = logging.getLogger(name)
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.INFO)
    return log


def test_it_rotates_when_the_next_line_would_pass_the_size(tmp_path: Path):
    path = tmp_path / "owner.log"
    handler = LogFile(path, max_bytes=100, backups=2)
    log = logger_to(handler, "test.logfile.rotate")
    try:
        for i in range(12):
            log.info("line %02d %s", i, "x" * 20)  # 29 bytes with its newline
    finally:
        handler.close()
    # three lines (87 bytes) fit under 100; a fourth would reach it: 12 lines in 4 files,
    # of which the newest three are kept
    assert path.read_text().splitlines() == [f"line {i:02d} {'x' * 20}" for i in (9, 10, 11)]
    assert (tmp_path / "owner.log.1").read_text().splitlines()[0].startswith("line 06")
    assert (tmp_path / "owner.log.2").read_text().splitlines()[0].startswith("line 03")
    assert not (tmp_path / "owner.log.3").exists()


def test_it_counts_what_the_file_held_when_opened_and_bytes_not_characters(tmp_path: Path):
    path = tmp_path / "owner.log"
    path.write_text("y" * 90 + "\n")  # an earlier owner's lines
    handler = LogFile(path, max_bytes=100, backups=1)
    log = logger_to(handler, "test.logfile.reopen")
    try:
        log.info("é" * 5)  # 11 bytes with its newline: 91 + 11 passes 100
    finally:
        handler.close()
    assert path.read_text(encoding="utf-8") == "é" * 5 + "\n"
    assert (tmp_path / "owner.log.1").read_text() == "y" * 90 + "\n"

