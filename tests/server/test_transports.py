"""The two transports, as clients use them: stdio (Claude Desktop, IDEs) and streamable HTTP behind bearer
tokens, each with a real MCP client session against `kb serve` running as its own process."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from tests.server.conftest import VENV_BIN, client_with, database_url

from kb_core.roles import Role

pytestmark = pytest.mark.anyio


async def test_over_http_each_token_gets_its_roles_slice(http_server):
    url, tokens, _ = http_server
    counts = {}
    for role in Role:
        async with client_with(url, tokens[role.value]) as client:
            listed = await client.call_tool("list_documents", {})
            counts[role] = listed.structured_content["total"]
    assert (
        counts[Role.DEMO_READONLY]
        < counts[Role.SUPPORT_AGENT]
        < counts[Role.ANALYST]
        < counts[Role.COMPLIANCE_OFFICER]
        == 85
    )


def test_no_token_or_an_unknown_token_gets_401(http_server):
    url, _, _ = http_server
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    missing = httpx2.post(f"{url}/mcp", json=body)
    unknown = httpx2.post(f"{url}/mcp", json=body, headers={"Authorization": "Bearer kb_not-a-real-token"})
    assert (missing.status_code, unknown.status_code) == (401, 401)
    assert missing.headers["www-authenticate"].startswith("Bearer")
    # The body says how to get in, not only that one may not.
    assert "send 'Authorization: Bearer <token>'" in missing.text and "`kb tokens add`" in unknown.text


async def test_a_forged_role_header_changes_nothing(http_server):
    url, tokens, _ = http_server
    forged = {"X-KB-Role": "compliance_officer", "X-Role": "compliance_officer", "X-Forwarded-User": "admin"}
    async with client_with(url, tokens["demo_readonly"], forged) as client:
        listed = await client.call_tool("list_documents", {})
        restricted = await client.call_tool("get_document", {"doc_code": "CMP-SOP-006"})
    assert {d["classification"] for d in listed.structured_content["documents"]} == {"public"}
    assert restricted.is_error


def test_a_token_over_its_rate_gets_429_with_retry_after(http_server):
    url, tokens, _ = http_server
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Authorization": f"Bearer {tokens['limited']}", "Accept": "application/json, text/event-stream"}
    statuses = [httpx2.post(f"{url}/mcp", json=body, headers=headers) for _ in range(25)]
    limited = [r for r in statuses if r.status_code == 429]
    assert limited and int(limited[0].headers["retry-after"]) >= 1
    wait = limited[0].headers["retry-after"]
    assert limited[0].json()["error"].startswith(f"rate limit exceeded for this token: try again in {wait} s")
    assert all(r.status_code != 429 for r in statuses[:20])  # the burst of 20 is served


def test_guessing_tokens_is_rate_limited(http_server):
    url, _, _ = http_server
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    answers = [httpx2.post(f"{url}/mcp", json=body, headers={"Authorization": f"Bearer guess-{n}"}) for n in range(15)]
    statuses = [a.status_code for a in answers]
    assert statuses[0] == 401 and 429 in statuses
    # The body says how long, as the per-token 429's does (found walking it: only Retry-After said it).
    limited = next(a for a in answers if a.status_code == 429)
    wait = limited.headers["retry-after"]
    assert limited.json()["error"].startswith(
        f"too many failed authentications from this address: try again in {wait} s"
    )


def test_an_oversize_request_body_gets_413(http_server):
    url, tokens, _ = http_server
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search_knowledge_base", "arguments": {"query": "x" * 20_000}},
    }
    response = httpx2.post(f"{url}/mcp", json=body, headers={"Authorization": f"Bearer {tokens['analyst']}"})
    assert response.status_code == 413


def test_tokens_are_stored_hashed_and_never_logged(http_server):
    _url, tokens, log = http_server
    tokens_file = json.loads(next(Path(log).parent.glob("tokens.json")).read_text())
    text = json.dumps(tokens_file) + log.read_text()
    for token in tokens.values():
        assert token not in text
    assert all(len(entry["sha256"]) == 64 for entry in tokens_file["tokens"])


async def test_over_stdio_the_configured_role_searches(corpus_database):
    env = {**os.environ, "DATABASE_URL": database_url(corpus_database.targets), "KB_ROLE": "support_agent"}
    parameters = StdioServerParameters(command=str(VENV_BIN / "kb"), args=["serve", "--transport", "stdio"], env=env)
    async with Client(parameters) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("search_knowledge_base", {"query": "escalation matrix support duty manager"})
        listed = await client.call_tool("list_documents", {})
    assert tools == {"search_knowledge_base", "get_document", "list_documents", "compare_versions", "verify_quote"}
    assert result.structured_content["documents"]
    assert {d["classification"] for d in listed.structured_content["documents"]} == {"public", "internal"}


def test_over_stdio_requests_sent_before_stdin_closes_are_answered_before_the_server_exits(corpus_database):
    # Found trying it from a shell: `printf '<requests>' | kb serve` answered only initialize; every tool call got
    # "Connection closed", and the cancelled queries left psycopg warnings in the log.
    env = {**os.environ, "DATABASE_URL": database_url(corpus_database.targets), "KB_ROLE": "analyst"}
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "sh", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_documents", "arguments": {}}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "search_knowledge_base", "arguments": {"query": "enhanced due diligence threshold"}},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "kb://compliance/CMP-SOP-004#4.2"}},
    ]
    done = subprocess.run(
        [str(VENV_BIN / "kb"), "serve"],
        input="".join(json.dumps(r) + "\n" for r in requests),  # written at once, then stdin is closed
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert set(answers) == {1, 2, 3, 4}, done.stdout[-2000:]
    assert all("result" in a for a in answers.values()), [a.get("error") for a in answers.values()]
    assert not answers[2]["result"]["isError"] and not answers[3]["result"]["isError"]
    assert json.loads(answers[3]["result"]["content"][0]["text"])["documents"]
    assert "CMP-SOP-004" in answers[4]["result"]["contents"][0]["text"]
    assert "WARNING" not in done.stderr, done.stderr


def test_what_stdio_waits_for_at_stdin_end_is_each_request_not_answered_or_cancelled():
    from mcp_types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

    from kb_server.stdio_drain import Outstanding

    async def scenario() -> set:  # type: ignore[type-arg]
        outstanding = Outstanding()
        for n in (1, 2, 3):
            outstanding.asked(JSONRPCRequest(jsonrpc="2.0", id=n, method="tools/call", params={"name": "x"}))
        outstanding.asked(JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))
        outstanding.answered(JSONRPCResponse(jsonrpc="2.0", id=1, result={}))
        outstanding.asked(JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 3}))
        return set(outstanding.ids)

    import anyio

    assert anyio.run(scenario) == {2}
