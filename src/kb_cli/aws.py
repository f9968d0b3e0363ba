"""`kb worker`, `kb aws ...` and `kb up`: the queue-fed ingestion path, locally and on AWS."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from ingest.aws.bootstrap import Stack, bootstrap
from ingest.aws.clients import client, queue_arn, queue_url
from ingest.document import EMPTY_FILE
from ingest.pipeline import IngestResult
from kb_cli.common import console, err, friendly_errors, settings_or_exit
from kb_core.embedders import Embedder
from kb_core.file_limits import over_size_limit
from kb_core.settings import Settings
from kb_core.words import counted

if TYPE_CHECKING:
    from ingest.aws.upload import UploadReport
    from ingest.embedding_parts import Report

aws_app = typer.Typer(no_args_is_help=True, help="The corpus bucket and the ingest queues.")


def _settings() -> Settings:
    """Settings with the AWS target decided (and said in one line on stderr), or one line and exit 2."""
    from ingest.aws.target import NoAwsTarget, resolve_aws_target

    settings = settings_or_exit()
    try:
        target = resolve_aws_target(settings.aws, settings.database.state_dir)
    except NoAwsTarget as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None
    err.print(f"AWS: {target.description}", highlight=False)
    return settings


def _queues(settings: Settings) -> tuple[Any, str, str, str, str]:
    sqs = client("sqs", settings.aws)
    url, dlq = queue_url(sqs, settings.aws.ingest_queue), queue_url(sqs, settings.aws.dead_letter_queue)
    return sqs, url, queue_arn(sqs, url), dlq, queue_arn(sqs, dlq)


def build_worker(
    settings: Settings,
    on_result: Callable[[IngestResult], None] | None = None,
    embedder: Embedder | None = None,
    report_embedding: Report | None = None,
) -> Any:
    """The SQS worker; a large file's embedding progress goes to `report_embedding`, else to the log."""
    from ingest.pipeline import Ingestor, log_embedding_progress
    from ingest.worker.handler import RecordProcessor, make_handler
    from ingest.worker.poller import SqsWorker
    from kb_cli.prepare import prepare_database
    from kb_core.embedders import make_embedder
    from kb_core.process_memory import limit_malloc_arenas

    limit_malloc_arenas()  # before the parse and model threads start
    # The queues first: a local AWS not bootstrapped yet is refused in a second, before a database is created and
    # migrated and the model loaded for a worker that cannot run.
    sqs, url, arn, _, _ = _queues(settings)
    targets = prepare_database(settings, login="ingest")
    ingestor = Ingestor.from_settings(
        targets.ingest,
        embedder or make_embedder(settings.embedding, bulk=True),
        settings.aws,
        report_embedding or log_embedding_progress,
    )
    processor = RecordProcessor(
        ingestor, client("s3", settings.aws), max_bytes=settings.aws.max_file_bytes, on_result=on_result
    )
    return SqsWorker(
        sqs,
        url,
        arn,
        make_handler(processor),
        region=settings.aws.region,
        batch_size=settings.aws.batch_size,
        wait_time_s=settings.aws.wait_time_s,
        retry_delay_s=settings.aws.retry_delay_s,
        visibility_timeout_s=settings.aws.visibility_timeout_s,
    )


def worker_command(console: Console) -> None:
    """Long-poll the ingest queue and ingest what arrives, until SIGTERM or Ctrl-C."""
    settings = _settings()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("botocore").setLevel(logging.WARNING)  # "Found credentials in environment variables"
    worker = build_worker(settings)

    requested = threading.Event()

    def stop(signum: int, _: Any) -> None:
        if requested.is_set():
            # A second signal: do not wait for the batch in hand (a big file takes minutes). Its transaction never
            # commits, and its messages are made visible again at once for the next worker.
            from kb_core.db.embedded import release_held

            handed_back = worker.hand_back()
            logging.getLogger("kosha.worker").warning(
                "signal %d again: stopping at once; the batch in hand is not finished%s",
                signum,
                f" and is back in the queue ({counted(handed_back, 'message')})" if handed_back else "",
            )
            release_held()
            os._exit(128 + signum)
        logging.getLogger("kosha.worker").info(
            "signal %d: finishing the batch in hand, if any, then stopping (signal again to stop at once)", signum
        )
        requested.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    logging.getLogger("kosha.worker").info("polling %s (batch %d)", worker.queue_url, worker.batch_size)
    settings.database.state_dir.mkdir(parents=True, exist_ok=True)
    # Polled on a thread of its own, so that a stop while idle is not held for the rest of the long poll
    # (KB_WORKER_WAIT_TIME_S): only a batch in hand is waited for.
    heartbeat = settings.database.state_dir / "worker.heartbeat"
    thread = threading.Thread(target=worker.run, kwargs={"heartbeat": heartbeat}, name="ingest-worker", daemon=True)
    thread.start()
    while thread.is_alive() and not requested.wait(0.5):
        pass
    worker.wind_down()
    stats = worker.stats
    console.print(
        f"stopped: {counted(stats.batches, 'batch')}, {counted(stats.succeeded, 'message')} done, "
        f"{stats.failed} failed, {stats.released} handed back",
        highlight=False,
    )


