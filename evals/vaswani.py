"""The NPL (Vaswani) test collection: 11,429 physics and electronics abstracts, 93 queries, binary judgments.

Each abstract is ingested through the product's own pipeline as a plain public document (one section),
each query runs through the same hybrid query as the MCP tool (as demo_readonly, 1,000 results so MAP is
comparable with the published runs), and the usual measures are computed per leg: MAP, nDCG@10, P@10 and
R@100. The data stays in ../shared/datasets/vaswani; nothing of it is copied into the repository.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector_async

from ingest.pipeline import Ingestor, IngestResult
from kb_core.db.targets import reader_conninfo
from kb_core.embedders.base import Embedder
from kb_core.roles import Role
from kb_server.search import DEFAULT_FUSION, Bm25, Fusion, hybrid_search

DATASET = Path(
    os.environ.get("KB_VASWANI_DIR", Path(__file__).resolve().parents[2] / "shared" / "datasets" / "vaswani")
)
DEPTH = 1000
# Published runs on this collection (../shared/datasets/README.md).
BASELINES = {
    "BM25 (Terrier defaults)": {"MAP": 0.2965},
    "BM25 (rank_bm25, k1 1.2, b 0.75, Porter, stop words)": {
        "MAP": 0.289,
        "nDCG@10": 0.440,
        "P@10": 0.358,
        "R@100": 0.604,
    },
}


@dataclass(frozen=True)
class Collection:
    documents: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, set[str]]


def verify(folder: Path = DATASET) -> None:
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        if name != "README.md" and hashlib.sha256((folder / name).read_bytes()).hexdigest() != digest:
            raise ValueError(f"{folder / name} does not match its SHA256SUMS entry")


def load(folder: Path = DATASET) -> Collection:
    verify(folder)
    text = (folder / "doc-text.trec").read_text()
    documents = {
        m.group(1): " ".join(m.group(2).split())
        for m in re.finditer(r"<DOCNO>\s*(\d+)\s*</DOCNO>(.*?)</DOC>", text, re.S)
    }
    queries_text = (folder / "query-text.trec").read_text()
    queries = {
        m.group(1): " ".join(m.group(2).split())
        for m in re.finditer(r"<num>\s*(\d+)\s*</num>\s*<title>(.*?)</title>", queries_text, re.S)
    }
    qrels: dict[str, set[str]] = defaultdict(set)
    for line in (folder / "qrels").read_text().splitlines():
        qid, _, docno, relevance = line.split()
        if int(relevance) > 0:
            qrels[qid].add(docno)
    return Collection(documents, queries, dict(qrels))


def as_markdown(docno: str, text: str) -> bytes:
    return (
        f'---\ndoc_code: ENG-NPL-{int(docno):06d}\ntitle: NPL abstract {docno}\nversion: "1.0"\n'
        "status: effective\neffective_date: 1970-01-01\nowner: NPL test collection\ndepartment: engineering\n"
        f"classification: public\nregulatory_refs: []\n---\n\n## 1. Abstract\n\n{text}\n"
    ).encode()


def ingest(ingestor: Ingestor, collection: Collection) -> list[IngestResult]:
    return [
        ingestor.ingest(as_markdown(docno, text), name=f"{docno}.md", source_uri=f"vaswani:{docno}")
        for docno, text in collection.documents.items()
    ]


async def run(
    conninfo: str,
    embedder: Embedder,
    collection: Collection,
    *,
    mode: str,
    text_query: str,
    text_rank: str,
    query_ids: Sequence[str] | None = None,
    fusion: Fusion = DEFAULT_FUSION,
    bm25: Bm25 | None = None,
    vectors: dict[str, np.ndarray] | None = None,
    hyphen_spellings: bool = True,
) -> dict[str, list[str]]:
    """qid -> ranked docnos (of `query_ids`, default every query); `vectors` reuses query embeddings."""
    scored = await run_scored(
        conninfo,
        embedder,
        collection,
        mode=mode,
        text_query=text_query,
        text_rank=text_rank,
        query_ids=query_ids,
        fusion=fusion,
        bm25=bm25,
        vectors=vectors,
        hyphen_spellings=hyphen_spellings,
    )
    return {qid: list(dict.fromkeys(docno for docno, _ in ranked)) for qid, ranked in scored.items()}


async def run_scored(
    conninfo: str,
    embedder: Embedder,
    collection: Collection,
    *,
    mode: str,
    text_query: str,
    text_rank: str,
    query_ids: Sequence[str] | None = None,
    fusion: Fusion = DEFAULT_FUSION,
    bm25: Bm25 | None = None,
    vectors: dict[str, np.ndarray] | None = None,
    hyphen_spellings: bool = True,
) -> dict[str, list[tuple[str, float | None]]]:
    """qid -> (docno, score) of each hit in rank order: the leg's own score (cosine similarity or BM25) for a
    one-leg `mode`, the fused score for "hybrid". The tuner fuses the legs' scores this way (evals/tune.py)."""
    rankings: dict[str, list[tuple[str, float | None]]] = {}
    # demo_readonly's own login (sql/010): the server's login alone may become no reader role.
    reader = reader_conninfo(conninfo, Role.DEMO_READONLY)
    async with await psycopg.AsyncConnection.connect(reader, autocommit=True) as conn:
        await register_vector_async(conn)
        for qid in query_ids if query_ids is not None else list(collection.queries):
            text = collection.queries[qid]
            vector = None
            if mode != "text":
                vector = vectors[qid] if vectors is not None and qid in vectors else embedder.embed_query(text)
            hits = await hybrid_search(
                conn,
                Role.DEMO_READONLY,
                text=text,
                vector=vector,
                departments=None,
                limit=DEPTH,
                candidates=DEPTH,
                ef_search=DEPTH,
                text_query=text_query,
                text_rank=text_rank,
                with_text=mode != "vector",
                fusion=fusion,
                bm25=bm25,
                hyphen_spellings=hyphen_spellings,
            )
            score = {"vector": "vector_score", "text": "text_score"}.get(mode, "score")
            rankings[qid] = [(str(int(h.doc_code.rsplit("-", 1)[1])), getattr(h, score)) for h in hits]
    return rankings


