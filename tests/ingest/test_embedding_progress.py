"""A large file says how far its embedding has got: minutes of silence could not be told from a stuck worker."""

from __future__ import annotations

import numpy as np
from tests.support.documents import markdown_document

from ingest.embedding_parts import EmbeddingProgress, embed_in_parts
from ingest.pipeline import Ingestor


def test_a_file_of_several_parts_reports_each_part_but_the_last_and_its_vectors_are_the_same(local_embedder):
    texts = [f"Clause {n}: wires above ${n * 100:,} need a callback to a number on file." for n in range(600)]
    ticks = iter(float(n) for n in range(100))
    heard: list[EmbeddingProgress] = []
    parted = embed_in_parts(
        local_embedder, texts, name="big.md", report=heard.append, part=256, every_s=1.0, clock=lambda: next(ticks)
    )
    whole = local_embedder.embed(texts)
    assert [(p.done, p.total) for p in heard] == [(256, 600), (512, 600)]
    assert heard[0].line() == "embedding big.md: 256/600 chunks · 1 s"
    assert parted.vectors.shape == whole.vectors.shape == (600, whole.vectors.shape[1])
    assert np.allclose(parted.vectors, whole.vectors, atol=1e-4)
    assert parted.tokens == whole.tokens and parted.windows == whole.windows


def test_no_line_comes_sooner_than_every_s_nor_for_a_file_of_one_part(local_embedder):
    texts = [f"Row {n} of the fee table." for n in range(300)]
    heard: list[EmbeddingProgress] = []
    embed_in_parts(local_embedder, texts, name="a.md", report=heard.append, part=100, every_s=3600.0)
    embed_in_parts(local_embedder, texts[:100], name="b.md", report=heard.append, part=100, every_s=0.0)
    assert heard == []


def test_ingestion_reports_a_large_files_progress_to_whoever_runs_it(database, local_embedder, monkeypatch):
    monkeypatch.setattr("ingest.embedding_parts.EVERY_S", 0.0)
    monkeypatch.setattr("ingest.embedding_parts.PART", 40)
    monkeypatch.setattr("ingest.embedding_parts.TEXTS_PER_REQUEST", 1)
    sections = {f"{n}. Control {n}": f"Control {n} is tested every quarter by Internal Audit." for n in range(1, 101)}
    document = markdown_document("RSK-STD-931", title="Control Catalogue", sections=sections)
    heard: list[EmbeddingProgress] = []
    with Ingestor(database.ingest, local_embedder, max_bytes=2_000_000, report_embedding=heard.append) as ingestor:
        result = ingestor.ingest(document.encode(), name="catalogue.md", source_uri="s3://kb/risk/catalogue.md")
    assert result.outcome == "ingested" and result.chunks >= 100, result
    assert heard and {p.name for p in heard} == {"catalogue.md"}
    assert [p.done for p in heard] == list(range(40, result.embedded, 40))
    assert all(p.total == result.embedded for p in heard)


def test_a_part_keeps_every_request_the_embedder_may_have_in_flight_busy(local_embedder, monkeypatch):
    calls: list[int] = []

    class Parallel:
        requests_in_flight = 16  # e.g. KB_EMBED_CONCURRENCY=16: 16 requests of 64 texts at once

        def embed(self, texts):  # type: ignore[no-untyped-def]
            calls.append(len(texts))
            return local_embedder.embed(texts)

    embed_in_parts(Parallel(), ["a clause"] * 2500, name="x.md", report=lambda _: None)  # type: ignore[arg-type]
    assert calls == [1024, 1024, 452]
