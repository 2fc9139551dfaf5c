"""``python -m tether.bench``: the same as ``tether bench``; also how the
bench starts its own owner and echo server (``--serve-owner`` / ``--serve-echo``)."""

import sys

from .command import main

sys.exit(main())
