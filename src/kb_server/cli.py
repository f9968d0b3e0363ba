"""The `kb` command: database, ingestion, serving, search and the queue, for people and for `make`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console

from kb_server.settings import ConfigError, Settings, load_settings

app = typer.Typer(no_args_is_help=True, add_completion=False, help="kosha-kb: MCP retrieval over PostgreSQL.")
db_app = typer.Typer(no_args_is_help=True, help="The database: migrate, status, start, stop.")
app.add_typer(db_app, name="db")

console = Console()
err = Console(stderr=True, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


def _known_errors() -> tuple[type[BaseException], ...]:
    from ingest.embedders.base import EmbeddingError
    from ingest.embedders.local import LocalModelMissing
    from kb_server.db.embedding_space import EmbeddingSpaceMismatch, SchemaNotReady
    from kb_server.db.migrations import MigrationError

    return (ConfigError, MigrationError, EmbeddingSpaceMismatch, SchemaNotReady, EmbeddingError, LocalModelMissing)


def friendly_errors(fn: F) -> F:
    """Known failures print one clear line and exit 2; anything else keeps its traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _known_errors() as exc:
            err.print(f"[bold red]error:[/] {exc}", highlight=False)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def settings_or_exit() -> Settings:
    try:
        return load_settings()
    except ConfigError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(2)


@db_app.command("migrate")
@friendly_errors
def db_migrate() -> None:
    """Apply pending migrations from sql/ (safe to run again)."""
    from ingest.embedders import embedding_space_for
    from kb_server.db.migrations import migrate
    from kb_server.db.targets import resolve_database

    settings = settings_or_exit()
    targets = resolve_database(settings.database)
    applied = migrate(targets.owner, embedding_space_for(settings.embedding))
    if applied:
        for migration in applied:
            console.print(f"applied {migration.version:03d}_{migration.name}")
    else:
        console.print("nothing to apply: the schema is up to date")


@db_app.command("status")
@friendly_errors
def db_status() -> None:
    """Which database is in use, its versions, migration level and embedding model."""
    from kb_server.db.status import database_status
    from kb_server.db.targets import resolve_database

    settings = settings_or_exit()
    status = database_status(resolve_database(settings.database))
    table = _Rows()
    table.add_row("database", status.description)
    table.add_row("PostgreSQL", status.postgres_version)
    table.add_row("pgvector", status.pgvector_version or "[red]not available[/]")
    table.add_row("migrations", f"{status.migration_level} of {status.latest_migration}")
    table.add_row(
        "embedding model",
        str(status.embedding_space) if status.embedding_space else "none yet (run `kb db migrate`)",
    )
    if status.embedding_space:
        docs = status.documents_by_status
        table.add_row(
            "documents",
            f"{sum(docs.values())} ("
            + ", ".join(f"{docs.get(s, 0)} {s}" for s in ("effective", "superseded", "draft"))
            + ")",
        )
        chunks = status.chunks_by_classification
        table.add_row(
            "chunks",
            f"{sum(chunks.values())} ("
            + ", ".join(f"{chunks.get(c, 0)} {c}" for c in ("public", "internal", "confidential", "restricted"))
            + ")",
        )
    table.print()


