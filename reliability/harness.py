"""What the load and the faults run against, each the real thing as a process of its own, on loopback only:

- `kb serve --transport http` with one bearer token per role (`serve_http`);
- `kb worker` (`start_worker`), fed by moto's server as its own process (`MotoProcess`) through `AwsProxy`,
  an HTTP proxy that can go down (its port refuses connections while moto keeps every queue's state), hold
  or refuse SQS deletes, and records what the worker received and deleted;
- an embedded PostgreSQL of its own, stopped and started with `kb db stop --force` / `kb db start` (`Cluster`);
- the local /v1/embeddings endpoint of tests/support/openai_wire.py, on a port it can come back on.

Every wait has a deadline; every process started here is stopped by the context that started it.
"""

from __future__ import annotations

import csv
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import psutil
import psycopg
from psycopg import conninfo as pg_conninfo
from psycopg import sql

from kb_core.db.embedded import EmbeddedPostgres
from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.db.targets import DatabaseTargets
from kb_core.roles import Classification, Role
from kb_server.http import add_token

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
MANIFEST = REPO / "corpus" / "MANIFEST.csv"
OPENAI_SPACE = EmbeddingSpace("text-embedding-3-large", 1024)
FAKE_OPENAI_KEY = "sk-reliability-local"  # the local endpoint accepts any key
AWS_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}


class Deadline(AssertionError):
    """Something did not happen in time."""


def wait_until(condition: Callable[[], Any], timeout: float, what: str, poll: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Deadline(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment without the product's own settings (a developer's must not leak in)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("KB_")
        and k not in ("DATABASE_URL", "AWS_ENDPOINT_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")
    }
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def database_url(conninfo: str) -> str:
    """A postgresql:// URL for DATABASE_URL from a conninfo over the embedded server's unix socket."""
    params = pg_conninfo.conninfo_to_dict(conninfo)
    return f"postgresql://{params['user']}@/{params['dbname']}?host={params['host']}"


def manifest_levels(path: Path = MANIFEST) -> dict[str, Classification]:
    """doc code -> classification, from corpus/MANIFEST.csv (not from the database under test)."""
    with path.open(newline="") as f:
        return {row["doc_code"]: Classification(row["classification"]) for row in csv.DictReader(f)}


def golden_queries() -> list[str]:
    from evals.golden import load_golden

    return [q.question for q in load_golden()]


# --- databases -------------------------------------------------------------------------------------------


def fresh_database(superuser: str, name: str, space: EmbeddingSpace) -> DatabaseTargets:
    from evals.run import fresh_database as create

    return create(superuser, name, space)


def drop_database(superuser: str, name: str) -> None:
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


