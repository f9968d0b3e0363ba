"""How a not-found answer names the versions a caller may read (documents.VersionStatus)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from kb_server.documents import VersionStatus


def test_a_superseded_version_is_named_with_its_effective_date_not_a_date_it_was_superseded():
    # Found walking it: "2.0 (superseded from 2024-06-01)" read as superseded since June 2024, the date 2.0
    # took effect; an auditor would quote it so.
    assert VersionStatus("2.0", "superseded", date(2024, 6, 1), None).describe() == (
        "2.0 (superseded; its effective date 2024-06-01)"
    )
    assert VersionStatus("3.1", "effective", date(2026, 3, 1), None).describe() == "3.1 (effective from 2026-03-01)"
    withdrawn = VersionStatus("1.0", "effective", date(2025, 1, 1), datetime(2026, 6, 15, tzinfo=UTC))
    assert withdrawn.describe() == "1.0 (withdrawn 2026-06-15)"
