"""Faults, each against the real processes (reliability/harness.py), each measured:

(a) `database_restart`: the database stopped under the servers (`kb db stop --force`) and started again
    (`kb db start`) while clients search over HTTP: requests during the outage fail fast with the server's
    clear "temporarily unavailable" error, and the service recovers without restarting the server (its
    connection pool reconnects).
(b) `embedding_outage`: `kb serve` with KB_EMBEDDER=openai against the local /v1/embeddings endpoint, which
    is taken down and brought back on the same port: searches answer `degraded: true` with the reason, then
    `degraded: false` again, without restarting the server.
(c) `aws_outage`: the local AWS unreachable while `kb worker` runs (moto keeps its queues; the proxy in front
    of it closes its port): while polling, and with a processed batch in hand whose delete cannot get
    through. The worker backs off and resumes; no message is lost and no document doubled.
(d) `worker_kill`: `kb worker` SIGKILLed at each stage of a document's upsert (parse, embed, inside the
    database transaction after some chunk rows are written, after COMMIT before the SQS delete), then a fresh
    worker drains the queue: the document is stored exactly once, complete (its chunks are a clean ingest's),
    never half-written, and its message was delivered again.

The kill points are made deterministic from outside the product, with no hook in it: a large document
(parse), an embeddings endpoint that holds its answer (embed), a PostgreSQL trigger that sleeps after the
4th chunk row (transaction), and a proxy that holds the SQS delete (after COMMIT).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from kb_core.roles import Role
from kb_server.audit import UNAVAILABLE
from reliability.harness import (
    MANIFEST,
    OPENAI_SPACE,
    REPO,
    AwsProxy,
    Cluster,
    EmbeddingsEndpoint,
    MotoProcess,
    Queue,
    ServerProcess,
    Timeline,
    WorkerProcess,
    database_url,
    drop_database,
    fresh_database,
    golden_queries,
    make_queue,
    manifest_levels,
    serve_http,
    start_worker,
    stop_process,
    wait_until,
)
from reliability.load import UNLIMITED, Sampler

ROLES = list(Role)


def sample_documents(per_classification: int = 2) -> list[Path]:
    """A few corpus documents of each classification (the manifest's first ones), for small databases."""
    import csv

    chosen: dict[str, list[Path]] = {}
    with MANIFEST.open(newline="") as f:
        for row in csv.DictReader(f):
            picked = chosen.setdefault(row["classification"], [])
            if len(picked) < per_classification:
                picked.append(REPO / row["path"])
    return [path for paths in chosen.values() for path in paths]


def ingest_paths(targets: Any, embedder: Any, paths: list[Path]) -> int:
    from ingest.pipeline import Ingestor, ingest_files

    with Ingestor(targets.ingest, embedder, max_bytes=25_000_000) as ingestor:
        results = list(ingest_files(ingestor, paths))
    failed = [r for r in results if r.outcome == "failed"]
    if failed:
        raise AssertionError(f"{failed[0].source_uri}: {failed[0].reason}")
    return len(results)


def stats_ms(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    array = np.array(values) * 1000
    return {
        "count": len(values),
        "p50": round(float(np.percentile(array, 50)), 1),
        "p95": round(float(np.percentile(array, 95)), 1),
        "max": round(float(array.max()), 1),
    }


# --- searching clients for (a) and (b) -------------------------------------------------------------------


@dataclass
class Call:
    client: int
    began: float  # seconds on the scenario's timeline
    ended: float
    outcome: str  # ok | degraded | unavailable | error
    detail: str = ""
    chunks: int = 0

    @property
    def seconds(self) -> float:
        return self.ended - self.began


class Searchers:
    """`clients` MCP sessions (one role each, in turn) searching back to back until stopped, recording each
    call on `timeline`. A chunk above the caller's ceiling is recorded as an error."""

    def __init__(self, server: ServerProcess, clients: int, timeline: Timeline, pause_s: float = 0.05) -> None:
        self.server, self.clients, self.timeline, self.pause_s = server, clients, timeline, pause_s
        self.calls: list[Call] = []
        self.queries = golden_queries()
        self.levels = manifest_levels()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def now(self) -> float:
        return time.monotonic() - self.timeline.started

    def start(self) -> None:
        self._tasks = [asyncio.ensure_future(self._client(n)) for n in range(self.clients)]

    async def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), 60)

    def classify(self, result: Any, role: Role) -> tuple[str, str, int]:
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            return ("unavailable", text, 0) if UNAVAILABLE in text else ("error", f"tool error: {text[:160]}", 0)
        content = result.structured_content or {}
        chunks = content.get("documents", [])
        for chunk in chunks:
            level = self.levels.get(chunk.get("doc_code", ""))
            if level is None or not role.may_read(level):
                return "error", f"leak: {chunk.get('doc_code')} ({level}) to {role.value}", len(chunks)
        if content.get("degraded"):
            return "degraded", str(content.get("degraded_reason")), len(chunks)
        return "ok", "", len(chunks)

    async def _client(self, n: int) -> None:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        role = ROLES[n % len(ROLES)]
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.server.tokens[role]}"}, timeout=60)
        index = n
        try:
            async with Client(streamable_http_client(f"{self.server.url}/mcp", http_client=http)) as session:
                while not self._stop.is_set():
                    query = self.queries[index % len(self.queries)]
                    index += self.clients
                    began = self.now()
                    try:
                        result = await asyncio.wait_for(
                            session.call_tool("search_knowledge_base", {"query": query}), 45
                        )
                        outcome, detail, chunks = self.classify(result, role)
                    except Exception as exc:
                        outcome, detail, chunks = "error", f"{type(exc).__name__}: {str(exc)[:160]}", 0
                    self.calls.append(Call(n, began, self.now(), outcome, detail, chunks))
                    await asyncio.sleep(self.pause_s)
        except Exception as exc:
            self.calls.append(Call(n, self.now(), self.now(), "error", f"session {type(exc).__name__}: {exc}"))
        finally:
            await http.aclose()

    def between(self, start: float, end: float) -> list[Call]:
        """Calls that began at or after `start` and ended by `end`."""
        return [c for c in self.calls if c.began >= start and c.ended <= end]

    async def wait_all_clients(self, since: float, outcome: str, timeout: float) -> float | None:
        """Seconds after `since` by which every client had a call with `outcome` that began after `since`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            firsts = {}
            for call in self.calls:
                if call.began >= since and call.outcome == outcome and call.client not in firsts:
                    firsts[call.client] = call.ended
            if len(firsts) == self.clients:
                return round(max(firsts.values()) - since, 3)
            await asyncio.sleep(0.1)
        return None

    def first(self, since: float, outcome: str) -> float | None:
        ended = [c.ended for c in self.calls if c.began >= since and c.outcome == outcome]
        return round(min(ended) - since, 3) if ended else None


def outcomes(calls: list[Call]) -> dict[str, int]:
    return dict(Counter(c.outcome for c in calls))


def errors_of(calls: list[Call]) -> dict[str, int]:
    return dict(Counter(c.detail for c in calls if c.outcome == "error"))


# --- (a) the database restarted while the server serves --------------------------------------------------


@dataclass
class DatabaseRestartResult:
    clients: int
    outage_s: float
    timeline: dict[str, float]
    before: dict[str, int]
    during: dict[str, int]  # outcomes of the searches asked while the database was down
    served_while_down: int  # of those, answered before its start was even asked for (none can be)
    unavailable_total: int  # "temporarily unavailable" answers over the whole run (in flight at the stop too)
    unavailable_latency_ms: dict[str, float]  # of every "temporarily unavailable" answer in the run
    other_tool_during: dict[str, str]
    after_start: dict[str, int]
    first_ok_after_start_s: float | None
    all_clients_ok_after_start_s: float | None
    errors: dict[str, int]  # anything but ok or the clear unavailable error, over the whole run
    server_pid_unchanged: bool
    server_alive: bool
    kb_server_connections_after: int

    @property
    def outage_answered_clearly(self) -> bool:
        """Searches asked while the database was down got the clear error (or, when the database came back
        while they waited for a connection, an answer), and searches did get the error."""
        return self.unavailable_total > 0 and set(self.during) <= {"unavailable", "ok"} and self.served_while_down == 0

    def summary(self) -> dict[str, Any]:
        return {**asdict(self), "outage_answered_clearly": self.outage_answered_clearly}


def database_restart(
    cluster: Cluster,
    db_url: str,
    folder: Path,
    *,
    clients: int = 4,
    outage_s: float = 5,
    recovery_timeout_s: float = 60,
) -> DatabaseRestartResult:
    """Stop the database under a serving `kb serve`, keep searching for `outage_s`, start it again, and
    measure how fast failures come and how soon every client is served again."""
    with serve_http(db_url, folder, UNLIMITED) as server:
        pid = server.pid
        result = asyncio.run(_database_restart(server, cluster, clients, outage_s, recovery_timeout_s))
        result.server_pid_unchanged = server.pid == pid and server.process.is_running()
        result.server_alive = server.process.poll() is None
        with psycopg.connect(cluster.superuser) as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE usename LIKE 'kb\\_server%'").fetchone()
            result.kb_server_connections_after = int(row[0]) if row else -1
    return result


async def _probe_other_tools(server: ServerProcess) -> dict[str, str]:
    """list_documents and get_document during the outage, from a session of their own."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    seen = {}
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.tokens[Role.ANALYST]}"}, timeout=60)

    async def call(session: Any, tool: str, arguments: dict[str, str]) -> None:
        began = time.monotonic()
        result = await session.call_tool(tool, arguments)
        text = " ".join(getattr(c, "text", "") for c in result.content) if result.is_error else "answered"
        seen[tool] = f"{text} ({time.monotonic() - began:.2f} s)"

    async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as session:
        await asyncio.gather(
            call(session, "list_documents", {}), call(session, "get_document", {"doc_code": "CMP-SOP-004"})
        )
    await http.aclose()
    return seen


