"""Serving over stdio: requests a client sent before closing stdin are answered before the server exits.

The MCP specification has a stdio client shut the server down by closing its stdin. The SDK then ends the
session at once and answers every request still running with "Connection closed". A client that writes its
requests and closes stdin straight away (a script: `printf '...' | kb serve`) got no answer at all, and the
cancelled queries left psycopg warnings in the log. Here stdin's end waits, at most DRAIN_S, until every
request read before it has its response written (or was cancelled by the client), then ends the session.

A stop signal is not stdin's end: SIGTERM still exits at once (kb_cli.lifecycle).
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

# Longer than any one tool call takes (the query timeout, an embedding's retries), short enough that a client
# which closed stdin and went away does not leave a server behind for long.
DRAIN_S = 60.0

RequestId = str | int


class Outstanding:
    """The ids of requests read and not yet answered, and a way to wait until there are none."""

    def __init__(self) -> None:
        self.ids: set[RequestId] = set()
        self._changed = anyio.Event()

    def asked(self, message: object) -> None:
        if isinstance(message, JSONRPCRequest):
            self.ids.add(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            # A cancelled request gets no response (the specification's SHOULD NOT): stop waiting for it.
            request_id = (message.params or {}).get("requestId")
            if isinstance(request_id, str | int):
                self._settle(request_id)

    def answered(self, message: object) -> None:
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self._settle(message.id)

    def _settle(self, request_id: RequestId) -> None:
        self.ids.discard(request_id)
        self._changed.set()
        self._changed = anyio.Event()

    async def none_left(self) -> None:
        while self.ids:
            await self._changed.wait()


async def serve_stdio(server: MCPServer, drain_s: float = DRAIN_S) -> None:
    """Serve `server` over stdin/stdout until stdin ends and what was asked before it is answered."""
    lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, with the streams between
    outstanding = Outstanding()
    async with stdio_server() as (wire_in, wire_out):
        # Plain memory streams: the server reads a sender's context from a stream only where it has one.
        to_server, server_in = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        server_out, from_server = anyio.create_memory_object_stream[SessionMessage](0)

        async def inbound() -> None:
            async with to_server:
                async for item in wire_in:
                    if isinstance(item, SessionMessage):
                        outstanding.asked(item.message)
                    await to_server.send(item)
                with anyio.move_on_after(drain_s):
                    await outstanding.none_left()

        async def outbound() -> None:
            async with wire_out:
                async for item in from_server:
                    await wire_out.send(item)
                    outstanding.answered(item.message)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(inbound)
            tasks.start_soon(outbound)
            async with server_out:
                await lowlevel.run(server_in, server_out, lowlevel.create_initialization_options())
