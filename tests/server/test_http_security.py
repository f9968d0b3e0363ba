"""The HTTP transport as the MCP specification asks and as a team deploys it: Host and Origin checked on every
path, sessions bound to the token that created them, X-Forwarded-For believed only from trusted proxies, a
bounded failed-authentication table, and quiet client disconnects. Each test runs `kb serve` (or `kb up`'s
serve path) as its own process and talks to it with a real HTTP client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import httpx2
import pytest
from tests.server.conftest import VENV_BIN, HttpServer, database_url, free_port, serve_http

from kb_core.settings import ServerSettings
from kb_server.http import FAILED_AUTH_ADDRESSES, BearerAuthMiddleware, TokenStore

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


@pytest.fixture
def served(database, tmp_path) -> Iterator[HttpServer]:
    with serve_http(SimpleNamespace(targets=database), tmp_path) as server:
        yield server


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def port_of(server: HttpServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


# 1. Origin and Host ------------------------------------------------------------------------------------------


def test_bound_off_loopback_without_an_allow_list_the_server_refuses_to_start_in_one_line(database):
    env = {**os.environ, "DATABASE_URL": database_url(database), "KB_HTTP_PORT": str(free_port())}
    done = subprocess.run(
        [str(VENV_BIN / "kb"), "serve", "--transport", "http", "--host", "0.0.0.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "KB_HTTP_ALLOWED_HOSTS" in lines[0], done.stderr
    assert "KB_HTTP_HOST (or --host) 0.0.0.0 is not a loopback address" in lines[0], done.stderr  # as it was given


def test_on_loopback_a_foreign_origin_or_host_is_refused_on_every_path_before_authentication(served):
    port, token = port_of(served), served.tokens["analyst"]
    for path, method in [("/healthz", "GET"), ("/mcp", "POST")]:
        for origin in ("http://evil.example", "null", f"http://localhost.evil.example:{port}"):
            response = httpx2.request(
                method, f"{served.url}{path}", json=TOOLS_LIST, headers={**ACCEPT, **bearer(token), "Origin": origin}
            )
            assert response.status_code == 403, (path, origin, response.status_code)
            assert response.text == "Invalid Origin header: this server's KB_HTTP_ALLOWED_ORIGINS does not list it"
        rebound = httpx2.request(
            method, f"{served.url}{path}", json=TOOLS_LIST, headers={**ACCEPT, "Host": f"evil.example:{port}"}
        )
        assert rebound.status_code == 421, (path, rebound.status_code)
        assert rebound.text == "Invalid Host header: this server's KB_HTTP_ALLOWED_HOSTS does not list it"
    # the server's own loopback origin, and no Origin at all (non-browser clients), are served
    own = httpx2.post(
        f"{served.url}/mcp", json=INITIALIZE, headers={**ACCEPT, **bearer(token), "Origin": f"http://localhost:{port}"}
    )
    assert own.status_code == 200
    assert httpx2.get(f"{served.url}/healthz").status_code == 200


def test_bound_off_loopback_only_the_allowed_hosts_and_origins_are_served(database, tmp_path):
    with serve_http(
        SimpleNamespace(targets=database),
        tmp_path,
        KB_HTTP_HOST="0.0.0.0",
        KB_HTTP_ALLOWED_HOSTS="127.0.0.1:*",
        KB_HTTP_ALLOWED_ORIGINS="https://console.example",
    ) as server:
        token, port = server.tokens["analyst"], port_of(server)
        statuses = {
            origin: httpx2.post(
                f"{server.url}/mcp", json=INITIALIZE, headers={**ACCEPT, **bearer(token), "Origin": origin}
            ).status_code
            for origin in ("https://console.example", "http://evil.example", "null", f"http://127.0.0.1:{port}")
        }
        rebound = httpx2.post(
            f"{server.url}/mcp", json=INITIALIZE, headers={**ACCEPT, **bearer(token), "Host": "attacker.example"}
        )
        plain = httpx2.post(f"{server.url}/mcp", json=INITIALIZE, headers={**ACCEPT, **bearer(token)})
    assert statuses == {
        "https://console.example": 200,
        "http://evil.example": 403,
        "null": 403,
        f"http://127.0.0.1:{port}": 403,  # KB_HTTP_ALLOWED_ORIGINS replaces the derived list
    }
    assert (rebound.status_code, plain.status_code) == (421, 200)


# 2. Sessions bound to their caller ---------------------------------------------------------------------------


def open_session(url: str, token: str) -> tuple[str, dict[str, str]]:
    response = httpx2.post(f"{url}/mcp", json=INITIALIZE, headers={**ACCEPT, **bearer(token)})
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    data = next(line[5:] for line in response.text.splitlines() if line.startswith("data:"))
    version = json.loads(data)["result"]["protocolVersion"]
    headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": version}
    done = httpx2.post(
        f"{url}/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={**headers, **bearer(token)},
    )
    assert done.status_code == 202
    return session, headers


def get_status(url: str, headers: dict[str, str]) -> int:
    with httpx2.stream("GET", f"{url}/mcp", headers={**headers, "Accept": "text/event-stream"}, timeout=10) as r:
        return r.status_code


def test_another_token_or_none_cannot_post_to_stream_or_delete_a_session(served):
    url, owner, other = served.url, served.tokens["compliance_officer"], served.tokens["demo_readonly"]
    _, session = open_session(url, owner)
    for token in (other, None):
        posted = httpx2.post(f"{url}/mcp", json=TOOLS_LIST, headers={**session, **bearer(token)})
        streamed = get_status(url, {**session, **bearer(token)})
        deleted = httpx2.delete(f"{url}/mcp", headers={**session, **bearer(token)})
        expected = 404 if token else 401
        assert (posted.status_code, streamed, deleted.status_code) == (expected, expected, expected), token
    # the owner's session survived all of it: it still answers, its stream is free, and only it can end it
    assert httpx2.post(f"{url}/mcp", json=TOOLS_LIST, headers={**session, **bearer(owner)}).status_code == 200
    assert get_status(url, {**session, **bearer(owner)}) == 200
    assert httpx2.delete(f"{url}/mcp", headers={**session, **bearer(owner)}).status_code == 200
    ended = httpx2.post(f"{url}/mcp", json=TOOLS_LIST, headers={**session, **bearer(owner)})
    # Found walking it: the bare "Session not found" said nothing of what to do (after a server restart too).
    assert ended.status_code == 404 and "start a new session with initialize" in ended.json()["error"]["message"]


def test_a_session_belongs_to_one_token_even_among_tokens_of_the_same_role(served):
    url = served.url
    _, session = open_session(url, served.tokens["demo_readonly"])
    same_role = served.tokens["limited"]  # also demo_readonly, another token
    assert httpx2.post(f"{url}/mcp", json=TOOLS_LIST, headers={**session, **bearer(same_role)}).status_code == 404


def test_a_protocol_version_the_server_does_not_speak_is_refused_naming_the_ones_it_does(served):
    # The specification's MUST (400 for an unsupported MCP-Protocol-Version); the SDK's own 400 spoke of a missing
    # params._meta envelope, which names neither the header nor what to send.
    url, token = served.url, served.tokens["analyst"]
    _, session = open_session(url, token)
    for version in ("1999-01-01", "garbage"):
        refused = httpx2.post(
            f"{url}/mcp", json=TOOLS_LIST, headers={**session, **bearer(token), "mcp-protocol-version": version}
        )
        assert refused.status_code == 400
        assert refused.json()["error"].startswith(f"unsupported mcp-protocol-version {version!r}: this server speaks ")
        assert "2025-06-18" in refused.json()["error"]
    # the version initialize negotiated still answers on the same session
    assert httpx2.post(f"{url}/mcp", json=TOOLS_LIST, headers={**session, **bearer(token)}).status_code == 200


# 3. Proxies and the failed-authentication table --------------------------------------------------------------


def guess_with_rotating_forwarded_for(url: str, *, rotate: bool = True) -> list[int]:
    return [
        httpx2.post(
            f"{url}/mcp",
            json=TOOLS_LIST,
            headers={
                "Authorization": f"Bearer guess-{n}",
                "X-Forwarded-For": f"203.0.113.{n if rotate else 7}",
                "Forwarded": f"for=192.0.2.{n}",
            },
            timeout=10,
        ).status_code
        for n in range(15)
    ]


@contextmanager
def kb_up_serving(database, folder: Path, **settings: str) -> Iterator[str]:
    """`kb up`'s serve step (what `make run` ends with) as its own process, over a migrated database."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(database),
        "KB_STATE_DIR": str(folder),
        "KB_HTTP_PORT": str(port),
        **settings,
    }
    script = (
        "from kb_cli.common import console; from kb_cli.up import _serve; "
        "from kb_core.settings import load_settings; _serve(console, load_settings())"
    )
    log = folder / "up.log"
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_kb_up_does_not_believe_x_forwarded_for_from_an_untrusted_peer(database, tmp_path):
    with kb_up_serving(database, tmp_path) as url:
        statuses = guess_with_rotating_forwarded_for(url)
    assert statuses[0] == 401 and statuses[-1] == 429, statuses


