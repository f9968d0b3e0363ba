"""Upload a folder of documents to the corpus bucket, only the files that changed (by sha256)."""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from ingest.document import ParseError
from ingest.parsers import parse_document
from ingest.pipeline import document_files
from ingest.upsert import not_in_force


@dataclass
class UploadReport:
    uploaded: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    over_limit: dict[str, int] = field(default_factory=dict)  # key -> size: a worker at max_bytes refuses it
    empty: list[str] = field(default_factory=list)  # nothing but whitespace: the worker refuses it
    # Files to upload that the worker will refuse, and why (parsed here first: a broken header or a damaged file
    # was only found after the upload, a minute later in the dead-letter queue).
    refused: dict[str, str] = field(default_factory=dict)
    # Effective versions dated after today: not uploaded (the next upload on or after the date sends them).
    held_back: dict[str, date] = field(default_factory=dict)
    in_bucket: int = 0  # objects in the bucket before

    @property
    def deletes_most(self) -> bool:
        """Most of the bucket deleted: more like the wrong folder (a subfolder, an empty one) than files removed."""
        return len(self.deleted) >= 2 and 2 * len(self.deleted) > self.in_bucket


def most_of_bucket(folder: Path, bucket: str, report: UploadReport, *, changed_nothing: bool = True) -> str:
    """Why an upload that deletes most of the bucket is refused, and what to do instead (a dry run changes nothing
    anyway, so it says so only of a real upload)."""
    empty = "" if report.uploaded or report.unchanged else f" ({folder} holds no documents)"
    done = "; nothing was changed" if changed_nothing else ""
    return (
        f"uploading {folder} would delete {len(report.deleted)} of the {report.in_bucket} objects in s3://{bucket} "
        f"(and withdraw their documents){empty}{done}. The bucket mirrors the whole corpus folder "
        "(keys such as compliance/CMP-SOP-004.md): upload that folder, or pass --keep-deleted to upload without "
        "deleting, or --delete-most if they really are gone"
    )


class MostOfBucket(Exception):
    """Refused, before anything was written: the folder would delete most of the bucket's objects."""


def upload_folder(
    s3: Any,
    bucket: str,
    folder: Path,
    *,
    delete: bool = False,
    dry_run: bool = False,
    delete_most: bool = True,
    max_bytes: int | None = None,
    check: bool = False,
) -> UploadReport:
    """Keys are paths relative to `folder` (compliance/CMP-SOP-004.md). With `delete`, objects whose file is
    gone are deleted, which withdraws their documents; unless `delete_most`, an upload that would delete most of
    the bucket raises MostOfBucket before writing anything. With `dry_run`, the report lists what would change
    and nothing is written. A file over `max_bytes` is uploaded all the same (the worker's own limit decides)
    and listed in `over_limit`, so the upload can say it will be dead-lettered at a worker with that limit; an
    empty file likewise, in `empty`. With `check`, each file to upload is parsed first: those the worker will
    refuse are listed in `refused` (and uploaded all the same: the worker records why), and an effective version
    dated after today is held back, in `held_back` (`kb aws upload` and `make run` check)."""
    report = UploadReport()
    files, skipped = document_files([folder])
    report.skipped = [p.relative_to(folder).as_posix() for p in skipped]
    remote = _remote_hashes(s3, bucket)
    report.in_bucket = len(remote)
    keys = {path.relative_to(folder).as_posix(): path for path in files}
    if delete:
        report.deleted = sorted(set(remote) - set(keys))
    refused = report.deletes_most and not delete_most and not dry_run
    for key, path in keys.items():
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if remote.get(key) == digest:
            report.unchanged.append(key)  # said when it was uploaded: not again on every upload
            continue
        too_big = max_bytes is not None and len(data) > max_bytes
        empty = not data.strip()
        found = preflight(data, key) if check and not too_big and not empty else Preflight()
        if found.in_force_on is not None:
            # Uploaded, it would be dead-lettered now and, unchanged since, never sent again on its date (found
            # walking it): held back, the next upload on or after that date sends it; the bucket keeps what is in
            # force.
            report.held_back[key] = found.in_force_on
            continue
        report.uploaded.append(key)
        if too_big:
            report.over_limit[key] = len(data)
        if empty:
            report.empty.append(key)
        if found.refusal is not None:
            report.refused[key] = found.refusal
        if dry_run or refused:
            continue
        s3.put_object(
            Bucket=bucket,
            Key=key,
            Body=data,
            Metadata={"sha256": digest},
            ContentType=mimetypes.guess_type(key)[0] or "application/octet-stream",
        )
    if refused:  # after the loop, so that the message can say whether the folder holds documents at all
        raise MostOfBucket(most_of_bucket(folder, bucket, report))
    if not dry_run:
        for key in report.deleted:
            s3.delete_object(Bucket=bucket, Key=key)
    return report


@dataclass(frozen=True)
class Preflight:
    refusal: str | None = None  # why the worker will refuse the file, as it will say it
    in_force_on: date | None = None  # an effective version dated after today: its date


def preflight(data: bytes, name: str, *, today: date | None = None) -> Preflight:
    """The file as the worker will see it: the parse and the header's checks, and an effective version dated
    after today. (What depends on the database, such as a version already stored with other content, is the
    worker's to find; the size limit is the caller's.)"""
    try:
        header = parse_document(data, name, max_bytes=len(data) + 1).header
    except ParseError as exc:
        return Preflight(refusal=str(exc))
    if not_in_force(header, today or datetime.now(UTC).date()):
        return Preflight(in_force_on=header.effective_date)
    return Preflight()


def _remote_hashes(s3: Any, bucket: str) -> dict[str, str | None]:
    hashes: dict[str, str | None] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            head = s3.head_object(Bucket=bucket, Key=item["Key"])
            hashes[item["Key"]] = head.get("Metadata", {}).get("sha256")
    return hashes
