"""Benchmarks at corpus size: query embedding, the hybrid SQL, the tool call end to end, ingest, memory."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from evals.golden import load_golden

from bench.timing import measure, summary
from kb_core.db.targets import DatabaseTargets
from kb_core.embedders.local import LocalEmbedder
from kb_core.roles import Role
from kb_server.db.pools import RoleConnections
from kb_server.search import hybrid_search

REPO = Path(__file__).resolve().parents[1]


def query_benchmarks(targets: DatabaseTargets, embedder: LocalEmbedder, rounds: int) -> dict[str, Any]:
    questions = load_golden()[:rounds] if rounds < len(load_golden()) else load_golden()
    texts = [q.question for q in questions]
    embed_ms, vectors = measure(iter_call(embedder.embed_query, texts), len(texts))

    async def sql_and_tool() -> dict[str, Any]:
        async with RoleConnections(targets.server) as connections:
            samples = []
            for question, vector in zip(questions, vectors, strict=True):
                conn = await connections.get(question.role)
                started = time.perf_counter()
                await hybrid_search(
                    conn, question.role, text=question.question, vector=vector, departments=None, limit=8
                )
                samples.append((time.perf_counter() - started) * 1000)
        from mcp import Client

        from kb_core.settings import load_settings
        from kb_server.server import build_server

        server = build_server(load_settings(), targets.server, role=Role.ANALYST, embedder=embedder)
        tool = []
        async with Client(server) as client:
            await client.call_tool("search_knowledge_base", {"query": "warm-up"})
            for question in questions:
                started = time.perf_counter()
                result = await client.call_tool("search_knowledge_base", {"query": question.question})
                tool.append((time.perf_counter() - started) * 1000)
                assert not result.is_error, result.content
        return {"hybrid_sql_ms": summary(samples), "tool_call_end_to_end_ms": summary(tool)}

    return {"query_embedding_ms": embed_ms, **asyncio.run(sql_and_tool()), "queries": len(questions)}


def iter_call(function, items):
    iterator = iter(items)
    return lambda: function(next(iterator))


def server_memory(targets: DatabaseTargets, searches: int, clients: int) -> dict[str, Any]:
    """RSS of `kb serve --transport http` with the local embedder loaded: idle, and the peak under load."""
    from psycopg import conninfo

    from kb_server.http import add_token

    state = Path(os.environ.get("TMPDIR", "/tmp")) / f"kb-bench-serve-{os.getpid()}"
    state.mkdir(exist_ok=True)
    token = add_token(state / "tokens.json", "bench", Role.ANALYST)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params = conninfo.conninfo_to_dict(targets.owner)
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://{params['user']}@/{params['dbname']}?host={params['host']}",
        "KB_TOKENS_FILE": str(state / "tokens.json"),
        "KB_HTTP_PORT": str(port),
        "KB_RATE_LIMIT_PER_MINUTE": "100000",
        "KB_RATE_LIMIT_BURST": "10000",
    }
    process = psutil.Popen(
        [str(Path(sys.executable).parent / "kb"), "serve", "--transport", "http"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import httpx2

        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.TransportError:
                time.sleep(0.3)
        time.sleep(2)
        idle = process.memory_info().rss
        peak = [idle]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak.append(process.memory_info().rss)
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        asyncio.run(_load(url, token, searches, clients))
        stop.set()
        sampler.join()
        after = process.memory_info().rss
    finally:
        process.terminate()
        process.wait(timeout=30)
    return {
        "idle_mb": round(idle / 2**20, 1),
        "peak_under_load_mb": round(max(peak) / 2**20, 1),
        "after_load_mb": round(after / 2**20, 1),
        "searches": searches,
        "clients": clients,
    }


async def _load(url: str, token: str, searches: int, clients: int) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    questions = [q.question for q in load_golden()]

    async def client(n: int) -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as session:
            for i in range(n, searches, clients):
                result = await session.call_tool("search_knowledge_base", {"query": questions[i % len(questions)]})
                assert not result.is_error, result.content

    await asyncio.gather(*(client(n) for n in range(clients)))
