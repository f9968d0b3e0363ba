"""`kb tokens ...`: bearer tokens for the HTTP transport."""

from __future__ import annotations

import typer

from kb_cli.common import console, err, friendly_errors, role_or_exit, settings_or_exit

app = typer.Typer(no_args_is_help=True, help="Bearer tokens for the HTTP transport.")


@app.command("add")
@friendly_errors
def tokens_add(
    name: str = typer.Argument(..., help="Who or what holds the token, e.g. alice-laptop."),
    role: str = typer.Option(..., help="demo_readonly, support_agent, analyst or compliance_officer."),
) -> None:
    """Create a token with a role; only its sha256 is stored. The token is printed once."""
    from kb_server.http import add_token

    settings = settings_or_exit()
    path = settings.server.tokens_file or settings.database.state_dir / "tokens.json"
    chosen = role_or_exit(role)
    token = add_token(path, name, chosen)
    err.print(f"token for {name} ({chosen.value}) stored as a hash in {path}; it is shown only now:", highlight=False)
    console.print(token, highlight=False)
