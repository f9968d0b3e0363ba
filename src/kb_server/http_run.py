"""Running the HTTP app: one way for every serve path (`kb serve`, `kb up`), so none forgets a setting.

- X-Forwarded-For is believed only from KB_TRUSTED_PROXIES. uvicorn's default believes it from 127.0.0.1,
  which behind no proxy is every local caller: a token guesser could rotate the header to get a fresh
  failed-authentication allowance on every guess.
- Logs are one line per record (the SDK's rich handler wraps and draws tracebacks in boxes), and a client
  that goes away mid-request is an INFO line, not an ERROR with a traceback: it is not the server's fault.
- A second Ctrl-C while it stops does not "force quit": uvicorn's force quit skips the app's shutdown and lets
  asyncio cancel it mid-way, which printed a traceback from every cancelled task (a supervisor such as
  `timeout` repeats the signal). The stop in hand is already bounded: 5 s for open streams, then the pools.
"""

from __future__ import annotations

import logging
import sys
from types import FrameType
from typing import Any

from starlette.requests import ClientDisconnect

from kb_core.settings import ServerSettings

# The SDK logs these with logger.exception when the client has gone; nothing on the server is wrong.
_DISCONNECTS: tuple[type[BaseException], ...] = (ClientDisconnect, ConnectionResetError, BrokenPipeError)


def proxy_options(settings: ServerSettings) -> dict[str, Any]:
    proxies = [p.strip() for p in (settings.trusted_proxies or "").split(",") if p.strip()]
    if not proxies:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": proxies}


class ClientDisconnectToInfo(logging.Filter):
    """Turns an exception record caused by a client disconnect into one INFO line without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, _DISCONNECTS):
            record.msg = f"client disconnected before its request was complete ({record.getMessage()})"
            record.args = None
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info, record.exc_text = None, None
        return True


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )
    disconnects = ClientDisconnectToInfo()
    for handler in logging.getLogger().handlers:
        handler.addFilter(disconnects)


def run_http(app: Any, settings: ServerSettings) -> None:
    import uvicorn

    configure_logging()
    if settings.stateless:
        # Stateless, the SDK logs "Terminating session: None" at INFO for every request: noise, not news.
        logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if not self.should_exit:  # a repeated signal: the stop in hand goes on (module docstring)
                super().handle_exit(sig, frame)

    config = uvicorn.Config(
        app,
        host=settings.http_host,
        port=settings.http_port,
        log_level="warning",
        access_log=False,
        log_config=None,  # keep the one-line handler above
        # Open event streams would otherwise hold a stop signal off for as long as their clients stay.
        timeout_graceful_shutdown=5,
        # uvicorn's default (5 s) closes idle connections sooner than a balancer or a pooled client expects:
        # a request sent as the server closes one fails with "server disconnected" (KB_HTTP_KEEP_ALIVE_S).
        timeout_keep_alive=settings.keep_alive_s,
        **proxy_options(settings),
    )
    server = Server(config)
    server.run()
    if not server.started:
        sys.exit(3)  # as uvicorn.run: the app did not start (its lifespan failed, or the port was taken)
