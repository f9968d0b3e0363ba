"""Upload a folder of documents to the corpus bucket, only the files that changed (by sha256)."""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingest.pipeline import document_files


@dataclass
class UploadReport:
    uploaded: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def upload_folder(s3: Any, bucket: str, folder: Path, *, delete: bool = False, dry_run: bool = False) -> UploadReport:
    """Keys are paths relative to `folder` (compliance/CMP-SOP-004.md). With `delete`, objects whose file is
    gone are deleted, which withdraws their documents. With `dry_run`, the report lists what would change
    and nothing is written."""
    report = UploadReport()
    files, skipped = document_files([folder])
    report.skipped = [p.relative_to(folder).as_posix() for p in skipped]
    remote = _remote_hashes(s3, bucket)
    local = set()
    for path in files:
        key = path.relative_to(folder).as_posix()
        local.add(key)
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if remote.get(key) == digest:
            report.unchanged.append(key)
            continue
        report.uploaded.append(key)
        if dry_run:
            continue
        s3.put_object(
            Bucket=bucket,
            Key=key,
            Body=data,
            Metadata={"sha256": digest},
            ContentType=mimetypes.guess_type(key)[0] or "application/octet-stream",
        )
    if delete:
        for key in sorted(set(remote) - local):
            if not dry_run:
                s3.delete_object(Bucket=bucket, Key=key)
            report.deleted.append(key)
    return report


def _remote_hashes(s3: Any, bucket: str) -> dict[str, str | None]:
    hashes: dict[str, str | None] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            head = s3.head_object(Bucket=bucket, Key=item["Key"])
            hashes[item["Key"]] = head.get("Metadata", {}).get("sha256")
    return hashes
