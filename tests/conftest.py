"""Suite-wide pytest setup: makes the shared test helpers in tests/ importable."""

import sys
from pathlib import Path

# tests/ has no __init__.py (tests mirror the source tree without being a package), so put
# the folder itself on sys.path for helpers such as `from fakeprovider import FakeProvider`.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
