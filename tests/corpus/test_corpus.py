"""corpus/: the manifest matches the files, every file ingests, and the planted injections are flagged."""

from __future__ import annotations

import csv
import hashlib
import io
import subprocess
import sys
from collections import Counter

import psycopg
from rich.console import Console
from tests.conftest import REPO

from kb_cli.ingest_report import print_summary

MANIFEST = list(csv.DictReader((REPO / "corpus" / "MANIFEST.csv").open()))
PLANTED = {"SEC-VND-007", "PAY-REF-006", "ENG-API-008", "FIN-SOP-005"}
LEGITIMATE = [
    "ignore transactions below the reporting threshold",
    "the system prompt for the IVR",
    "disregard superseded versions of the schedule",
    "override the hold only with CCO approval",
    "execute the rollback command",
]


def test_the_manifest_lists_every_document_file_with_its_hash():
    on_disk = {
        p.relative_to(REPO).as_posix() for p in (REPO / "corpus").rglob("*") if p.is_file() and p.name != "MANIFEST.csv"
    }
    assert {row["path"] for row in MANIFEST} == on_disk
    for row in MANIFEST:
        assert hashlib.sha256((REPO / row["path"]).read_bytes()).hexdigest() == row["sha256"], row["path"]


def test_the_corpus_has_every_format_level_and_trap_the_evals_need():
    formats = Counter(row["format"] for row in MANIFEST)
    assert formats["pdf"] >= 8 and formats["docx"] >= 8 and formats["html"] >= 8 and formats["openapi"] >= 5
    assert len({row["department"] for row in MANIFEST}) == 9
    assert {row["classification"] for row in MANIFEST} == {"public", "internal", "confidential", "restricted"}
    superseded = {row["doc_code"] for row in MANIFEST if row["status"] == "superseded"}
    effective = {row["doc_code"] for row in MANIFEST if row["status"] == "effective"}
    assert len(superseded & effective) >= 6  # documents with an older version whose numbers differ
    mixed = [
        d
        for d in {r["department"] for r in MANIFEST}
        if len({r["classification"] for r in MANIFEST if r["department"] == d}) >= 3
    ]
    assert len(mixed) >= 5


def test_the_binary_files_rebuild_exactly_from_their_sources():
    result = subprocess.run(
        [sys.executable, "tools/corpus/build.py", "--check"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_file_ingests_and_each_result_matches_its_manifest_row(corpus_database):
    results = {r.source_uri: r for r in corpus_database.results}
    assert [r for r in results.values() if r.outcome != "ingested"] == []
    assert [p.name for p in corpus_database.skipped] == ["MANIFEST.csv"]
    for row in MANIFEST:
        result = results[(REPO / row["path"]).resolve().as_uri()]
        assert (result.doc_code, result.version, result.status) == (row["doc_code"], row["version"], row["status"])
        assert (result.department, result.classification, result.source_format) == (
            row["department"],
            row["classification"],
            row["format"],
        )


def test_the_ingest_summary_counts_match_the_manifest(corpus_database):
    out = io.StringIO()
    print_summary(Console(file=out, width=400), corpus_database.results, corpus_database.skipped, 1.0)
    printed = out.getvalue()
    assert f"{len(MANIFEST)} ingested, 0 unchanged, 0 failed" in printed
    for label, column in (
        ("department", "department"),
        ("format", "format"),
        ("classification", "classification"),
        ("status", "status"),
    ):
        counts = Counter(row[column] for row in MANIFEST)
        assert f"by {label}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) in printed


def test_the_planted_documents_are_flagged_and_legitimate_alarming_text_is_not(corpus_database):
    with psycopg.connect(corpus_database.targets.ingest) as conn:
        flagged = conn.execute(
            "SELECT DISTINCT d.doc_code FROM kb.chunks c JOIN kb.documents d USING (doc_id) WHERE c.injection_suspect"
        ).fetchall()
        for phrase in LEGITIMATE:
            rows = conn.execute(
                "SELECT injection_suspect FROM kb.chunks WHERE content ILIKE %s", (f"%{phrase}%",)
            ).fetchall()
            assert rows, f"the corpus should contain {phrase!r}"
            assert not any(r[0] for r in rows), phrase
    assert {row[0] for row in flagged} == PLANTED
