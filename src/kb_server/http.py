"""The streamable HTTP transport (/mcp) behind bearer tokens, per-token rate limits and size limits.

- Each caller presents `Authorization: Bearer <token>`; the token's sha256 is looked up in the tokens
  file (tokens themselves are never stored or logged) and gives the request its reader role. No token,
  or an unknown one: 401. Nothing else the client sends (no header, no argument) can choose a role.
- Each token has a token bucket (KB_RATE_LIMIT_PER_MINUTE, burst KB_RATE_LIMIT_BURST): 429 with
  Retry-After when it is empty. Failed authentications are limited per client address the same way,
  so guessing tokens is slow.
- An MCP-Protocol-Version header naming a revision the server does not speak gets 400 saying which it speaks
  (the specification's MUST); the SDK's own answer to one spoke of a missing `params._meta` envelope.
- Request bodies over KB_MAX_REQUEST_BYTES get 413 before they are read; one sent without Content-Length
  (chunked) gets 413 once it passes the limit, from the SDK's body limit, which build_http_app sets to the
  same number.
- Each refusal is a WARNING line in the server's log (client address, and the token's name when it has one;
  never a token): the audit log records calls that reached a tool, and a security reviewer asks who was
  turned away too. A throttled address or token is logged when its throttling starts, not at every refusal.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kb_core.settings import ServerSettings
from kb_server.http_guard import OriginHostMiddleware, transport_security
from kb_server.readiness import probe_of
from kb_server.tokens import TokenEntry, TokenStore, add_token, hash_token

__all__ = ["TokenEntry", "TokenStore", "add_token", "build_http_app", "hash_token"]

logger = logging.getLogger(__name__)

FAILED_AUTH_PER_MINUTE = 10
PROTOCOL_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
# Addresses remembered by the failed-authentication limit. Forgetting the least recently seen one can only
# forgive the address that has been quiet longest; without a bound, each new address costs memory forever.
FAILED_AUTH_ADDRESSES = 10_000


@dataclass
class RateLimiter:
    """A token bucket per key: `per_minute` refill, `burst` capacity; at most `max_keys` keys (LRU)."""

    per_minute: float
    burst: float
    max_keys: int = FAILED_AUTH_ADDRESSES
    buckets: OrderedDict[str, tuple[float, float]] = field(default_factory=OrderedDict)  # key -> (tokens, last)

    def take(self, key: str, now: float | None = None) -> float:
        """0 when allowed (one unit taken); otherwise the seconds until one unit is available."""
        now = time.monotonic() if now is None else now
        tokens, last = self.buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.per_minute / 60)
        allowed = tokens >= 1
        self.buckets[key] = (tokens - 1 if allowed else tokens, now)
        self.buckets.move_to_end(key)
        while len(self.buckets) > self.max_keys:
            self.buckets.popitem(last=False)
        return 0.0 if allowed else (1 - tokens) * 60 / self.per_minute


@dataclass
class Throttled:
    """The keys being refused now, so that a throttled client is logged once per spell (at most `max_keys`)."""

    max_keys: int = FAILED_AUTH_ADDRESSES
    keys: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def starts(self, key: str) -> bool:
        """True when `key` was not being refused already (log it); it is refused until `ends(key)`."""
        new = key not in self.keys
        self.keys[key] = None
        self.keys.move_to_end(key)
        while len(self.keys) > self.max_keys:
            self.keys.popitem(last=False)
        return new

    def ends(self, key: str) -> None:
        self.keys.pop(key, None)


def _refused(status: int, client: str, why: str, token_name: str | None = None) -> None:
    who = f"token {token_name!r} from {client}" if token_name else client
    logger.warning("refused %d to %s: %s", status, who, why)


class BearerAuthMiddleware:
    """Authenticates /mcp requests, applies the limits, and puts the caller's role on the request."""

    def __init__(self, app: ASGIApp, tokens: TokenStore, settings: ServerSettings) -> None:
        self.app = app
        self.tokens = tokens
        self.max_bytes = settings.max_request_bytes
        self.per_token = RateLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst)
        self.failures = RateLimiter(FAILED_AUTH_PER_MINUTE, FAILED_AUTH_PER_MINUTE)
        self.throttled = Throttled()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        client = request.client.host if request.client else "unknown"
        length = request.headers.get("content-length")
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        presented = scheme.lower() == "bearer" and token.strip()
        entry = self.tokens.role_of(token.strip()) if presented else None
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            why = f"request body of {length[:20]} bytes, over KB_MAX_REQUEST_BYTES {self.max_bytes}"
            _refused(413, client, why, entry.name if entry else None)
            await _reply(scope, receive, send, 413, f"request body over {self.max_bytes} bytes")
            return
        if entry is None:
            wait = self.failures.take(client)
            if wait:
                if self.throttled.starts(f"address {client}"):
                    _refused(429, client, "too many failed authentications (further refusals not logged)")
                message = (
                    f"too many failed authentications from this address: try again in {max(1, math.ceil(wait))} s "
                    "(Retry-After); a valid token is not held back"
                )
                await _reply(scope, receive, send, 429, message, retry_after=wait)
                return
            self.throttled.ends(f"address {client}")
            _refused(401, client, "an unknown or revoked bearer token" if presented else "no bearer token")
            await _reply(
                scope,
                receive,
                send,
                401,
                "a valid bearer token is required: send 'Authorization: Bearer <token>' with a token the server's "
                "operator made with `kb tokens add`",
                headers={"WWW-Authenticate": 'Bearer realm="kosha-kb"'},
            )
            return
        hashed = hash_token(token.strip())
        wait = self.per_token.take(hashed)
        if not wait:
            self.throttled.ends(f"token {hashed}")
        else:
            if self.throttled.starts(f"token {hashed}"):
                _refused(429, client, "its rate limit was exceeded (further refusals not logged)", entry.name)
            # Found walking it: the body said nothing of how long to wait (only Retry-After did) or what sets it.
            message = (
                f"rate limit exceeded for this token: try again in {max(1, math.ceil(wait))} s (Retry-After); every "
                "HTTP request of a session counts (KB_RATE_LIMIT_PER_MINUTE, KB_RATE_LIMIT_BURST on the server)"
            )
            await _reply(scope, receive, send, 429, message, retry_after=wait)
            return
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in PROTOCOL_VERSIONS:
            _refused(400, client, f"unsupported {MCP_PROTOCOL_VERSION_HEADER} {version[:40]!r}", entry.name)
            await _reply(scope, receive, send, 400, unsupported_version(version))
            return
        scope.setdefault("state", {})["kb_role"] = entry.role
        scope["state"]["kb_caller"] = entry.name
        # The SDK binds a session to the AuthenticatedUser that created it: another token (or none) then gets
        # 404 for it on POST, GET and DELETE. The subject is the token's hash, so a session belongs to one token.
        scope["user"] = AuthenticatedUser(
            AccessToken(
                token=hashed,
                client_id=entry.name,
                scopes=[entry.role.value],
                subject=hashed,
            )
        )
        # A chunked body is not cut off here: raising from receive() was a 500. The SDK's
        # RequestBodyLimitMiddleware (max_request_body_size in build_http_app) answers it with 413, which
        # _rewording_sdk_refusals logs and words as the Content-Length refusal above.
        await self.app(scope, receive, _rewording_sdk_refusals(send, self.max_bytes, client, entry.name))