@aws_app.command("bootstrap")
@friendly_errors
def bootstrap_command() -> None:
    """Create the bucket, ingest-queue, ingest-dlq, the notification and the DLQ alarm (safe to rerun)."""
    settings = _settings()
    stack = bootstrap(settings.aws)
    print_stack(console, stack)


def print_stack(console: Console, stack: Stack) -> None:
    console.print(
        f"bucket {stack.bucket} → {stack.queue_arn} (redrive to {stack.dlq_arn} after "
        f"3 receives); alarm {stack.alarm_name} → {stack.topic_arn}",
        highlight=False,
    )


@aws_app.command("upload")
@friendly_errors
def upload_command(
    folder: Path = typer.Argument(Path("corpus"), exists=True, file_okay=False),
    delete: bool = typer.Option(
        True, "--delete/--keep-deleted", help="Delete objects whose file is gone, which withdraws their documents."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be uploaded and deleted; change nothing."),
    delete_most: bool = typer.Option(
        False, "--delete-most", help="Delete even when most of the bucket's objects would go (refused otherwise)."
    ),
) -> None:
    """Make the corpus bucket match a folder: upload the files that changed, delete the ones that are gone."""
    from ingest.aws.upload import MostOfBucket, most_of_bucket, upload_folder
    from kb_cli.ingest_report import skipped_line

    settings = _settings()
    try:
        report = upload_folder(
            client("s3", settings.aws),
            settings.aws.corpus_bucket,
            folder,
            delete=delete,
            dry_run=dry_run,
            delete_most=delete_most,
            max_bytes=settings.aws.max_file_bytes,
            check=True,
        )
    except MostOfBucket as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    out = Console(soft_wrap=True)  # a line per file, unwrapped: in a log or a pipe too
    if dry_run:
        for key in report.uploaded:
            out.print(f"would upload {key}", highlight=False)
        for key in report.deleted:
            out.print(f"would delete {key} (withdraws the document stored from it, if any)", highlight=False)
    counts = (len(report.uploaded), len(report.unchanged), len(report.deleted))
    where = f"s3://{settings.aws.corpus_bucket}"
    if dry_run:
        summary = f"would upload {counts[0]}, delete {counts[2]}, leave {counts[1]} unchanged in {where}"
        out.print(summary + " (dry run: nothing was changed)", highlight=False)
        if report.deletes_most and not delete_most:
            # Exit 2 as the real upload would: a script that checks a dry run first must not read success.
            said = most_of_bucket(folder, settings.aws.corpus_bucket, report, changed_nothing=False)
            err.print(f"[bold red]error:[/] without --dry-run this is refused: {said}", highlight=False, soft_wrap=True)
            raise typer.Exit(2)
    else:
        out.print(f"{counts[0]} uploaded, {counts[1]} unchanged, {counts[2]} deleted in {where}", highlight=False)
    if report.skipped:
        out.print(skipped_line(report.skipped), highlight=False, soft_wrap=True)
    for label, key, said in upload_warnings(report, settings.aws.max_file_bytes):
        err.print(f"[yellow]{label}:[/] {key}: {said}", highlight=False, soft_wrap=True)


def upload_warnings(report: UploadReport, max_file_bytes: int) -> list[tuple[str, str, str]]:
    """(label, key, what to say) for each file the upload says something of: all but the held-back ones were
    uploaded all the same (the worker records why it refuses them, and `kb aws status` shows it): said now, not
    a minute later from the dead-letter queue."""
    return [
        *[("warning", key, f"{EMPTY_FILE}; the worker dead-letters it") for key in report.empty],
        *held_back_warnings(report),
        *[("warning", key, f"the worker will refuse it: {reason}") for key, reason in report.refused.items()],
        # the worker's own KB_MAX_FILE_BYTES (the Lambda's may differ) decides
        *[
            ("warning", key, f"{over_size_limit(size, max_file_bytes, 'it')}; a worker with this limit dead-letters it")
            for key, size in report.over_limit.items()
        ],
    ]


def held_back_warnings(report: UploadReport) -> list[tuple[str, str, str]]:
    """(label, key, what to say) for each effective version held back as dated after today (`kb aws upload`,
    `make run`)."""
    return [
        (
            "held back",
            key,
            f"an effective version dated {when.isoformat()}, after today; not uploaded (the worker would refuse "
            "it until then): an upload on or after that date sends it",
        )
        for key, when in report.held_back.items()
    ]


@aws_app.command("status")
@friendly_errors
def status_command(
    recent: int = typer.Option(10, min=0, max=200, help="How many recent ingest outcomes to show."),
) -> None:
    """The ingest queue, the dead-letter queue (each dead file and its last error), the alarm, recent outcomes."""
    from ingest.queue_status import queue_status
    from kb_cli.aws_status import print_status
    from kb_cli.prepare import NotReady, prepare_database
    from kb_core.db.embedded import EmbeddedPostgres

    settings = _settings()
    conninfo = None
    if settings.database.embedded and not EmbeddedPostgres(settings.database.state_dir).is_running():
        # Found walking it: this started the stopped database and reported all well, without a word.
        err.print(
            "[yellow]database:[/] the embedded database is not running (`kb db start`, or `make run`, starts it; "
            "showing the queues only)",
            highlight=False,
            soft_wrap=True,
        )
    else:
        try:
            conninfo = prepare_database(settings, login="ingest").ingest
        except NotReady as exc:
            err.print(f"[yellow]database:[/] {exc} (showing the queues only)", highlight=False)
    status = queue_status(
        client("sqs", settings.aws),
        client("cloudwatch", settings.aws),
        ingest_queue=settings.aws.ingest_queue,
        dead_letter_queue=settings.aws.dead_letter_queue,
        local=settings.aws.endpoint_url is not None,
        ingest_conninfo=conninfo,
        recent=recent,
        s3=client("s3", settings.aws),
    )
    print_status(console, settings, status, database_read=conninfo is not None)


@aws_app.command("redrive")
@friendly_errors
def redrive_command() -> None:
    """Move the dead-letter queue's messages back to the ingest queue, and report progress."""
    from ingest.aws.redrive import redrive

    settings = _settings()
    sqs, url, arn, dlq, dlq_arn = _queues(settings)
    console = Console(soft_wrap=True)  # unwrapped in a log or a pipe
    report = redrive(
        sqs,
        dlq_url=dlq,
        dlq_arn=dlq_arn,
        queue_url=url,
        queue_arn=arn,
        local=settings.aws.endpoint_url is not None,
        say=lambda m: console.print(m, highlight=False),
    )
    if report.status != "COMPLETED":
        raise typer.Exit(1)


@aws_app.command("local")
def local_command(port: int = typer.Option(4566, help="Port on 127.0.0.1.")) -> None:
    """Run the local AWS (moto) in the foreground, for a worker or an upload in another terminal."""
    from ingest.aws.local_stack import LocalAws
    from ingest.aws.target import forget_local_stack, record_local_stack

    settings = settings_or_exit()
    state_dir = settings.database.state_dir
    if problem := local_aws_already_running(state_dir):
        err.print(f"[bold red]error:[/] {problem}", highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    stack = LocalAws(port).start()
    record = record_local_stack(state_dir, stack.endpoint_url)
    out = Console(soft_wrap=True)  # unwrapped in a log or a pipe
    if stack.port != port:
        out.print(f"port {port} is in use: listening on {stack.port} instead", highlight=False)
    out.print(
        f"local AWS at {stack.endpoint_url}, recorded in {record}: `kb aws ...`, `kb worker` and the poe corpus "
        "tasks use it from any terminal while this runs (Ctrl-C stops it)",
        highlight=False,
    )
    try:
        threading.Event().wait()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        forget_local_stack(state_dir)
        stack.stop()


def local_aws_already_running(state_dir: Path) -> str | None:
    """Why another local AWS for this state directory is refused (`kb aws local`, `make run`), in one line, or
    None if no recorded one still answers. A second one would take over the record, and take it away when it
    stops, from the first one's: every ops command of the stack still running then found no local AWS."""
    from ingest.aws.target import RECORD_FILE, recorded_local_stack

    running = recorded_local_stack(state_dir)
    if not running:
        return None
    return (
        f"a local AWS already runs for this state directory, at {running} (recorded in {state_dir / RECORD_FILE}): "
        "`kb aws ...`, `kb worker` and the poe corpus tasks use it; stop it to start another, or set KB_STATE_DIR "
        "to another folder"
    )


@friendly_errors
def worker() -> None:
    """Long-poll the ingest queue and ingest what arrives (the Lambda handler, locally), until SIGTERM."""
    worker_command(console)