class Cluster:
    """An embedded PostgreSQL of its own under `state_dir`, stopped and started the operator's way
    (`kb db stop --force`, `kb db start`). Its folder must not be under pytest's temporary root (tests/conftest.py's
    server_dir says why)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.superuser = ""

    def start(self) -> str:
        self.superuser = EmbeddedPostgres(self.state_dir).start(keep_running=True)
        return self.superuser

    def _kb(self, *args: str) -> None:
        subprocess.run(
            [str(VENV_BIN / "kb"), *args],
            env=child_env(KB_STATE_DIR=str(self.state_dir)),
            check=True,
            capture_output=True,
            timeout=120,
        )

    def stop(self) -> None:
        # The fault: the database goes down under the servers that hold it, so --force (kb db stop refuses).
        self._kb("db", "stop", "--force")

    def start_again(self) -> None:
        self._kb("db", "start")

    def shutdown(self) -> None:
        """Stop it, keeping its data."""
        with suppress(Exception):
            EmbeddedPostgres(self.state_dir).stop()

    def destroy(self) -> None:
        with suppress(Exception):
            EmbeddedPostgres(self.state_dir).stop()
        shutil.rmtree(self.state_dir, ignore_errors=True)


# --- kb serve --------------------------------------------------------------------------------------------


@dataclass
class ServerProcess:
    url: str
    tokens: dict[Role, str]
    log: Path
    process: psutil.Popen

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def sample(self) -> tuple[float, int, int]:
        """(RSS in MB, threads, open file descriptors) of the server process."""
        with self.process.oneshot():
            return self.process.memory_info().rss / 2**20, self.process.num_threads(), self.process.num_fds()


@contextmanager
def serve_http(
    db_url: str,
    folder: Path,
    settings: dict[str, str] | None = None,
    *,
    start_timeout_s: float = 90,
    name: str = "server",
) -> Iterator[ServerProcess]:
    """`kb serve --transport http` on a free loopback port, with one bearer token per role; `settings` are
    extra environment variables (KB_RATE_LIMIT_PER_MINUTE, KB_EMBEDDER, ...). Servers started on the same
    folder share its tokens file; `name` names the log."""
    import httpx2

    folder.mkdir(parents=True, exist_ok=True)
    tokens_file = folder / "tokens.json"
    suffix = "" if name == "server" else f"-{name}"  # one name per server: adding a name again replaces its token
    tokens = {role: add_token(tokens_file, f"reliability-{role.value}{suffix}", role) for role in Role}
    port = free_port()
    log = folder / f"{name}.log"
    env = child_env(
        DATABASE_URL=db_url,
        KB_TOKENS_FILE=str(tokens_file),
        KB_HTTP_HOST="127.0.0.1",
        KB_HTTP_PORT=str(port),
        **(settings or {}),
    )
    with log.open("w") as out:
        process = psutil.Popen(
            [str(VENV_BIN / "kb"), "serve", "--transport", "http"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if process.poll() is not None:
            raise AssertionError("the HTTP server exited:\n" + log.read_text())
        try:
            return httpx2.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx2.TransportError:
            return False

    try:
        wait_until(healthy, start_timeout_s, "kb serve to answer /healthz", poll=0.2)
        yield ServerProcess(url, tokens, log, process)
    finally:
        stop_process(process)


def stop_process(process: psutil.Popen | subprocess.Popen, timeout: float = 30) -> int | None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except (subprocess.TimeoutExpired, psutil.TimeoutExpired):
            process.kill()
            process.wait(timeout=timeout)
    return process.returncode


# --- the local /v1/embeddings endpoint -------------------------------------------------------------------


class EmbeddingsEndpoint:
    """tests/support/openai_wire.py's server on a fixed port, so that it can go down and come back."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._context: Any = None
        self.state: Any = None

    def up(self) -> EmbeddingsEndpoint:
        from tests.support.openai_wire import embeddings_server

        self._context = embeddings_server(port=self.port)
        self.state = self._context.__enter__()
        return self

    def down(self) -> None:
        if self._context is not None:
            context, self._context = self._context, None
            context.__exit__(None, None, None)

    @property
    def is_up(self) -> bool:
        return self._context is not None

    def embedder(self) -> Any:
        """The product's OpenAI embedder, pointed here."""
        import openai

        from kb_core.embedders.openai_embedder import OpenAIEmbedder

        client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, base_url=self.url, max_retries=0, timeout=30)
        return OpenAIEmbedder(client, backoff_base_s=0.05, backoff_cap_s=0.5)

    def env(self) -> dict[str, str]:
        return {"KB_EMBEDDER": "openai", "OPENAI_API_KEY": FAKE_OPENAI_KEY, "KB_OPENAI_BASE_URL": self.url}


# --- the local AWS: moto's server as a process, behind a proxy -----------------------------------------


