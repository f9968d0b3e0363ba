"""Load and soak: concurrent MCP client sessions against `kb serve --transport http` running as its own process.

Each client holds one MCP session over streamable HTTP with the bearer token of one of the four roles (client
n has role n mod 4) and asks questions from evals/golden.jsonl. What is recorded:

- errors by kind: anything but an answer is an error, except a designed 429 (counted apart, then retried
  after its Retry-After);
- leaks: every returned chunk's doc code is checked against the caller's ceiling with corpus/MANIFEST.csv's
  classification column, not with anything the server says (zero are tolerated);
- latency of every answered search (p50, p95, p99, max), throughput, answers that were `degraded`;
- the server process's RSS, threads and open file descriptors: before, sampled during, and after.

Bounded: a fixed number of searches (or a fixed duration for the soak) and a hard deadline after which
every client is cancelled; loopback only.

    python -m reliability.load --clients 50 --searches 10000     # against .kb-reliability/'s corpus database
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kb_core.roles import Classification, Role
from reliability.balancer import RoundRobin
from reliability.harness import REPO, ServerProcess, golden_queries, manifest_levels, serve_http

STATE = REPO / ".kb-reliability"
ROLES = list(Role)
# High enough that the load itself is never rate limited (the settings' maximums).
UNLIMITED = {"KB_RATE_LIMIT_PER_MINUTE": "100000", "KB_RATE_LIMIT_BURST": "10000"}
BALANCER_HOST = "kb.balancer.test"  # the name clients use for the replicas behind the balancer
REPLICATED = {"KB_HTTP_STATELESS": "true", "KB_HTTP_ALLOWED_HOSTS": f"{BALANCER_HOST},127.0.0.1:*"}


@dataclass
class Sample:
    at_s: float
    rss_mb: float
    threads: int
    fds: int


class Sampler:
    """Samples the server process every `every_s` seconds in a thread of its own."""

    def __init__(self, server: ServerProcess, every_s: float) -> None:
        self.server, self.every_s = server, every_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.started = time.monotonic()

    def now(self) -> Sample:
        rss, threads, fds = self.server.sample()
        return Sample(round(time.monotonic() - self.started, 2), round(rss, 1), threads, fds)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.now())
            self._stop.wait(self.every_s)

    def __enter__(self) -> Sampler:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@dataclass
class Leak:
    role: str
    doc_code: str
    classification: str
    query: str


@dataclass
class LoadResult:
    clients: int
    planned: int | None  # searches asked for (None: as many as fit in the duration)
    completed: int = 0  # searches answered (with or without a tool error)
    ok: int = 0  # answered with results and no error
    degraded: int = 0  # of which answered from full text alone
    rate_limited: int = 0  # designed 429s (retried)
    errors: Counter[str] = field(default_factory=Counter)
    leaks: list[Leak] = field(default_factory=list)
    chunks_checked: int = 0
    per_role: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0
    deadline_hit: bool = False
    before: Sample | None = None
    samples: list[Sample] = field(default_factory=list)
    after: Sample | None = None
    replicas: int = 1

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def throughput(self) -> float:
        return self.completed / self.seconds if self.seconds else 0.0

    def percentiles(self) -> dict[str, float]:
        if not self.latencies_ms:
            return {}
        values = np.array(self.latencies_ms)
        return {
            "p50": round(float(np.percentile(values, 50)), 1),
            "p95": round(float(np.percentile(values, 95)), 1),
            "p99": round(float(np.percentile(values, 99)), 1),
            "max": round(float(values.max()), 1),
            "mean": round(float(values.mean()), 1),
        }

    def summary(self) -> dict[str, Any]:
        rss = [s.rss_mb for s in self.samples]
        return {
            "clients": self.clients,
            "replicas": self.replicas,
            "planned": self.planned,
            "completed": self.completed,
            "ok": self.ok,
            "degraded": self.degraded,
            "rate_limited_429": self.rate_limited,
            "errors": dict(self.errors),
            "error_count": self.error_count,
            "leaks": [asdict(leak) for leak in self.leaks[:20]],
            "leak_count": len(self.leaks),
            "chunks_checked": self.chunks_checked,
            "per_role": dict(self.per_role),
            "latency_ms": self.percentiles(),
            "seconds": round(self.seconds, 1),
            "throughput_per_s": round(self.throughput, 1),
            "deadline_hit": self.deadline_hit,
            "rss_mb": {
                "before": self.before.rss_mb if self.before else None,
                "peak_during": max(rss) if rss else None,
                "after": self.after.rss_mb if self.after else None,
                "samples": len(rss),
            },
            "threads": {
                "before": self.before.threads if self.before else None,
                "peak_during": max((s.threads for s in self.samples), default=None),
                "after": self.after.threads if self.after else None,
            },
            "open_fds": {
                "before": self.before.fds if self.before else None,
                "peak_during": max((s.fds for s in self.samples), default=None),
                "after": self.after.fds if self.after else None,
            },
        }


def check_answer(result: Any, role: Role, query: str, levels: dict[str, Classification], outcome: LoadResult) -> None:
    """Count an answered search: a tool error, or results whose every chunk is checked against the ceiling."""
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        outcome.errors[f"tool error: {text[:120]}"] += 1
        return
    content = result.structured_content
    if not isinstance(content, dict) or not isinstance(content.get("documents"), list):
        outcome.errors["an answer without structured documents"] += 1
        return
    for chunk in content["documents"]:
        outcome.chunks_checked += 1
        level = levels.get(chunk.get("doc_code", ""))
        if level is None:
            outcome.errors["a chunk whose doc code is not in corpus/MANIFEST.csv"] += 1
        elif not role.may_read(level):
            outcome.leaks.append(Leak(role.value, chunk["doc_code"], level.value, query))
    outcome.ok += 1
    if content.get("degraded"):
        outcome.degraded += 1


async def run_clients(
    url: str,
    tokens: dict[Role, str],
    *,
    clients: int,
    queries: list[str],
    levels: dict[str, Classification],
    searches: int | None = None,
    duration_s: float | None = None,
    rate_per_s: float | None = None,
    deadline_s: float,
    call_timeout_s: float = 60,
    replica_urls: list[str] | None = None,
) -> LoadResult:
    """`clients` MCP sessions issuing `searches` searches in total (or searching for `duration_s`, paced
    at `rate_per_s` overall), stopped at `deadline_s` whatever happens. With `replica_urls`, each client's
    requests go to the replicas in turn (reliability.balancer)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    assert searches is not None or duration_s is not None
    outcome = LoadResult(clients=clients, planned=searches)
    counter = itertools.count()
    started = time.monotonic()
    ends = started + duration_s if duration_s is not None else None
    failed = 0  # searches that ended without an answer

    def next_search() -> int | None:
        index = next(counter)
        if searches is not None and index >= searches:
            return None
        if ends is not None and time.monotonic() >= ends:
            return None
        return index

    async def client(n: int) -> None:
        nonlocal failed
        role = ROLES[n % len(ROLES)]
        seen: list[Any] = []

        async def on_response(response: Any) -> None:
            seen.append(response)

        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {tokens[role]}"},
            timeout=call_timeout_s,
            event_hooks={"response": [on_response]},
            **({"transport": RoundRobin(replica_urls, host=BALANCER_HOST)} if replica_urls else {}),
        )
        interval = clients / rate_per_s if rate_per_s else 0.0
        k = 0
        try:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as session:
                while (index := next_search()) is not None:
                    if interval:
                        due = started + (n / clients + k) * interval
                        k += 1
                        await asyncio.sleep(max(0.0, due - time.monotonic()))
                    query = queries[index % len(queries)]
                    for _attempt in range(10):
                        seen.clear()
                        began = time.perf_counter()
                        try:
                            result = await asyncio.wait_for(
                                session.call_tool("search_knowledge_base", {"query": query}), call_timeout_s
                            )
                        except TimeoutError:
                            outcome.errors[f"no answer within {call_timeout_s:g} s"] += 1
                            failed += 1
                            break
                        except Exception as exc:
                            limited = [r for r in seen if r.status_code == 429]
                            if limited:
                                outcome.rate_limited += 1
                                await asyncio.sleep(float(limited[-1].headers.get("retry-after", "1")))
                                continue
                            statuses = ",".join(str(r.status_code) for r in seen) or "none"
                            outcome.errors[f"{type(exc).__name__} (HTTP {statuses}): {str(exc)[:100]}"] += 1
                            failed += 1
                            break
                        outcome.latencies_ms.append((time.perf_counter() - began) * 1000)
                        outcome.completed += 1
                        outcome.per_role[role.value] += 1
                        check_answer(result, role, query, levels, outcome)
                        break
                    else:
                        outcome.errors["still rate limited after 10 tries"] += 1
                        failed += 1
        except Exception as exc:  # the session itself failed (opening or closing it, or its transport)
            leaf = _innermost(exc)
            outcome.errors[f"session {type(leaf).__name__}: {str(leaf)[:100]}"] += 1
        finally:
            await http.aclose()

    tasks = [asyncio.ensure_future(client(n)) for n in range(clients)]
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), deadline_s)
    except TimeoutError:
        outcome.deadline_hit = True
        outcome.errors[f"the hard deadline of {deadline_s:g} s was reached"] += 1
    outcome.seconds = time.monotonic() - started
    if searches is not None and outcome.completed + failed < searches:
        outcome.errors["searches never answered"] += searches - outcome.completed - failed
    return outcome


