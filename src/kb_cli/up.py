"""`kb up` (what `make run` runs): the whole product on one machine.

Embedded PostgreSQL → migrations → local AWS (moto, unless AWS_ENDPOINT_URL points at one) → bucket,
queues, notification, alarm → upload corpus/ (changed files only; effective versions dated after today held
back, as `kb aws upload` holds them) → the worker ingests through the queue,
with progress → the MCP server over HTTP, with a bearer token per role. The worker keeps running, so
a file uploaded later is ingested too. A second run reuses the database: nothing is embedded again.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from ingest.pipeline import IngestResult, result_line
from kb_cli.common import console, friendly_errors, settings_or_exit
from kb_cli.logs import plain_logging
from kb_core.embedders import Embedder, make_embedder
from kb_core.roles import Role
from kb_core.settings import Settings
from kb_core.words import counted

if TYPE_CHECKING:
    from ingest.worker.poller import SqsWorker


def run_up(console: Console, settings: Settings, corpus: Path, *, serve: bool = True, timeout_s: float = 1800) -> int:
    from ingest.aws.local_stack import DEFAULT_PORT, LocalAws
    from ingest.aws.target import forget_local_stack, record_local_stack
    from kb_cli.aws import local_aws_already_running
    from kb_cli.lifecycle import bind_problem
    from kb_core.db.migrations import migrate
    from kb_core.db.targets import resolve_database
    from kb_core.embedders import embedding_space_for

    if serve:
        from kb_server.http_guard import UnsafeBind, transport_security

        try:
            transport_security(settings.server)  # refuse a public bind with no allow-list before any work
        except UnsafeBind as exc:
            console.print(f"[bold red]error:[/] {exc}", highlight=False)
            return 2
    # Checked before anything is printed or started: finding out after the ingestion is too late.
    hint = "(another `make run` or `kb serve`?)"
    if serve and (
        problem := bind_problem(settings.server.http_host, settings.server.http_port, hint=hint, flags=False)
    ):
        console.print(f"[bold red]error:[/] {problem}", highlight=False, soft_wrap=True)
        return 2
    if settings.aws.endpoint_url is None and (problem := local_aws_already_running(settings.database.state_dir)):
        # Found walking it: a second `make run` started a whole second stack and took the first one's local AWS
        # record, then deleted it when it stopped.
        console.print(f"[bold red]error:[/] {problem}", highlight=False, soft_wrap=True)
        return 2
    plain_logging(logging.WARNING)  # the progress bar owns the terminal until the server starts
    console.rule("[bold]kosha-kb")
    targets = resolve_database(settings.database)
    migrate(targets.owner, embedding_space_for(settings.embedding))
    console.print(f"[green]✓[/] database: {targets.description}", highlight=False)

    local = None
    if settings.aws.endpoint_url is None:
        local = LocalAws().start()
        settings.aws.endpoint_url = local.endpoint_url
        os.environ["AWS_ENDPOINT_URL"] = local.endpoint_url
        record = record_local_stack(settings.database.state_dir, local.endpoint_url)
        moved = f" (port {DEFAULT_PORT} is in use)" if local.port != DEFAULT_PORT else ""
        console.print(
            f"[green]✓[/] local AWS (moto) at {local.endpoint_url}{moved}, recorded in {record} for `kb aws` and poe",
            highlight=False,
        )
    at_once: int | None = None
    try:
        return _run_stack(console, settings, corpus, targets, local, serve=serve, timeout_s=timeout_s)
    except StopAtOnce as stop:
        at_once = stop.code
        return stop.code
    finally:
        if local:
            forget_local_stack(settings.database.state_dir)
            local.stop()
        if at_once is not None:
            # Python's exit would join the embedding and parsing pools' threads, which finish the file in hand
            # first (found walking it: a second Ctrl-C still took 65 s). Nothing is half-stored: the file's
            # transaction never commits, and the next run ingests it.
            from kb_core.db.embedded import release_held

            release_held()
            os._exit(at_once)
        if targets.embedded is not None and targets.embedded.keep_mark.exists():
            # `kb db start` asked for it to outlive every kb process: said, or Ctrl-C seems to leave it behind.
            console.print(
                "the embedded database stays up (`kb db start` asked for it): `.venv/bin/kb db stop` stops it",
                highlight=False,
                soft_wrap=True,
            )


def _run_stack(
    console: Console,
    settings: Settings,
    corpus: Path,
    targets: Any,
    local: Any,
    *,
    serve: bool,
    timeout_s: float,
) -> int:
    from ingest.aws.bootstrap import bootstrap
    from ingest.aws.clients import client
    from ingest.aws.upload import upload_folder
    from kb_cli.aws import build_worker, held_back_warnings, print_stack
    from kb_cli.ingest_report import embedding_reporter, print_summary, progress_bar
    from kb_cli.local_stack import reconcile_with_folder, withdrawn_versions

    stack = bootstrap(settings.aws)
    console.print("[green]✓[/] ", end="")
    print_stack(console, stack)

    withdrawn_before = withdrawn_versions(targets.ingest)
    withdrawn = reconcile_with_folder(settings, targets.ingest, stack.bucket, corpus)
    if withdrawn:
        console.print(
            f"[green]✓[/] withdrew {_documents_and_versions(withdrawn)} whose file is gone from {corpus}/: "
            + ", ".join(f"{code} v{version}" for code, version in withdrawn),
            highlight=False,
            soft_wrap=True,
        )
    # Checked as `kb aws upload` checks, for the effective versions dated after today: uploaded, the worker refused
    # them, they were dead-lettered and the DLQ alarm stayed in ALARM. What else it would refuse goes up: the
    # worker reports it within the minute.
    report = upload_folder(
        client("s3", settings.aws),
        stack.bucket,
        corpus,
        delete=True,
        max_bytes=settings.aws.max_file_bytes,
        check=True,
    )
    console.print(
        f"[green]✓[/] uploaded {len(report.uploaded)} files to s3://{stack.bucket} ({len(report.unchanged)} unchanged, "
        f"{len(report.deleted)} deleted)",
        highlight=False,
    )
    for label, key, said in held_back_warnings(report):
        console.print(f"[yellow]{label}:[/] {key}: {said}", highlight=False, soft_wrap=True)

    expected = {f"s3://{stack.bucket}/{key}" for key in report.uploaded}
    results: dict[str, IngestResult] = {}
    lock = threading.Lock()
    started = time.perf_counter()
    bar: list[Callable[[IngestResult], None]] = []  # the progress bar's advance, once it is drawn
    settled = threading.Event()  # the start-up ingestion is summarised: later files get a line each

    def record(result: IngestResult) -> None:
        with lock:
            if result.source_uri in expected and result.source_uri not in results and bar:
                bar[0](result)
            elif settled.is_set() and result.outcome != "failed":  # a failure is the worker's WARNING line already
                # Files uploaded while it serves: found walking it, the log showed only the failures.
                console.print(result_line(result), highlight=False, soft_wrap=True)
            results[result.source_uri] = result

    # One model for the worker and the server: a second copy would cost the process another ~150 MB.
    embedder = make_embedder(settings.embedding, bulk=True)
    worker: SqsWorker = build_worker(
        settings, on_result=record, embedder=embedder, report_embedding=embedding_reporter(console)
    )
    try:
        with progress_bar(console, len(expected)) as advance:
            bar.append(advance)
            thread = threading.Thread(target=worker.run, name="ingest-worker", daemon=True)
            thread.start()
            deadline = time.monotonic() + timeout_s
            while not expected <= set(results) and time.monotonic() < deadline:
                time.sleep(0.2)
        elapsed = time.perf_counter() - started
        print_summary(console, [results[u] for u in sorted(expected) if u in results], [], elapsed)
        for result in sorted(results.values(), key=lambda r: r.source_uri):
            day = withdrawn_before.get((result.doc_code or "", result.version or ""))
            if result.outcome == "ingested" and day is not None:
                console.print(
                    f"[yellow]reinstated:[/] {result.doc_code} v{result.version}, withdrawn on {day}: its file is in "
                    f"{corpus}/ ({result.source_uri.split('/', 3)[-1]}); delete the file to keep it withdrawn",
                    highlight=False,
                    soft_wrap=True,
                )
        settled.set()
        missing = expected - set(results)
        if missing:
            console.print(f"[red]{len(missing)} files were not processed within {timeout_s:.0f} s[/]")
        if not serve:
            return 1 if missing or any(r.outcome == "failed" for r in results.values()) else 0
        _serve(console, settings, embedder)
        return 0
    finally:
        _stop_worker(console, worker)


class StopAtOnce(Exception):
    """A second stop signal while the file in hand is finished: stop without waiting for it (`code`: the exit
    status, 128 + the signal)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _stop_worker(console: Console, worker: SqsWorker) -> None:
    """A batch in hand is finished first: the database (stopped when this process exits) went away under it,
    and its file was reported failed with a database error. A second Ctrl-C or SIGTERM stops at once."""
    try:
        worker.wind_down(
            on_wait=lambda: console.print(
                "finishing the file in hand before stopping (Ctrl-C or SIGTERM again stops at once)", highlight=False
            )
        )
    except (KeyboardInterrupt, SystemExit) as stop:
        # SIGTERM arrives as SystemExit(143) (kb_cli.lifecycle); found walking it: a second `kill` was let through
        # to Python's exit, which waited 44 s for the file and logged it failed as the database stopped under it.
        code = stop.code if isinstance(stop, SystemExit) and isinstance(stop.code, int) else 130
        console.print("stopping at once: the file in hand is not stored; the next `make run` ingests it")
        raise StopAtOnce(code) from None


