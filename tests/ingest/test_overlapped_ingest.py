"""`ingest_files` overlaps parsing, embedding and storing, yet each file keeps the outcome it would have alone:
results and log entries in file order, identical bytes found even while the first copy is still embedding,
vectors another file of the run is computing reused rather than embedded twice, and an embedding failure
is its own file's alone."""

from __future__ import annotations

import psycopg
from tests.support.documents import markdown_document, write

from ingest.pipeline import Ingestor, ingest_files
from kb_core.embedders.base import EmbeddingError

SECTIONS = {f"{n}. Topic {n}": f"Paragraph about topic {n} and its limits." for n in range(1, 6)}
REVISED = {**SECTIONS, "3. Topic 3": "A rewritten rule."}


def log_outcomes(conninfo: str) -> list[tuple[str, str]]:
    with psycopg.connect(conninfo) as conn:
        rows = conn.execute("SELECT source_uri, outcome FROM kb.ingest_log ORDER BY event_id").fetchall()
    return [(uri.rsplit("/", 1)[-1], outcome) for uri, outcome in rows]


def test_a_run_gives_each_file_the_outcome_it_would_have_alone_in_file_order(
    ingestor, counting_embedder, database, tmp_path
):
    v1 = markdown_document(sections=SECTIONS)
    files = [
        write(tmp_path / "a-v1.md", v1),
        write(tmp_path / "b-copy.md", v1),  # identical bytes, checked while a-v1 is still in flight
        write(tmp_path / "c-v2.md", markdown_document(version="1.1", effective_date="2026-02-01", sections=REVISED)),
        write(tmp_path / "d-other.md", markdown_document("RSK-SOP-902", title="Risk", sections=SECTIONS)),
        write(
            tmp_path / "e-other-v2.md", markdown_document("RSK-SOP-902", title="Risk", version="2.0", sections=REVISED)
        ),
        write(tmp_path / "f-conflict.md", markdown_document(sections={"1. Purpose": "Other content."})),
        write(tmp_path / "g-empty.md", b""),
    ]
    seen: list[str] = []
    results = list(ingest_files(ingestor, files, on_result=lambda r: seen.append(r.source_uri)))
    names = [r.source_uri.rsplit("/", 1)[-1] for r in results]
    assert names == [f.name for f in files] and seen == [r.source_uri for r in results]
    assert [r.outcome for r in results] == ["ingested", "unchanged", "ingested", "ingested", "ingested"] + [
        "failed"
    ] * 2
    assert results[1].reason == f"identical to {files[0].resolve().as_uri()}"
    assert (results[2].reason, results[4].reason) == ("superseded version 1.0", "superseded version 1.0")
    assert "CMP-SOP-901 version 1.0 is already stored from" in (results[5].reason or "")
    assert results[6].reason is not None and "the file is empty" in results[6].reason
    # Each changed chunk embedded once: the revisions reuse the earlier versions' vectors, stored or in flight.
    assert [r.embedded for r in results[:5]] == [5, 0, 1, 5, 1]
    assert counting_embedder.texts == 12
    assert log_outcomes(database.ingest) == [(r.source_uri.rsplit("/", 1)[-1], r.outcome) for r in results]


class FailsFirstCall:
    """The real local embedder, except that its first call fails as an API outage would."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.calls, self.texts = inner, 0, 0

    @property
    def space(self):  # type: ignore[no-untyped-def]
        return self.inner.space

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls == 1:
            raise EmbeddingError("the embeddings API answered HTTP 503: scripted outage")
        self.texts += len(texts)
        return self.inner.embed(texts)

    def embed_query(self, text):  # type: ignore[no-untyped-def]
        return self.inner.embed_query(text)


def test_a_failed_embedding_fails_its_file_alone_and_a_file_counting_on_its_vectors_embeds_them_itself(
    local_embedder, database, tmp_path
):
    embedder = FailsFirstCall(local_embedder)
    files = [
        write(tmp_path / "a-v1.md", markdown_document(sections=SECTIONS)),
        write(tmp_path / "b-v2.md", markdown_document(version="1.1", effective_date="2026-02-01", sections=REVISED)),
    ]
    with Ingestor(database.ingest, embedder, max_bytes=1_000_000) as ingestor:
        first, second = ingest_files(ingestor, files)
    assert (first.outcome, first.reason) == ("failed", "the embeddings API answered HTTP 503: scripted outage")
    assert (second.outcome, second.embedded, embedder.texts) == ("ingested", 5, 5)
    with psycopg.connect(database.ingest) as conn:
        stored = conn.execute("SELECT version, count(*) FROM kb.documents JOIN kb.chunks USING (doc_id) GROUP BY 1")
        assert stored.fetchall() == [("1.1", 5)]


def test_a_file_that_meets_a_stopped_database_names_the_fix_and_the_next_one_reconnects(ingestor, database):
    # Found walking it as an operator: "database error: OperationalError: connection is bad: connection to server on
    # socket ... failed: No such file or directory" named no fix.
    import psycopg
    from tests.support.documents import markdown_document

    first = ingestor.ingest(markdown_document("FIN-SOP-971").encode(), name="a.md", source_uri="s3://kb/a.md")
    assert first.outcome == "ingested", first
    with psycopg.connect(database.owner, autocommit=True) as conn:
        (pid,) = conn.execute("SELECT pid FROM pg_stat_activity WHERE usename = 'kb_ingest'").fetchone()
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    cut = ingestor.ingest(markdown_document("FIN-SOP-972").encode(), name="b.md", source_uri="s3://kb/b.md")
    assert cut.outcome == "failed", cut
    assert cut.reason is not None and cut.reason.startswith("the database is unreachable (AdminShutdown: "), cut
    assert "`kb db start`" in cut.reason and "nothing of this file was stored" in cut.reason
    again = ingestor.ingest(markdown_document("FIN-SOP-972").encode(), name="b.md", source_uri="s3://kb/b.md")
    assert again.outcome == "ingested", again
