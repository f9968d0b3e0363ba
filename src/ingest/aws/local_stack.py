"""The local AWS: moto's server speaking the real S3, SQS, SNS and CloudWatch wire protocols on loopback."""

from __future__ import annotations

import logging
import os
import socket

from moto.server import ThreadedMotoServer

DEFAULT_PORT = 4566


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


class LocalAws:
    """moto in a thread of this process; `endpoint_url` is what AWS_ENDPOINT_URL should be."""

    def __init__(self, port: int = DEFAULT_PORT) -> None:
        """`port` 0: any free port (tests: two test processes asking for one fixed port at once could both find
        it free, and one then used, and lost, the other's server)."""
        if port == 0 or not _port_free(port):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.port = port
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LocalAws:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per AWS call otherwise
        # moto accepts any credentials; boto3 insists that some exist.
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> LocalAws:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
