"""The `kb` command: the one place that wires the core, ingestion and the server together.

Each subcommand group lives in a module of its own; this file only assembles them.
"""

from __future__ import annotations

import typer

from kb_cli import audit, aws, db, ingest, rescan, search, serve, tokens, up, withdraw
from kb_cli.lifecycle import exit_on_termination
from kb_core.version import package_version

app = typer.Typer(no_args_is_help=True, add_completion=False, help="kosha-kb: MCP retrieval over PostgreSQL.")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kosha-kb {package_version()}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """kosha-kb: MCP retrieval over PostgreSQL."""
    exit_on_termination()


app.add_typer(db.app, name="db")
app.command("ingest")(ingest.ingest)
app.command("withdraw")(withdraw.withdraw)
app.command("rescan")(rescan.rescan)
app.command("serve")(serve.serve)
app.add_typer(tokens.app, name="tokens")
app.command("search")(search.search)
app.command("worker")(aws.worker)
app.command("up")(up.up)
app.add_typer(aws.aws_app, name="aws")
app.add_typer(audit.app, name="audit")

if __name__ == "__main__":  # pragma: no cover
    app()
