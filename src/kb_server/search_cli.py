"""`kb search`: the same query the MCP tool runs, printed for a person (with --explain, the X-ray)."""

from __future__ import annotations

import psycopg
from pgvector.psycopg import register_vector_async
from rich.console import Console
from rich.table import Table

from ingest.embedders import make_embedder
from kb_server.db.embedding_space import check_embedding_space
from kb_server.db.targets import resolve_database
from kb_server.roles import Role
from kb_server.search import hybrid_search
from kb_server.server import MAX_CHUNKS, capped_result
from kb_server.settings import Settings


async def run_search(
    console: Console,
    settings: Settings,
    query: str,
    role: Role,
    departments: list[str] | None,
    top_k: int,
    explain: bool,
) -> None:
    targets = resolve_database(settings.database)
    embedder = make_embedder(settings.embedding)
    with psycopg.connect(targets.server, autocommit=True) as check:
        check_embedding_space(check, embedder.space)
    vector = embedder.embed_query(query)
    async with await psycopg.AsyncConnection.connect(targets.server, autocommit=True) as conn:
        await register_vector_async(conn)
        hits = await hybrid_search(
            conn,
            role,
            text=query,
            vector=vector,
            departments=departments,
            limit=min(top_k, MAX_CHUNKS),
            ef_search=settings.server.ef_search,
        )
    result = capped_result(query, hits, degraded_reason=None)
    console.print(f"[bold]{len(result.documents)} chunks[/] for {query!r} as {role.value}", highlight=False)
    if result.warning:
        console.print(f"[yellow]warning:[/] {result.warning}", highlight=False)
    if explain:
        table = Table("#", "citation", "vector rank", "text rank", "RRF score", "section", show_lines=False)
        for n, hit in enumerate(hits[: len(result.documents)], start=1):
            table.add_row(
                str(n),
                hit.citation,
                str(hit.vector_rank or "–"),
                str(hit.text_rank or "–"),
                f"{hit.score:.5f}",
                hit.section_path[:60] + (" ⚠ injection-suspect" if hit.injection_suspect else ""),
            )
        console.print(table)
        console.print(
            "RRF score = Σ 1 / (60 + rank) over the legs that found the chunk (– : not in that leg's top 50)",
            highlight=False,
        )
        return
    for n, chunk in enumerate(result.documents, start=1):
        flag = " [red](injection-suspect)[/]" if chunk.injection_suspect else ""
        console.print(f"\n[bold]{n}. {chunk.title}[/] v{chunk.version} — {chunk.section_path}{flag}", highlight=False)
        console.print(f"   {chunk.citation}", style="cyan", highlight=False)
        console.print("   " + chunk.content[:400].replace("\n", "\n   "), highlight=False)