def test_x_forwarded_for_is_believed_from_a_trusted_proxy_only(database, tmp_path):
    with serve_http(SimpleNamespace(targets=database), tmp_path, KB_TRUSTED_PROXIES="127.0.0.1") as server:
        rotating = guess_with_rotating_forwarded_for(server.url)
        one_address = guess_with_rotating_forwarded_for(server.url, rotate=False)
    assert set(rotating) == {401}, rotating  # behind a trusted proxy each client address has its own limit
    assert one_address[0] == 401 and one_address[-1] == 429, one_address


def test_the_failed_authentication_table_stays_bounded_over_100000_addresses():
    middleware = BearerAuthMiddleware(lambda *a: None, TokenStore({}), ServerSettings())  # type: ignore[arg-type]
    tracemalloc.start()
    sizes = []
    for n in range(100_000):
        middleware.failures.take(f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}", now=n / 1000)
        if n in (FAILED_AUTH_ADDRESSES, 99_999):
            sizes.append(tracemalloc.get_traced_memory()[0])
    tracemalloc.stop()
    assert len(middleware.failures.buckets) == FAILED_AUTH_ADDRESSES
    # memory is reported, not asserted tightly: between 10k and 100k addresses it should not grow 10-fold
    at_bound, at_100k = (size / 1e6 for size in sizes)
    print(f"failed-auth table: {at_bound:.2f} MB at {FAILED_AUTH_ADDRESSES} addresses, {at_100k:.2f} MB at 100k")
    assert sizes[1] < sizes[0] * 2
    # the most recent addresses are the ones remembered
    assert "10.1.134.159" in middleware.failures.buckets  # address number 99,999


