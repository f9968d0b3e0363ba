"""A round-robin load balancer inside an HTTP client: each request goes to the next replica in turn.

It stands in for any HTTP load balancer that does not pin a client to one replica (the worst case for
MCP sessions): the requests really go to N server processes on N ports. The Host header stays the name the
client used, as a balancer passes it on, so each replica must allow that name (KB_HTTP_ALLOWED_HOSTS).
"""

from __future__ import annotations

import itertools
from collections import Counter

import httpx2


class RoundRobin(httpx2.AsyncBaseTransport):
    def __init__(self, urls: list[str], *, host: str | None = None) -> None:
        self.ports = [httpx2.URL(url).port for url in urls]
        self.host = host
        self._next = itertools.cycle(self.ports)
        self.sent: Counter[int] = Counter()  # requests per replica's port
        self.session_ids: list[str] = []  # any Mcp-Session-Id a replica handed out
        self.statuses: list[int] = []
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self._next)
        request.url = request.url.copy_with(port=port)
        if self.host is not None:
            request.headers["Host"] = self.host
        self.sent[port] += 1
        response = await self._inner.handle_async_request(request)
        self.statuses.append(response.status_code)
        if "mcp-session-id" in response.headers:
            self.session_ids.append(response.headers["mcp-session-id"])
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
