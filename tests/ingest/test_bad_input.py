"""Bad files fail alone, each with a reason that names the problem; the others in the run are ingested,
and nothing of a failed file is stored."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import psycopg
import pytest
from tests.conftest import REPO
from tests.support.documents import markdown_document, write

from ingest.pipeline import document_files, ingest_files


@pytest.fixture
def mixed_folder(tmp_path):
    folder = tmp_path / "inbox"
    real_pdf = (REPO / "corpus/compliance/CMP-SOP-006.pdf").read_bytes()
    damaged_zip = tmp_path / "damaged.docx"
    with zipfile.ZipFile(damaged_zip, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")  # a zip, but not a Word package
    write(folder / "good-one.md", markdown_document("CMP-SOP-901"))
    write(folder / "good-two.md", markdown_document("RSK-SOP-902", classification="public"))
    write(folder / "truncated.pdf", real_pdf[: len(real_pdf) // 3])
    write(folder / "empty.md", b"")
    write(folder / "not-a-zip.docx", b"This was saved as plain text and renamed to .docx\n")
    write(folder / "damaged.docx", damaged_zip.read_bytes())
    write(
        folder / "no-headings.html",
        (
            '<html><body><dl class="document-control"><dt>Doc code</dt><dd>LEG-GDE-903</dd><dt>Title</dt><dd>T</dd>'
            "<dt>Version</dt><dd>1.0</dd><dt>Status</dt><dd>effective</dd><dt>Effective date</dt><dd>2026-01-01</dd>"
            "<dt>Owner</dt><dd>Legal</dd><dt>Department</dt><dd>legal</dd><dt>Classification</dt><dd>public</dd>"
            "<dt>Regulatory refs</dt><dd></dd></dl><p>Just one paragraph, no sections.</p></body></html>"
        ),
    )
    write(folder / "broken-api.yaml", "openapi: 3.0.3\ninfo: [this is: not, valid\n")
    write(
        folder / "no-paths.json",
        '{"openapi": "3.0.3", "info": {"title": "X", "version": "1.0", '
        '"x-document-control": {"doc_code": "ENG-API-904", "status": "effective", "effective_date": "2026-01-01",'
        ' "owner": "Eng", "department": "engineering", "classification": "public", "regulatory_refs": []}}}',
    )
    write(folder / "notes.txt", b"meeting notes")
    write(folder / "latin1.md", markdown_document("CMP-SOP-905").replace("Test", "Caf\u00e9").encode("latin-1"))
    return folder


EXPECTED_REASONS = {
    "truncated.pdf": "the PDF is damaged",
    "empty.md": "the file is empty",
    "not-a-zip.docx": "not a DOCX file",
    "damaged.docx": "DOCX package is damaged or incomplete",
    "no-headings.html": "no section headings",
    "broken-api.yaml": "not valid YAML at line 3, column 1: expected ',' or ']', but got '<stream end>'",
    "no-paths.json": "'paths' is missing",
    "notes.txt": "unsupported file type '.txt'",
    "latin1.md": "not UTF-8",
}


def test_each_bad_file_fails_alone_with_its_reason_and_the_good_ones_are_ingested(ingestor, database, mixed_folder):
    files = sorted(mixed_folder.iterdir())
    results = {r.source_uri.rsplit("/", 1)[-1]: r for r in ingest_files(ingestor, files)}
    assert {n for n, r in results.items() if r.outcome == "ingested"} == {"good-one.md", "good-two.md"}
    for name, reason in EXPECTED_REASONS.items():
        assert results[name].outcome == "failed"
        assert reason in (results[name].reason or ""), (name, results[name].reason)
    # Found walking it: these two named neither where the fault is nor what to do.
    assert (results["broken-api.yaml"].reason or "").endswith("; correct it there")
    assert (results["damaged.docx"].reason or "").endswith("; save or export it again from its editor")
    with psycopg.connect(database.ingest) as conn:
        stored = {row[0] for row in conn.execute("SELECT doc_code FROM kb.documents")}
        orphans = conn.execute("SELECT count(*) FROM kb.chunks WHERE doc_id NOT IN (SELECT doc_id FROM kb.documents)")
        assert orphans.fetchone()[0] == 0
    assert stored == {"CMP-SOP-901", "RSK-SOP-902"}


def test_a_stored_documents_bytes_under_another_extension_fail_its_type_check_not_pass_as_unchanged(ingestor, tmp_path):
    # Found walking it: LEG-GDE-020.md copied to LEG-GDE-022.pdf came back "unchanged LEG-GDE-020 v1.0", since
    # the bytes were known; the same file with other bytes failed naming its real type.
    text = markdown_document("CMP-SOP-903")
    (stored,) = ingest_files(ingestor, [write(tmp_path / "a" / "CMP-SOP-903.md", text)])
    assert stored.outcome == "ingested", stored.reason
    (renamed,) = ingest_files(ingestor, [write(tmp_path / "b" / "CMP-SOP-904.pdf", text)])
    assert renamed.outcome == "failed", renamed
    expected = "the file is Markdown text, not a PDF file: its extension .pdf does not match its content"
    assert expected in (renamed.reason or "")


@pytest.mark.parametrize("extension", [".yaml", ".json", ".html"])
def test_a_stored_markdown_documents_bytes_under_a_text_formats_extension_fail_naming_markdown(
    ingestor, tmp_path, extension
):
    # Found walking it: the type check before the hash lookup covered the binary formats only, so a byte copy of
    # a stored .md under .yaml, .json or .html came back "unchanged".
    text = markdown_document("CMP-SOP-905")
    (stored,) = ingest_files(ingestor, [write(tmp_path / "a" / "CMP-SOP-905.md", text)])
    assert stored.outcome == "ingested", stored.reason
    (copied,) = ingest_files(ingestor, [write(tmp_path / "b" / f"CMP-SOP-905{extension}", text)])
    assert copied.outcome == "failed", copied
    assert "the file is Markdown text" in (copied.reason or "") and "rename it to .md" in (copied.reason or "")


def test_a_file_over_the_size_limit_fails_with_the_limit_named(database, counting_embedder, tmp_path):
    from ingest.pipeline import Ingestor

    big = write(tmp_path / "big.md", markdown_document(sections={"1. A": "word " * 5000}))
    with Ingestor(database.ingest, counting_embedder, max_bytes=10_000) as small_limit:
        (result,) = ingest_files(small_limit, [big])
    assert result.outcome == "failed" and "KB_MAX_FILE_BYTES" in (result.reason or "")
    assert counting_embedder.calls == 0


def test_walking_a_folder_skips_what_is_not_a_document_but_a_named_file_is_kept(mixed_folder):
    chosen, skipped = document_files([mixed_folder])
    assert [p.name for p in skipped] == ["notes.txt"]
    chosen, skipped = document_files([mixed_folder / "notes.txt"])
    assert [p.name for p in chosen] == ["notes.txt"]


def test_kb_ingest_reports_the_failures_and_exits_non_zero(mixed_folder, database, test_state_dir):
    from psycopg import conninfo as pg_conninfo

    params = pg_conninfo.conninfo_to_dict(database.owner)
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://{params['user']}@/{params['dbname']}?host={params['host']}",
        "COLUMNS": "200",
    }
    result = subprocess.run(
        [sys.executable, "-m", "kb_cli.main", "ingest", str(mixed_folder)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    assert "2 ingested, 0 unchanged" in result.stdout
    assert "8 failed" in result.stdout  # the walked folder skips notes.txt
    assert "not a DOCX file" in result.stdout
    # One file, said in the singular, with the types that are documents (as kb aws upload says it).
    assert "skipped 1 file of a type that is not a document (.docx, " in " ".join(result.stdout.split())
    assert "notes.txt" in result.stdout


def test_kb_ingest_of_a_folder_with_no_documents_is_an_error_not_a_quiet_zero(tmp_path, test_state_dir):
    folder = tmp_path / "wrong"
    write(folder / "notes.txt", b"not a document\n")
    env = {**os.environ, "KB_STATE_DIR": str(test_state_dir), "COLUMNS": "200"}
    result = subprocess.run(
        [sys.executable, "-m", "kb_cli.main", "ingest", str(folder)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"error: no documents in {folder}: nothing to ingest (the formats are .docx, " in result.stderr
    assert "skipped 1 file of a type that is not a document" in result.stdout
