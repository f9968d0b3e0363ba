"""Per-file budgets: the decompressed size of a zip package (.docx), checked before a parser inflates any
of it, and the parse time, checked by every format's parser as it goes (between PDF pages, DOCX paragraphs,
Markdown and HTML blocks, OpenAPI operations).

`KB_MAX_FILE_BYTES` sees only the compressed size, and XML compresses 100-fold or more: a 0.9 MB .docx
expanding to 300 MB of XML held a worker at 4.9 GB for over a minute. The declared sizes are summed first
(free); then every entry is inflated through a counter that stops at the budget, so a package whose
headers understate its entries cannot get past the budget either.
"""

from __future__ import annotations

import io
import time
import zipfile
import zlib
from dataclasses import dataclass

from ingest.document import ParseError

_READ = 1 << 20  # bytes inflated per read: memory stays at one slice, whatever an entry holds
PARSE_LIMIT_SETTING = "KB_MAX_PARSE_SECONDS"  # a parse limit cut shorter names its cut as well (ingest.worker)


@dataclass(frozen=True)
class ParseLimit:
    """One file's parse-time budget and what set it, as a time-out names it (KB_MAX_PARSE_SECONDS, or that
    cut to a Lambda invocation's time left)."""

    seconds: float
    setting: str = PARSE_LIMIT_SETTING


def check_package_size(data: bytes, budget: int, kind: str) -> None:
    """Raise ParseError if the zip package in `data` expands to more than `budget` bytes. Data that is
    not a zip is left to the format's parser to name."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return
    with archive:
        entries = archive.infolist()
        declared = sum(entry.file_size for entry in entries)
        if declared > budget:
            raise ParseError(_over(kind, f"{declared / 1e6:.1f} MB", budget))
        total = 0
        try:
            for entry in entries:
                with archive.open(entry) as stream:
                    while piece := stream.read(_READ):
                        total += len(piece)
                        if total > budget:
                            raise ParseError(_over(kind, f"more than {budget / 1e6:.1f} MB", budget))
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError) as exc:
            # CRC or size mismatch (headers that lie), an unsupported compression method, encryption.
            raise ParseError(
                f"the {kind} package is damaged or incomplete ({exc.__class__.__name__}: {exc}): it was cut short or "
                "changed on the way; save or export it again from its editor"
            ) from None


class OutOfMemory(ParseError):
    """A parse ran out of memory: in a parse child, its budget (ingest.parsers.child) was reached."""


class Deadline:
    """A parse-time budget, checked between pages, paragraphs, blocks or operations: none of them takes long, and
    a parser library's single call cannot be interrupted. Over it, the file fails with its reason instead of
    running into the worker's own timeout (then retried, and dead-lettered with no reason)."""

    def __init__(self, seconds: float, setting: str = PARSE_LIMIT_SETTING) -> None:
        self.seconds = seconds
        self.setting = setting  # what set the limit, as the error names it
        self.until = time.monotonic() + seconds

    def check(self, kind: str, where: str) -> None:
        if time.monotonic() > self.until:
            raise ParseError(
                f"parsing the {kind} took longer than the {self.seconds:g} s limit ({self.setting}), at "
                f"{where}: split the document, or raise the limit within the worker's timeout"
            )


def _over(kind: str, size: str, budget: int) -> str:
    return (
        f"the {kind} package expands to {size}, over the {budget / 1e6:.1f} MB decompressed-size limit "
        "(KB_MAX_DECOMPRESSED_BYTES): split the document, or raise the limit with the worker's memory"
    )
