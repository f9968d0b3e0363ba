"""`kb serve`: the MCP tools over stdio or streamable HTTP."""

from __future__ import annotations

import typer

from kb_cli.common import err, friendly_errors, settings_or_exit, tokens_path
from kb_core.words import counted


@friendly_errors
def serve(
    transport: str = typer.Option("stdio", help="stdio (Claude Desktop, IDEs) or http (streamable HTTP on /mcp)."),
    host: str | None = typer.Option(None, help="HTTP bind address (default KB_HTTP_HOST, 127.0.0.1)."),
    port: int | None = typer.Option(None, min=1, max=65535, help="HTTP port (default KB_HTTP_PORT, 8765)."),
) -> None:
    """Serve the MCP tools: over stdio, or over HTTP with bearer tokens."""
    from kb_cli.lifecycle import bind_problem, exit_at_once_on_signals, hangup_as_terminate
    from kb_cli.logs import plain_logging
    from kb_cli.prepare import check_audit_target, prepare_database
    from kb_server.server import build_server

    settings = settings_or_exit()
    plain_logging()
    if transport not in ("stdio", "http"):
        err.print(f"[bold red]error:[/] --transport must be stdio or http, not {transport!r}")
        raise typer.Exit(2)
    if transport == "stdio":
        exit_at_once_on_signals()
        targets = prepare_database(settings)
        check_audit_target(settings, targets)
        server = build_server(settings, targets.server)
        err.print(f"kosha-kb serving MCP over stdio as role {settings.server.role.value}", highlight=False)
        import anyio

        from kb_server.stdio_drain import serve_stdio

        anyio.run(serve_stdio, server)
        return
    from kb_server.http import TokenStore, build_http_app
    from kb_server.http_guard import transport_security
    from kb_server.http_run import run_http

    if host:
        settings.server.http_host = host
    if port:
        settings.server.http_port = port
    if problem := bind_problem(settings.server.http_host, settings.server.http_port):
        err.print(f"[bold red]error:[/] {problem}", highlight=False)
        raise typer.Exit(2)
    path = tokens_path(settings)
    try:
        transport_security(settings.server)  # off loopback with no allow-list: one line, no start
        tokens = TokenStore.load(path)
    except ValueError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None
    hangup_as_terminate()
    targets = prepare_database(settings)
    check_audit_target(settings, targets)
    server = build_server(settings, targets.server)
    if not len(tokens):
        err.print(
            f"[yellow]warning:[/] no bearer tokens in {path} yet: every request gets 401 until you run "
            "`kb tokens add NAME --role ROLE` (the running server picks it up)",
            highlight=False,
        )
    url = f"http://{settings.server.http_host}:{settings.server.http_port}/mcp"
    held = counted(len(tokens), "token")
    err.print(f"kosha-kb serving MCP over streamable HTTP at {url} ({held} in {path})", highlight=False)
    run_http(build_http_app(server, settings.server, tokens), settings.server)
