"""What every `kb` subcommand shares: the consoles, settings loading and one-line errors."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer
from rich.console import Console

from kb_core.settings import ConfigError, Settings, load_settings

console = Console()
err = Console(stderr=True, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


def _known_errors() -> tuple[type[BaseException], ...]:
    from kb_core.db.embedding_space import EmbeddingSpaceMismatch, SchemaNotReady
    from kb_core.db.migrations import MigrationError
    from kb_core.embedders.base import EmbeddingError
    from kb_core.embedders.local import LocalModelMissing

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


def role_or_exit(value: str) -> Any:
    """The reader role named on the command line, or one line naming the accepted values."""
    from kb_core.roles import Role

    try:
        return Role(value)
    except ValueError:
        err.print(f"[bold red]error:[/] --role must be one of {', '.join(r.value for r in Role)}")
        raise typer.Exit(2) from None