# 5. Client disconnects ---------------------------------------------------------------------------------------


def test_a_client_that_disconnects_mid_request_is_one_info_line_without_a_traceback(served):
    port, token = port_of(served), served.tokens["analyst"]
    _, session = open_session(served.url, token)
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "list_documents"}})
    head = "".join(f"{k}: {v}\r\n" for k, v in {**session, **bearer(token)}.items())
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port)) as raw:
            request = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}Content-Length: {len(body) + 50}\r\n\r\n"
            raw.sendall((request + body).encode())  # promises 50 more bytes, then hangs up
    time.sleep(1.5)
    assert httpx2.get(f"{served.url}/healthz").status_code == 200
    log = served.log.read_text()
    disconnects = [line for line in log.splitlines() if "client disconnected" in line]
    assert len(disconnects) == 3 and all(" INFO " in line for line in disconnects), log[-3000:]
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


# 6. Refusals in the server's log -----------------------------------------------------------------------------


def test_each_refusal_is_one_warning_line_naming_the_client_and_a_throttling_spell_is_logged_once(database, tmp_path):
    # The audit log records calls that reached a tool; who was turned away was nowhere (access log off).
    limits = {"KB_RATE_LIMIT_PER_MINUTE": "30", "KB_RATE_LIMIT_BURST": "5", "KB_MAX_REQUEST_BYTES": "16384"}
    with serve_http(SimpleNamespace(targets=database), tmp_path, **limits) as server:
        mcp = f"{server.url}/mcp"
        guesses = [f"kb_guess-{n}-{os.getpid()}" for n in range(14)]
        statuses = [httpx2.post(mcp, json=TOOLS_LIST, headers=ACCEPT).status_code]
        statuses += [httpx2.post(mcp, json=TOOLS_LIST, headers={**ACCEPT, **bearer(g)}).status_code for g in guesses]
        throttled = [
            httpx2.post(mcp, json=TOOLS_LIST, headers={**ACCEPT, **bearer(server.tokens["limited"])}).status_code
            for _ in range(12)
        ]
        oversize = httpx2.post(mcp, content=b"x" * 20_000, headers={**ACCEPT, **bearer(server.tokens["analyst"])})
        # The same body sent chunked (no Content-Length): refused by the SDK's body limit, logged and worded alike.
        chunks = iter([b"x" * 10_000, b"x" * 10_000])
        chunked = httpx2.post(mcp, content=chunks, headers={**ACCEPT, **bearer(server.tokens["analyst"])})
        time.sleep(0.5)
        log = server.log.read_text()
    assert statuses[:10] == [401] * 10 and set(statuses[10:]) == {429}, statuses
    assert 429 in throttled and oversize.status_code == 413
    assert (
        (chunked.status_code, chunked.json())
        == (413, oversize.json())
        == (413, {"error": "request body over 16384 bytes"})
    )
    refusals = [line for line in log.splitlines() if "refused" in line]
    assert all(" WARNING " in line for line in refusals), refusals
    assert sum("refused 401 to 127.0.0.1: no bearer token" in line for line in refusals) == 1, refusals
    assert sum("refused 401 to 127.0.0.1: an unknown or revoked bearer token" in line for line in refusals) == 9
    assert sum("refused 429 to 127.0.0.1: too many failed authentications" in line for line in refusals) == 1
    assert sum("refused 429 to token 'limited-client' from 127.0.0.1: its rate limit" in line for line in refusals) == 1
    assert (
        sum(
            "refused 413 to token 'analyst-client' from 127.0.0.1: request body of 20000 bytes" in line
            for line in refusals
        )
        == 1
    )
    assert (
        sum(
            "refused 413 to token 'analyst-client' from 127.0.0.1: chunked request body over" in line
            for line in refusals
        )
        == 1
    )
    assert len(refusals) == 14, refusals
    for secret in [*guesses, *server.tokens.values()]:
        assert secret not in log
