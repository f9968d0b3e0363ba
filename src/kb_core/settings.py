"""Configuration, one settings class per concern, each value from one named environment variable.

A bad value stops the process at start-up with a message that names the variable and says what it
accepts (`load_settings` turns pydantic's error into `ConfigError`).
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from kb_core.file_limits import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_PARSE_MEMORY_BYTES,
    DEFAULT_MAX_PARSE_SECONDS,
    DEFAULT_WORKER_RESERVE_SECONDS,
)
from kb_core.roles import Role

_COMMON = SettingsConfigDict(env_prefix="", extra="ignore", populate_by_name=False, validate_default=True)


class ConfigError(Exception):
    """A setting has a value the product cannot use; the message names the environment variable."""


def default_state_dir() -> Path:
    return Path(platformdirs.user_state_dir("kosha-kb", appauthor=False))


class DatabaseSettings(BaseSettings):
    model_config = _COMMON

    url: SecretStr | None = Field(
        None,
        validation_alias="DATABASE_URL",
        description="Owner connection (migrations). Unset: the embedded PostgreSQL under KB_STATE_DIR.",
    )
    server_url: SecretStr | None = Field(
        None,
        validation_alias="KB_SERVER_DATABASE_URL",
        description="The MCP server's login (kb_server). Default: DATABASE_URL with user kb_server.",
    )
    ingest_url: SecretStr | None = Field(
        None,
        validation_alias="KB_INGEST_DATABASE_URL",
        description="The writer's login (kb_ingest). Default: DATABASE_URL with user kb_ingest.",
    )
    audit_write_url: SecretStr | None = Field(
        None,
        validation_alias="KB_AUDIT_WRITE_DATABASE_URL",
        description="When KB_SERVER_DATABASE_URL is a read replica: the primary, as kb_server, where each "
        "call's audit record is written (a replica takes no writes). Unset: the server's own database.",
    )
    server_password: SecretStr | None = Field(None, validation_alias="KB_SERVER_DB_PASSWORD")
    ingest_password: SecretStr | None = Field(None, validation_alias="KB_INGEST_DB_PASSWORD")
    state_dir: Path = Field(default_factory=default_state_dir, validation_alias="KB_STATE_DIR")
    embedded_database: str = Field(
        "kosha_kb", validation_alias="KB_EMBEDDED_DATABASE", pattern=r"^[a-z_][a-z0-9_]{0,62}$"
    )
    pool_min_size: int = Field(1, ge=0, le=100, validation_alias="KB_DB_POOL_MIN")
    pool_max_size: int = Field(10, ge=1, le=200, validation_alias="KB_DB_POOL_MAX")
    connect_timeout_s: float = Field(5.0, gt=0, le=120, validation_alias="KB_DB_CONNECT_TIMEOUT_S")
    reconnect_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        validation_alias="KB_DB_RECONNECT_TIMEOUT_S",
        description="How long the pool retries a lost connection (doubling pauses) before it starts afresh.",
    )
    statement_timeout_ms: int = Field(10_000, ge=100, le=600_000, validation_alias="KB_DB_STATEMENT_TIMEOUT_MS")

    @property
    def embedded(self) -> bool:
        """The embedded PostgreSQL under KB_STATE_DIR is the database: no URL names another one."""
        return self.url is None and self.server_url is None and self.ingest_url is None

    @field_validator("url", "server_url", "ingest_url", "audit_write_url")
    @classmethod
    def _postgres_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL, e.g. postgresql://user:password@host:5432/dbname")
        return value


class EmbeddingSettings(BaseSettings):
    model_config = _COMMON

    provider: Literal["local", "openai"] = Field("local", validation_alias="KB_EMBEDDER")
    openai_api_key: SecretStr | None = Field(None, validation_alias=AliasChoices("KB_OPENAI_API_KEY", "OPENAI_API_KEY"))
    openai_base_url: str | None = Field(None, validation_alias=AliasChoices("KB_OPENAI_BASE_URL", "OPENAI_BASE_URL"))
    openai_model: str = Field("text-embedding-3-large", validation_alias="KB_OPENAI_EMBEDDING_MODEL")
    openai_dimensions: int = Field(1024, ge=1, le=3072, validation_alias="KB_OPENAI_EMBEDDING_DIMENSIONS")
    batch_size: int = Field(64, ge=1, le=2048, validation_alias="KB_EMBED_BATCH_SIZE")
    max_retries: int = Field(6, ge=0, le=20, validation_alias="KB_EMBED_MAX_RETRIES")
    request_timeout_s: float = Field(30.0, gt=0, le=600, validation_alias="KB_EMBED_TIMEOUT_S")
    concurrency: int = Field(
        4,
        ge=1,
        le=64,
        validation_alias="KB_EMBED_CONCURRENCY",
        description="OpenAI embedder: embedding requests in flight at once, per process.",
    )
    # OpenAI's usage tier 1 limits for text-embedding-3-large: set your organisation's, divided by the number
    # of processes that embed at once (each keeps its own count).
    requests_per_minute: int = Field(3000, ge=1, validation_alias="KB_EMBED_RPM")
    tokens_per_minute: int = Field(1_000_000, ge=1, validation_alias="KB_EMBED_TPM")
    query_timeout_s: float = Field(
        3.0,
        gt=0,
        le=60,
        validation_alias="KB_QUERY_EMBED_TIMEOUT_S",
        description="A search whose query embedding takes longer answers from full text alone (degraded).",
    )
    local_threads: int = Field(
        0,
        ge=0,
        le=64,
        validation_alias="KB_LOCAL_EMBEDDER_THREADS",
        description="Local embedder: the cores its model uses (0: the cores this process may use).",
    )


class AwsSettings(BaseSettings):
    model_config = _COMMON

    endpoint_url: str | None = Field(
        None, validation_alias="AWS_ENDPOINT_URL", description="Unset: real AWS. Set: a local AWS (moto)."
    )
    target: Literal["auto", "aws"] = Field(
        "auto",
        validation_alias="KB_AWS_TARGET",
        description="auto: AWS_ENDPOINT_URL, else the running local stack; aws: real AWS (never a fallback).",
    )
    region: str = Field("us-east-1", validation_alias=AliasChoices("AWS_REGION", "AWS_DEFAULT_REGION"))
    corpus_bucket: str = Field(
        "kosha-kb-corpus", validation_alias="KB_CORPUS_BUCKET", pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
    )
    ingest_queue: str = Field("ingest-queue", validation_alias="KB_INGEST_QUEUE")
    dead_letter_queue: str = Field("ingest-dlq", validation_alias="KB_INGEST_DLQ")
    visibility_timeout_s: int = Field(360, ge=0, le=43_200, validation_alias="KB_QUEUE_VISIBILITY_TIMEOUT_S")
    max_receive_count: int = Field(3, ge=1, le=1000, validation_alias="KB_QUEUE_MAX_RECEIVE_COUNT")
    dlq_retention_s: int = Field(14 * 24 * 3600, ge=60, le=14 * 24 * 3600, validation_alias="KB_DLQ_RETENTION_S")
    batch_size: int = Field(5, ge=1, le=10, validation_alias="KB_WORKER_BATCH_SIZE")
    wait_time_s: int = Field(10, ge=0, le=20, validation_alias="KB_WORKER_WAIT_TIME_S")
    retry_delay_s: int = Field(
        20,
        ge=0,
        le=43_200,
        validation_alias="KB_WORKER_RETRY_DELAY_S",
        description="`kb worker` only: a failed message is retried after this many seconds instead of the "
        "visibility timeout, so a broken file reaches the DLQ in about max receives × this (Lambda: unused).",
    )
    max_file_bytes: int = Field(25 * 1024 * 1024, ge=1024, validation_alias="KB_MAX_FILE_BYTES")
    max_decompressed_bytes: int = Field(
        DEFAULT_MAX_DECOMPRESSED_BYTES,
        ge=1024,
        validation_alias="KB_MAX_DECOMPRESSED_BYTES",
        description="A .docx whose zip entries expand past this is refused before it is parsed.",
    )
    max_parse_seconds: float = Field(
        DEFAULT_MAX_PARSE_SECONDS,
        gt=0,
        le=3600,
        validation_alias="KB_MAX_PARSE_SECONDS",
        description="A file still parsing after this many seconds fails with the limit named.",
    )
    worker_reserve_seconds: float = Field(
        DEFAULT_WORKER_RESERVE_SECONDS,
        ge=0,
        le=900,
        validation_alias="KB_WORKER_RESERVE_SECONDS",
        description="Lambda: a record's parse budget is cut to the invocation's time left less this, kept for "
        "what follows a parse (its hard stop, embedding, storing); a record with under 1 s of budget is not started.",
    )
    max_parse_memory_bytes: int = Field(
        DEFAULT_MAX_PARSE_MEMORY_BYTES,
        ge=0,
        validation_alias="KB_MAX_PARSE_MEMORY_BYTES",
        description="A parse runs in a child of the parse server capped at this much more memory; 0 parses in-process.",
    )
    withdrawn_retention_days: int | None = Field(
        None,
        ge=0,
        le=36_500,
        validation_alias="KB_WITHDRAWN_RETENTION_DAYS",
        description="Unset: withdrawn versions are kept for ever; 0: deleted when withdrawn; N: deleted N days after.",
    )


class ServerSettings(BaseSettings):
    model_config = _COMMON

    role: Role = Field(
        Role.DEMO_READONLY, validation_alias="KB_ROLE", description="The role of every request over stdio."
    )

    @field_validator("role", mode="before")
    @classmethod
    def _folded_role(cls, value: object) -> object:
        # Read as departments and doc codes are: "Analyst" and " analyst " name the analyst.
        return value.strip().lower() if isinstance(value, str) else value

    http_host: str = Field("127.0.0.1", validation_alias="KB_HTTP_HOST")
    http_port: int = Field(8765, ge=1, le=65535, validation_alias="KB_HTTP_PORT")
    allowed_hosts: str | None = Field(
        None,
        validation_alias="KB_HTTP_ALLOWED_HOSTS",
        description="Host headers accepted over HTTP, comma-separated (e.g. mcp.internal:8765). "
        "Unset: localhost only when bound to 127.0.0.1.",
    )
    allowed_origins: str | None = Field(
        None,
        validation_alias="KB_HTTP_ALLOWED_ORIGINS",
        description="Origin headers accepted over HTTP, comma-separated (e.g. https://console.internal). "
        "Unset: http(s):// of each allowed host. Requests without Origin (non-browser clients) are unaffected.",
    )
    trusted_proxies: str | None = Field(
        None,
        validation_alias="KB_TRUSTED_PROXIES",
        description="Addresses (or CIDRs) of the proxies whose X-Forwarded-For is believed. Unset: none.",
    )
    keep_alive_s: int = Field(
        75,
        ge=1,
        le=3600,
        validation_alias="KB_HTTP_KEEP_ALIVE_S",
        description="How long an idle HTTP connection is kept open. Longer than a load balancer's idle timeout "
        "(an ALB's is 60 s), so the balancer never sends a request on a connection the server is closing.",
    )
    stateless: bool = Field(
        False,
        validation_alias="KB_HTTP_STATELESS",
        description="Serve HTTP without sessions, so any replica behind a load balancer can answer any request.",
    )
    tokens_file: Path | None = Field(
        None,
        validation_alias="KB_TOKENS_FILE",
        description="JSON file of sha256(token) -> role, for the HTTP transport.",
    )
    rate_limit_per_minute: int = Field(120, ge=1, le=100_000, validation_alias="KB_RATE_LIMIT_PER_MINUTE")
    rate_limit_burst: int = Field(30, ge=1, le=10_000, validation_alias="KB_RATE_LIMIT_BURST")
    max_request_bytes: int = Field(64 * 1024, ge=1024, le=10 * 1024 * 1024, validation_alias="KB_MAX_REQUEST_BYTES")
    ef_search: int = Field(80, ge=10, le=1000, validation_alias="KB_HNSW_EF_SEARCH")


def default_stdio_caller() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name (a container without a passwd entry)
        return "stdio"


class AuditSettings(BaseSettings):
    model_config = _COMMON

    stdio_caller: str = Field(
        default_factory=default_stdio_caller,
        validation_alias="KB_STDIO_CALLER",
        min_length=1,
        max_length=200,
        description="Who stdio calls are recorded as in the audit log (default: the OS user).",
    )
    retention_days: int = Field(
        365,
        ge=1,
        le=36_500,
        validation_alias="KB_AUDIT_RETENTION_DAYS",
        description="`kb audit prune` removes audit records older than this by default.",
    )
    reader_url: SecretStr | None = Field(
        None,
        validation_alias="KB_AUDIT_DATABASE_URL",
        description="The login `kb audit` reads with (granted compliance_officer). Default: DATABASE_URL.",
    )

    @field_validator("reader_url")
    @classmethod
    def _postgres_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        return DatabaseSettings._postgres_scheme(value)


@dataclass(frozen=True)
class Settings:
    """All settings, loaded once at start-up."""

    database: DatabaseSettings
    embedding: EmbeddingSettings
    aws: AwsSettings
    server: ServerSettings
    audit: AuditSettings = field(default_factory=AuditSettings)


def load_settings() -> Settings:
    """Read every setting from the environment; raise ConfigError naming the first bad variable."""
    try:
        return Settings(
            database=DatabaseSettings(),
            embedding=EmbeddingSettings(),
            aws=AwsSettings(),
            server=ServerSettings(),
            audit=AuditSettings(),
        )
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc)) from None


_SETTINGS_CLASSES = (DatabaseSettings, EmbeddingSettings, AwsSettings, ServerSettings, AuditSettings)


def setting_variables() -> set[str]:
    """Every environment variable a setting reads."""
    names: set[str] = set()
    for settings_class in _SETTINGS_CLASSES:
        for name, info in settings_class.model_fields.items():
            alias = info.validation_alias
            if isinstance(alias, AliasChoices):
                names.update(choice for choice in alias.choices if isinstance(choice, str))
            else:
                names.add(alias if isinstance(alias, str) else name.upper())
    return names


def misspelt_variables(environ: Mapping[str, str]) -> list[str]:
    """A warning per KB_ variable that no setting reads but that is one or two characters from one that does.

    Unknown variables are ignored (the environment holds many), so `KB_EMBEDER=openai` would quietly keep the
    local embedder; a name that close to a setting's is a typo worth saying. Names further away (tools' own
    variables, such as the evals') are left alone."""
    known = sorted(setting_variables())
    warnings = []
    for name in sorted(environ):
        if not name.startswith("KB_") or name in known:
            continue
        match = process.extractOne(name, known, scorer=Levenshtein.distance, score_cutoff=2)
        if match is not None:
            warnings.append(f"{name} is not a setting and is ignored: did you mean {match[0]}?")
    return warnings


def describe_validation_error(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        variable = ".".join(str(part) for part in error["loc"]) or exc.title
        value = error.get("input")
        hidden = any(word in variable.lower() for word in ("url", "key", "password", "token", "secret"))
        shown = "" if value is None or hidden else f" (got {value!r})"
        lines.append(f"{variable}: {error['msg']}{shown}")
    return "invalid configuration: " + "; ".join(lines)
