"""`kb search`: the same query the MCP tool runs, printed for a person (with --explain, the X-ray)."""

from __future__ import annotations

import asyncio
from datetime import date, datetime

import psycopg
import typer
from pgvector.psycopg import register_vector_async
from rich.console import Console

from kb_cli.common import console, friendly_errors, role_or_exit, settings_or_exit
from kb_cli.prepare import prepare_database
from kb_core.db.embedding_space import check_embedding_space
from kb_core.embedders import make_embedder
from kb_core.roles import Role
from kb_core.settings import Settings
from kb_core.words import counted
from kb_server.documents import empty_knowledge_base_hint
from kb_server.search import hybrid_search
from kb_server.server import MAX_CHUNKS, capped_result, check_departments, clean_query


async def run_search(
    console: Console,
    settings: Settings,
    query: str,
    role: Role,
    departments: list[str] | None,
    top_k: int,
    explain: bool,
    as_of: date | None = None,
) -> None:
    query = clean_query(query)  # the tool's own checks, before anything is started
    departments = check_departments(departments)
    targets = prepare_database(settings)
    embedder = make_embedder(settings.embedding)
    with psycopg.connect(targets.server, autocommit=True) as check:
        check_embedding_space(check, embedder.space)
    vector = embedder.embed_query(query)
    async with await psycopg.AsyncConnection.connect(targets.reader(role), autocommit=True) as conn:
        await register_vector_async(conn)
        hits = await hybrid_search(
            conn,
            role,
            text=query,
            vector=vector,
            departments=departments,
            limit=min(top_k, MAX_CHUNKS),
            ef_search=settings.server.ef_search,
            as_of=as_of,
        )
    result = capped_result(query, hits, degraded_reason=None)
    when = f" as of {as_of.isoformat()}" if as_of else ""
    found = counted(len(result.documents), "chunk")
    console.print(f"[bold]{found}[/] for {query!r} as {role.value}{when}", highlight=False)
    if not hits:
        async with await psycopg.AsyncConnection.connect(targets.reader(role), autocommit=True) as conn:
            hint = await empty_knowledge_base_hint(conn, role, as_of=as_of, departments=departments)
        if hint:
            console.print(f"[yellow]{hint}[/]", highlight=False)
    elif result.hint:
        console.print(f"[yellow]{result.hint}[/]", highlight=False)
    if result.warning:
        console.print(f"[yellow]warning:[/] {result.warning}", highlight=False)
    if explain:
        # One row per chunk in two lines, not a table: in an 80-column terminal a table cut the citation, the one
        # thing a reader copies, to "kb://compliance/…".
        for n, hit in enumerate(hits[: len(result.documents)], start=1):
            flag = " [red]⚠ injection-suspect[/]" if hit.injection_suspect else ""
            console.print(
                f"{n:>2}. [cyan]{hit.citation}[/]  vector rank {hit.vector_rank or '–'} · text rank "
                f"{hit.text_rank or '–'} · score {hit.score:.5f}",
                highlight=False,
                soft_wrap=True,
            )
            console.print(f"    {hit.section_path}{flag}", highlight=False, soft_wrap=True)
        console.print(
            "score = 0.6 × vector similarity + 0.4 × BM25, each in standard deviations above the lowest of its "
            "leg's top 50 (– : not in that leg's top 50), + 0.05 for a leg's first, + 10 per identifier grade",
            highlight=False,
        )
        return
    for n, chunk in enumerate(result.documents, start=1):
        flag = " [red](injection-suspect)[/]" if chunk.injection_suspect else ""
        console.print(f"\n[bold]{n}. {chunk.title}[/] v{chunk.version} — {chunk.section_path}{flag}", highlight=False)
        console.print(f"   {chunk.citation}", style="cyan", highlight=False)
        console.print("   " + chunk.content[:400].replace("\n", "\n   "), highlight=False)


@friendly_errors
def search(
    query: str = typer.Argument(..., help="What to look for."),
    role: str = typer.Option("demo_readonly", help="The reader role to search as."),
    department: list[str] = typer.Option(None, "--department", "-d", help="Only this department (repeatable)."),
    top_k: int = typer.Option(5, "--top-k", "-k", min=1, max=50),
    explain: bool = typer.Option(False, "--explain", help="Show each chunk's vector rank, text rank and score."),
    as_of: datetime | None = typer.Option(
        None, "--as-of", formats=["%Y-%m-%d"], help="Search the versions in force on this date (YYYY-MM-DD)."
    ),
) -> None:
    """Search as a person would through MCP; --explain is the retrieval X-ray."""
    settings = settings_or_exit()
    chosen = role_or_exit(role)
    day = as_of.date() if as_of else None
    asyncio.run(run_search(console, settings, query, chosen, department or None, top_k, explain, day))
