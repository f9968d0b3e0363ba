"""What every `kb` subcommand shares: the consoles, settings loading and one-line errors."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console

from kb_core.settings import ConfigError, Settings, load_settings, misspelt_variables

# Lines are not wrapped at 80 columns where there is no terminal (make run > log): a path or an ARN broke in two.
console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


def _known_errors() -> tuple[type[BaseException], ...]:
    from mcp.server.mcpserver.exceptions import ToolError  # a tool argument `kb search` shares with the MCP tool

    from kb_cli.prepare import NotReady
    from kb_core.db.embedding_space import EmbeddingSpaceMismatch, SchemaNotReady
    from kb_core.db.migrations import MigrationError
    from kb_core.db.targets import MissingLogin
    from kb_core.embedders.base import EmbeddingError
    from kb_core.embedders.local import LocalModelMissing
    from kb_server.tokens import TokensFileError

    return (
        ConfigError,
        MigrationError,
        EmbeddingSpaceMismatch,
        SchemaNotReady,
        EmbeddingError,
        LocalModelMissing,
        TokensFileError,
        NotReady,
        ToolError,
        MissingLogin,
    )


def friendly_errors(fn: F) -> F:
    """Known failures print one clear line and exit 2; anything else keeps its traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _known_errors() as exc:
            err.print(f"[bold red]error:[/] {exc}", highlight=False)
            raise typer.Exit(2) from None
        except (BotoCoreError, ClientError) as exc:
            err.print(f"[bold red]error:[/] AWS: {exc}{_aws_hint(exc)}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except psycopg.OperationalError as exc:
            # Unreachable, refused or a wrong password, met past the commands' own checks (kb db status,
            # kb db migrate, kb rescan printed a traceback).
            text = " ".join(str(exc).split())[:300] or type(exc).__name__
            err.print(
                f"[bold red]error:[/] cannot use the database: {text}; check DATABASE_URL (or the login's own "
                "KB_SERVER_DATABASE_URL / KB_INGEST_DATABASE_URL), or start it",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


# The bucket or a queue is not there: on a local AWS that nothing has bootstrapped (`kb aws local` alone), or
# under names that are not the stack's.
_MISSING_STACK = {"NoSuchBucket", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}


def _aws_hint(exc: Exception) -> str:
    code = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else None
    if code in _MISSING_STACK:
        return (
            "; create the bucket and queues with `kb aws bootstrap` (`make run` does it), or check "
            "KB_CORPUS_BUCKET, KB_INGEST_QUEUE and KB_INGEST_DLQ"
        )
    return ""


def settings_or_exit() -> Settings:
    try:
        settings = load_settings()
    except ConfigError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(2)
    for warning in misspelt_variables(os.environ):
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    return settings


def tokens_path(settings: Settings) -> Path:
    """The tokens file `kb tokens` writes and `kb serve` reads: KB_TOKENS_FILE, else the state directory's."""
    return settings.server.tokens_file or settings.database.state_dir / "tokens.json"


def role_or_exit(value: str) -> Any:
    """The reader role named on the command line, or one line naming the accepted values."""
    from kb_core.roles import Role

    try:
        return Role(value.strip().lower())
    except ValueError:
        err.print(f"[bold red]error:[/] --role must be one of {', '.join(r.value for r in Role)}")
        raise typer.Exit(2) from None
