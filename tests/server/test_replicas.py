"""Two `kb serve` replicas over one PostgreSQL, behind a round-robin balancer (KB_HTTP_STATELESS=true).

The balancer (reliability.balancer.RoundRobin) is an httpx transport in the client that sends each request to
the next replica in turn: the requests really go to two processes on two ports, as behind any HTTP load
balancer that does not pin a client to one replica.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from reliability.balancer import RoundRobin
from tests.security.conftest import CLASSIFICATION
from tests.server.conftest import HttpServer, serve_http

from kb_core.roles import Role

BALANCER_HOST = "kb.balancer.test"  # the name clients use; each replica allows it (KB_HTTP_ALLOWED_HOSTS)
BURST = 700  # per replica: the 1,000 calls split across two replicas stay under it, on one they would not
CALLS = 1000
QUESTIONS = [
    "What is the wire transfer cut-off time?",
    "Which customers need enhanced due diligence?",
    "How are suspicious activity reports escalated?",
    "What is the retention period for KYC records?",
    "Who approves a credit limit increase?",
    "What happens when the reconciliation fails?",
    "board minutes on the acquisition",
    "sanctions screening false positive rate",
]


@pytest.fixture(scope="module")
def replicas(corpus_database, tmp_path_factory) -> Iterator[list[HttpServer]]:
    folder = tmp_path_factory.mktemp("replicas")
    limits = {
        "KB_RATE_LIMIT_PER_MINUTE": "1",
        "KB_RATE_LIMIT_BURST": str(BURST),
        "KB_HTTP_ALLOWED_HOSTS": f"{BALANCER_HOST},127.0.0.1:*",
    }
    with (
        serve_http(corpus_database, folder, name="a", KB_HTTP_STATELESS="true", **limits) as a,
        serve_http(corpus_database, folder, name="b", KB_HTTP_STATELESS="true", **limits) as b,
    ):
        yield [a, b]


@pytest.mark.anyio
async def test_a_thousand_calls_alternating_between_two_stateless_replicas_all_succeed_within_the_ceiling(
    replicas,
):
    balancer = RoundRobin([r.url for r in replicas], host=BALANCER_HOST)
    token = replicas[0].tokens[Role.DEMO_READONLY.value]  # a token written by replica a; b rereads the file
    http = httpx2.AsyncClient(transport=balancer, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    errors: list[str] = []
    leaks: list[str] = []
    answered = 0

    async with Client(streamable_http_client(f"{replicas[0].url}/mcp", http_client=http)) as client:

        async def caller(numbers: range) -> None:
            nonlocal answered
            for n in numbers:
                result = await client.call_tool("search_knowledge_base", {"query": QUESTIONS[n % len(QUESTIONS)]})
                if result.is_error:
                    errors.append(str(result.content)[:200])
                    continue
                answered += 1
                for document in result.structured_content["documents"]:
                    if not Role.DEMO_READONLY.may_read(CLASSIFICATION[document["doc_code"]]):
                        leaks.append(document["doc_code"])

        async with anyio.create_task_group() as group:
            for worker in range(4):
                group.start_soon(caller, range(worker, CALLS, 4))

    assert errors == [] and leaks == [] and answered == CALLS
    # Both replicas answered half of everything, and no replica handed out a session another would need.
    a, b = (balancer.sent[p] for p in balancer.ports)
    assert abs(a - b) <= 1 and a + b >= CALLS
    assert balancer.session_ids == []


def _requests_until_limited(server: HttpServer, token: str, most: int) -> list[int]:
    """Statuses of authenticated requests to one replica until the first 429. Each carries an empty JSON-RPC
    body (answered 400 by the transport) so it is cheap, but it passed authentication and so took a unit
    from the token's bucket like any tool call."""
    statuses: list[int] = []
    with httpx2.Client(headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}) as http:
        for _ in range(most):
            statuses.append(http.post(f"{server.url}/mcp", content=b"{}", timeout=30).status_code)
            if statuses[-1] == 429:
                break
    return statuses


def test_each_replica_limits_a_token_on_its_own_so_n_replicas_allow_n_bursts(replicas):
    """The documented behaviour (README, Scaling out): rate-limit buckets live in each process."""
    token = replicas[0].tokens["limited"]
    first, second = replicas
    limited = _requests_until_limited(first, token, BURST + 10)
    # The first replica's bucket is empty after its burst (refill: one a minute) ...
    assert limited[-1] == 429 and 429 not in limited[:-1]
    assert BURST <= len(limited) - 1 <= BURST + 1
    # ... while the second still has all of its own.
    fresh = _requests_until_limited(second, token, 5)
    assert 429 not in fresh and len(fresh) == 5


def test_an_idle_connection_stays_open_longer_than_a_balancers_idle_timeout_would_need(replicas):
    """uvicorn's default closed idle connections after 5 s: a balancer (or a pooled client, such as the MCP
    client's) that sent its next request as the server closed one got "server disconnected" (it was 13 of
    10,000 searches in the two-replica load). KB_HTTP_KEEP_ALIVE_S (75 s) keeps them open."""
    port = httpx2.URL(replicas[0].url).port
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/healthz")
    assert connection.getresponse().read() is not None
    time.sleep(6)  # longer than uvicorn's default keep-alive
    connection.request("GET", "/healthz")  # on the same socket: http.client does not reconnect by itself
    assert connection.getresponse().status == 200
    connection.close()
