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
    replace: bool = typer.Option(False, "--replace", help="Issue a new token for a name that has one already."),
) -> None:
    """Create a token with a role; only its sha256 is stored. The token is printed once."""
    from kb_server.tokens import add_token, read_tokens

    path = tokens_path(settings_or_exit())
    chosen = role_or_exit(role)
    # The name is who the audit log says called: it has to read as someone, as one word (`kb tokens list` and
    # `kb audit --caller` take it as one).
    if not name or not name.isprintable() or any(c.isspace() for c in name):
        err.print(
            f"[bold red]error:[/] {name!r} is not a token name: use one such as alice-laptop, without spaces",
            highlight=False,
        )
        raise typer.Exit(2)
    held = next((e for e in read_tokens(path).values() if e.name == name), None)
    if held is not None and not replace:
        err.print(
            f"[bold red]error:[/] {name} has a token already ({held.role.value}, created {held.created or '-'}): "
            "add --replace to issue a new one (the old one stops working), or choose another name",
            highlight=False,
        )
        raise typer.Exit(2)
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
    width = max(len("name"), *(len(e.name) for e in entries))
    console.print(f"[bold]{'name':<{width}}  {'role':<18}  created[/]", highlight=False)
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
