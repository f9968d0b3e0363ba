"""The kb:// citation form: emitted pinned, read back pinned or not."""

from __future__ import annotations

import pytest

from kb_server.citations import Citation, CitationError, parse_citation


def test_a_pinned_section_citation_round_trips() -> None:
    citation = Citation("compliance", "CMP-SOP-004", "2.0", "4.2")
    assert str(citation) == "kb://compliance/CMP-SOP-004@2.0#4.2"
    assert parse_citation(str(citation)) == citation
    assert citation.pinned


def test_an_unpinned_citation_means_the_effective_version() -> None:
    citation = parse_citation("kb://compliance/CMP-SOP-004#4.2")
    assert citation == Citation("compliance", "CMP-SOP-004", None, "4.2")
    assert not citation.pinned


def test_a_document_citation_has_no_section() -> None:
    assert parse_citation("kb://engineering/ENG-API-001@1.3") == Citation("engineering", "ENG-API-001", "1.3")


@pytest.mark.parametrize(
    "text", ["", "https://example.com/x", "kb://compliance", "kb://a/b@#x", "kb://a/b c", "kb://1legal/CMP-SOP-004"]
)
def test_anything_else_is_refused_with_the_expected_form(text: str) -> None:
    with pytest.raises(CitationError, match="kb://department/DOC-CODE@version#section"):
        parse_citation(text)


def test_a_department_keeps_its_case_so_the_server_can_refuse_it_by_name() -> None:
    # kb://Compliance/... is refused as an unknown department by the tools and the resources alike (one
    # sentence on both paths); the parser used to refuse it as no citation at all, and only in verify_quote.
    assert parse_citation("kb://Compliance/CMP-SOP-004").department == "Compliance"


def test_the_scheme_is_read_in_any_case_and_the_doc_code_upper_cased() -> None:
    # Found walking it: KB://Compliance/cmp-sop-004@3.1#4.2 was "not a kb:// citation" in verify_quote, where
    # get_document takes cmp-sop-004 and the department's case is refused by name. Schemes are case-insensitive.
    assert parse_citation("KB://Compliance/cmp-sop-004@3.1#4.2") == Citation("Compliance", "CMP-SOP-004", "3.1", "4.2")
