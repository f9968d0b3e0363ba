from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp import Client

from kb_server.roles import Role
from kb_server.server import build_server
from kb_server.settings import load_settings


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
