"""The per-file budgets' defaults (KB_MAX_DECOMPRESSED_BYTES, KB_MAX_PARSE_SECONDS, KB_MAX_PARSE_MEMORY_BYTES,
KB_WORKER_RESERVE_SECONDS), apart from the settings classes: the parse server reads them without loading the
settings' libraries.
"""

from __future__ import annotations

# A .docx is a zip of XML, and XML compresses 100-fold: KB_MAX_FILE_BYTES alone lets a 1 MB file expand
# to gigabytes. 32 MiB holds a package at the 25 MiB file limit of images (which barely compress) plus
# several MB of XML (20k Word paragraphs are ~10-20 MB), while python-docx's tree of the XML (measured
# 6x its size for prose, up to 22x for empty paragraphs) stays inside the worker's 1,024 MB (infra/).
DEFAULT_MAX_DECOMPRESSED_BYTES = 32 * 1024 * 1024
# Checked by the PDF and DOCX parsers between pages and paragraphs; the 2,000-page PDF and 20k-paragraph DOCX
# targets (60 s, 10 s) fit. The Lambda worker sets less (infra/template.yaml), under its own timeout.
DEFAULT_MAX_PARSE_SECONDS = 120.0
# A parse runs in a child of the parse server that may take this much memory beyond the server's
# (ingest.parsers.child, ingest.parsers.parse_server). The Lambda worker's 1,024 MB (infra/) = the worker and its
# parse server idle (~130 MB together) + a parse (512 MiB) + the parsed document and its chunks held afterwards.
# Markdown is parsed in parts of ~256 KB (ingest.parsers.markdown): 24 MB of it peaks at ~205 MB and parses;
# a file whose parse needs more than the budget is refused, naming it, not OOM-killed.
DEFAULT_MAX_PARSE_MEMORY_BYTES = 512 * 1024 * 1024
# The Lambda worker cuts each record's parse budget to the time its invocation has left less this, and does not
# start a record it cannot give 1 s (ingest.worker.invocation_deadline). 20 s = the 10 s a parse child may run
# past its budget before it is killed (ingest.parsers.child.HARD_STOP_GRACE_S) + 10 s to embed, store and report
# an average file (one or two embedding calls, one transaction). With the worker's 60 s Timeout the first record
# of a batch keeps its whole KB_MAX_PARSE_SECONDS (40), the split infra/template.yaml made before.
DEFAULT_WORKER_RESERVE_SECONDS = 20.0


def over_size_limit(size: int, max_bytes: int, what: str = "the file") -> str:
    """Why a file over KB_MAX_FILE_BYTES is refused, in the unit the README states the limit in, with the fix."""
    return (
        f"{what} is {_binary_size(size)}, over the {_binary_size(max_bytes)} limit (KB_MAX_FILE_BYTES): split the "
        "document, or raise KB_MAX_FILE_BYTES"
    )


def _binary_size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"