async def _database_restart(
    server: ServerProcess, cluster: Cluster, clients: int, outage_s: float, recovery_timeout_s: float
) -> DatabaseRestartResult:
    timeline = Timeline()
    searchers = Searchers(server, clients, timeline)
    searchers.start()
    await asyncio.sleep(3)
    stop_requested = timeline.mark("stop requested")
    await asyncio.to_thread(cluster.stop)
    down = timeline.mark("database stopped")
    probe = asyncio.ensure_future(_probe_other_tools(server))
    await asyncio.sleep(outage_s)
    other = await probe
    start_requested = timeline.mark("start requested")
    await asyncio.to_thread(cluster.start_again)
    up = timeline.mark("database ready")
    recovered = await searchers.wait_all_clients(up, "ok", recovery_timeout_s)
    await asyncio.sleep(2)
    await searchers.stop()
    timeline.mark("end")
    during = [c for c in searchers.calls if down <= c.began < start_requested]
    return DatabaseRestartResult(
        clients=clients,
        outage_s=outage_s,
        timeline=timeline.marks,
        before=outcomes(searchers.between(0, stop_requested)),
        during=outcomes(during),
        served_while_down=sum(1 for c in during if c.outcome == "ok" and c.ended < start_requested),
        unavailable_total=sum(1 for c in searchers.calls if c.outcome == "unavailable"),
        unavailable_latency_ms=stats_ms([c.seconds for c in searchers.calls if c.outcome == "unavailable"]),
        other_tool_during=other,
        after_start=outcomes([c for c in searchers.calls if c.began >= up]),
        first_ok_after_start_s=searchers.first(up, "ok"),
        all_clients_ok_after_start_s=recovered,
        errors=errors_of(searchers.calls),
        server_pid_unchanged=False,
        server_alive=False,
        kb_server_connections_after=-1,
    )


