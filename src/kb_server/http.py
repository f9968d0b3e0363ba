"""The streamable HTTP transport (/mcp) behind bearer tokens, per-token rate limits and size limits.

- Each caller presents `Authorization: Bearer <token>`; the token's sha256 is looked up in the tokens
  file (tokens themselves are never stored or logged) and gives the request its reader role. No token,
  or an unknown one: 401. Nothing else the client sends (no header, no argument) can choose a role.
- Each token has a token bucket (KB_RATE_LIMIT_PER_MINUTE, burst KB_RATE_LIMIT_BURST): 429 with
  Retry-After when it is empty. Failed authentications are limited per client address the same way,
  so guessing tokens is slow.
- Request bodies over KB_MAX_REQUEST_BYTES get 413 before they are read; one sent without Content-Length
  (chunked) gets 413 once it passes the limit, from the SDK's body limit, which build_http_app sets to the
  same number.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from kb_core.roles import Role
from kb_core.settings import ServerSettings
from kb_server.http_guard import OriginHostMiddleware, transport_security

FAILED_AUTH_PER_MINUTE = 10
# Addresses remembered by the failed-authentication limit. Forgetting the least recently seen one can only
# forgive the address that has been quiet longest; without a bound, each new address costs memory forever.
FAILED_AUTH_ADDRESSES = 10_000


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class TokenEntry:
    name: str
    role: Role


class TokenStore:
    """sha256(token) -> (name, role), from a JSON file: {"tokens": [{"name", "role", "sha256"}]}."""

    def __init__(self, entries: dict[str, TokenEntry]) -> None:
        self._entries = entries

    @classmethod
    def load(cls, path: Path | None) -> TokenStore:
        if path is None or not path.exists():
            return cls({})
        try:
            data = json.loads(path.read_text())
            entries = {item["sha256"]: TokenEntry(item["name"], Role(item["role"])) for item in data["tokens"]}
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"KB_TOKENS_FILE {path} is not a valid tokens file ({exc}); recreate it with `kb tokens add`"
            ) from None
        return cls(entries)

    def role_of(self, token: str) -> TokenEntry | None:
        return self._entries.get(hash_token(token))

    def __len__(self) -> int:
        return len(self._entries)


def add_token(path: Path, name: str, role: Role) -> str:
    """Create a token for `name` with `role`; store its hash; return the token (shown once)."""
    token = "kb_" + secrets.token_urlsafe(32)
    data = json.loads(path.read_text()) if path.exists() else {"tokens": []}
    data["tokens"] = [t for t in data["tokens"] if t["name"] != name]
    data["tokens"].append({"name": name, "role": role.value, "sha256": hash_token(token)})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    path.chmod(0o600)
    return token


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


class BearerAuthMiddleware:
    """Authenticates /mcp requests, applies the limits, and puts the caller's role on the request."""

    def __init__(self, app: ASGIApp, tokens: TokenStore, settings: ServerSettings) -> None:
        self.app = app
        self.tokens = tokens
        self.max_bytes = settings.max_request_bytes
        self.per_token = RateLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst)
        self.failures = RateLimiter(FAILED_AUTH_PER_MINUTE, FAILED_AUTH_PER_MINUTE)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        client = request.client.host if request.client else "unknown"
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await _reply(scope, receive, send, 413, f"request body over {self.max_bytes} bytes")
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        entry = self.tokens.role_of(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
        if entry is None:
            wait = self.failures.take(client)
            if wait:
                await _reply(scope, receive, send, 429, "too many failed authentications", retry_after=wait)
                return
            await _reply(
                scope,
                receive,
                send,
                401,
                "a valid bearer token is required",
                headers={"WWW-Authenticate": 'Bearer realm="kosha-kb"'},
            )
            return
        wait = self.per_token.take(hash_token(token.strip()))
        if wait:
            await _reply(scope, receive, send, 429, "rate limit exceeded for this token", retry_after=wait)
            return
        scope.setdefault("state", {})["kb_role"] = entry.role
        scope["state"]["kb_caller"] = entry.name
        # The SDK binds a session to the AuthenticatedUser that created it: another token (or none) then gets
        # 404 for it on POST, GET and DELETE. The subject is the token's hash, so a session belongs to one token.
        scope["user"] = AuthenticatedUser(
            AccessToken(
                token=hash_token(token.strip()),
                client_id=entry.name,
                scopes=[entry.role.value],
                subject=hash_token(token.strip()),
            )
        )
        # A chunked body is not cut off here: raising from receive() was a 500. The SDK's
        # RequestBodyLimitMiddleware (max_request_body_size in build_http_app) answers it with 413.
        await self.app(scope, receive, send)


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
    app = server.streamable_http_app(
        max_request_body_size=settings.max_request_bytes,
        host=settings.http_host,
        transport_security=security,
        stateless_http=settings.stateless,
    )
    app.add_middleware(BearerAuthMiddleware, tokens=tokens, settings=settings)
    app.add_middleware(OriginHostMiddleware, security=security)  # added last: runs first, before authentication
    return app