def _innermost(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (the client's task groups wrap what really went wrong)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def run_load(
    db_url: str,
    folder: Path,
    *,
    clients: int,
    searches: int | None = None,
    duration_s: float | None = None,
    rate_per_s: float | None = None,
    deadline_s: float,
    sample_every_s: float = 0.5,
    settings: dict[str, str] | None = None,
    replicas: int = 1,
) -> LoadResult:
    """Start the server, measure it idle, run the clients while sampling it, measure it again after.

    With `replicas` > 1: that many stateless servers over the one database (KB_HTTP_STATELESS=true), each
    client's requests alternating between them; the first replica is the one sampled."""
    queries, levels = golden_queries(), manifest_levels()
    if replicas > 1:
        settings = {**(settings or {}), **REPLICATED}
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(serve_http(db_url, folder, {**UNLIMITED, **(settings or {})}, name=f"server-{n}"))
            for n in range(replicas)
        ]
        server = servers[0]
        time.sleep(1.0)
        sampler = Sampler(server, sample_every_s)
        before = sampler.now()
        with sampler:
            outcome = asyncio.run(
                run_clients(
                    server.url,
                    server.tokens,
                    clients=clients,
                    queries=queries,
                    levels=levels,
                    searches=searches,
                    duration_s=duration_s,
                    rate_per_s=rate_per_s,
                    deadline_s=deadline_s,
                    replica_urls=[s.url for s in servers] if replicas > 1 else None,
                )
            )
        outcome.replicas = replicas
        time.sleep(2.0)
        outcome.before, outcome.samples, outcome.after = before, sampler.samples, sampler.now()
    return outcome


