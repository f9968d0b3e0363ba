"""An impossible date in a header block fails the document with an error that names the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.document import ParseError
from ingest.parsers import parse_document

SOURCE = (Path(__file__).resolve().parents[2] / "corpus" / "risk" / "RSK-REF-006.md").read_text()


@pytest.mark.parametrize("bad", ["2026-13-45", "2026-02-30", "yesterday"])
def test_an_impossible_effective_date_in_front_matter_names_the_effective_date_field(bad: str) -> None:
    text = SOURCE.replace("effective_date: 2026-01-01", f"effective_date: {bad}")
    with pytest.raises(ParseError) as caught:
        parse_document(text.encode(), "RSK-REF-006.md", max_bytes=10**7)
    assert "effective_date" in str(caught.value) and bad in str(caught.value)


def test_a_valid_effective_date_is_still_read_as_a_date() -> None:
    document = parse_document(SOURCE.encode(), "RSK-REF-006.md", max_bytes=10**7)
    assert document.header.effective_date.isoformat() == "2026-01-01"


def test_every_bad_header_field_is_named_in_one_error_not_one_per_attempt() -> None:
    # Walking it, each field came back on its own: a file with two bad fields took two trips to the DLQ.
    text = (
        SOURCE.replace("classification: restricted", "classification: topsecret")
        .replace("regulatory_refs: []\n", "")
        .replace('version: "2.0"', "version: two")
    )
    with pytest.raises(ParseError) as caught:
        parse_document(text.encode(), "RSK-REF-006.md", max_bytes=10**7)
    message = str(caught.value)
    assert message.startswith("header block: Version (version) is 'two'; use dotted numbers such as 3.1")
    assert "; Classification (classification) is 'topsecret'; it must be one of public, internal," in message
    assert "; Regulatory refs (regulatory_refs) is missing (write an empty list" in message
    assert message.endswith("; see docs/header-block.md") and message.count("see docs/header-block.md") == 1
    assert "\n" not in message


@pytest.mark.parametrize("digits", ["٣.٠", "３.１", "2.٠"])
def test_a_version_in_digits_other_than_0_to_9_is_refused_in_the_header_not_by_the_database(digits: str) -> None:
    # Python's \d takes any script's digits; the documents table's CHECK and the tools take 0-9 only, so such a
    # version passed the header and then failed the whole transaction with a constraint violation.
    text = SOURCE.replace('version: "2.0"', f'version: "{digits}"')
    with pytest.raises(ParseError) as caught:
        parse_document(text.encode(), "RSK-REF-006.md", max_bytes=10**7)
    assert f"Version (version) is '{digits}'; use dotted numbers such as 3.1" in str(caught.value)
