"""The terminal suites share test_interactive_tty's pseudo-terminal (``Terminal``,
``Screen``, ``PROMPT``): this folder is importable by name, as tests/clients is for
clihelp."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
