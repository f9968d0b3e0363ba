"""A local HTTP server that speaks OpenAI's /v1/embeddings wire format, for testing the real `openai`
client code here, where the OpenAI API cannot be reached. It answers with scripted HTTP statuses
(429, 500, ...) before succeeding, and records every request it was sent.

For the reliability faults (reliability/faults.py) it can also listen on a given port (so that an
endpoint taken down comes back at the same address) and hold requests: while `gate` is clear, a
request is recorded on arrival and answered only once the gate is set again.

Like the real API it can take `latency_s` to answer each request and enforce a request limit: at most
`requests_per_window` arrivals in any `window_s` seconds (a sliding window, the strictest reading of a
per-minute limit), answering 429 with Retry-After over it. It counts the requests it is answering at once
(`peak_in_flight`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from kb_core.token_count import count_tokens


def fake_vector(text: str, dimensions: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    v = np.random.default_rng(seed).standard_normal(dimensions)
    return (v / np.linalg.norm(v)).tolist()


@dataclass
class EmbeddingsServer:
    script: list[int] = field(default_factory=list)  # statuses to answer before succeeding, in order
    requests: list[dict] = field(default_factory=list)
    retry_after: str | None = None
    url: str = ""
    gate: threading.Event = field(default_factory=threading.Event)  # clear: hold requests until it is set
    latency_s: float = 0.0
    requests_per_window: int | None = None
    window_s: float = 60.0
    in_flight: int = 0
    peak_in_flight: int = 0
    rate_limited: int = 0  # 429s answered for going over requests_per_window
    arrivals: list[float] = field(default_factory=list)  # of the requests answered 200, within the window
    arrival_times: list[float] = field(default_factory=list)  # time.monotonic() of every request

    def reply_status(self) -> tuple[int, str | None]:
        """The status to answer with and its Retry-After."""
        if self.script:
            status = self.script.pop(0)
            return status, self.retry_after if status == 429 else None
        if self.requests_per_window is not None:
            now = time.monotonic()
            self.arrivals = [t for t in self.arrivals if now - t < self.window_s]
            if len(self.arrivals) >= self.requests_per_window:
                self.rate_limited += 1
                return 429, f"{self.window_s - (now - self.arrivals[0]):.3f}"
            self.arrivals.append(now)
        return 200, None


@contextmanager
def embeddings_server(
    script: list[int] | None = None,
    retry_after: str | None = None,
    *,
    port: int = 0,
    latency_s: float = 0.0,
    requests_per_window: int | None = None,
    window_s: float = 60.0,
) -> Iterator[EmbeddingsServer]:
    state = EmbeddingsServer(
        script=list(script or []),
        retry_after=retry_after,
        latency_s=latency_s,
        requests_per_window=requests_per_window,
        window_s=window_s,
    )
    state.gate.set()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep the test output clean
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                state.requests.append({**body, "authorization": self.headers.get("Authorization")})
                state.arrival_times.append(time.monotonic())
                status, retry_after = state.reply_status()
                state.in_flight += 1
                state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
            try:
                state.gate.wait(timeout=300)
                time.sleep(state.latency_s)
                self._answer(body, status, retry_after)
            finally:
                with lock:
                    state.in_flight -= 1

        def _answer(self, body: dict, status: int, retry_after: str | None) -> None:
            if self.path != "/v1/embeddings":
                status = 404
            if status != 200:
                payload = {"error": {"message": f"scripted {status}", "type": "server_error", "code": None}}
                self._send(status, payload, retry_after=retry_after)
                return
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            dimensions = body.get("dimensions", 3072)
            tokens = sum(count_tokens(t) for t in inputs)
            self._send(
                200,
                {
                    "object": "list",
                    "model": body["model"],
                    "data": [
                        {"object": "embedding", "index": i, "embedding": fake_vector(t, dimensions)}
                        for i, t in enumerate(inputs)
                    ],
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

        def _send(self, status: int, payload: dict, retry_after: str | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if retry_after:
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            # The client may be gone (a held request whose caller was killed).
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.gate.set()  # let held requests finish
        server.shutdown()
        server.server_close()
