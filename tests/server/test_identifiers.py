"""A question that names an identifier (a document code, an error or alert code, an API path, an operationId, a
header or a field name) gets the chunk holding that identifier first, through the exact-token path of the
full-text leg; every kind is tried on the corpus."""

from __future__ import annotations

import psycopg
import pytest
from pgvector.psycopg import register_vector_async

from kb_core.roles import Role
from kb_server.identifiers import identifiers_in
from kb_server.search import hybrid_search

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("question", "named"),
    [
        ("what does CMP-SOP-004 say about enhanced due diligence?", ["CMP-SOP-004"]),
        ("screening service keeps returning SCR-E210", ["SCR-E210"]),
        ("recon dashboard shows RECON-309, what now?", ["RECON-309"]),
        ("what fires DBReplicationLagHigh?", ["DBReplicationLagHigh"]),
        ("POST /v1/payouts/{payout_id}/cancel gave me a 409", ["/v1/payouts/{payout_id}/cancel"]),
        ("what does createPayout need?", ["createPayout"]),
        ("do I send Idempotency-Key and X-Request-Id on retries?", ["Idempotency-Key", "X-Request-Id"]),
        ("when is dti_exceeds_policy true?", ["dti_exceeds_policy"]),
        ("Is a SOC 2 Type II mandatory for a tier 1 vendor, or will ISO 27001 do?", []),
        ("what's the 401(k) employer match, and/or the Q2 bonus?", []),
        # Codes typed in lower or mixed case, as the tools that take a doc code accept them: found walking it.
        ("escalation contact in cmp-sop-004", ["CMP-SOP-004"]),
        ("screening keeps returning scr-e210", ["SCR-E210"]),
        ("what does Pay-Sop-004 say?", ["PAY-SOP-004"]),
    ],
)
def test_identifiers_of_every_kind_are_found_in_a_question_and_plain_words_are_not(question, named):
    assert identifiers_in(question) == named


# (question, the identifier, the document whose chunk defines it)
CORPUS_IDENTIFIERS = [
    ("what does CMP-SOP-004 say about the monthly trigger?", "", "CMP-SOP-004"),
    ("what does SCR-E210 mean?", "SCR-E210", "ENG-RBK-006"),
    ("escalation contact in cmp-sop-004", "", "CMP-SOP-004"),
    ("what does scr-e210 mean?", "SCR-E210", "ENG-RBK-006"),
    ("what replica lag fires DBReplicationLagHigh?", "DBReplicationLagHigh", "ENG-RBK-003"),
    ("what does /v1/payouts/{payout_id}/cancel do?", "/v1/payouts/{payout_id}/cancel", "PAY-API-008"),
    ("which fields does createPayout take?", "createPayout", "PAY-API-008"),
    ("what is X-Request-Id for?", "X-Request-Id", "ENG-API-007"),
    # The API's field, which the credit policy also names verbatim: either chunk holds it.
    ("when is dti_exceeds_policy set?", "dti_exceeds_policy", None),
]


@pytest.mark.parametrize(("question", "identifier", "doc_code"), CORPUS_IDENTIFIERS)
async def test_a_question_naming_an_identifier_gets_the_chunk_holding_it_first(
    corpus_database, local_embedder, question, identifier, doc_code
):
    async with await psycopg.AsyncConnection.connect(
        corpus_database.targets.reader(Role.COMPLIANCE_OFFICER), autocommit=True
    ) as conn:
        await register_vector_async(conn)
        found = await hybrid_search(
            conn,
            Role.COMPLIANCE_OFFICER,
            text=question,
            vector=local_embedder.embed_query(question),
            departments=None,
            limit=5,
        )
        without = await hybrid_search(
            conn,
            Role.COMPLIANCE_OFFICER,
            text=question,
            vector=local_embedder.embed_query(question),
            departments=None,
            limit=5,
            find_identifiers=False,
        )
    assert doc_code is None or found[0].doc_code == doc_code, [(h.doc_code, h.section_path) for h in found]
    assert identifier in found[0].content or identifier in found[0].section_path
    print(question, "without the identifier path, first:", without[0].doc_code, without[0].section_path)