# --- (b) the embedding endpoint down ---------------------------------------------------------------------


@dataclass
class EmbeddingOutageResult:
    clients: int
    outage_s: float
    timeline: dict[str, float]
    before: dict[str, int]
    during: dict[str, int]
    degraded_reasons: dict[str, int]
    degraded_latency_ms: dict[str, float]
    degraded_with_results: int  # degraded answers that still carried chunks (from full text)
    after_up: dict[str, int]
    first_ok_after_up_s: float | None
    all_clients_ok_after_up_s: float | None
    errors: dict[str, int]
    threads: dict[str, int]
    server_pid_unchanged: bool

    @property
    def during_all_degraded(self) -> bool:
        return bool(self.during) and set(self.during) == {"degraded"}

    def summary(self) -> dict[str, Any]:
        return {**asdict(self), "during_all_degraded": self.during_all_degraded}


def openai_database(superuser: str, name: str, endpoint: EmbeddingsEndpoint, paths: list[Path]) -> Any:
    """A database migrated for text-embedding-3-large at 1,024 dimensions, with `paths` ingested through the
    OpenAI embedder pointed at the local endpoint."""
    targets = fresh_database(superuser, name, OPENAI_SPACE)
    ingest_paths(targets, endpoint.embedder(), paths)
    return targets


def embedding_outage(
    superuser: str,
    folder: Path,
    *,
    clients: int = 4,
    outage_s: float = 8,
    recovery_timeout_s: float = 60,
    database: str = "reliability_openai",
) -> EmbeddingOutageResult:
    endpoint = EmbeddingsEndpoint().up()
    try:
        targets = openai_database(superuser, database, endpoint, sample_documents())
        with serve_http(database_url(targets.owner), folder, {**UNLIMITED, **endpoint.env()}) as server:
            pid = server.pid
            result = asyncio.run(_embedding_outage(server, endpoint, clients, outage_s, recovery_timeout_s))
            result.server_pid_unchanged = server.pid == pid and server.process.poll() is None
        drop_database(superuser, database)
        return result
    finally:
        endpoint.down()


