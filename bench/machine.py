"""The machine and database a measurement ran on, for the head of bench/ and reliability/ reports."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import psutil
import psycopg

REPO = Path(__file__).resolve().parents[1]


def describe(superuser: str) -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    with psycopg.connect(superuser) as conn:
        postgres = conn.execute("SHOW server_version").fetchone()
        vector = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        buffers = conn.execute("SHOW shared_buffers").fetchone()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "postgresql": postgres[0] if postgres else None,
        "pgvector": vector[0] if vector else None,
        "shared_buffers": buffers[0] if buffers else None,
        "commit": commit.stdout.strip(),
    }
