"""Settings: grouped by concern, each from a named variable; a bad value stops start-up naming it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kb_core.roles import Role
from kb_core.settings import ConfigError, load_settings


def test_defaults_need_no_configuration(monkeypatch):
    settings = load_settings()
    assert settings.database.url is None  # the embedded database
    assert settings.embedding.provider == "local"
    assert settings.aws.endpoint_url is None  # real AWS unless told otherwise
    assert settings.server.role is Role.DEMO_READONLY
    assert settings.server.http_host == "127.0.0.1"


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("KB_HTTP_PORT", "eighty", "KB_HTTP_PORT"),
        ("KB_DB_POOL_MAX", "0", "KB_DB_POOL_MAX"),
        ("KB_EMBEDDER", "word2vec", "KB_EMBEDDER"),
        ("KB_ROLE", "admin", "KB_ROLE"),
        ("DATABASE_URL", "mysql://db/kb", "DATABASE_URL"),
        ("KB_WORKER_BATCH_SIZE", "11", "KB_WORKER_BATCH_SIZE"),
        ("KB_CORPUS_BUCKET", "Not_A_Bucket", "KB_CORPUS_BUCKET"),
    ],
)
def test_a_bad_value_fails_with_a_message_naming_the_variable(monkeypatch, variable, value, expected):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert expected in str(caught.value)


@pytest.mark.parametrize("value", ["Analyst", " ANALYST ", "analyst"])
def test_kb_role_is_read_whatever_its_case_and_surrounding_spaces(monkeypatch, value):
    monkeypatch.setenv("KB_ROLE", value)  # as department and status names are: "Analyst" was refused
    assert load_settings().server.role is Role.ANALYST


def test_a_secret_value_is_never_echoed_in_the_error(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "mysql://admin:hunter2@db/kb")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "hunter2" not in str(caught.value)


def test_the_cli_stops_at_start_up_with_exit_code_2_and_names_the_variable():
    env = {**os.environ, "KB_DB_STATEMENT_TIMEOUT_MS": "fast"}
    result = subprocess.run(
        [sys.executable, "-m", "kb_cli.main", "db", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "KB_DB_STATEMENT_TIMEOUT_MS" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_kb_variable_a_character_or_two_from_a_setting_is_named_as_a_typo_and_others_are_left_alone() -> None:
    from kb_core.settings import misspelt_variables, setting_variables

    environ = {
        "KB_EMBEDER": "openai",  # KB_EMBEDDER
        "KB_HTTP_PORTS": "9000",  # KB_HTTP_PORT
        "KB_EMBEDDER": "local",  # a setting
        "KB_VASWANI_DIR": "/data",  # a tool's own variable
        "KB_TEST_DATABASE_URL": "postgresql://",  # four characters from KB_INGEST_DATABASE_URL
        "KB_EMBEDDING_PROVIDER": "x",  # unknown, but no setting is near
        "HOME": "/root",
    }
    assert misspelt_variables(environ) == [
        "KB_EMBEDER is not a setting and is ignored: did you mean KB_EMBEDDER?",
        "KB_HTTP_PORTS is not a setting and is ignored: did you mean KB_HTTP_PORT?",
    ]
    assert {"KB_EMBEDDER", "KB_HTTP_PORT", "DATABASE_URL", "KB_STATE_DIR"} <= setting_variables()


def test_a_database_is_named_without_its_password_as_a_url_that_works_for_a_socket_too():
    from kb_core.db.targets import redact

    assert redact("host=db.internal port=5433 dbname=kb user=kb_server password=s3cret") == (
        "postgresql://kb_server@db.internal:5433/kb"
    )
    # Found walking it: a unix socket's directory read as a host ("@/tmp/state/pgdata:5432/kb"), no usable URL.
    assert redact("host=/tmp/state/pgdata dbname=kosha_kb user=kb_server") == (
        "postgresql://kb_server@/kosha_kb?host=/tmp/state/pgdata"
    )