async def _embedding_outage(
    server: ServerProcess, endpoint: EmbeddingsEndpoint, clients: int, outage_s: float, recovery_timeout_s: float
) -> EmbeddingOutageResult:
    timeline = Timeline()
    sampler = Sampler(server, 0.25)
    sampler.started = timeline.started
    searchers = Searchers(server, clients, timeline)
    with sampler:
        searchers.start()
        await asyncio.sleep(3)
        down_requested = timeline.mark("endpoint stop requested")
        await asyncio.to_thread(endpoint.down)
        down = timeline.mark("endpoint down")
        await asyncio.sleep(outage_s)
        up_requested = timeline.mark("endpoint start requested")
        await asyncio.to_thread(endpoint.up)
        up = timeline.mark("endpoint up")
        recovered = await searchers.wait_all_clients(up, "ok", recovery_timeout_s)
        await asyncio.sleep(2)
        await searchers.stop()
        timeline.mark("end")
    during = searchers.between(down, up_requested)
    degraded = [c for c in during if c.outcome == "degraded"]

    def peak(start: float, end: float) -> int:
        return max((s.threads for s in sampler.samples if start <= s.at_s <= end), default=-1)

    return EmbeddingOutageResult(
        clients=clients,
        outage_s=outage_s,
        timeline=timeline.marks,
        before=outcomes(searchers.between(0, down_requested)),
        during=outcomes(during),
        degraded_reasons=dict(Counter(c.detail for c in degraded)),
        degraded_latency_ms=stats_ms([c.seconds for c in degraded]),
        degraded_with_results=sum(1 for c in degraded if c.chunks),
        after_up=outcomes([c for c in searchers.calls if c.began >= up]),
        first_ok_after_up_s=searchers.first(up, "ok"),
        all_clients_ok_after_up_s=recovered,
        errors=errors_of(searchers.calls),
        threads={
            "before_outage_peak": peak(0, down_requested),
            "during_outage_peak": peak(down, up_requested),
            "after_up_peak": peak(up, timeline.marks["end"]),
            "at_end": sampler.samples[-1].threads if sampler.samples else -1,
        },
        server_pid_unchanged=False,
    )


# --- the ingestion rig for (c) and (d) -------------------------------------------------------------------


@dataclass
class Rig:
    """moto's server as a process, the proxy the workers use in front of it, the local embeddings endpoint,
    and the PostgreSQL that databases are created in."""

    superuser: str
    folder: Path
    moto: MotoProcess
    proxy: AwsProxy
    endpoint: EmbeddingsEndpoint
    names: Iterator[int] = field(default_factory=lambda: iter(range(1_000_000)))

    def name(self, prefix: str) -> str:
        return f"{prefix}_{os.getpid()}_{next(self.names)}"

    def database(self, name: str) -> Any:
        return fresh_database(self.superuser, name, OPENAI_SPACE)

    def queue(self, name: str, visibility_timeout_s: int = 3, max_receive_count: int = 3) -> Queue:
        return make_queue(
            self.moto.endpoint_url,
            name.replace("_", "-"),
            visibility_timeout_s=visibility_timeout_s,
            max_receive_count=max_receive_count,
        )

    def worker(self, queue: Queue, targets: Any, name: str) -> WorkerProcess:
        return start_worker(
            queue,
            endpoint_url=self.proxy.url,
            db_url=database_url(targets.owner),
            embeddings=self.endpoint,
            folder=self.folder,
            name=name,
        )

    def clean_ingest(self, data: bytes, key: str) -> list[tuple[Any, ...]]:
        """The chunks a clean, uninterrupted ingest of `data` stores."""
        from ingest.pipeline import Ingestor

        name = self.name("rel_reference")
        targets = self.database(name)
        try:
            with Ingestor(targets.ingest, self.endpoint.embedder(), max_bytes=25_000_000) as ingestor:
                result = ingestor.ingest(data, name=key, source_uri=f"s3://reference/{key}")
            assert result.outcome == "ingested", result.reason
            return stored_chunks(targets.owner, result.doc_code or "")
        finally:
            drop_database(self.superuser, name)


