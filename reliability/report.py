"""reliability/report.md from the results of `python -m reliability` (also kept as reliability/results.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reliability.load import GROWTH_MB_PER_MIN


def _n(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in counts.items()) if counts else "none"


def _ok(flag: bool) -> str:
    return "pass" if flag else "**FAIL**"


def checks(results: dict[str, Any]) -> list[tuple[str, bool]]:
    out: list[tuple[str, bool]] = []
    if "load" in results:
        load = results["load"]
        out.append(("load: no error but designed 429s", load["error_count"] == 0))
        out.append(("load: no chunk above the caller's ceiling", load["leak_count"] == 0))
    if "load_replicas" in results:
        load = results["load_replicas"]
        out.append((f"load through {load['replicas']} replicas: no error", load["error_count"] == 0))
        out.append((f"load through {load['replicas']} replicas: no chunk above the ceiling", load["leak_count"] == 0))
    if "soak" in results:
        soak = results["soak"]
        out.append(("soak: no error, no leak", soak["error_count"] == 0 and soak["leak_count"] == 0))
        out.append(("soak: memory does not grow", not soak["grows"]))
    faults = results.get("faults", {})
    if "database_restart" in faults:
        r = faults["database_restart"]
        out.append(
            (
                "database restart: clear, fast errors; recovery without a server restart",
                r["outage_answered_clearly"]
                and not r["errors"]
                and r["all_clients_ok_after_start_s"] is not None
                and r["server_pid_unchanged"],
            )
        )
    if "embedding_outage" in faults:
        r = faults["embedding_outage"]
        out.append(
            (
                "embedding endpoint down: degraded with the reason, then full answers again",
                r["during_all_degraded"] and not r["errors"] and r["all_clients_ok_after_up_s"] is not None,
            )
        )
    for r in faults.get("aws_outage", []):
        out.append(
            (
                f"AWS endpoint {'down' if r['mode'] == 'down' else 'refusing deletes'}: worker resumes, nothing lost",
                r["nothing_lost_or_doubled"]
                and r["worker_alive_after_idle_outage"]
                and r["worker_alive_after_batch_outage"],
            )
        )
    for stage in ("parse", "embed", "transaction", "after_commit"):
        runs = [k for k in faults.get("worker_kills", []) if k["stage"] == stage]
        if runs:
            out.append(
                (f"worker killed ({stage}), {len(runs)}×: exactly once, complete", all(k["passed"] for k in runs))
            )
    if "hostile" in results:
        modules = results["hostile"]["modules"]
        out.append(
            (
                f"hostile input: all {sum(m['passed'] + m['failed'] for m in modules.values())} tests of "
                "tests/security pass (no crash, no 5xx, no leak, a clear error each time)",
                bool(modules) and not any(m["failed"] for m in modules.values()),
            )
        )
    return out


def all_passed(results: dict[str, Any]) -> bool:
    return all(flag for _, flag in checks(results)) and not results.get("failures")


def plot_soak(results: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    soak = results["soak"]
    series = soak["series"]
    minutes = [s[0] / 60 for s in series]
    rss = [s[1] for s in series]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.plot(minutes, rss, ".", markersize=3, label="server RSS (MB)")
    warm = soak["warmup_s"] / 60
    fitted = [(m, r) for m, r in zip(minutes, rss, strict=True) if m >= warm]
    if fitted:
        import numpy as np

        x = np.array([m for m, _ in fitted])
        slope, intercept = np.polyfit(x, np.array([r for _, r in fitted]), 1)
        ax.plot(x, slope * x + intercept, "-", label=f"fit after warm-up: {slope:+.3f} MB/min")
    ax.axvline(warm, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("minutes")
    ax.set_ylabel("MB")
    ax.set_title(f"kb serve RSS under {soak['clients']} clients for {soak['seconds'] / 60:.0f} minutes")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(path: Path, results: dict[str, Any]) -> None:
    lines: list[str] = []
    add = lines.append
    m = results.get("machine", {})
    add("# Reliability")
    add("")
    add(
        "Measured by `poe reliability` (`python -m reliability`): load from concurrent MCP clients over streamable "
        "HTTP, a soak, and faults injected into the real processes. Nothing here is mocked: `kb serve --transport "
        "http` and `kb worker` run as processes of their own, against the embedded PostgreSQL, moto's server "
        "(as its own process) and the local `/v1/embeddings` endpoint of `tests/support/openai_wire.py`, all on "
        "loopback."
    )
    add("")
    add(
        f"**Machine:** {m.get('cpu', '?')}, **{m.get('cores', '?')} cores**, {m.get('memory_gb', '?')} GB; "
        f"{m.get('os', '')}; Python {m.get('python', '?')}; PostgreSQL {m.get('postgresql', '?')} (embedded) with "
        f"pgvector {m.get('pgvector', '?')}. The load generator and the server share the 2 cores, so latency under "
        "load includes the clients' own CPU time."
    )
    add("")
    if len(results.get("runs", [])) > 1:
        add(
            "**Runs:** this report merges runs (figures: `reliability/results.json`); each part's figures come "
            "from the last run that measured it:"
        )
        add("")
        for run in results["runs"]:
            add(f"- `{run['command']}`, started {run['started']}, {_n(run.get('minutes'))} minutes")
    else:
        add(
            f"**Run:** `{results.get('command', 'python -m reliability')}`, started {results.get('started', '?')}, "
            f"{_n(results.get('seconds', {}).get('total', 0) / 60, 1)} minutes in all. Figures: "
            "`reliability/results.json`."
        )
    add("")
    add("| check | result |")
    add("|---|---|")
    for name, flag in checks(results):
        add(f"| {name} | {_ok(flag)} |")
    for failure in results.get("failures", []):
        add(f"| {failure} | **FAIL** (did not complete) |")
    add("")
    add("Commands:")
    add("")
    add("```sh")
    add("python -m reliability                          # everything below (poe reliability)")
    add("python -m reliability.load --clients 50 --searches 10000   # the load alone")
    add(".venv/bin/pytest tests/reliability             # the fast checks `make test` runs (about 2½ minutes)")
    add("```")
    add("")
    if "load" in results:
        _load_section(add, results["load"])
    if "load_replicas" in results:
        _load_section(add, results["load_replicas"])
    if "soak" in results:
        _soak_section(add, results, path)
    faults = results.get("faults", {})
    if "database_restart" in faults:
        _restart_section(add, faults["database_restart"])
    if "embedding_outage" in faults:
        _embedding_section(add, faults["embedding_outage"])
    if "aws_outage" in faults:
        _aws_section(add, faults["aws_outage"])
    if "worker_kills" in faults:
        _kills_section(add, faults["worker_kills"])
    if "hostile" in results:
        _hostile_section(add, results["hostile"])
    _parts(add, results)
    _findings(add)
    _tests(add)
    path.write_text("\n".join(lines).rstrip() + "\n")


def _load_section(add: Any, load: dict[str, Any]) -> None:
    lat, rss, threads, fds = load["latency_ms"], load["rss_mb"], load["threads"], load["open_fds"]
    replicas = load.get("replicas", 1)
    through = f" through {replicas} stateless replicas" if replicas > 1 else ""
    add(f"## Load: {load['clients']} clients, {_n(load['planned'])} searches{through}")
    add("")
    if replicas > 1:
        add(
            f"The same load against {replicas} `kb serve` processes over the one database, started with "
            "`KB_HTTP_STATELESS=true`; each client's requests go to the replicas in turn "
            "(`reliability/balancer.py`, a round-robin balancer that never pins a client), so every MCP "
            "session's requests are answered by different processes. The server rows below are the first "
            "replica's; the replicas share the machine's 2 cores with each other and with the clients."
        )
        add("")
    add(
        f"{load['clients']} MCP sessions, each with the bearer token of one role (client n has role n mod 4), "
        f"search with the 130 questions of `evals/golden.jsonl` until {_n(load['planned'])} searches are done "
        "(hard deadline: every client is cancelled). Rate limit raised to 100,000 a minute per token so that the "
        "load is not throttled. Every returned chunk's doc code is checked against the caller's ceiling with "
        "`corpus/MANIFEST.csv`'s classification column."
    )
    add("")
    add("| | |")
    add("|---|---|")
    add(f"| searches answered | {_n(load['completed'])} of {_n(load['planned'])} in {_n(load['seconds'])} s |")
    add(f"| per role | {_counts(load['per_role'])} |")
    add(f"| throughput | **{_n(load['throughput_per_s'])} searches/s** |")
    add(
        f"| latency (client side) | p50 **{_n(lat.get('p50'))} ms**, p95 {_n(lat.get('p95'))} ms, "
        f"p99 {_n(lat.get('p99'))} ms, max {_n(lat.get('max'))} ms |"
    )
    add(f"| errors (anything but an answer) | **{_n(load['error_count'])}** ({_counts(load['errors'])}) |")
    add(f"| designed 429s | {_n(load['rate_limited_429'])} |")
    add(f"| degraded answers (full text only) | {_n(load['degraded'])} |")
    add(f"| chunks checked against the ceiling | {_n(load['chunks_checked'])}; **above it: {load['leak_count']}** |")
    add(
        f"| server RSS | before {_n(rss['before'])} MB, peak {_n(rss['peak_during'])} MB "
        f"({rss['samples']} samples every 0.5 s), after {_n(rss['after'])} MB |"
    )
    add(
        f"| server threads / open fds | {threads['before']} → peak {threads['peak_during']} → {threads['after']} / "
        f"{fds['before']} → peak {fds['peak_during']} → {fds['after']} |"
    )
    add("")


def _soak_section(add: Any, results: dict[str, Any], path: Path) -> None:
    soak = results["soak"]
    after = soak["rss_after_warmup_mb"]
    add(f"## Soak: {soak['seconds'] / 60:.0f} minutes at {soak['throughput_per_s']} searches/s")
    add("")
    add(
        f"{soak['clients']} clients (two per role) paced to a steady moderate load, about a quarter of the "
        "throughput above. The server's RSS, threads and open file descriptors are sampled every 5 s; after a "
        f"{soak['warmup_s'] / 60:.0f}-minute warm-up a least-squares line is fitted to RSS over time. Memory counts "
        f"as growing when the slope is over {GROWTH_MB_PER_MIN} MB/min (15 MB an hour) and more than three standard "
        "errors from zero."
    )
    add("")
    add("| | |")
    add("|---|---|")
    add(
        f"| searches | {_n(soak['completed'])} in {_n(soak['seconds'])} s; errors {soak['error_count']} "
        f"({_counts(soak['errors'])}); chunks above a ceiling {soak['leak_count']} |"
    )
    lat = soak["latency_ms"]
    add(
        f"| latency | p50 {_n(lat.get('p50'))} ms, p95 {_n(lat.get('p95'))} ms, p99 {_n(lat.get('p99'))} ms, "
        f"max {_n(lat.get('max'))} ms |"
    )
    add(
        f"| RSS | before {_n(soak['rss_mb']['before'])} MB; after the warm-up {_n(after['first'])} → "
        f"{_n(after['last'])} MB (min {_n(after['min'])}, max {_n(after['max'])}); "
        f"after {_n(soak['rss_mb']['after'])} MB |"
    )
    add(
        f"| RSS slope after the warm-up | **{soak['slope_mb_per_min']:+.4f} MB/min** (± {soak['slope_stderr']:.4f} "
        f"standard error, R² {soak['r2']}, {soak['fitted_samples']} samples), i.e. {soak['kb_per_search']:+.4f} KB "
        "per search |"
    )
    add(
        f"| threads / open fds slope | {soak['threads_slope_per_min']:+.4f} / {soak['fds_slope_per_min']:+.4f} "
        "per minute |"
    )
    add(f"| memory grows | **{'yes' if soak['grows'] else 'no'}** |")
    add("")
    if plot_soak(results, path.with_name("soak.png")):
        add("![RSS during the soak](soak.png)")
        add("")


def _timeline(marks: dict[str, float]) -> str:
    return "; ".join(f"{name} {value:.1f} s" for name, value in marks.items())


def _restart_section(add: Any, r: dict[str, Any]) -> None:
    add("## Fault: the database restarted while the server serves")
    add("")
    add(
        f"{r['clients']} clients search back to back through `kb serve --transport http`; the database is stopped "
        f"with `kb db stop --force` (PostgreSQL's fast shutdown), left down for {r['outage_s']:g} s, and started with "
        "`kb db start`. The server is not restarted."
    )
    add("")
    lat = r["unavailable_latency_ms"]
    add("| | |")
    add("|---|---|")
    add(f"| timeline | {_timeline(r['timeline'])} |")
    add(f"| before the stop | {_counts(r['before'])} |")
    add(
        f"| searches asked while it was down | {_counts(r['during'])} (an `ok` here waited for a connection while "
        "the database came back) |"
    )
    add(
        f'| "temporarily unavailable" answers | {r["unavailable_total"]}, in p50 **{_n(lat.get("p50"))} ms**, '
        f"max **{_n(lat.get('max'))} ms** |"
    )
    for tool, seen in r["other_tool_during"].items():
        add(f"| `{tool}` while down | {seen} |")
    add(f"| after the start | {_counts(r['after_start'])} |")
    add(
        f"| recovery | first answer {_n(r['first_ok_after_start_s'], 2)} s after `kb db start` returned; every "
        f"client answered after **{_n(r['all_clients_ok_after_start_s'], 2)} s** |"
    )
    add(f"| any other error | {_counts(r['errors'])} |")
    add(
        f"| same server process throughout | {'yes' if r['server_pid_unchanged'] and r['server_alive'] else 'NO'}; "
        f"its database connections afterwards: {r['kb_server_connections_after']} |"
    )
    add("")
    add(
        "A search during the outage waits for a pooled connection for `KB_DB_CONNECT_TIMEOUT_S` (5 s by default) "
        "before the server answers with its `ToolError` (*the knowledge base is temporarily unavailable (database "
        "unreachable); try again shortly*); that wait is the whole of the latency above. The pool discards the dead "
        "connections (it checks each one before lending it) and reconnects, doubling its pauses for at most "
        "`KB_DB_RECONNECT_TIMEOUT_S` (10 s), then starting afresh on the next request."
    )
    add("")


def _embedding_section(add: Any, r: dict[str, Any]) -> None:
    add("## Fault: the embedding endpoint down")
    add("")
    add(
        "`kb serve` with `KB_EMBEDDER=openai` (`text-embedding-3-large`, 1,024 dimensions) pointed by "
        "`KB_OPENAI_BASE_URL` at the local `/v1/embeddings` server, over a database migrated for that model with "
        f"{'eight'} corpus documents (two per classification) ingested through the same embedder. {r['clients']} "
        f"clients search; the endpoint is stopped (its port refuses connections) for {r['outage_s']:g} s, then "
        "started again on the same port. The server is not restarted."
    )
    add("")
    lat = r["degraded_latency_ms"]
    add("| | |")
    add("|---|---|")
    add(f"| timeline | {_timeline(r['timeline'])} |")
    add(f"| before | {_counts(r['before'])} |")
    add(
        f"| during the outage | {_counts(r['during'])}; {r['degraded_with_results']} of the degraded answers still "
        "carried chunks (full text) |"
    )
    add(f"| reason given | {_counts(r['degraded_reasons'])} |")
    add(
        f"| degraded answer latency | p50 {_n(lat.get('p50'))} ms, max {_n(lat.get('max'))} ms "
        "(`KB_QUERY_EMBED_TIMEOUT_S` is 3 s) |"
    )
    add(
        f"| after it is back | {_counts(r['after_up'])}; first full answer {_n(r['first_ok_after_up_s'], 2)} s "
        f"after, every client **{_n(r['all_clients_ok_after_up_s'], 2)} s** after |"
    )
    add(f"| any error | {_counts(r['errors'])} |")
    t = r["threads"]
    add(
        f"| server threads | peak {t['before_outage_peak']} before, **{t['during_outage_peak']}** during, "
        f"{t['after_up_peak']} after; {t['at_end']} at the end |"
    )
    add(f"| same server process throughout | {'yes' if r['server_pid_unchanged'] else 'NO'} |")
    add("")


def _aws_section(add: Any, runs: list[dict[str, Any]]) -> None:
    add("## Fault: the local AWS down while the worker runs")
    add("")
    add(
        "moto's server runs as its own process and keeps every queue's state; `kb worker` reaches it through a "
        "proxy whose port is closed for the outage (connections refused, open ones dropped) and reopened after. "
        "First, while the worker idles on its long poll, three documents are uploaded during the outage. Then two "
        "more: the worker ingests a batch, and its SQS delete of that batch is held at the proxy and kept from "
        "getting through: by closing the port (`down`), or by answering it `AccessDenied` (`deny`, which the "
        "tests use: it is deterministic and quick)."
    )
    add("")
    add("| | " + " | ".join(f"`{r['mode']}`" for r in runs) + " |")
    add("|---|" + "---|" * len(runs))
    rows = [
        (
            "outage while polling",
            lambda r: (
                f"{r['idle_outage_s']:g} s; {r['backoff_lines_during_idle_outage']} "
                "back-off warnings; worker alive: " + ("yes" if r["worker_alive_after_idle_outage"] else "NO")
            ),
        ),
        (
            "resumed after the endpoint came back",
            lambda r: f"first document {_n(r['resumed_after_s'], 2)} s, all three {_n(r['all_ingested_after_s'], 2)} s",
        ),
        (
            "delete of the batch in hand kept out",
            lambda r: f"{r['batch_outage_s']:g} s ({', '.join(r['batch_in_hand'])})",
        ),
        (
            "worker alive after it",
            lambda r: (
                ("yes" if r["worker_alive_after_batch_outage"] else "**NO**")
                + f'; "could not delete" warnings: {r["delete_failure_lines"]}'
            ),
        ),
        ("a new worker was needed", lambda r: "yes" if r["worker_restarted"] else "no"),
        ("documents stored (each)", lambda r: f"{len(r['documents'])} × {set(r['documents'].values())}"),
        ("'ingested' in the ingest log (each)", lambda r: f"{set(r['ingested_log'].values())}"),
        ("queue (visible, in flight) / DLQ at the end", lambda r: f"{r['queue']} / {r['dlq']}"),
        ("nothing lost or doubled", lambda r: "yes" if r["nothing_lost_or_doubled"] else "**NO**"),
        ("timeline", lambda r: _timeline(r["timeline"])),
    ]
    for label, cell in rows:
        add(f"| {label} | " + " | ".join(cell(r) for r in runs) + " |")
    add("")
    add(
        "The time to resume is the worker's own back-off: botocore's standard retries (5 attempts) inside each "
        "call, then the worker's full-jitter pause (up to 30 s, doubling with each failed poll)."
    )
    add("")


STAGE_HOW = {
    "parse": "a ~770 KB Markdown document (280 chunks): the worker is killed 0.3 s after the proxy has handed it "
    "the object, while parsing, chunking and scanning take ~2 s; no embeddings request has been sent",
    "embed": "the embeddings endpoint holds its answer: killed once the request has arrived",
    "transaction": "a PostgreSQL trigger on `kb.chunks` counts rows in a sequence (non-transactional) and "
    "sleeps in `pg_sleep` after chunk row 4 of 8: killed while the upsert's transaction is open with 4 rows "
    "written and not committed",
    "after_commit": "the proxy holds the worker's SQS `DeleteMessageBatch`: killed once the document is "
    "committed and the delete is on its way",
}


def _kills_section(add: Any, kills: list[dict[str, Any]]) -> None:
    add("## Fault: the worker killed at each stage of an upsert")
    add("")
    add(
        "`kb worker` (`KB_EMBEDDER=openai` against the local endpoint) is SIGKILLed at a deterministic point of one "
        "document's upsert, reached from outside the product (no hook in it). What the database holds right "
        "after is read; then a fresh `kb worker` drains the queue (visibility timeout 3–5 s) and is stopped with "
        "SIGTERM. The stored chunks are compared, row by row (ordinal, section path, content hash, embedding), "
        "with a clean ingest of the same bytes into a database of its own."
    )
    add("")
    for stage, how in STAGE_HOW.items():
        add(f"- **{stage}**: {how}.")
    add("")
    add(
        "| stage | at the kill | right after the kill | after a fresh worker | deliveries (receive count) | "
        "kill → drained | result |"
    )
    add("|---|---|---|---|---|---|---|")
    for k in kills:
        at = ", ".join(f"{key} {value}" for key, value in k["at_kill"].items() if key != "worker_alive")
        after = f"{k['after_kill']['documents']} document, {k['after_kill']['chunks']} chunks"
        final = (
            f"{k['final']['documents']} document, {k['final']['chunks']}/{k['expected_chunks']} chunks"
            f"{' = clean ingest' if k['final']['chunks_match_clean_ingest'] else ' ≠ clean ingest'}; "
            f"log {_counts(k['final']['logged'])}; queue {k['final']['queue']}, DLQ {k['final']['dlq']}"
        )
        marks = k["timeline"]
        span = marks.get("queue drained", 0) - marks.get("killed (SIGKILL)", 0)
        add(
            f"| {k['stage']} | {at} | {after} | {final} | {k['receive_counts']} | {span:.1f} s | "
            f"{_ok(k['passed'])}{'' if k['passed'] else ': ' + '; '.join(k['problems'])} |"
        )
    add("")


def _hostile_section(add: Any, hostile: dict[str, Any]) -> None:
    add("## Hostile input and injection")
    add("")
    add(
        f"`{hostile['command']}`: the server over a real MCP session (in process and over HTTP as its own "
        "process) and the ingestion pipeline against a real PostgreSQL, with hostile input. Every test must pass; "
        "each module's docstring says what it sends and what it asserts."
    )
    add("")
    add("| module | passed | failed | seconds | what it sends |")
    add("|---|---|---|---|---|")
    for name, m in hostile["modules"].items():
        failed = f"**{m['failed']}** ({', '.join(m['failures'])})" if m["failed"] else "0"
        add(f"| `{name}` | {m['passed']} | {failed} | {_n(m['seconds'])} | {m['what']} |")
    add("")
    scanner = hostile.get("scanner")
    if scanner:
        add(
            f"**Injection scanner on the poisoned chunks** (`tests/security/data/poisoned_chunks.json`, written in "
            f"varied styles beyond the corpus's planted documents): **{scanner['flagged']} of {scanner['of']} "
            f"flagged** ({scanner['flagged'] / scanner['of']:.0%}). Whether flagged or not, no answer of "
            "`search_knowledge_base`, `get_document` or a `kb://` resource carries any of them outside a `content` "
            "field (asserted for each). Missed: " + ", ".join(scanner["missed"]) + "."
        )
        add("")


def _parts(add: Any, results: dict[str, Any]) -> None:
    add("## Parts of the run")
    add("")
    add(
        "Seconds each part took, and the machine's 1-minute load average at its start and end (with 2 cores, a "
        "figure well above 2 would mean something else was competing for them)."
    )
    add("")
    add("| part | seconds | load average (start → end) |")
    add("|---|---|---|")
    for name, seconds in results.get("seconds", {}).items():
        if name == "total":
            continue
        start, end = results.get("load_average", {}).get(name, [None, None])
        add(f"| {name} | {_n(seconds)} | {_n(start, 2)} → {_n(end, 2)} |")
    add("")


def _findings(add: Any) -> None:
    add("## Found and fixed")
    add("")
    add(
        "- **`kb worker` died when the delete of a processed batch could not get through.** `SqsWorker.run` backed "
        "off when *receiving* failed, but a `ClientError`/`BotoCoreError` from the delete (raised by "
        "`_with_retry` after its 5 attempts) propagated out of `run` and ended the process with a traceback "
        "(nothing was lost: the messages came back and were skipped as unchanged, but nothing resumed). Fixed in "
        "`src/ingest/worker/poller.py`: `run` catches those errors around `process`, logs *could not delete the "
        "processed messages …; they will be delivered again*, and backs off like a failed poll. "
        "`tests/reliability/test_worker_faults.py::test_the_worker_backs_off_while_aws_is_unreachable_and_outlives_"
        "a_lost_delete` fails without the fix."
    )
    add(
        "- **After a long database outage the server took up to a minute to come back.** psycopg_pool doubles its "
        "pause between reconnection attempts for `reconnect_timeout` (five minutes by default), so after a 15 s "
        "outage the next attempt could be 8–16 s away (measured: every client served again 12.6 s after the "
        "database was up). The pool now gives up after `KB_DB_RECONNECT_TIMEOUT_S` (10 s) and the next request "
        "starts a fresh attempt; the database-restart figures above are from after the change."
    )
    add(
        "- **Hostile input** (tests/security): a chunked request body over the size limit got a 500 instead of "
        "413; `X-Forwarded-For` was trusted, so a token guesser could dodge the failed-authentication limit by "
        "changing it; YAML alias bombs expanded in the OpenAPI parser; empty documents and NUL characters failed "
        "without a reason. Each is fixed, with the test that found it."
    )
    add("")


def _tests(add: Any) -> None:
    add("## What `make test` runs (tests/reliability)")
    add("")
    add(
        "- `test_load.py`: 8 clients, 200 searches across the four roles over HTTP: no error but 429s, no chunk "
        "above a ceiling (checked with the manifest), every role served, RSS sampled; the leak check and the soak's "
        "growth test on fabricated inputs (so that they can fail)."
    )
    add(
        "- `test_database_restart.py`: the database stopped for 6 s under 4 clients: only answers or the clear "
        "error, each in < 10 s; `list_documents` and `get_document` too; every client served again, same server "
        "process."
    )
    add(
        "- `test_embedding_outage.py`: the endpoint down for 6 s: every search degraded with the reason, in < 10 s; "
        "then full answers for every client, same server process."
    )
    add(
        "- `test_worker_faults.py`: the worker killed at each of the four stages (exactly once, complete, never "
        "half-written, delivered again); the AWS endpoint down while polling (backs off, resumes) and refusing the "
        "delete of a batch in hand for 16 s (the worker survives; nothing lost or doubled)."
    )
    add(
        "- `tests/security` (the hostile-input table above) runs whole in `make test`; "
        "`test_hostile_report.py` checks that this report counts its failures."
    )
    add("")
