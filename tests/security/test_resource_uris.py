"""kb:// resource URIs with traversal and encoding tricks, through a real in-process MCP session. A trick never
reaches a document above the caller's ceiling, never resolves to a document other than the one the
(decoded) URI names in the department it names, and a forbidden document and a missing one still get the
same answer. Every failure is a readable protocol error, not a crash."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from mcp.shared.exceptions import MCPError

from kb_core.roles import Classification, Role
from tests.security.conftest import MANIFEST_ROWS, SQL_SHAPED, TITLES, table_counts
from tests.server.conftest import client_as

pytestmark = pytest.mark.anyio
RESTRICTED = "CMP-SOP-006"  # compliance, restricted
CONFIDENTIAL = "CMP-SOP-004"  # compliance, confidential (its section 4.2 exists)
LEGAL_RESTRICTED = "LEG-SOP-005"

TRICKS = [
    f"kb://compliance/../legal/{RESTRICTED}",
    f"kb://legal/../compliance/{RESTRICTED}",
    f"kb://compliance/..%2Fcompliance/{RESTRICTED}",
    f"kb://compliance/%2e%2e/{RESTRICTED}",
    f"kb://%2e%2e/compliance/{RESTRICTED}",
    f"kb://compliance%2F..%2Fcompliance/{RESTRICTED}",
    f"kb://compliance%2f{RESTRICTED}",
    f"kb://compliance/{RESTRICTED}%00",
    f"kb://compliance/{RESTRICTED}%00.md",
    f"kb://compliance/{RESTRICTED}\x00",
    f"kb://compliance%00/{RESTRICTED}",
    f"kb://compliance/{RESTRICTED.lower()}",
    f"kb://COMPLIANCE/{RESTRICTED}",
    f"kb://Compliance/{RESTRICTED}",
    f"KB://compliance/{RESTRICTED}",
    f"kb://compliance/{RESTRICTED}#",
    f"kb://compliance/{RESTRICTED}#6.1",
    f"kb://compliance/{RESTRICTED}##6.1",
    f"kb://compliance/{RESTRICTED}#../../{CONFIDENTIAL}",
    f"kb://compliance/{RESTRICTED}%236.1",
    f"kb://compliance/{RESTRICTED}?role=compliance_officer",
    f"kb://compliance/{RESTRICTED}/",
    f"kb://compliance//{RESTRICTED}",
    f"kb:///compliance/{RESTRICTED}",
    f"kb://compliance/{CONFIDENTIAL}/../{RESTRICTED}",
    "kb://compliance/CMP%2DSOP%2D006",
    "kb://compliance/%43MP-SOP-006",
    f"kb://compliance/{RESTRICTED}#%36.1",
    f"kb://compliance/{RESTRICTED}" + "A" * 100_000,
    f"kb://compliance/{RESTRICTED}#" + "6." * 50_000,
    f"kb://{'compliance/' * 2000}{RESTRICTED}",
    f"kb://user:pass@compliance/{RESTRICTED}",
    f"kb://compliance:443/{RESTRICTED}",
    f"file:///work/corpus/compliance/{RESTRICTED}.pdf",
    f"http://compliance/{RESTRICTED}",
    f"kbx://compliance/{RESTRICTED}",
    f"kb:/compliance/{RESTRICTED}",
    f"kb://compliance/{RESTRICTED}\u2215x",  # division slash
    f"kb://compliance\uff0f{RESTRICTED}",  # fullwidth solidus
]


async def read_error(client, uri: str) -> str | None:  # type: ignore[no-untyped-def]
    """The protocol error's message, or None when the read succeeded."""
    try:
        await client.read_resource(uri)
    except MCPError as exc:
        return str(exc)
    return None


def assert_readable(message: str) -> None:
    assert not message.startswith(("Error reading resource", "Error creating resource")), f"crashed: {message}"
    assert len(message) >= 10


async def test_no_uri_trick_reaches_a_document_above_the_callers_ceiling(corpus_database, local_embedder):
    title = TITLES[RESTRICTED]
    async with client_as(corpus_database, Role.SUPPORT_AGENT, local_embedder) as client:
        for uri in TRICKS:
            message = await read_error(client, uri)
            assert message is not None, f"{uri[:120]!r} was read by support_agent"
            assert_readable(message)
            assert title not in message
            # the same answer as for a document that does not exist
            missing = await read_error(client, uri.replace("006", "999").replace("%36", "%39"))
            assert missing is not None and message.replace("006", "999") == missing, uri[:120]


def decoded_target(uri: str) -> tuple[str, str] | None:
    """(department, doc code) that a URI names, when it is a well-formed kb://department/code[#anchor]."""
    from urllib.parse import unquote

    if not uri.startswith("kb://"):
        return None
    path = uri[len("kb://") :].split("#", 1)[0]
    parts = path.split("/")
    if len(parts) != 2:
        return None
    return unquote(parts[0]), unquote(parts[1]).upper()


async def test_a_uri_trick_resolves_only_to_the_document_it_names_in_the_department_it_names(
    corpus_database, local_embedder
):
    """As the role that may read everything: a trick that resolves at all resolves to what it says."""
    tricks = [*TRICKS, f"kb://compliance/../legal/{LEGAL_RESTRICTED}", f"kb://legal/{RESTRICTED}"]
    resolved = []
    async with client_as(corpus_database, Role.COMPLIANCE_OFFICER, local_embedder) as client:
        for uri in tricks:
            try:
                result = await client.read_resource(uri)
            except MCPError as exc:
                assert_readable(str(exc))
                continue
            body = json.loads(result.contents[0].text)
            assert decoded_target(uri) == (body["department"], body["doc_code"]), uri[:120]
            resolved.append(uri)
    # the percent-encoded spellings of the plain URI decode to it, and are the only ones that resolve
    assert set(resolved) <= {
        f"kb://compliance/{RESTRICTED.lower()}",
        f"kb://compliance/{RESTRICTED}#6.1",
        "kb://compliance/CMP%2DSOP%2D006",
        "kb://compliance/%43MP-SOP-006",
        f"kb://compliance/{RESTRICTED}#%36.1",
    }, resolved


async def test_sql_shaped_uri_parts_are_not_found_and_no_row_is_lost(corpus_database, local_embedder):
    before = table_counts(corpus_database.targets.owner)
    async with client_as(corpus_database, Role.DEMO_READONLY, local_embedder) as client:
        for value in SQL_SHAPED:
            encoded = quote(value, safe="")
            for uri in (
                f"kb://compliance/{encoded}",
                f"kb://{encoded}/{CONFIDENTIAL}",
                f"kb://compliance/{CONFIDENTIAL}#{encoded}",
                f"kb://compliance/{value}",
            ):
                message = await read_error(client, uri)
                assert message is not None, uri
                assert_readable(message)
        public = await client.call_tool("list_documents", {})
    public_rows = [c for c in MANIFEST_ROWS if c == Classification.PUBLIC]
    assert not public.is_error and public.structured_content["total"] == len(public_rows)
    assert table_counts(corpus_database.targets.owner) == before
