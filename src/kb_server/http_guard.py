"""Which Host and Origin headers the HTTP transport accepts, checked on every path (not only /mcp).

The MCP specification (Streamable HTTP, security) says a server MUST validate Origin: a web page the
user opens could otherwise call the server from the user's browser, and a DNS-rebinding name could make
that page same-origin with it. So:

- Bound to a loopback address, the defaults are the loopback names of the bound port
  (127.0.0.1:PORT, localhost:PORT, [::1]:PORT) and their http:// origins.
- Bound anywhere else, the operator must say which names the server answers to (KB_HTTP_ALLOWED_HOSTS);
  without them the server refuses to start, because nothing local could tell a rebinding name from a
  real one. Origins default to http:// and https:// of each allowed host (same-origin pages only);
  KB_HTTP_ALLOWED_ORIGINS replaces that list.
- A request without an Origin header (every non-browser MCP client) passes the Origin check; a request
  with `Origin: null` or any other unlisted origin gets 403, an unlisted Host 421.

The checks are the SDK's own (TransportSecurityMiddleware.validate_request); this module only chooses the
lists and applies them before authentication, so a foreign page learns nothing, not even 401.
"""

from __future__ import annotations

import ipaddress

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from kb_core.settings import ServerSettings


class UnsafeBind(ValueError):
    """Bound off loopback with no allow-list: the message names the setting to set."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _split(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def transport_security(settings: ServerSettings) -> TransportSecuritySettings:
    """The allow-lists for this bind address and port; UnsafeBind when off loopback without KB_HTTP_ALLOWED_HOSTS."""
    hosts = _split(settings.allowed_hosts)
    if not hosts:
        if not is_loopback(settings.http_host):
            raise UnsafeBind(
                f"KB_HTTP_HOST (or --host) {settings.http_host} is not a loopback address: set KB_HTTP_ALLOWED_HOSTS "
                f"to the host:port names clients use (e.g. mcp.internal:{settings.http_port}); "
                "KB_HTTP_ALLOWED_ORIGINS for browser origins"
            )
        port = settings.http_port
        hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    origins = _split(settings.allowed_origins) or [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class OriginHostMiddleware:
    """Refuses a request whose Host (421) or Origin (403) is not allowed, on every path."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings) -> None:
        self.app = app
        self.check = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = await self.check.validate_request(Request(scope), is_post=False)
            if refused is not None:
                # The SDK's body only says "Invalid Host header": name the setting the server's operator changes.
                setting = "KB_HTTP_ALLOWED_HOSTS" if refused.status_code == 421 else "KB_HTTP_ALLOWED_ORIGINS"
                fix = f"{bytes(refused.body).decode(errors='replace')}: this server's {setting} does not list it"
                await PlainTextResponse(fix, status_code=refused.status_code)(scope, receive, send)
                return
        await self.app(scope, receive, send)
