"""A streaming standby of an embedded PostgreSQL, built with the bundled pg_basebackup and started with pg_ctl.

The embedded server allows replication over its unix socket (initdb --auth-local=trust) and runs with
wal_level=replica and max_wal_senders=10 by default, so nothing on the primary has to change. The standby
is a copy taken with `pg_basebackup -R` (which writes standby.signal and primary_conninfo) and listens on a
unix socket in a folder of its own.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from psycopg import conninfo as pg_conninfo

from kb_core.db.embedded import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

BIN = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]


def _run_as(owner: str, *command: str) -> None:
    """As the primary's data owner (the embedded server runs as its own system user when we are root)."""
    line = " ".join(shlex.quote(c) for c in command)
    subprocess.run(["su", owner, "-s", "/bin/sh", "-c", line], check=True, capture_output=True, timeout=120)


@dataclass
class Standby:
    data_dir: Path
    owner: str
    superuser: str  # conninfo of the standby's superuser, database postgres

    def stop(self) -> None:
        _run_as(self.owner, str(BIN / "pg_ctl"), "-w", "-D", str(self.data_dir), "stop", "-m", "fast")
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)


def start_standby(primary_superuser: str, primary_data_dir: Path, folder: Path) -> Standby:
    """Copy the primary into `folder` and start the copy as a streaming standby of it."""
    owner = primary_data_dir.owner()
    params = pg_conninfo.conninfo_to_dict(primary_superuser)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.chown(folder, owner)
    folder.chmod(0o755)
    data_dir = folder / "pgdata"
    _run_as(
        owner,
        str(BIN / "pg_basebackup"),
        "-h",
        str(params["host"]),
        "-U",
        str(params["user"]),
        "-D",
        str(data_dir),
        "-R",  # standby.signal and primary_conninfo
        "-X",
        "stream",
        "-c",
        "fast",
    )
    options = f'-h "" -k {folder}'
    _run_as(owner, str(BIN / "pg_ctl"), "-w", "-D", str(data_dir), "-o", options, "-l", str(folder / "log"), "start")
    superuser = pg_conninfo.make_conninfo(primary_superuser, host=str(folder))
    return Standby(data_dir, owner, superuser)