@dataclass
class SoakResult:
    load: LoadResult
    warmup_s: float
    slope_mb_per_min: float
    slope_stderr: float
    r2: float
    fitted_samples: int
    grows: bool
    threads_slope_per_min: float
    fds_slope_per_min: float

    def summary(self) -> dict[str, Any]:
        fitted = [s for s in self.load.samples if s.at_s >= self.warmup_s]
        per_minute = self.load.throughput * 60
        return {
            **self.load.summary(),
            "warmup_s": self.warmup_s,
            "fitted_samples": self.fitted_samples,
            "rss_after_warmup_mb": {
                "first": fitted[0].rss_mb if fitted else None,
                "last": fitted[-1].rss_mb if fitted else None,
                "min": min((s.rss_mb for s in fitted), default=None),
                "max": max((s.rss_mb for s in fitted), default=None),
            },
            "slope_mb_per_min": round(self.slope_mb_per_min, 4),
            "slope_stderr": round(self.slope_stderr, 4),
            "kb_per_search": round(self.slope_mb_per_min * 1024 / per_minute, 4) if per_minute else None,
            "r2": round(self.r2, 3),
            "grows": self.grows,
            "threads_slope_per_min": round(self.threads_slope_per_min, 4),
            "fds_slope_per_min": round(self.fds_slope_per_min, 4),
        }