def measures(
    rankings: dict[str, list[str]], qrels: dict[str, set[str]], query_ids: Sequence[str] | None = None
) -> dict[str, float]:
    """Means over the judged queries (of `query_ids`), as trec_eval computes them (binary relevance)."""
    ap, ndcg, p10, r100 = [], [], [], []
    for qid, relevant in qrels.items():
        if query_ids is not None and qid not in query_ids:
            continue
        ranked = rankings.get(qid, [])
        hits, precision_sum = 0, 0.0
        for rank, docno in enumerate(ranked, start=1):
            if docno in relevant:
                hits += 1
                precision_sum += hits / rank
        ap.append(precision_sum / len(relevant))
        dcg = sum(1 / math.log2(rank + 1) for rank, d in enumerate(ranked[:10], start=1) if d in relevant)
        ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(len(relevant), 10) + 1))
        ndcg.append(dcg / ideal)
        p10.append(sum(d in relevant for d in ranked[:10]) / 10)
        r100.append(sum(d in relevant for d in ranked[:100]) / len(relevant))
    n = len(ap)
    return {"MAP": sum(ap) / n, "nDCG@10": sum(ndcg) / n, "P@10": sum(p10) / n, "R@100": sum(r100) / n}


def bulk_load(owner_conninfo: str, embedder: Embedder, collection: Collection, *, model: str) -> None:
    """The collection, parsed and chunked by the product's own parser and chunker and embedded with the
    same texts the pipeline embeds, written with COPY (as the bench's synthetic chunks are) instead of one
    transaction per abstract: 11,429 single-document ingests take over an hour on a loaded 2-core machine.
    The writer's statistics are then counted by kb.rebuild_text_stats(), which tests/server/test_bm25.py shows
    equal to what the writer keeps. The query side, which is what is measured, is the served one."""
    from pgvector.psycopg import register_vector

    from ingest.chunker import chunk_document
    from ingest.parsers import parse_document
    from ingest.upsert import embedding_sha256

    prepared = []
    for docno, text in collection.documents.items():
        data = as_markdown(docno, text)
        document = parse_document(data, f"{docno}.md", max_bytes=1_000_000)
        chunks = chunk_document(document)
        prepared.append((docno, data, document, chunks, [c.embedding_text(document.header.title) for c in chunks]))
    texts = [t for *_, embedded in prepared for t in embedded]
    vectors = iter(embedder.embed(texts).vectors)
    with psycopg.connect(owner_conninfo, autocommit=True) as conn:
        register_vector(conn)
        with conn.transaction():
            with conn.cursor().copy(
                "COPY kb.documents (doc_code, version, version_key, title, status, effective_date, owner, department,"
                " classification, regulatory_refs, source_uri, source_format, source_sha256) FROM STDIN"
            ) as copy:
                for docno, data, document, _, _ in prepared:
                    h = document.header
                    copy.write_row(
                        (
                            h.doc_code,
                            h.version,
                            list(h.version_key),
                            h.title,
                            h.status,
                            h.effective_date,
                            h.owner,
                            h.department,
                            h.classification.value,
                            list(h.regulatory_refs),
                            f"vaswani:{docno}",
                            document.source_format,
                            hashlib.sha256(data).hexdigest(),
                        )
                    )
            ids: dict[str, int] = dict(conn.execute("SELECT doc_code, doc_id FROM kb.documents").fetchall())
            with conn.cursor().copy(
                "COPY kb.chunks (doc_id, classification, department, is_effective, ordinal, section_path, anchor,"
                " title, content, token_count, embedding_sha256, embedding) FROM STDIN"
            ) as copy:
                for _, _, document, chunks, embedded in prepared:
                    h = document.header
                    for chunk, text in zip(chunks, embedded, strict=True):
                        copy.write_row(
                            (
                                ids[h.doc_code],
                                h.classification.value,
                                h.department,
                                True,
                                chunk.ordinal,
                                chunk.section_path,
                                chunk.anchor,
                                h.title,
                                chunk.content,
                                chunk.token_count,
                                embedding_sha256(model, text),
                                next(vectors),
                            )
                        )
            conn.execute("SELECT kb.rebuild_text_stats()")
        conn.execute("VACUUM ANALYZE")
