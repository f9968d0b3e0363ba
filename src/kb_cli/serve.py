"""`kb serve`: the MCP tools over stdio or streamable HTTP."""

from __future__ import annotations

import typer

from kb_cli.common import err, friendly_errors, settings_or_exit


@friendly_errors
def serve(
    transport: str = typer.Option("stdio", help="stdio (Claude Desktop, IDEs) or http (streamable HTTP on /mcp)."),
    host: str | None = typer.Option(None, help="HTTP bind address (default KB_HTTP_HOST, 127.0.0.1)."),
    port: int | None = typer.Option(None, help="HTTP port (default KB_HTTP_PORT, 8765)."),
) -> None:
    """Serve the MCP tools: over stdio, or over HTTP with bearer tokens."""
    from kb_core.db.targets import resolve_database
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
    from kb_server.http import TokenStore, build_http_app
    from kb_server.http_guard import transport_security
    from kb_server.http_run import run_http

    if host:
        settings.server.http_host = host
    if port:
        settings.server.http_port = port
    try:
        transport_security(settings.server)  # off loopback with no allow-list: one line, no start
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
    run_http(build_http_app(server, settings.server, tokens), settings.server)
