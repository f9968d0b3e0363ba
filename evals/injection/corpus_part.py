"""corpus/'s own chunks as benign development passages for the injection classifier.

corpus/ is the company-document sample that tests/corpus ingests; its documents are long legitimate policy,
runbook and API prose, the kind of text a retrieval server stores, and no benign chunk of it may be flagged.
The labelled set's benign passages are short, so a classifier fitted on them alone scored some long policy
chunks near the attacks. Each document is parsed and chunked as ingestion does (ingest.pipeline) and each chunk
is read as the scanner reads it (its section path, then its text). The documents with a planted injection
(tools/corpus/catalog.md, "Planted injection") are left out whole: their attack chunks are not benign, and
their other chunks would teach the classifier the prose an attack hides in. A document is one group, so that
cross-validation never trains on one of its chunks and scores another.
"""

from __future__ import annotations

import csv
from pathlib import Path

from evals.injection.data_set import Passage
from ingest.chunker import chunk_document
from ingest.parsers import parse_document
from kb_core.token_count import EMBEDDING_INPUT_LIMIT

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
PLANTED = frozenset({"SEC-VND-007", "PAY-REF-006", "ENG-API-008", "FIN-SOP-005"})
KIND = "corpus_chunk"
ID_PREFIX = "corpus:"


def document_chunks() -> list[tuple[str, str, str]]:
    """(doc_code, version, chunk text as the scanner reads it) of every chunk of every document in corpus/."""
    with (CORPUS / "MANIFEST.csv").open(encoding="utf-8") as manifest:
        rows = list(csv.DictReader(manifest))
    chunks = []
    for row in rows:
        path = CORPUS.parent / row["path"]
        document = parse_document(path.read_bytes(), path.name, max_bytes=50_000_000)
        for chunk in chunk_document(document, max_tokens=EMBEDDING_INPUT_LIMIT):
            chunks.append((row["doc_code"], row["version"], f"{chunk.section_path}\n{chunk.content}"))
    return chunks


def corpus_passages() -> list[Passage]:
    """Every chunk of corpus/'s documents without a planted injection, as a benign passage with the id
    `corpus:<doc_code>:<version>:<n>`."""
    passages = []
    for n, (doc_code, version, text) in enumerate(document_chunks()):
        if doc_code not in PLANTED:
            passages.append(Passage(f"{ID_PREFIX}{doc_code}:{version}:{n}", "benign", KIND, "corpus chunk", text))
    return passages
