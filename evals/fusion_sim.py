"""`python -m evals.fusion_sim`: two ranking ideas tried on the development golden questions before any SQL is
written (needs the databases `python -m evals.run` builds). Each leg's 50 candidates come from the served query
(evals.retrieval, the served BM25), are fused in Python exactly as the SQL fuses them (evals.tune.fuse, z-score,
with the identifier bonus the served hybrid gave), and then changed:

- sentence windows: each candidate chunk is also embedded two sentences at a time (with its contextual prefix,
  as ingestion embeds a chunk) and the vector leg scores it by its best window when that beats the whole chunk,
  as if every window were indexed as a row group is; "mix" averages that with the chunk's own similarity;
- document diversity: the result is taken greedily, each document's later chunks losing λ (in the fused
  score's units, standard deviations) per chunk of it already taken, for questions whose answer spans two
  documents;
- followed references: the chunks of a document that the first N fused chunks name by its code (another
  document than theirs) gain β, for cross-reference questions whose second section is in the document the
  first one points to;
- boilerplate sections: the chunks of a Purpose, Scope, Definitions or Revision History section lose λ, since
  such sections echo a document's whole vocabulary and fill places in the top 5 that the answering section needs.
  No golden question is answered by such a section, so the golden set cannot show what the penalty costs: it is
  also run on probe questions made from the corpus whose answer is one ("What changed in the latest version of
  the {title}?", "What is the purpose of the {title} and what does it cover?", "What does {a defined term} mean
  in the {title}?"), asked as the highest role.

The held-out questions are never read here. The report's rows (evals/report.py DEV_ONLY_ROWS) quote this output.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

import numpy as np

from evals.golden import Expected, GoldenQuestion, load_golden
from evals.metrics import Ranked, recall_at, reciprocal_rank
from evals.retrieval import run_questions
from evals.run import STATE, reusable_database
from evals.split import golden_part
from evals.tune import fuse, fused_scores
from ingest.chunker import Chunk, sentences
from kb_core.db.embedded import EmbeddedPostgres
from kb_core.embedders.local import LocalEmbedder
from kb_core.roles import Role
from kb_server.search import DEFAULT_BM25, DEFAULT_FUSION

# A section stands for its chunks: a table's row groups and the chunk of the whole table win different legs, and
# the SQL shows only the best of them (so does a leg here: its first), as the metrics count sections.
Key = tuple[str, str, str]  # doc_code, version, section_path
Legs = dict[str, list[tuple[Key, float]]]
DEPTH = 20
DOC_CODE_IN_TEXT = re.compile(r"\b[A-Z]{3}-[A-Z]{3}-[0-9]{3,6}\b")
BOILERPLATE = re.compile(r"(?:[0-9.]+\s+)?(?:purpose|scope|purpose and scope|definitions|revision history)", re.I)


def windows(content: str, size: int = 2) -> list[str]:
    """Overlapping runs of `size` sentences; none for a chunk of `size` sentences or fewer (its window is itself)."""
    said = sentences(content)
    return [" ".join(said[i : i + size]) for i in range(len(said) - size + 1)] if len(said) > size else []


def scores(questions: Sequence[GoldenQuestion], ranked: dict[str, list[Key]]) -> str:
    r5, rr = [], []
    for q in questions:
        keys = [Ranked(k[0], k[2]) for k in ranked[q.id]]
        r5.append(recall_at(keys, q.expected, 5))
        rr.append(reciprocal_rank(keys, q.expected))
    return f"recall@5 {np.mean(r5):.3f} MRR {np.mean(rr):.3f}"


def diversified(legs: Legs, bonus: dict[Key, float], penalty: float) -> list[Key]:
    rest, _ = fused_scores(legs, DEFAULT_FUSION, bonus)
    taken: list[Key] = []
    per_document: dict[str, int] = {}
    while rest and len(taken) < DEPTH:
        key = max(rest, key=lambda k: rest[k] - penalty * per_document.get(k[0], 0))
        taken.append(key)
        per_document[key[0]] = per_document.get(key[0], 0) + 1
        del rest[key]
    return taken


def followed(
    served: list[Key], contents: dict[Key, set[str]], legs: Legs, bonus: dict[Key, float], top: int, gain: float
) -> list[Key]:
    """The fused ranking again, each chunk of a document the first `top` name (by code, not their own) + `gain`."""
    own = {key[0] for key in served[:top]}
    named = {code for key in served[:top] for text in contents[key] for code in DOC_CODE_IN_TEXT.findall(text)}
    scored, _ = fused_scores(legs, DEFAULT_FUSION, bonus)
    raised = {key: score + (gain if key[0] in named - own else 0.0) for key, score in scored.items()}
    return sorted(raised, key=lambda key: -raised[key])[:DEPTH]


def without_boilerplate(legs: Legs, bonus: dict[Key, float], penalty: float) -> list[Key]:
    """The fused ranking again, each chunk of a boilerplate section (by its last heading) less `penalty`."""
    scored, _ = fused_scores(legs, DEFAULT_FUSION, bonus)
    lowered = {
        key: score - (penalty if BOILERPLATE.fullmatch(key[2].split(" › ")[-1].strip()) else 0.0)
        for key, score in scored.items()
    }
    return sorted(lowered, key=lambda key: -lowered[key])[:DEPTH]


def boilerplate_probes(owner: str) -> list[GoldenQuestion]:
    """One question per boilerplate section of an effective document, answered by that section."""
    import psycopg

    with psycopg.connect(owner) as conn:
        rows = conn.execute(
            "SELECT DISTINCT ON (d.doc_code, c.section_path) d.doc_code, d.title, c.section_path, c.content "
            "FROM kb.chunks c JOIN kb.documents d USING (doc_id) WHERE d.status = 'effective' "
            "ORDER BY d.doc_code, c.section_path, c.chunk_id"
        ).fetchall()
    probes: list[GoldenQuestion] = []
    for code, title, section_path, content in rows:
        heading = section_path.split(" › ")[-1].strip()
        if not BOILERPLATE.fullmatch(heading):
            continue
        kind = heading.split(" ", 1)[-1].lower()
        if kind == "revision history":
            question = f"What changed in the latest version of the {title}?"
        elif kind == "definitions":
            body = content.split("\n", 2)[-1]
            term = re.search(r"\*\*([^*]{3,40})\*\*", content) or re.search(r"^\|\s*([^|]{3,40}?)\s*\|", body, re.M)
            if term is None:
                continue
            question = f"What does {term.group(1).strip()} mean in the {title}?"
        else:
            question = f"What is the purpose of the {title} and what does it cover?"
        probe_id = f"probe-{len(probes)}"
        top_role = Role("compliance_officer")
        probes.append(GoldenQuestion(probe_id, "", "direct", question, (Expected(code, heading),), "", top_role))
    return probes


async def candidate_legs(
    server: str, model: LocalEmbedder, questions: Sequence[GoldenQuestion]
) -> tuple[dict[str, Legs], dict[str, dict[Key, float]], dict[Key, set[str]], dict[str, np.ndarray]]:
    """Each leg's 50 candidates per question (a section once, by its first chunk), the identifier bonuses the
    served hybrid gave, the candidates' texts and the questions' vectors."""
    vectors = {q.id: model.embed_query(q.question) for q in questions}
    legs: dict[str, Legs] = {q.id: {} for q in questions}
    bonus: dict[str, dict[Key, float]] = {q.id: {} for q in questions}
    contents: dict[Key, set[str]] = {}
    for mode in ("vector", "text", "hybrid"):
        run = await run_questions(server, model, questions, mode=mode, k=50, bm25=DEFAULT_BM25, vectors=vectors)
        for outcome in run.outcomes:
            qid = outcome.question.id
            seen: set[Key] = set()
            for hit in outcome.hits:
                key = (hit.doc_code, hit.version, hit.section_path)
                contents.setdefault(key, set()).add(hit.content)
                if mode == "hybrid" and hit.score >= DEFAULT_FUSION.identifier_bonus:
                    bonus[qid][key] = DEFAULT_FUSION.identifier_bonus
                elif mode != "hybrid" and key not in seen:
                    seen.add(key)
                    score = hit.vector_score if mode == "vector" else hit.text_score
                    legs[qid].setdefault(mode, []).append((key, score or 0.0))
    return legs, bonus, contents, vectors


async def main() -> int:
    server = EmbeddedPostgres(STATE).start()
    db = reusable_database(server, "eval_corpus")
    if db is None:
        print("run `python -m evals.run --skip-public` first: it builds the eval databases this reads")
        return 2
    model = LocalEmbedder()
    model.load()
    questions = [q for q in golden_part(load_golden(), "dev") if q.answerable]
    legs, bonus, contents, vectors = await candidate_legs(db.server, model, questions)
    served = {q.id: fuse(legs[q.id], DEFAULT_FUSION, DEPTH, bonus[q.id]) for q in questions}
    print(f"fused in Python as served: {scores(questions, served)}")

    import psycopg

    with psycopg.connect(db.owner) as conn:
        titles: dict[str, str] = dict(conn.execute("SELECT doc_code, title FROM kb.documents").fetchall())
    candidates = sorted({key for q in questions for key, _ in legs[q.id]["vector"]})
    texts = [(key, w) for key in candidates for content in sorted(contents[key]) for w in windows(content)]
    embedded = model.embed([Chunk(0, key[2], "", w, 0).embedding_text(titles[key[0]]) for key, w in texts]).vectors
    by_chunk: dict[Key, list[np.ndarray]] = {}
    for (key, _), vector in zip(texts, embedded, strict=True):
        by_chunk.setdefault(key, []).append(vector)
    print(f"{len(texts)} windows of {len(candidates)} candidate sections embedded")

    def rescored(qid: str, blend: float) -> Legs:
        def best(key: Key, similarity: float) -> float:
            found = by_chunk.get(key)
            top = max(similarity, float(np.max(np.stack(found) @ vectors[qid]))) if found else similarity
            return (1 - blend) * similarity + blend * top

        vector = sorted(((k, best(k, s)) for k, s in legs[qid]["vector"]), key=lambda pair: -pair[1])
        return {"vector": vector, "text": legs[qid]["text"]}

    variants: dict[str, dict[str, list[Key]]] = {}
    for blend in (1.0, 0.5):
        ranked = {q.id: fuse(rescored(q.id, blend), DEFAULT_FUSION, DEPTH, bonus[q.id]) for q in questions}
        variants[f"sentence windows, blend {blend}"] = ranked
    for penalty in (0.1, 0.2, 0.3):
        ranked = {q.id: diversified(legs[q.id], bonus[q.id], penalty) for q in questions}
        variants[f"document diversity, λ {penalty}"] = ranked
    for top in (1, 2):
        for gain in (0.2, 0.5):
            ranked = {q.id: followed(served[q.id], contents, legs[q.id], bonus[q.id], top, gain) for q in questions}
            variants[f"followed references, first {top}, β {gain}"] = ranked
    for penalty in (0.5, 1.0):
        ranked = {q.id: without_boilerplate(legs[q.id], bonus[q.id], penalty) for q in questions}
        variants[f"boilerplate sections, λ {penalty}"] = ranked
    for name, ranked in variants.items():
        print(f"{name}: {scores(questions, ranked)}")

    probes = boilerplate_probes(db.owner)
    probe_legs, probe_bonus, _, _ = await candidate_legs(db.server, model, probes)
    for penalty in (0.0, 0.5, 1.0):
        ranked = {q.id: without_boilerplate(probe_legs[q.id], probe_bonus[q.id], penalty) for q in probes}
        first = np.mean([recall_at([Ranked(k[0], k[2]) for k in ranked[q.id]], q.expected, 1) for q in probes])
        print(f"{len(probes)} boilerplate probes, λ {penalty}: recall@1 {first:.3f} {scores(probes, ranked)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
