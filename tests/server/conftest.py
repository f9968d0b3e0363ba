from __future__ import annotations

import dataclasses
import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg import conninfo as pg_conninfo
from psycopg.rows import dict_row

from kb_core.roles import Role
from kb_core.settings import AuditSettings, load_settings
from kb_server.http import add_token
from kb_server.server import build_server

VENV_BIN = Path(sys.executable).parent
_callers = itertools.count()


def unique_caller(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_callers)}"


@asynccontextmanager
async def client_called(conninfo: str, role: Role, embedder: Any, caller: str) -> AsyncIterator[Client]:
    """An in-process MCP client session whose calls the audit log records as `caller` (KB_STDIO_CALLER)."""
    settings = dataclasses.replace(load_settings(), audit=AuditSettings(KB_STDIO_CALLER=caller))
    server = build_server(settings, conninfo, role=role, embedder=embedder)
    async with Client(server, raise_exceptions=False) as client:
        yield client


def records(owner: str, caller: str) -> list[dict[str, Any]]:
    """The audit records of `caller`, oldest first."""
    with psycopg.connect(owner, row_factory=dict_row) as conn:
        return conn.execute("SELECT * FROM kb.audit_log WHERE caller = %s ORDER BY audit_id", (caller,)).fetchall()


@asynccontextmanager
async def client_as(
    corpus_database, role: Role, embedder, query_timeout_s: float | None = None
) -> AsyncIterator[Client]:  # type: ignore[no-untyped-def]
    """An in-process MCP client session with the server, as `role`."""
    settings = load_settings()
    if query_timeout_s is not None:
        settings.embedding.query_timeout_s = query_timeout_s
    server = build_server(settings, corpus_database.targets.server, role=role, embedder=embedder)
    async with Client(server, raise_exceptions=True) as client:
        yield client


def database_url(targets) -> str:  # type: ignore[no-untyped-def]
    params = pg_conninfo.conninfo_to_dict(targets.owner)
    return f"postgresql://{params['user']}@/{params['dbname']}?host={params['host']}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class HttpServer:
    url: str
    tokens: dict[str, str]  # role value (and 'limited') -> bearer token
    log: Path
    process: subprocess.Popen

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter((self.url, self.tokens, self.log))  # url, tokens, log = http_server


@contextmanager
def serve_http(corpus_database, folder: Path, *, name: str = "server", **settings: str) -> Iterator[HttpServer]:  # type: ignore[no-untyped-def]
    """`kb serve --transport http` as its own process over the ingested corpus, with one token per role
    (and a 'limited' demo_readonly one); `settings` are extra KB_* environment variables. Servers started
    with the same folder share its tokens file (each rereads it when it changes); `name` names the log."""
    tokens_file = folder / "tokens.json"
    who = "client" if name == "server" else name
    tokens = {role.value: add_token(tokens_file, f"{role.value}-{who}", role) for role in Role}
    tokens["limited"] = add_token(tokens_file, f"limited-{who}", Role.DEMO_READONLY)
    port = free_port()
    log = folder / f"{name}.log"
    env = {
        **os.environ,
        "DATABASE_URL": database_url(corpus_database.targets),
        "KB_TOKENS_FILE": str(tokens_file),
        "KB_HTTP_PORT": str(port),
        **settings,
    }
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(VENV_BIN / "kb"), "serve", "--transport", "http"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.TransportError:
                if process.poll() is not None:
                    raise AssertionError("the HTTP server exited:\n" + log.read_text()) from None
                time.sleep(0.3)
        else:
            raise AssertionError("the HTTP server did not start:\n" + log.read_text())
        yield HttpServer(url, tokens, log, process)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def http_server(corpus_database, tmp_path_factory) -> Iterator[HttpServer]:
    with serve_http(
        corpus_database,
        tmp_path_factory.mktemp("http"),
        KB_RATE_LIMIT_PER_MINUTE="30",
        KB_RATE_LIMIT_BURST="20",
        KB_MAX_REQUEST_BYTES="16384",
    ) as server:
        yield server


def client_with(url: str, token: str | None, headers: dict[str, str] | None = None) -> Client:
    all_headers = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})}
    http = httpx2.AsyncClient(headers=all_headers, timeout=30)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))
