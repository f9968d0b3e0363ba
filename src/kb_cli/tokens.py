"""`kb tokens ...`: bearer tokens for the HTTP transport (add, list, revoke)."""

from __future__ import annotations

import typer

from kb_cli.common import console, err, friendly_errors, role_or_exit, settings_or_exit, tokens_path

app = typer.Typer(no_args_is_help=True, help="Bearer tokens for the HTTP transport: add, list, revoke.")


@app.command("add")
@friendly_errors
def tokens_add(
    name: str = typer.Argument(..., help="Who or what holds the token, e.g. alice-laptop."),
    role: str = typer.Option(..., help="demo_readonly, support_agent, analyst or compliance_officer."),
) -> None:
    """Create a token with a role; only its sha256 is stored. The token is printed once."""
    from kb_server.tokens import add_token

    path = tokens_path(settings_or_exit())
    chosen = role_or_exit(role)
    token = add_token(path, name, chosen)
    err.print(f"token for {name} ({chosen.value}) stored as a hash in {path}; it is shown only now:", highlight=False)
    console.print(token, highlight=False)


@app.command("list")
@friendly_errors
def tokens_list() -> None:
    """Each token's name, role and creation time (never the token: only its hash is stored)."""
    from kb_server.tokens import list_tokens

    path = tokens_path(settings_or_exit())
    entries = list_tokens(path)
    if not entries:
        err.print(f"no tokens in {path}; create one with `kb tokens add NAME --role ROLE`", highlight=False)
        return
    width = max(len(e.name) for e in entries)
    for entry in entries:
        console.print(f"{entry.name:<{width}}  {entry.role.value:<18}  {entry.created or '-'}", highlight=False)


@app.command("revoke")
@friendly_errors
def tokens_revoke(name: str = typer.Argument(..., help="The token's name, as `kb tokens list` shows it.")) -> None:
    """Remove a token; a running server refuses it within seconds."""
    from kb_server.tokens import revoke_token

    path = tokens_path(settings_or_exit())
    if not revoke_token(path, name):
        err.print(f"[bold red]error:[/] no token named {name!r} in {path} (`kb tokens list` shows them)")
        raise typer.Exit(1)
    err.print(f"revoked {name}: a running server refuses it within a few seconds", highlight=False)
