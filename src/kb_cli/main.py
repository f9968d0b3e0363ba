"""The `kb` command: the one place that wires the core, ingestion and the server together.

Each subcommand group lives in a module of its own; this file only assembles them.
"""

from __future__ import annotations

import typer

from kb_cli import audit, aws, db, ingest, search, serve, tokens, up

app = typer.Typer(no_args_is_help=True, add_completion=False, help="kosha-kb: MCP retrieval over PostgreSQL.")
app.add_typer(db.app, name="db")
app.command("ingest")(ingest.ingest)
app.command("serve")(serve.serve)
app.add_typer(tokens.app, name="tokens")
app.command("search")(search.search)
app.command("worker")(aws.worker)
app.command("up")(up.up)
app.add_typer(aws.aws_app, name="aws")
app.add_typer(audit.app, name="audit")

if __name__ == "__main__":  # pragma: no cover
    app()
