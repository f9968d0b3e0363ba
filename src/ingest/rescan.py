"""`kb rescan`: re-scan stored chunks with the current injection scanner and rewrite their flags in place.

A chunk's text is not changed by a rescan, so neither is its embedding: nothing is sent to the embedder.
Only chunks stored by an older scanner version are read (all of them with `everything=True`), in batches,
each batch in its own transaction, so a rescan can be stopped and run again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg

from ingest.injection import HeaderText, header_text, scan_chunk
from ingest.scanner import SCANNER_VERSION, InjectionFinding
from ingest.upsert import injection_metadata

Scan = Callable[[str, str, HeaderText], Sequence[InjectionFinding]]
BATCH = 500

_SELECT = """
SELECT c.chunk_id, c.classification, c.section_path, c.content, c.injection_rule, d.title, d.owner, d.regulatory_refs
FROM kb.chunks c
JOIN kb.documents d ON d.doc_id = c.doc_id
WHERE (%(everything)s OR c.scanner_version < %(version)s) AND c.chunk_id > %(after)s
ORDER BY c.chunk_id
LIMIT %(batch)s"""
_UPDATE = """
UPDATE kb.chunks
SET injection_suspect = %(suspect)s, injection_rule = %(rule)s, scanner_version = %(version)s,
    metadata = (metadata - 'injection') || %(evidence)s::jsonb
WHERE chunk_id = %(chunk_id)s AND classification = %(class)s"""


@dataclass
class RescanResult:
    scanned: int = 0
    newly_flagged: int = 0  # suspect now, not before
    cleared: int = 0  # suspect before, not now
    rule_changed: int = 0  # suspect before and now, with other rules


def rescan(
    conn: psycopg.Connection,
    *,
    scan: Scan = scan_chunk,
    version: int = SCANNER_VERSION,
    everything: bool = False,
    batch: int = BATCH,
) -> RescanResult:
    """Re-flag every chunk stored by a scanner older than `version` (or every chunk) as the writer."""
    result = RescanResult()
    after = 0  # chunk ids are one identity across the partitions
    while True:
        with conn.transaction():
            rows = conn.execute(
                _SELECT,
                {"everything": everything, "version": version, "after": after, "batch": batch},
            ).fetchall()
            for chunk_id, classification, section_path, content, old_rule, title, owner, refs in rows:
                findings = list(scan(section_path, content, header_text(title, owner, refs)))
                rule = ",".join(f.rule for f in findings) or None
                conn.execute(
                    _UPDATE,
                    {
                        "suspect": rule is not None,
                        "rule": rule,
                        "version": version,
                        "evidence": json.dumps(injection_metadata(findings)),
                        "chunk_id": chunk_id,
                        "class": classification,
                    },
                )
                result.scanned += 1
                if rule and not old_rule:
                    result.newly_flagged += 1
                elif old_rule and not rule:
                    result.cleared += 1
                elif rule != old_rule:
                    result.rule_changed += 1
        if len(rows) < batch:
            return result
        after = rows[-1][0]
