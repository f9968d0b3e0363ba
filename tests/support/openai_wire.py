"""A local HTTP server that speaks OpenAI's /v1/embeddings wire format, for testing the real `openai`
client code here, where the OpenAI API cannot be reached. It answers with scripted HTTP statuses
(429, 500, ...) before succeeding, and records every request it was sent.

For the reliability faults (reliability/faults.py) it can also listen on a given port (so that an
endpoint taken down comes back at the same address) and hold requests: while `gate` is clear, a
request is recorded on arrival and answered only once the gate is set again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
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

    def reply_status(self) -> int:
        return self.script.pop(0) if self.script else 200


@contextmanager
def embeddings_server(
    script: list[int] | None = None, retry_after: str | None = None, *, port: int = 0
) -> Iterator[EmbeddingsServer]:
    state = EmbeddingsServer(script=list(script or []), retry_after=retry_after)
    state.gate.set()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep the test output clean
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                state.requests.append({**body, "authorization": self.headers.get("Authorization")})
                status = state.reply_status()
            state.gate.wait(timeout=300)
            if self.path != "/v1/embeddings":
                status = 404
            if status != 200:
                payload = {"error": {"message": f"scripted {status}", "type": "server_error", "code": None}}
                self._send(status, payload, retry_after=state.retry_after if status == 429 else None)
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
