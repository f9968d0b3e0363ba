"""Hostile requests to `kb serve --transport http` running as its own process: oversize and deeply nested
bodies, invalid UTF-8 and control characters in the body, the arguments and the URL, broken framing and
protocol headers, identity forged in the body or the URL, and token guessing behind a forged
X-Forwarded-For. Each gets a 4xx (413 for size) or a clear JSON-RPC error, never a 5xx; the process keeps
serving real MCP sessions afterwards and logs no crash."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import httpx2
import pytest
from mcp.shared.inbound import encode_header_value

from kb_core.roles import Role
from tests.security.conftest import CLASSIFICATION, SQL_SHAPED, assert_readable_error, assert_within_ceiling
from tests.server.conftest import HttpServer, client_with, serve_http

PROTOCOL = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientInfo": {"name": "hostile", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
PARSE_ERROR = -32700


def mcp_headers(token: str, method: str = "tools/call", name: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": PROTOCOL,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = encode_header_value(name)
    return headers


def call_body(tool: str, arguments: object, meta: dict | None = None) -> bytes:
    params = {"name": tool, "arguments": arguments, "_meta": {**META, **(meta or {})}}
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}).encode()


def post(server: HttpServer, content, headers: dict[str, str], path: str = "/mcp") -> httpx2.Response:  # type: ignore[no-untyped-def]
    return httpx2.post(f"{server.url}{path}", content=content, headers=headers, timeout=30)


def raw_post(
    server: HttpServer, *, target: bytes = b"/mcp", length: bytes | None = None, body: bytes = b"{}"
) -> int | None:
    """POST bytes exactly as given (no client library to tidy them up) with a valid token and protocol
    headers; the status, or None if the server closed the connection without one."""
    parts = urlsplit(server.url)
    headers = {
        **mcp_headers(server.tokens["analyst"], name="list_documents"),
        "Host": parts.netloc,
        "Content-Length": str(len(body)),
        "Connection": "close",
    }
    head = b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items() if k != "Content-Length")
    head += b"Content-Length: " + (length if length is not None else str(len(body)).encode()) + b"\r\n"
    request = b"POST " + target + b" HTTP/1.1\r\n" + head + b"\r\n" + body
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as sock:
        sock.sendall(request)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    if not received:
        return None
    return int(received.split(b" ", 2)[1])


def assert_no_5xx(label: str, response: httpx2.Response) -> None:
    assert response.status_code < 500, f"{label}: {response.status_code} {response.text[:300]}"


def assert_parse_error(label: str, response: httpx2.Response) -> None:
    assert response.status_code == 400, f"{label}: {response.status_code} {response.text[:300]}"
    assert response.json()["error"]["code"] == PARSE_ERROR, label


def tool_answer(label: str, response: httpx2.Response) -> dict:
    """The tools/call result of a 200 JSON answer; an is_error result must say what went wrong."""
    assert response.status_code == 200, f"{label}: {response.status_code} {response.text[:300]}"
    payload = response.json()
    assert "result" in payload, f"{label}: {payload}"
    result = payload["result"]
    if result.get("isError"):
        text = " ".join(block.get("text", "") for block in result["content"])
        # The SDK's "Error executing tool <name>" starts only a crash's answer (a deliberate error is the tool's
        # own sentence: kb_server.argument_errors).
        assert not text.startswith("Error executing tool"), f"{label}: the tool crashed: {text!r}"
        assert len(text.strip()) >= 10, f"{label}: an error that says nothing: {text!r}"
    return result


def assert_still_serving(server: HttpServer) -> None:
    assert server.process.poll() is None, "the server process died:\n" + server.log.read_text()[-3000:]
    assert httpx2.get(f"{server.url}/healthz", timeout=10).status_code == 200
    response = post(
        server, call_body("list_documents", {}), mcp_headers(server.tokens["demo_readonly"], name="list_documents")
    )
    result = tool_answer("a plain call afterwards", response)
    assert not result.get("isError") and result["structuredContent"]["total"] > 0


def test_an_oversize_body_gets_413_whether_it_declares_its_length_or_streams_it(http_server):
    headers = mcp_headers(http_server.tokens["analyst"], name="search_knowledge_base")
    declared = post(http_server, call_body("search_knowledge_base", {"query": "x" * 70_000}), headers)

    def chunks():  # no Content-Length: Transfer-Encoding: chunked
        yield b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"arguments": {"query": "'
        for _ in range(200):
            yield b"x" * 1000

    streamed = post(http_server, chunks(), headers)
    huge_declared = raw_post(http_server, length=b"99999999999999999999")
    assert (declared.status_code, streamed.status_code, huge_declared) == (413, 413, 413), streamed.text[:200]
    assert_still_serving(http_server)


@pytest.mark.parametrize("length", [b"abc", b"-1", b"1e3", b"0x10", b"13, 13", b" ", b"13\x00"])
def test_a_content_length_that_is_not_a_number_is_refused_with_a_4xx(http_server, length):
    status = raw_post(http_server, length=length, body=call_body("list_documents", {})[:13])
    assert status is None or 400 <= status < 500, (length, status)
    assert_still_serving(http_server)


def test_deeply_nested_json_gets_a_parse_error_or_a_readable_tool_error_never_a_5xx(http_server):
    token = http_server.tokens["analyst"]
    plain = mcp_headers(token, name="search_knowledge_base")
    for label, body in [
        ("20,000 nested arrays", b"[" * 20_000 + b"]" * 20_000),
        ("5,000 nested objects", b'{"a":' * 5_000 + b"1" + b"}" * 5_000),
        ("alternating", b'[{"a":' * 3_000 + b"1" + b"}]" * 3_000),
        ("unclosed", b"[" * 30_000),
        ("an integer of 5,000 digits", call_body("x", {}).replace(b'"arguments": {}', b'"arguments": ' + b"9" * 5000)),
    ]:
        assert_parse_error(label, post(http_server, body, plain))
    for depth in (50, 500, 2_000):
        nested = "[" * depth + "]" * depth
        body = call_body("search_knowledge_base", {"query": "x"}).replace(b'"x"', nested.encode())
        response = post(http_server, body, plain)
        assert_no_5xx(f"query nested {depth} deep", response)
        if response.status_code == 200:
            result = tool_answer(f"query nested {depth} deep", response)
            assert result.get("isError"), "a nested list is not a query"
        else:
            assert response.json()["error"]["message"], depth
    assert_still_serving(http_server)


@pytest.mark.parametrize("protocol_header", [True, False], ids=["stateless-protocol", "session-protocol"])
def test_invalid_utf8_and_raw_control_bytes_in_the_body_get_a_parse_error(http_server, protocol_header):
    headers = mcp_headers(http_server.tokens["analyst"], name="get_document")
    if not protocol_header:  # an older client: the session-based path parses the body differently
        headers = {k: v for k, v in headers.items() if not k.startswith(("MCP-", "Mcp-"))}
    valid = call_body("get_document", {"doc_code": "CMP-SOP-004"})
    bodies = {
        "invalid UTF-8 in a string": valid.replace(b"CMP-SOP-004", b"\xff\xfe\xc3"),
        "overlong UTF-8 slash": valid.replace(b"CMP-SOP-004", b"CMP\xc0\xafSOP"),
        "UTF-8-encoded surrogate": valid.replace(b"CMP-SOP-004", b"\xed\xa0\x80"),
        "truncated multibyte at the end": valid[:-3] + b"\xe2\x82",
        "raw NUL and control bytes in a string": valid.replace(b"CMP-SOP-004", b"CMP\x00\x01\x1b[2J"),
        "raw newline in a string": valid.replace(b"CMP-SOP-004", b"CMP\nSOP"),
        "latin-1 bytes": valid.replace(b"CMP-SOP-004", "Café".encode("latin-1")),
        "binary noise": bytes(range(256)) * 4,
        "only a NUL": b"\x00",
        "empty": b"",
    }
    for label, body in bodies.items():
        response = post(http_server, body, headers)
        assert_no_5xx(label, response)
        if protocol_header and label == "UTF-8-encoded surrogate":
            # json.loads reads bytes with 'surrogatepass': the argument arrives, and validation refuses it
            assert tool_answer(label, response)["isError"]
        elif protocol_header:
            assert_parse_error(label, response)
        else:
            assert response.status_code == 400 and response.json()["error"]["message"], label
    assert_still_serving(http_server)


CONTROL = ["\u0000", "\u0007", "\u001b[31m", "\u007f", "\u0085", "\u200b", "\u202e", "\ufeff", "\r\n\r\n", "\ud800"]


def test_control_characters_and_lone_surrogates_in_each_argument_get_an_answer_or_a_readable_error(http_server):
    """Escaped in valid JSON, so they reach the tools: no 5xx, no crash, nothing above the ceiling."""
    token = http_server.tokens["demo_readonly"]
    calls = []
    for char in CONTROL:
        calls += [
            ("search_knowledge_base", {"query": f"wire{char}transfer cut-off"}),
            ("search_knowledge_base", {"query": char * 3}),
            ("search_knowledge_base", {"query": "fees", "departments": [f"payments{char}"]}),
            ("get_document", {"doc_code": f"CMP-SOP-006{char}"}),
            ("get_document", {"doc_code": "CMP-POL-001", "version": f"4.0{char}"}),
            ("list_documents", {"department": f"compliance{char}"}),
            ("list_documents", {"status": f"effective{char}"}),
        ]
    answered = 0
    for tool, arguments in calls:
        label = f"{tool} {arguments!r}"
        result = tool_answer(label, post(http_server, call_body(tool, arguments), mcp_headers(token, name=tool)))
        if not result.get("isError"):
            answered += 1
            for code in _codes(tool, result["structuredContent"]):
                assert Role.DEMO_READONLY.may_read(CLASSIFICATION[code]), label
    assert answered >= len(CONTROL)  # the searches with control characters around real words do answer
    assert_still_serving(http_server)


def _codes(tool: str, content: dict) -> list[str]:
    return [content["doc_code"]] if tool == "get_document" else [d["doc_code"] for d in content["documents"]]


@pytest.mark.anyio
async def test_control_characters_in_a_search_query_over_a_real_http_session_answer_like_the_words_alone(
    http_server,
):
    async with client_with(http_server.url, http_server.tokens["support_agent"]) as client:
        plain = await client.call_tool("search_knowledge_base", {"query": "wire transfer cut-off"})
        for char in CONTROL[:-1]:  # the client itself cannot encode a lone surrogate
            hostile = await client.call_tool("search_knowledge_base", {"query": f"wire{char}transfer{char} cut-off"})
            assert not hostile.is_error, (char, hostile.content)
            assert_within_ceiling("search_knowledge_base", hostile, Role.SUPPORT_AGENT)
            assert hostile.structured_content["documents"]
        sql = [await client.call_tool("get_document", {"doc_code": value}) for value in SQL_SHAPED]
    assert plain.structured_content["documents"]
    for result in sql:
        assert result.is_error
        assert_readable_error("get_document", result)


def test_control_characters_and_bad_escapes_in_the_url_get_no_5xx(http_server):
    token = http_server.tokens["analyst"]
    headers = mcp_headers(token, name="list_documents")
    body = call_body("list_documents", {})
    for path in ("/mcp?%00=%ff", "/mcp?q=%C0%AF%E0%80%80%ED%A0%80", "/mcp?%", "/mcp?a=%zz&b=%%"):
        result = tool_answer(path, post(http_server, body, headers, path=path))  # the query string is ignored
        assert not result.get("isError") and result["structuredContent"]["documents"], path
    assert post(http_server, body, headers, path="/mcp/%2e%2e/healthz").status_code == 404
    for target in (b"/mcp?\x01\x7f", b"/mcp?\xff\xfe", b"/mcp\x00", b"/mcp?a=%00%ff", b"/mcp?" + b"a" * 20_000):
        status = raw_post(http_server, target=target, body=body)
        assert status in (None, 200, 400, 414), (target[:40], status)  # 400: bytes HTTP does not allow there
    assert_still_serving(http_server)


def test_hostile_protocol_headers_are_refused_with_a_4xx(http_server):
    token = http_server.tokens["analyst"]
    body = call_body("get_document", {"doc_code": "CMP-SOP-004"})
    good = mcp_headers(token, name="get_document")
    variants = {
        "unknown protocol version": {**good, "MCP-Protocol-Version": "1999-01-01'; DROP TABLE kb.chunks; --"},
        "method header disagrees": {**good, "Mcp-Method": "tools/list"},
        "name header disagrees": {**good, "Mcp-Name": "list_documents"},
        "broken base64 name": {**good, "Mcp-Name": "=?base64?!!!?="},
        "name is a surrogate in base64": {**good, "Mcp-Name": "=?base64?7aCA?="},
        "text/plain body": {**good, "Content-Type": "text/plain"},
        "accepts nothing it can get": {**good, "Accept": "image/png"},
    }
    for label, headers in variants.items():
        response = post(http_server, body, headers)
        assert 400 <= response.status_code < 500, f"{label}: {response.status_code} {response.text[:200]}"
    for label, headers in {  # headers the server has no use for are ignored
        "a 6 KB header": {**good, "X-Junk": "x" * 6000},
        "a session id of nothing (the stateless protocol has none)": {**good, "Mcp-Session-Id": "../../etc/passwd"},
        "200 junk headers": {**good, **{f"X-Junk-{n}": "\x7f" * 20 for n in range(200)}},
    }.items():
        assert not tool_answer(label, post(http_server, body, headers)).get("isError"), label
    assert_still_serving(http_server)


def test_identity_forged_in_the_body_or_the_url_does_not_raise_the_callers_ceiling(http_server):
    demo, officer = http_server.tokens["demo_readonly"], http_server.tokens["compliance_officer"]
    forged_meta = {"role": "compliance_officer", "kb_role": "compliance_officer", "user": "admin"}
    for tool, arguments, meta, path in [
        ("list_documents", {}, forged_meta, "/mcp"),
        ("list_documents", {"role": "compliance_officer"}, {}, "/mcp"),
        ("get_document", {"doc_code": "CMP-SOP-006", "role": "compliance_officer"}, forged_meta, "/mcp"),
        ("list_documents", {}, {}, "/mcp?role=compliance_officer&kb_role=compliance_officer"),
        ("get_document", {"doc_code": "CMP-SOP-006"}, {}, f"/mcp?access_token={officer}&token={officer}"),
    ]:
        response = post(http_server, call_body(tool, arguments, meta), mcp_headers(demo, name=tool), path=path)
        result = tool_answer(f"{tool} {arguments} {meta} {path}", response)
        if not result.get("isError"):
            for code in _codes(tool, result["structuredContent"]):
                assert CLASSIFICATION[code] == "public", (tool, arguments, path, code)
        else:
            assert tool == "get_document" or "role" in json.dumps(arguments)
    # a valid higher token anywhere but a well-formed Bearer header is no token at all
    body = call_body("list_documents", {})
    without_auth = {k: v for k, v in mcp_headers(demo).items() if k != "Authorization"}
    for label, headers, path in [
        ("token in the URL", without_auth, f"/mcp?token={officer}"),
        ("Basic scheme", {**mcp_headers(demo), "Authorization": f"Basic {officer}"}, "/mcp"),
        ("two tokens", {**mcp_headers(demo), "Authorization": f"Bearer {officer} {demo}"}, "/mcp"),
        ("token with a NUL", {**mcp_headers(demo), "Authorization": f"Bearer {officer}%00"}, "/mcp"),
    ]:
        status = post(http_server, body, headers, path=path).status_code
        assert status in (401, 429), f"{label}: {status}"  # 429 once this address has failed often enough


def test_rotating_x_forwarded_for_does_not_reset_the_failed_authentication_limit(corpus_database, tmp_path):
    with serve_http(corpus_database, tmp_path) as server:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        statuses = [
            httpx2.post(
                f"{server.url}/mcp",
                json=body,
                headers={
                    "Authorization": f"Bearer guess-{n}",
                    "X-Forwarded-For": f"203.0.113.{n}",
                    "X-Real-IP": f"198.51.100.{n}",
                    "Forwarded": f"for=192.0.2.{n}",
                },
                timeout=10,
            ).status_code
            for n in range(15)
        ]
    assert statuses[0] == 401 and statuses[-1] == 429, statuses


def test_after_all_of_it_the_server_still_serves_real_sessions_and_logged_no_crash(http_server):
    """Last in this module: the same process took every request above."""
    assert_still_serving(http_server)
    log = http_server.log.read_text()
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log[-3000:]
