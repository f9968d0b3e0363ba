"""Run golden questions through the query the MCP tool runs, and score them."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg

from evals.golden import GoldenQuestion
from evals.metrics import Ranked, mean, ndcg_at, recall_at, reciprocal_rank
from kb_core.embedders.base import Embedder
from kb_core.roles import Classification, Role
from kb_server.db.pools import RoleConnections
from kb_server.search import CANDIDATES, DEFAULT_FUSION, TEXT_QUERY, TEXT_RANK, Bm25, Fusion, Hit, hybrid_search

MODES = ("hybrid", "vector", "text")


@dataclass
class Outcome:
    question: GoldenQuestion
    hits: list[Hit]
    seconds: float

    @property
    def ranked(self) -> list[Ranked]:
        return [Ranked(h.doc_code, h.section_path) for h in self.hits]

    @property
    def ranked_in_version(self) -> list[Ranked]:
        """Point in time: the ranking with every chunk of another version than the expected one blanked out."""
        wanted = self.question.expected_version
        return [Ranked(h.doc_code if h.version == wanted else "", h.section_path) for h in self.hits]

    @property
    def wrong_version_chunks(self) -> int:
        """Point in time: chunks of an expected document in a version other than the one in force then."""
        codes = {e.doc_code for e in self.question.expected}
        return sum(1 for h in self.hits if h.doc_code in codes and h.version != self.question.expected_version)


@dataclass
class Scores:
    recall_at_5: float
    recall_at_10: float
    mrr: float
    ndcg_at_10: float
    questions: int

    @classmethod
    def of(cls, outcomes: Sequence[Outcome]) -> Scores:
        scored = [o for o in outcomes if o.question.answerable]
        return cls(
            recall_at_5=mean([recall_at(o.ranked, o.question.expected, 5) for o in scored]),
            recall_at_10=mean([recall_at(o.ranked, o.question.expected, 10) for o in scored]),
            mrr=mean([reciprocal_rank(o.ranked, o.question.expected) for o in scored]),
            ndcg_at_10=mean([ndcg_at(o.ranked, o.question.expected, 10) for o in scored]),
            questions=len(scored),
        )


@dataclass
class Run:
    name: str
    outcomes: list[Outcome]
    overall: Scores = field(init=False)

    def __post_init__(self) -> None:
        self.overall = Scores.of(self.outcomes)

    def by(self, key: str) -> dict[str, Scores]:
        groups: dict[str, list[Outcome]] = defaultdict(list)
        for outcome in self.outcomes:
            groups[getattr(outcome.question, key)].append(outcome)
        return {name: Scores.of(items) for name, items in sorted(groups.items())}


async def run_questions(
    conninfo: str,
    embedder: Embedder,
    questions: Sequence[GoldenQuestion],
    *,
    mode: str = "hybrid",
    text_query: str = TEXT_QUERY,
    text_rank: str = TEXT_RANK,
    k: int = 10,
    role: Role | None = None,
    name: str | None = None,
    fusion: Fusion = DEFAULT_FUSION,
    bm25: Bm25 | None = None,
    vectors: dict[str, np.ndarray] | None = None,
    find_identifiers: bool = True,
    hyphen_spellings: bool = True,
    candidates: int = CANDIDATES,
) -> Run:
    """Every question as its own role (or `role` for all), the way search_knowledge_base runs it."""
    outcomes = []
    async with RoleConnections(conninfo) as connections:
        for question in questions:
            started = time.perf_counter()
            vector = None
            if mode != "text":
                known = vectors.get(question.id) if vectors is not None else None
                vector = known if known is not None else embedder.embed_query(question.question)
            hits = await hybrid_search(
                await connections.get(role or question.role),
                role or question.role,
                text=question.question,
                vector=vector,
                departments=None,
                limit=k,
                text_query=text_query,
                text_rank=text_rank,
                with_text=mode != "vector",
                fusion=fusion,
                bm25=bm25,
                find_identifiers=find_identifiers,
                hyphen_spellings=hyphen_spellings,
                as_of=question.as_of,
                candidates=candidates,
            )
            outcomes.append(Outcome(question, hits, time.perf_counter() - started))
    return Run(name or f"{mode} ({text_query}, {text_rank})", outcomes)


def classifications(ingest_conninfo: str) -> dict[str, Classification]:
    """doc code -> classification, read by the writer's login (which sees every row)."""
    with psycopg.connect(ingest_conninfo) as conn:
        rows = conn.execute("SELECT DISTINCT doc_code, classification::text FROM kb.documents").fetchall()
    return {code: Classification(level) for code, level in rows}


def leaks(run: Run, role: Role, levels: dict[str, Classification]) -> list[tuple[str, str]]:
    """(question id, doc code) of every returned chunk above the role's ceiling."""
    return [(o.question.id, h.doc_code) for o in run.outcomes for h in o.hits if not role.may_read(levels[h.doc_code])]