class _Rows:
    """Label/value lines that never wrap or truncate, so they can be read and grepped."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str]] = []

    def add_row(self, label: str, value: str) -> None:
        self.rows.append((label, value))

    def print(self) -> None:
        width = max(len(label) for label, _ in self.rows)
        for label, value in self.rows:
            console.print(f"[bold]{label:<{width}}[/]  {value}", soft_wrap=True, highlight=False)


@db_app.command("start")
@friendly_errors
def db_start() -> None:
    """Start the embedded PostgreSQL and keep it running after this command exits."""
    from kb_server.db.targets import resolve_database

    settings = settings_or_exit()
    if settings.database.url is not None:
        err.print("DATABASE_URL is set: the embedded database is not used, there is nothing to start")
        raise typer.Exit(2)
    targets = resolve_database(settings.database, keep_running=True)
    console.print(f"running: {targets.description}")


@db_app.command("stop")
@friendly_errors
def db_stop() -> None:
    """Stop the embedded PostgreSQL."""
    from kb_server.db.embedded import EmbeddedPostgres

    settings = settings_or_exit()
    stopped = EmbeddedPostgres(settings.database.state_dir).stop()
    console.print("stopped" if stopped else "it was not running")


@app.command("ingest")
@friendly_errors
def ingest(
    paths: list[Path] = typer.Argument(
        ..., help="Files or folders (folders are walked for known formats).", exists=True
    ),
) -> None:
    """Ingest files directly, without the queue: parse, chunk, scan, embed and store each one."""
    from ingest.embedders import make_embedder
    from ingest.pipeline import Ingestor, document_files, ingest_files
    from kb_server.db.targets import resolve_database
    from kb_server.ingest_report import print_summary, progress_bar

    settings = settings_or_exit()
    files, skipped = document_files(paths)
    targets = resolve_database(settings.database)
    started = time.perf_counter()
    embedder = make_embedder(settings.embedding)
    with (
        Ingestor(targets.ingest, embedder, max_bytes=settings.aws.max_file_bytes) as ingestor,
        progress_bar(console, len(files)) as advance,
    ):
        results = list(ingest_files(ingestor, files, on_result=advance))
    print_summary(console, results, skipped, time.perf_counter() - started)
    if any(r.outcome == "failed" for r in results):
        raise typer.Exit(1)


@app.command("serve")
@friendly_errors
def serve(
    transport: str = typer.Option("stdio", help="stdio (Claude Desktop, IDEs) or http (streamable HTTP on /mcp)."),
    host: str | None = typer.Option(None, help="HTTP bind address (default KB_HTTP_HOST, 127.0.0.1)."),
    port: int | None = typer.Option(None, help="HTTP port (default KB_HTTP_PORT, 8765)."),
) -> None:
    """Serve the MCP tools: over stdio, or over HTTP with bearer tokens."""
    from kb_server.db.targets import resolve_database
    from kb_server.server import build_server

    settings = settings_or_exit()
    if transport not in ("stdio", "http"):
        err.print(f"[bold red]error:[/] --transport must be stdio or http, not {transport!r}")
        raise typer.Exit(2)
    targets = resolve_database(settings.database)
    server = build_server(settings, targets.server)
    if transport == "stdio":
        err.print(f"kosha-kb serving MCP over stdio as role {settings.server.role.value}", highlight=False)
        server.run("stdio")
        return
    import uvicorn

    from kb_server.http import TokenStore, build_http_app

    if host:
        settings.server.http_host = host
    if port:
        settings.server.http_port = port
    try:
        tokens = TokenStore.load(settings.server.tokens_file)
    except ValueError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None
    if not len(tokens):
        err.print(
            "[yellow]warning:[/] no bearer tokens configured (KB_TOKENS_FILE): every request will get 401. "
            "Create one with `kb tokens add NAME --role ROLE`.",
            highlight=False,
        )
    url = f"http://{settings.server.http_host}:{settings.server.http_port}/mcp"
    err.print(f"kosha-kb serving MCP over streamable HTTP at {url} ({len(tokens)} tokens)", highlight=False)
    uvicorn.run(
        build_http_app(server, settings.server, tokens),
        host=settings.server.http_host,
        port=settings.server.http_port,
        log_level="warning",
        access_log=False,
        # The failed-authentication limit is per client address. uvicorn would otherwise take that address
        # from X-Forwarded-For on connections from 127.0.0.1 (every caller, at the default bind), so a
        # token guesser could rotate the header to get a fresh allowance on every guess.
        proxy_headers=False,
    )


tokens_app = typer.Typer(no_args_is_help=True, help="Bearer tokens for the HTTP transport.")
app.add_typer(tokens_app, name="tokens")


@tokens_app.command("add")
@friendly_errors
def tokens_add(
    name: str = typer.Argument(..., help="Who or what holds the token, e.g. alice-laptop."),
    role: str = typer.Option(..., help="demo_readonly, support_agent, analyst or compliance_officer."),
) -> None:
    """Create a token with a role; only its sha256 is stored. The token is printed once."""
    from kb_server.http import add_token
    from kb_server.roles import Role

    settings = settings_or_exit()
    path = settings.server.tokens_file or settings.database.state_dir / "tokens.json"
    try:
        chosen = Role(role)
    except ValueError:
        err.print(f"[bold red]error:[/] --role must be one of {', '.join(r.value for r in Role)}")
        raise typer.Exit(2) from None
    token = add_token(path, name, chosen)
    err.print(f"token for {name} ({chosen.value}) stored as a hash in {path}; it is shown only now:", highlight=False)
    console.print(token, highlight=False)


@app.command("search")
@friendly_errors
def search(
    query: str = typer.Argument(..., help="What to look for."),
    role: str = typer.Option("demo_readonly", help="The reader role to search as."),
    department: list[str] = typer.Option(None, "--department", "-d", help="Only this department (repeatable)."),
    top_k: int = typer.Option(5, "--top-k", "-k", min=1, max=50),
    explain: bool = typer.Option(False, "--explain", help="Show each chunk's vector rank, text rank and score."),
) -> None:
    """Search as a person would through MCP; --explain is the retrieval X-ray."""
    import asyncio

    from kb_server.roles import Role
    from kb_server.search_cli import run_search

    settings = settings_or_exit()
    try:
        chosen = Role(role)
    except ValueError:
        err.print(f"[bold red]error:[/] --role must be one of {', '.join(r.value for r in Role)}")
        raise typer.Exit(2) from None
    asyncio.run(run_search(console, settings, query, chosen, department or None, top_k, explain))


@app.command("worker")
@friendly_errors
def worker() -> None:
    """Long-poll the ingest queue and ingest what arrives (the Lambda handler, locally), until SIGTERM."""
    from kb_server.aws_cli import worker_command

    worker_command(console)


@app.command("up")
@friendly_errors
def up(
    corpus: Path = typer.Option(Path("corpus"), exists=True, file_okay=False, help="The folder to upload."),
    serve_after: bool = typer.Option(True, "--serve/--no-serve", help="Serve MCP over HTTP once ingested."),
) -> None:
    """Everything on this machine: database, local AWS, upload, queue-fed ingestion, then MCP over HTTP."""
    from kb_server.up import run_up

    raise typer.Exit(run_up(console, settings_or_exit(), corpus, serve=serve_after))


def _register_aws() -> None:
    from kb_server.aws_cli import aws_app

    app.add_typer(aws_app, name="aws")


_register_aws()

if __name__ == "__main__":  # pragma: no cover
    app()
