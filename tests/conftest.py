"""Suite-wide pytest setup: makes the shared test helpers in tests/ importable."""

import sys
from pathlib import Path

# tests/ has no __init__.py (tests mirror the source tree without being a package), so put
# the folder itself on sys.path for helpers such as `from fakeprovider import FakeProvider`.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

# A suite started from a script in the background (`cmd &` without job control) inherits
# SIGINT ignored, and so would every owner and CLI it starts: the tests that press
# Ctrl-C (SIGINT) on a CLI would then wait for nothing. A handler of our own here is
# reset to the default in every child at exec, as a terminal's shell would give it.
import signal  # noqa: E402

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