@contextlib.contextmanager
def ingest_rig(superuser: str, folder: Path) -> Iterator[Rig]:
    folder.mkdir(parents=True, exist_ok=True)
    moto = MotoProcess(folder / "moto.log").start()
    proxy = AwsProxy(moto.endpoint_url).up()
    endpoint = EmbeddingsEndpoint().up()
    try:
        yield Rig(superuser, folder, moto, proxy, endpoint)
    finally:
        endpoint.down()
        proxy.down()
        moto.stop()


def stored_chunks(owner: str, doc_code: str) -> list[tuple[Any, ...]]:
    """(ordinal, section path, content hash, embedding hash) of a document's stored chunks, in order."""
    with psycopg.connect(owner) as conn:
        rows = conn.execute(
            "SELECT c.ordinal, c.section_path, md5(c.content), c.embedding_sha256, md5(c.embedding::text) "
            "FROM kb.chunks c JOIN kb.documents d USING (doc_id) WHERE d.doc_code = %s ORDER BY c.ordinal",
            (doc_code,),
        ).fetchall()
    return [tuple(r) for r in rows]


def stored_documents(owner: str, doc_code: str) -> int:
    with psycopg.connect(owner) as conn:
        row = conn.execute("SELECT count(*) FROM kb.documents WHERE doc_code = %s", (doc_code,)).fetchone()
    return int(row[0]) if row else 0


def chunk_rows(owner: str) -> int:
    with psycopg.connect(owner) as conn:
        row = conn.execute("SELECT count(*) FROM kb.chunks").fetchone()
    return int(row[0]) if row else 0


def logged(owner: str, doc_code: str) -> dict[str, int]:
    with psycopg.connect(owner) as conn:
        rows = conn.execute(
            "SELECT outcome, count(*) FROM kb.ingest_log WHERE doc_code = %s GROUP BY outcome", (doc_code,)
        ).fetchall()
    return {outcome: int(n) for outcome, n in rows}


