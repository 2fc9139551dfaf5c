"""``python -m tether.clients.cli``: the ``tether`` command, as the console script runs it."""

import sys

from . import main

sys.exit(main())