GROWTH_MB_PER_MIN = 0.25  # 15 MB an hour; a leak of 1 KB per search at 5 searches/s is 0.29 MB/min


def memory_grows(slope_mb_per_min: float, stderr: float) -> bool:
    """Growth: a slope over GROWTH_MB_PER_MIN that is also more than three standard errors from zero."""
    return slope_mb_per_min > GROWTH_MB_PER_MIN and slope_mb_per_min > 3 * stderr


def fit(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Least-squares slope, its standard error and R² of (minutes, value) points."""
    x = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    slope, intercept = np.polyfit(x, y, 1)
    residuals = y - (slope * x + intercept)
    stderr = float(np.sqrt(residuals.var(ddof=2) / ((x - x.mean()) ** 2).sum())) if len(x) > 2 else 0.0
    total = ((y - y.mean()) ** 2).sum()
    r2 = float(1 - (residuals**2).sum() / total) if total else 0.0
    return float(slope), stderr, r2


def soak(
    db_url: str,
    folder: Path,
    *,
    minutes: float = 10,
    clients: int = 8,
    rate_per_s: float = 5,
    sample_every_s: float = 5,
    warmup_s: float = 120,
) -> SoakResult:
    """A steady moderate load for `minutes`, RSS sampled every `sample_every_s`; a least-squares slope of
    RSS over time after the warm-up says whether memory grows."""
    duration = minutes * 60
    outcome = run_load(
        db_url,
        folder,
        clients=clients,
        duration_s=duration,
        rate_per_s=rate_per_s,
        deadline_s=duration + 120,
        sample_every_s=sample_every_s,
    )
    fitted = [s for s in outcome.samples if s.at_s >= warmup_s]
    slope, stderr, r2 = fit([(s.at_s / 60, s.rss_mb) for s in fitted])
    threads, _, _ = fit([(s.at_s / 60, s.threads) for s in fitted])
    fds, _, _ = fit([(s.at_s / 60, s.fds) for s in fitted])
    grows = memory_grows(slope, stderr)
    return SoakResult(outcome, warmup_s, slope, stderr, r2, len(fitted), grows, threads, fds)


def corpus_database(state: Path = STATE) -> tuple[str, str]:
    """The corpus ingested into a fresh database of the embedded PostgreSQL under `state`, the way
    evals/run.py builds its own (vectors cached under ~/.cache/kosha-kb). Returns (superuser, DATABASE_URL)."""
    from evals.cache import CachingEmbedder
    from evals.run import CACHE, ingest_corpus

    from kb_core.embedders.local import LocalEmbedder
    from reliability.harness import Cluster, database_url, fresh_database

    state.mkdir(exist_ok=True)
    superuser = Cluster(state).start()
    model = LocalEmbedder()
    model.load()
    targets = fresh_database(superuser, "reliability_corpus", model.space)
    ingest_corpus(targets, CachingEmbedder(model, CACHE / "eval-vectors.npz"), prefix=True)
    import psycopg

    with psycopg.connect(targets.owner, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return superuser, database_url(targets.owner)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--searches", type=int, default=10_000)
    parser.add_argument("--deadline", type=float, default=1800, help="hard deadline in seconds")
    parser.add_argument("--replicas", type=int, default=1, help="stateless servers behind a round-robin balancer")
    args = parser.parse_args(argv)
    _, url = corpus_database()
    outcome = run_load(
        url,
        STATE / "load",
        clients=args.clients,
        searches=args.searches,
        deadline_s=args.deadline,
        replicas=args.replicas,
    )
    print(json.dumps(outcome.summary(), indent=2))
    return 0 if not outcome.error_count and not outcome.leaks else 1


if __name__ == "__main__":
    raise SystemExit(main())