def markdown(doc_code: str, sections: int, *, words: int = 40) -> bytes:
    from tests.support.documents import markdown_document

    body = {
        f"{n}. Rule {n}": " ".join(
            f"Rule {n}.{k}: reconciliation breaks above ${n},{k:03d} are escalated to the Treasury Operations "
            "Lead within two business hours."
            for k in range(max(1, words // 16))
        )
        for n in range(1, sections + 1)
    }
    return markdown_document(doc_code, sections=body, title=f"Reliability Procedure {doc_code}").encode()


# --- (d) the worker killed at each stage -----------------------------------------------------------------

STAGES = ("parse", "embed", "transaction", "after_commit")
STAGE_DOCUMENTS = {
    # ~770 KB: parsing, chunking and scanning take about 2 s; a small document would be past them before a kill.
    "parse": lambda: markdown("CMP-SOP-971", sections=40, words=2560),
    "embed": lambda: markdown("CMP-SOP-972", sections=8),
    "transaction": lambda: markdown("CMP-SOP-973", sections=8),
    "after_commit": lambda: markdown("CMP-SOP-974", sections=8),
}
TRANSACTION_SLEEP_AFTER_ORDINAL = 3  # the trigger sleeps once chunk rows 0..3 are written


@dataclass
class KillResult:
    stage: str
    doc_code: str
    expected_chunks: int
    timeline: dict[str, float]
    at_kill: dict[str, Any]  # what was true when the worker was killed
    after_kill: dict[str, Any]  # what the database held right after (before any retry)
    final: dict[str, Any]  # after a fresh worker drained the queue
    receive_counts: list[int]  # ApproximateReceiveCount of each delivery of the message, in order
    deletes_ok: int
    fresh_worker_exit: int | None

    @property
    def passed(self) -> bool:
        return not self.problems()

    def problems(self) -> list[str]:
        problems = []
        if self.stage == "after_commit":
            if self.after_kill["chunks"] != self.expected_chunks or self.after_kill["documents"] != 1:
                problems.append(f"after COMMIT the document was not complete: {self.after_kill}")
        elif self.after_kill["documents"] or self.after_kill["chunks"]:
            problems.append(f"a killed upsert left rows behind: {self.after_kill}")
        if self.final["documents"] != 1:
            problems.append(f"{self.final['documents']} documents stored instead of exactly one")
        if not self.final["chunks_match_clean_ingest"]:
            problems.append(f"the chunks differ from a clean ingest ({self.final['chunks']} vs {self.expected_chunks})")
        if self.final["logged"].get("ingested") != 1:
            problems.append(f"ingest log: {self.final['logged']}")
        if len(self.receive_counts) < 2 or max(self.receive_counts) < 2:
            problems.append(f"the message was not delivered again: receive counts {self.receive_counts}")
        if self.deletes_ok < 1 or self.final["queue"] != [0, 0] or self.final["dlq"] != 0:
            problems.append(f"the queue was not drained: {self.final} ({self.deletes_ok} deletes)")
        if self.fresh_worker_exit != 0:
            problems.append(f"the fresh worker exited with {self.fresh_worker_exit}")
        return problems

    def summary(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed, "problems": self.problems()}


TRIGGER = """
CREATE SEQUENCE kb.reliability_rows_written;
CREATE FUNCTION kb.reliability_sleep_in_upsert() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    PERFORM nextval('kb.reliability_rows_written');
    IF NEW.ordinal = {ordinal} THEN
        PERFORM pg_sleep(300);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER reliability_sleep_in_upsert AFTER INSERT ON kb.chunks
    FOR EACH ROW EXECUTE FUNCTION kb.reliability_sleep_in_upsert();
"""
UNTRIGGER = """
DROP TRIGGER reliability_sleep_in_upsert ON kb.chunks;
DROP FUNCTION kb.reliability_sleep_in_upsert();
DROP SEQUENCE kb.reliability_rows_written;
"""


def _rows_written(owner: str) -> int:
    with psycopg.connect(owner) as conn:
        row = conn.execute("SELECT last_value, is_called FROM kb.reliability_rows_written").fetchone()
    return int(row[0]) if row and row[1] else 0


def _sleeping_writer(owner: str) -> int | None:
    """The pid of a kb_ingest backend sleeping inside the trigger, if any."""
    with psycopg.connect(owner) as conn:
        row = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE usename = 'kb_ingest' AND datname = current_database() "
            "AND wait_event = 'PgSleep'"
        ).fetchone()
    return int(row[0]) if row else None


def _backend_gone(owner: str, pid: int) -> bool:
    with psycopg.connect(owner) as conn:
        return conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is None


def _cpu_busy(process: Any, interval: float = 0.3) -> float:
    return float(process.cpu_percent(interval=interval))


def worker_kill(rig: Rig, stage: str) -> KillResult:
    """Kill `kb worker` at `stage` of one document's upsert, then drain the queue with a fresh worker."""
    assert stage in STAGES
    data = STAGE_DOCUMENTS[stage]()
    doc_code = re.search(rb"doc_code: (\S+)", data).group(1).decode()  # type: ignore[union-attr]
    key = f"kill-{stage.replace('_', '-')}/{doc_code}.md"
    expected = rig.clean_ingest(data, key)
    name = rig.name(f"rel_kill_{stage}")
    targets = rig.database(name)
    owner = targets.owner
    queue = rig.queue(name, visibility_timeout_s=5 if stage == "parse" else 3)
    timeline = Timeline()
    at_kill: dict[str, Any] = {}
    requests_before = len(rig.endpoint.state.requests)

    if stage == "embed":
        rig.endpoint.state.gate.clear()  # the endpoint holds its answers
    elif stage == "transaction":
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute(TRIGGER.replace("{ordinal}", str(TRANSACTION_SLEEP_AFTER_ORDINAL)))
            # So that PostgreSQL notices the killed client even while the trigger sleeps (without the sleep
            # it would be waiting for the client's next message and notice at once).
            conn.execute(f'ALTER DATABASE "{name}" SET client_connection_check_interval = 200')
    elif stage == "after_commit":
        rig.proxy.hold()

    killed = rig.worker(queue, targets, f"{name}-killed")
    try:
        queue.upload(key, data)
        timeline.mark("uploaded")
        if stage == "parse":
            wait_until(
                lambda: any(path.endswith(key) for _, path in rig.proxy.s3_gets), 90, "the worker to download it"
            )
            timeline.mark("downloaded")
            at_kill["cpu_percent"] = _cpu_busy(killed.process)
            at_kill["embedding_requests"] = len(rig.endpoint.state.requests) - requests_before
        elif stage == "embed":
            wait_until(lambda: len(rig.endpoint.state.requests) > requests_before, 90, "an embeddings request")
            at_kill["embedding_requests"] = len(rig.endpoint.state.requests) - requests_before
        elif stage == "transaction":
            sleeper = wait_until(lambda: _sleeping_writer(owner), 90, "the upsert to sleep in its transaction")
            at_kill["chunk_rows_written_uncommitted"] = _rows_written(owner)
            at_kill["chunk_rows_visible"] = chunk_rows(owner)
        elif stage == "after_commit":
            wait_until(rig.proxy.held.is_set, 90, "the worker's SQS delete")
            at_kill["documents"] = stored_documents(owner, doc_code)
            at_kill["chunks"] = len(stored_chunks(owner, doc_code))
        at_kill["worker_alive"] = killed.alive
        at_kill["deliveries"] = sum(1 for r in rig.proxy.receives if doc_code in r.body)
        timeline.mark("stage reached")
        killed.process.kill()
        killed.process.wait(timeout=30)
        timeline.mark("killed (SIGKILL)")
        if stage == "parse":
            time.sleep(0.5)
            at_kill["embedding_requests_after_kill"] = len(rig.endpoint.state.requests) - requests_before
        if stage == "transaction":
            wait_until(lambda: _backend_gone(owner, sleeper), 30, "PostgreSQL to end the killed worker's backend")
            timeline.mark("its backend ended (transaction rolled back)")
        after_kill = {
            "documents": stored_documents(owner, doc_code),
            "chunks": len(stored_chunks(owner, doc_code)),
            "all_chunk_rows": chunk_rows(owner),
            "logged": logged(owner, doc_code),
        }
    finally:
        stop_process(killed.process)
        if stage == "embed":
            rig.endpoint.state.gate.set()
        elif stage == "transaction":
            with psycopg.connect(owner, autocommit=True) as conn:
                conn.execute("SET lock_timeout = '30s'")
                conn.execute(UNTRIGGER)
        elif stage == "after_commit":
            rig.proxy.release_held()

    def message_ids() -> set[str]:
        return {r.message_id for r in rig.proxy.receives if doc_code in r.body}

    fresh = rig.worker(queue, targets, f"{name}-fresh")
    timeline.mark("fresh worker started")
    try:
        wait_until(
            lambda: (
                queue.depth() == (0, 0)
                and stored_documents(owner, doc_code) == 1
                and any(d.ok for m in message_ids() for d in rig.proxy.deleted(m))
            ),
            180,
            "a fresh worker to drain the queue",
            poll=0.25,
        )
        timeline.mark("queue drained")
    finally:
        exit_code = stop_process(fresh.process)
    chunks = stored_chunks(owner, doc_code)
    final = {
        "documents": stored_documents(owner, doc_code),
        "chunks": len(chunks),
        "chunks_match_clean_ingest": chunks == expected,
        "logged": logged(owner, doc_code),
        "queue": list(queue.depth()),
        "dlq": queue.dlq_depth(),
    }
    receives = [r for m in message_ids() for r in rig.proxy.received(m)]
    result = KillResult(
        stage=stage,
        doc_code=doc_code,
        expected_chunks=len(expected),
        timeline=timeline.marks,
        at_kill=at_kill,
        after_kill=after_kill,
        final=final,
        receive_counts=[r.receive_count for r in sorted(receives, key=lambda r: r.at)],
        deletes_ok=sum(1 for m in message_ids() for d in rig.proxy.deleted(m) if d.ok),
        fresh_worker_exit=exit_code,
    )
    drop_database(rig.superuser, name)
    return result


# --- (c) the local AWS down while the worker runs --------------------------------------------------------


@dataclass
class AwsOutageResult:
    mode: str  # how the batch in hand's delete was kept from getting through: 'down' or 'deny'
    idle_outage_s: float
    batch_outage_s: float
    timeline: dict[str, float]
    backoff_lines_during_idle_outage: int
    worker_alive_after_idle_outage: bool
    resumed_after_s: float | None  # from the endpoint coming back to the first document uploaded meanwhile
    all_ingested_after_s: float | None
    worker_alive_after_batch_outage: bool
    delete_failure_lines: int
    batch_in_hand: list[str]  # the documents committed whose delete was kept out
    worker_restarted: bool  # a new worker had to be started to drain the queue
    documents: dict[str, int]  # doc code -> rows stored
    ingested_log: dict[str, int]  # doc code -> 'ingested' rows in the ingest log
    queue: list[int]
    dlq: int
    worker_exit: int | None
    worker_tail: str

    @property
    def nothing_lost_or_doubled(self) -> bool:
        return (
            bool(self.documents)
            and set(self.documents.values()) == {1}
            and set(self.ingested_log.values()) == {1}
            and self.queue == [0, 0]
            and self.dlq == 0
        )

    def summary(self) -> dict[str, Any]:
        return {**asdict(self), "nothing_lost_or_doubled": self.nothing_lost_or_doubled}


def aws_outage(
    rig: Rig, *, idle_outage_s: float = 8, batch_outage_s: float = 16, mode: str = "deny"
) -> AwsOutageResult:
    """The worker polls; the endpoint goes down (port closed) for `idle_outage_s` while three documents are
    uploaded; it comes back. Then two more documents: the worker ingests them and its SQS delete is held; the
    endpoint then keeps that delete from getting through for `batch_outage_s` (mode 'down': the port closed;
    'deny': the delete answered AccessDenied, deterministic and quicker); then it is back."""
    assert mode in ("down", "deny")
    name = rig.name("rel_aws")
    targets = rig.database(name)
    owner = targets.owner
    # The scenario squeezes time: a 3 s visibility timeout (360 s in production) makes a 16 s outage of deletes
    # five timeouts long, and the worker's randomised retries decide how often the batch in hand is received
    # again meanwhile (at most once a timeout). Three receives, the production count, then dead-lettered a
    # stored document now and then; 12 cannot be reached within the outage, so only a loss or a double counts.
    queue = rig.queue(name, visibility_timeout_s=3, max_receive_count=12)
    proxy = rig.proxy
    timeline = Timeline()
    first = [f"CMP-SOP-98{n}" for n in range(3)]
    second = [f"CMP-SOP-98{n}" for n in range(3, 5)]
    worker = rig.worker(queue, targets, f"{name}-worker")
    restarted = False
    in_hand: list[str] = []
    try:
        receives = proxy.calls["ReceiveMessage"]
        wait_until(lambda: proxy.calls["ReceiveMessage"] > receives, 60, "the worker to poll")
        timeline.mark("worker polling")
        lines_before = worker.text().count("the queue is unreachable")
        proxy.down()
        down = timeline.mark("endpoint down")
        for code in first:
            queue.upload(f"aws/{code}.md", markdown(code, sections=3))
        time.sleep(idle_outage_s)
        backoff_lines = worker.text().count("the queue is unreachable") - lines_before
        alive_idle = worker.alive
        proxy.up()
        up = timeline.mark("endpoint up")
        wait_until(lambda: any(stored_documents(owner, c) for c in first), 120, "the first document", poll=0.2)
        resumed = timeline.mark("first document ingested") - up
        wait_until(lambda: all(stored_documents(owner, c) for c in first), 120, "all three documents", poll=0.2)
        all_in = timeline.mark("all three ingested") - up
        del down
        # Stored is not yet deleted: hold only once the first batch's deletes are through, or the hold below
        # catches a first-batch delete and the batch "in hand" is one the worker has not even received.
        wait_until(lambda: queue.depth() == (0, 0), 60, "the first batch's deletes", poll=0.2)

        proxy.hold()
        for code in second:
            queue.upload(f"aws/{code}.md", markdown(code, sections=3))
        wait_until(proxy.held.is_set, 60, "the worker's delete of the batch in hand")
        in_hand = [c for c in second if stored_documents(owner, c)]
        assert in_hand, "the worker deletes a batch it has not stored"
        timeline.mark("a batch committed, its delete held")
        if mode == "down":
            proxy.down()  # drops the held delete too
        else:
            proxy.deny_deletes = True
            proxy.release_held()
        timeline.mark(f"delete kept out ({mode})")
        time.sleep(batch_outage_s)
        alive_batch = worker.alive
        if mode == "down":
            proxy.up()
        proxy.hold_deletes = False
        proxy.deny_deletes = False
        timeline.mark("endpoint back")
        if not worker.alive:
            restarted = True
            worker = rig.worker(queue, targets, f"{name}-worker-2")
        wait_until(lambda: queue.depth() == (0, 0), 120, "the queue to drain", poll=0.25)
        timeline.mark("queue drained")
    finally:
        exit_code = stop_process(worker.process)
        proxy.hold_deletes = proxy.deny_deletes = False
        if not proxy.is_up:
            proxy.up()
    text = (rig.folder / f"{name}-worker.log").read_text(errors="replace")
    codes = first + second
    result = AwsOutageResult(
        mode=mode,
        idle_outage_s=idle_outage_s,
        batch_outage_s=batch_outage_s,
        timeline=timeline.marks,
        backoff_lines_during_idle_outage=backoff_lines,
        worker_alive_after_idle_outage=alive_idle,
        resumed_after_s=round(resumed, 3),
        all_ingested_after_s=round(all_in, 3),
        worker_alive_after_batch_outage=alive_batch,
        delete_failure_lines=text.count("could not delete"),
        batch_in_hand=in_hand,
        worker_restarted=restarted,
        documents={c: stored_documents(owner, c) for c in codes},
        ingested_log={c: logged(owner, c).get("ingested", 0) for c in codes},
        queue=list(queue.depth()),
        dlq=queue.dlq_depth(),
        worker_exit=exit_code,
        worker_tail="\n".join(text.strip().splitlines()[-6:]),
    )
    drop_database(rig.superuser, name)
    return result