# Found walking it: after a server restart every client's next request got the SDK's bare "Session not found",
# and nothing said what to do. The spec's answer (404; the client starts a new session) is kept, with the why.
SESSION_GONE = (
    "Session not found: it has ended (the server restarted, or it was deleted or idle for 30 minutes), or it is "
    "another token's; start a new session with initialize"
)


def _rewording_sdk_refusals(send: Send, max_bytes: int, client: str, token_name: str) -> Send:
    """Rewords two of the SDK's answers: its 404 for an ended session, and its plain-text 413 for a chunked body
    over the limit (found walking it: logged nowhere, and not the JSON a Content-Length refusal gets)."""
    held: Message | None = None

    async def wrapped(message: Message) -> None:
        nonlocal held
        if message["type"] == "http.response.start" and message["status"] in (404, 413):
            held = message  # sent with its body, whose length may change
            return
        if held is not None and message["type"] == "http.response.body":
            body = message.get("body", b"")
            start, held = held, None
            changed = True
            if start["status"] == 404 and not message.get("more_body") and b'"Session not found"' in body:
                body = body.replace(b'"Session not found"', json.dumps(SESSION_GONE).encode())
            elif start["status"] == 413 and not message.get("more_body"):
                _refused(413, client, f"chunked request body over KB_MAX_REQUEST_BYTES {max_bytes}", token_name)
                body = json.dumps({"error": f"request body over {max_bytes} bytes"}).encode()
                kept = [(k, v) for k, v in start["headers"] if k.lower() != b"content-type"]
                start = {**start, "headers": [*kept, (b"content-type", b"application/json")]}
            else:
                changed = False
            if changed:
                headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
                start = {**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
            await send(start)
            await send({**message, "body": body})
            return
        await send(message)

    return wrapped


def unsupported_version(version: str) -> str:
    return (
        f"unsupported {MCP_PROTOCOL_VERSION_HEADER} {version[:40]!r}: this server speaks "
        f"{', '.join(PROTOCOL_VERSIONS)}; send the version initialize negotiated"
    )


async def _reply(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    message: str,
    *,
    retry_after: float | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    extra = dict(headers or {})
    if retry_after is not None:
        extra["Retry-After"] = str(max(1, math.ceil(retry_after)))
    await JSONResponse({"error": message}, status_code=status, headers=extra)(scope, receive, send)


def build_http_app(server: MCPServer, settings: ServerSettings, tokens: TokenStore) -> Starlette:
    @server.custom_route("/healthz", methods=["GET"])
    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    security = transport_security(settings)  # UnsafeBind off loopback without an allow-list
    probe = probe_of(server)

    @server.custom_route("/readyz", methods=["GET"])
    async def readyz(_: Request) -> JSONResponse:
        if probe is None:
            return JSONResponse({"status": "ready"})
        ready, checks = await probe.check()
        return JSONResponse({"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503)

    app = server.streamable_http_app(
        max_request_body_size=settings.max_request_bytes,
        host=settings.http_host,
        transport_security=security,
        stateless_http=settings.stateless,
    )
    app.add_middleware(BearerAuthMiddleware, tokens=tokens, settings=settings)
    app.add_middleware(OriginHostMiddleware, security=security)  # added last: runs first, before authentication
    return app
