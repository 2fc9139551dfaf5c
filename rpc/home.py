"""The home directory's layout and how a home is found (SPEC §1), for the owner and clients.

A home holds ``config.yaml``, ``state.db`` (+WAL), ``daemon.lock``, ``daemon.json``
(the descriptor), ``daemon.sock`` and ``logs/``. The owner creates and locks it
(``tether.daemon.runtime.home``); a client finds the owner through the same paths
(``tether.clients.library.discovery``). Both resolve the home with ``resolve_home``, and
agree on ``EXIT_OWNER_RUNNING``, the status by which an owner a client started
says that the home already has one.

Only paths are computed here: nothing is created, read or locked.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["EXIT_OWNER_RUNNING", "HOME_ENV", "HomeLayout", "resolve_home"]

#: the environment variable naming the home when ``--home`` is not given
HOME_ENV = "TETHER_HOME"
#: the application's directory name under the platform's user data dir (the default home)
_APP_DIR = "tether"

#: ``python -m tether.daemon`` exits with this status when the home already has a
#: live owner: a client that started it lost a start race and waits for the winner
EXIT_OWNER_RUNNING = 3


def resolve_home(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``--home`` (``explicit``), else ``$TETHER_HOME``, else the platform's user data dir.

    The result is absolute, with ``~`` expanded; an empty string counts as not given.
    """
    if explicit:
        return Path(explicit).expanduser().absolute()
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser().absolute()
    # lazy: only needed when nothing names the home, and not on a client's hot path
    import platformdirs

    return Path(platformdirs.user_data_dir(_APP_DIR, appauthor=False)).absolute()


class HomeLayout:
    """The paths of the home directory ``root``; two layouts of one root are equal."""

    # A plain class, not a dataclass: building a dataclass costs more at import
    # than the rest of this module, and every CLI command imports it.
    __slots__ = ("root",)

    def __init__(self, root: Path) -> None:
        self.root = root

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HomeLayout):
            return NotImplemented
        return self.root == other.root

    def __hash__(self) -> int:
        return hash(self.root)

    @property
    def config(self) -> Path:
        """``config.yaml``: the owner's configuration (SPEC §9)."""
        return self.root / "config.yaml"

    @property
    def db(self) -> Path:
        """``state.db``: the store, with its ``-wal`` and ``-shm`` files beside it."""
        return self.root / "state.db"

    @property
    def lock(self) -> Path:
        """``daemon.lock``: flocked by the owner for its whole life; holds its pid."""
        return self.root / "daemon.lock"

    @property
    def descriptor(self) -> Path:
        """``daemon.json``: written atomically once the owner is ready, removed on clean exit."""
        return self.root / "daemon.json"

    @property
    def stopped(self) -> Path:
        """``stopped.json``: written by an owner stopped on purpose (``tether stop``, a
        signal), removed when an owner starts; a client that lost that owner does not
        start another (a viewer never owns the owner's lifetime)."""
        return self.root / "stopped.json"

    @property
    def socket(self) -> Path:
        """``daemon.sock``: the owner's Unix socket (mode 0600)."""
        return self.root / "daemon.sock"

    @property
    def logs(self) -> Path:
        """``logs/``: the owner's logs."""
        return self.root / "logs"

    @property
    def owner_log(self) -> Path:
        """``logs/owner.log``: the owner's log (what it did, every error, with times);
        rotated at 5 MiB into ``owner.log.1`` to ``.3``. What ``tether logs`` shows."""
        return self.logs / "owner.log"

    @property
    def owner_stdio_log(self) -> Path:
        """``logs/daemon.log``: stdout and stderr of an owner that a client started:
        what never went through the log, such as why it could not start or a crash's
        traceback (``tether logs --stdio``)."""
        return self.logs / "daemon.log"