def _serve(console: Console, settings: Settings, embedder: Embedder | None = None) -> None:
    from kb_cli.lifecycle import hangup_as_terminate
    from kb_cli.local_tokens import local_tokens
    from kb_core.db.targets import resolve_database
    from kb_server.http import TokenStore, build_http_app
    from kb_server.http_run import run_http
    from kb_server.server import build_server

    tokens_file = settings.server.tokens_file or settings.database.state_dir / "tokens.json"
    settings.server.tokens_file = tokens_file
    tokens = local_tokens(settings.database.state_dir, tokens_file)
    url = f"http://{settings.server.http_host}:{settings.server.http_port}/mcp"
    console.rule("[bold]serving MCP")
    console.print(
        f"Streamable HTTP: [bold]{url}[/]  (bearer tokens below; they stay the same on the next `make run` "
        "unless revoked with `kb tokens revoke NAME`)",
        highlight=False,
    )
    for role, token in tokens.items():
        console.print(f"  local-{role.value:<19} {token}", highlight=False)
    inspector = (
        f"npx -y @modelcontextprotocol/inspector@2.12.0 --cli {url} --transport http "
        f"--header 'Authorization: Bearer {tokens[Role.ANALYST]}' --method tools/call "
        "--tool-name search_knowledge_base --tool-arg 'query=wire transfer cut-off'"
    )
    console.print(
        f"\nTry it from the MCP Inspector's CLI (needs Node.js >= 22.19):\n  {inspector}",
        highlight=False,
        soft_wrap=True,
    )
    kb = Path(sys.executable).parent / "kb"
    desktop = {
        "mcpServers": {
            "kosha-kb": {
                "command": str(kb),
                "args": ["serve", "--transport", "stdio"],
                "env": {"KB_ROLE": "analyst", "KB_STATE_DIR": str(settings.database.state_dir)},
            }
        }
    }
    console.print(
        "\nClaude Desktop (stdio), in claude_desktop_config.json:\n" + json.dumps(desktop, indent=2),
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        "\nOps, from another terminal: `.venv/bin/kb aws status`, `.venv/bin/poe corpus:upload`, "
        "`.venv/bin/poe corpus:redrive` (they find this local AWS by themselves).",
        highlight=False,
        soft_wrap=True,
    )
    console.print("\nCtrl-C stops the server, the worker and the local AWS.", highlight=False)
    hangup_as_terminate()
    targets = resolve_database(settings.database)
    server = build_server(settings, targets.server, embedder=embedder)
    app = build_http_app(server, settings.server, TokenStore.load(tokens_file))
    run_http(app, settings.server)  # the same proxy, Host/Origin and logging rules as `kb serve`


@friendly_errors
def up(
    corpus: Path = typer.Option(Path("corpus"), exists=True, file_okay=False, help="The folder to upload."),
    serve_after: bool = typer.Option(True, "--serve/--no-serve", help="Serve MCP over HTTP once ingested."),
) -> None:
    """Everything on this machine: database, local AWS, upload, queue-fed ingestion, then MCP over HTTP."""
    raise typer.Exit(run_up(console, settings_or_exit(), corpus, serve=serve_after))


def _documents_and_versions(withdrawn: list[tuple[str, str]]) -> str:
    """'1 document (2 versions)' for two versions of one doc code; '2 documents' for one version each."""
    documents = len({code for code, _ in withdrawn})
    said = counted(documents, "document")
    return said if documents == len(withdrawn) else f"{said} ({counted(len(withdrawn), 'version')})"