class MotoProcess:
    """moto's server (S3, SQS, SNS, CloudWatch wire protocols) as its own process on a loopback port."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoProcess:
        for name, value in AWS_CREDENTIALS.items():
            os.environ.setdefault(name, value)  # for this process's boto3 clients
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
                env=child_env(**AWS_CREDENTIALS),
                stdout=out,
                stderr=subprocess.STDOUT,
            )

        def listening() -> bool:
            assert self.process is not None and self.process.poll() is None, self.log.read_text()
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_until(listening, 30, "moto's server to listen", poll=0.1)
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)


@dataclass
class Received:
    at: float
    message_id: str
    receive_count: int
    body: str


@dataclass
class Deleted:
    at: float
    message_id: str | None
    ok: bool


HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


class AwsProxy:
    """An HTTP proxy in front of the local AWS, for the worker. `down()` closes its port and drops open
    connections (an endpoint outage; moto behind it keeps its queues), `up()` reopens the same port.
    `hold_deletes` holds SQS DeleteMessage(Batch) requests unforwarded until `release_held()` drops them;
    `deny_deletes` answers them with AccessDenied. It records the messages received and deleted."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.port = free_port()
        self.hold_deletes = False
        self.deny_deletes = False
        self.held = threading.Event()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.receives: list[Received] = []
        self.deletes: list[Deleted] = []
        self.denied = 0
        self.s3_gets: list[tuple[float, str]] = []
        self.calls: Counter[str] = Counter()
        self._handles: dict[str, str] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> AwsProxy:
        proxy = self

        class Handler(_ProxyHandler):
            owner = proxy

        self._release = threading.Event()
        self.held.clear()
        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        with self._lock:
            self._server = server
        return self

    def down(self) -> None:
        with self._lock:
            server, self._server = self._server, None
            sockets = list(self._sockets)
        if server is not None:
            server.shutdown()
            server.server_close()
        for s in sockets:
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self._release.set()

    @property
    def is_up(self) -> bool:
        return self._server is not None

    def hold(self) -> None:
        """Hold the SQS deletes from now on; `held` is set when one arrives."""
        self._release = threading.Event()
        self.held.clear()
        self.hold_deletes = True

    def release_held(self) -> None:
        """Drop the held deletes (their connections are closed unanswered) and forward later ones."""
        self.hold_deletes = False
        self._release.set()

    def received(self, message_id: str) -> list[Received]:
        return [r for r in self.receives if r.message_id == message_id]

    def deleted(self, message_id: str) -> list[Deleted]:
        return [d for d in self.deletes if d.message_id == message_id]

    def _track(self, s: socket.socket, add: bool) -> None:
        with self._lock:
            (self._sockets.add if add else self._sockets.discard)(s)

    def _record(self, action: str, path: str, body: bytes, status: int, data: bytes) -> None:
        now = time.monotonic()
        with self._lock:
            self.calls[action] += 1
            if status != 200:
                return
            if action == "ReceiveMessage":
                for m in json.loads(data or b"{}").get("Messages", []):
                    self._handles[m["ReceiptHandle"]] = m["MessageId"]
                    count = int(m.get("Attributes", {}).get("ApproximateReceiveCount", 0))
                    self.receives.append(Received(now, m["MessageId"], count, m["Body"]))
            elif action == "DeleteMessageBatch":
                request, response = json.loads(body), json.loads(data or b"{}")
                ok = {s["Id"] for s in response.get("Successful", [])}
                for entry in request.get("Entries", []):
                    self.deletes.append(Deleted(now, self._handles.get(entry["ReceiptHandle"]), entry["Id"] in ok))
            elif action == "DeleteMessage":
                handle = json.loads(body).get("ReceiptHandle", "")
                self.deletes.append(Deleted(now, self._handles.get(handle), True))
            elif action == "s3:GET":
                self.s3_gets.append((now, unquote(path.split("?", 1)[0])))


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: AwsProxy

    def setup(self) -> None:
        super().setup()
        self.owner._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.owner._track(self.connection, False)

    def log_message(self, *args: object) -> None:
        pass

    def _forward(self) -> None:
        proxy = self.owner
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._reply(501, b"chunked request bodies are not proxied")
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        target = self.headers.get("X-Amz-Target", "")
        action = target.rpartition(".")[2] if target else f"s3:{self.command}"
        if action in ("DeleteMessage", "DeleteMessageBatch"):
            if proxy.hold_deletes:
                proxy.held.set()
                proxy._release.wait(timeout=600)
                self.close_connection = True  # never forwarded: the caller's connection is dropped
                with suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            if proxy.deny_deletes:
                proxy.denied += 1
                error = {"__type": "com.amazonaws.sqs#AccessDenied", "message": "denied by the reliability proxy"}
                self._reply(
                    400,
                    json.dumps(error).encode(),
                    [("Content-Type", "application/x-amz-json-1.0"), ("x-amzn-query-error", "AccessDenied;Sender")],
                )
                return
        upstream = http.client.HTTPConnection(*proxy.upstream, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
            status, response_headers = response.status, response.getheaders()
        except OSError as exc:
            self._reply(502, f"upstream unreachable: {exc}".encode())
            return
        finally:
            upstream.close()
        try:
            self._reply(status, data, response_headers)
        except OSError:  # the caller is gone (killed, or the proxy went down under it)
            self.close_connection = True
            return
        proxy._record(action, self.path, body, status, data)

    def _reply(self, status: int, data: bytes, headers: list[tuple[str, str]] | None = None) -> None:
        self.send_response(status)
        length = str(len(data))
        for name, value in headers or []:
            lowered = name.lower()
            if lowered == "content-length" and self.command == "HEAD":
                length = value
            if lowered in HOP_BY_HOP or lowered in ("content-length", "server", "date"):
                continue
            self.send_header(name, value)
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward


@dataclass
class Queue:
    """A bucket, its notification, ingest queue and DLQ of their own in the local AWS."""

    settings: Any  # AwsSettings, pointing straight at moto
    stack: Any
    sqs: Any
    s3: Any

    def depth(self) -> tuple[int, int]:
        """(visible, in flight) messages of the ingest queue."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.stack.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def dlq_depth(self) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.stack.dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])

    def upload(self, key: str, data: bytes) -> None:
        self.s3.put_object(Bucket=self.settings.corpus_bucket, Key=key, Body=data)

    def env(self, endpoint_url: str) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": endpoint_url,
            "AWS_REGION": self.settings.region,
            "AWS_DEFAULT_REGION": self.settings.region,
            **AWS_CREDENTIALS,
            "KB_CORPUS_BUCKET": self.settings.corpus_bucket,
            "KB_INGEST_QUEUE": self.settings.ingest_queue,
            "KB_INGEST_DLQ": self.settings.dead_letter_queue,
            "KB_WORKER_WAIT_TIME_S": str(self.settings.wait_time_s),
        }


def make_queue(moto_url: str, name: str, *, visibility_timeout_s: int = 3, max_receive_count: int = 3) -> Queue:
    from ingest.aws.bootstrap import bootstrap
    from ingest.aws.clients import client
    from kb_core.settings import AwsSettings

    settings = AwsSettings(
        AWS_ENDPOINT_URL=moto_url,
        KB_CORPUS_BUCKET=name,
        KB_INGEST_QUEUE=f"ingest-{name}",
        KB_INGEST_DLQ=f"dlq-{name}",
        KB_QUEUE_VISIBILITY_TIMEOUT_S=visibility_timeout_s,
        KB_QUEUE_MAX_RECEIVE_COUNT=max_receive_count,
        KB_WORKER_WAIT_TIME_S=1,
    )
    stack = bootstrap(settings)
    sqs = client("sqs", settings)
    sqs.purge_queue(QueueUrl=stack.queue_url)  # the s3:TestEvent sent when the notification is set up
    return Queue(settings, stack, sqs, client("s3", settings))


@dataclass
class WorkerProcess:
    process: psutil.Popen
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


def start_worker(
    queue: Queue, *, endpoint_url: str, db_url: str, embeddings: EmbeddingsEndpoint, folder: Path, name: str
) -> WorkerProcess:
    """`kb worker` as its own process, against `endpoint_url` (the proxy), with the OpenAI embedder pointed
    at the local /v1/embeddings endpoint."""
    folder.mkdir(parents=True, exist_ok=True)
    env = child_env(
        **queue.env(endpoint_url),
        **embeddings.env(),
        DATABASE_URL=db_url,
        KB_STATE_DIR=str(folder / f"{name}-state"),
        PYTHONUNBUFFERED="1",
    )
    log = folder / f"{name}.log"
    with log.open("w") as out:
        process = psutil.Popen([str(VENV_BIN / "kb"), "worker"], env=env, stdout=out, stderr=subprocess.STDOUT)
    return WorkerProcess(process, log)


@dataclass
class Timeline:
    """Named moments, in seconds from its start."""

    started: float = field(default_factory=time.monotonic)
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, name: str) -> float:
        self.marks[name] = round(time.monotonic() - self.started, 3)
        return self.marks[name]
