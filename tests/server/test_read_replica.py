"""The server reading from a streaming standby of the embedded primary while ingestion writes to the primary.

A real standby (tests/support/standby.py: the bundled pg_basebackup and pg_ctl), real replication, the real
MCP server in process; the audit records go to the primary (KB_AUDIT_WRITE_DATABASE_URL).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from mcp import Client
from pydantic import SecretStr
from tests.conftest import create_database, server_dir, targets_for
from tests.server.conftest import VENV_BIN
from tests.support.documents import markdown_document
from tests.support.standby import Standby, start_standby

from ingest.pipeline import Ingestor
from kb_core.db.embedded import EmbeddedPostgres
from kb_core.db.migrations import migrate
from kb_core.db.targets import DatabaseTargets
from kb_core.roles import Role
from kb_core.settings import load_settings
from kb_server.server import build_server

DOC = "CMP-SOP-950"
REPLICATION_WAIT_S = 30


@dataclass
class Replicated:
    primary: DatabaseTargets
    standby: DatabaseTargets
    standby_server: Standby


@pytest.fixture(scope="module")
def replicated(local_embedder) -> Iterator[Replicated]:
    folder = server_dir("primary")
    primary = EmbeddedPostgres(folder)
    superuser = primary.start()
    try:
        create_database(superuser, "kb")
        targets = targets_for(superuser, "kb")
        migrate(targets.owner, local_embedder.space)
        standby = start_standby(superuser, primary.data_dir, server_dir("standby"))
        try:
            yield Replicated(targets, targets_for(standby.superuser, "kb"), standby)
        finally:
            standby.stop()
    finally:
        primary.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _ingest(targets: DatabaseTargets, embedder, version: str, threshold: str) -> None:  # type: ignore[no-untyped-def]
    text = markdown_document(
        DOC,
        version=version,
        effective_date=f"2026-0{version[0]}-01",
        classification="confidential",
        sections={"1. Purpose": "Who gets EDD.", "2. Trigger": f"Enhanced due diligence applies at {threshold}."},
    )
    with Ingestor(targets.ingest, embedder, max_bytes=2_000_000) as ingestor:
        result = ingestor.ingest(text.encode(), name=f"{DOC}_{version}.md", source_uri=f"file:///c/{version}.md")
    assert result.outcome == "ingested", result.reason


async def _served_version(client: Client) -> str | None:
    result = await client.call_tool("get_document", {"doc_code": DOC})
    return None if result.is_error else result.structured_content["version"]


async def _wait_for_version(client: Client, version: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < REPLICATION_WAIT_S:
        if await _served_version(client) == version:
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"version {version} never reached the standby (last: {await _served_version(client)})")


@pytest.mark.anyio
async def test_the_server_answers_from_a_standby_and_sees_a_new_version_ingested_on_the_primary(
    replicated, local_embedder
):
    with psycopg.connect(replicated.standby.owner, autocommit=True) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)  # really a standby
    _ingest(replicated.primary, local_embedder, "1.0", "$10,000")

    settings = load_settings()
    settings.database.audit_write_url = SecretStr(replicated.primary.server)
    server = build_server(settings, replicated.standby.server, role=Role.ANALYST, embedder=local_embedder)
    async with Client(server, raise_exceptions=True) as client:
        await _wait_for_version(client, "1.0")
        _ingest(replicated.primary, local_embedder, "2.0", "$7,500")  # supersedes 1.0, on the primary only
        await _wait_for_version(client, "2.0")
        search = await client.call_tool("search_knowledge_base", {"query": "enhanced due diligence threshold"})
    assert not search.is_error
    assert any("$7,500" in d["content"] for d in search.structured_content["documents"])
    assert all("$10,000" not in d["content"] for d in search.structured_content["documents"])
    # Every call's audit record was written on the primary (the standby takes no writes).
    with psycopg.connect(replicated.primary.owner) as conn:
        recorded = conn.execute("SELECT count(*) FROM kb.audit_log WHERE role = 'analyst'").fetchone()[0]
    assert recorded >= 3


def test_serving_from_a_standby_without_a_primary_for_the_audit_log_stops_with_one_line(replicated):
    def url(targets: DatabaseTargets, user: str) -> str:
        params = psycopg.conninfo.conninfo_to_dict(targets.owner)
        return f"postgresql://{user}@/{params['dbname']}?host={params['host']}"

    owner = str(psycopg.conninfo.conninfo_to_dict(replicated.primary.owner)["user"])
    env = {
        **os.environ,
        "DATABASE_URL": url(replicated.primary, owner),
        "KB_SERVER_DATABASE_URL": url(replicated.standby, "kb_server"),
    }
    env.pop("KB_AUDIT_WRITE_DATABASE_URL", None)
    done = subprocess.run(
        [str(VENV_BIN / "kb"), "serve", "--transport", "stdio"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "KB_AUDIT_WRITE_DATABASE_URL" in lines[0] and "read replica" in lines[0], done.stderr
