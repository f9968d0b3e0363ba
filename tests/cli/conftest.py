"""Helpers for tests that run the `kb` command as a user would: real processes, a fresh state directory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import psutil

VENV_BIN = Path(sys.executable).parent
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"test","version":"1"}}}\n'
)
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kb_env(state_dir: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "KB_STATE_DIR": str(state_dir), **extra}


def postgres_of(state_dir: Path) -> list[psutil.Process]:
    """The postgres server processes running on this state directory's data."""
    data = str((state_dir / "pgdata").resolve())
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["name"] == "postgres" and data in cmdline:
            found.append(proc)
    return found


def wait_until(condition, timeout: float, step: float = 0.3) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return bool(condition())


def wait_for_http(url: str, process: subprocess.Popen, timeout: float = 120) -> None:
    def up() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}")
        try:
            return httpx2.get(url, timeout=1).status_code in (200, 503)
        except httpx2.TransportError:
            return False

    assert wait_until(up, timeout), f"{url} did not answer within {timeout} s"


def initialize_status(mcp_url: str, token: str) -> int:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    return httpx2.post(mcp_url, content=INITIALIZE, headers=headers, timeout=30).status_code


def stop(process: subprocess.Popen, timeout: float = 60) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
