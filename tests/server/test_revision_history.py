"""kb_server.revision_history: the versions a document's revision history lists, and one of them never stored."""

from datetime import date

from kb_server.revision_history import listed_versions, unstored_in_force

HISTORY = """| Version | Effective date | Summary of changes |
|---|---|---|
| 2.0 | 2024-06-01 | Activity trigger set at $10,000 per month |
| 3.0 | 2025-10-01 | Activity trigger lowered to $7,500 per calendar month |
| v3.1 | 2026-03-01 | Escalation contact changed |"""


def test_the_rows_of_a_revision_history_table_give_versions_and_dates() -> None:
    assert listed_versions([("9. Revision History", HISTORY)]) == [
        ("2.0", date(2024, 6, 1)),
        ("3.0", date(2025, 10, 1)),
        ("3.1", date(2026, 3, 1)),
    ]


def test_other_sections_and_rows_without_a_version_and_a_date_are_not_read() -> None:
    assert listed_versions([("4. Fees", HISTORY)]) == []
    assert listed_versions([("Change Log", "| 1.0 | first issue |\n| n/a | 2024-01-01 |")]) == []


def test_the_latest_listed_version_between_the_stored_one_and_the_date_that_is_not_stored_is_named() -> None:
    listed = listed_versions([("9. Revision History", HISTORY)])
    stored = {"2.0", "3.1"}
    assert unstored_in_force(listed, stored, after=date(2024, 6, 1), on=date(2025, 12, 1)) == ("3.0", date(2025, 10, 1))
    # Before it took effect, or with it stored, there is nothing to say.
    assert unstored_in_force(listed, stored, after=date(2024, 6, 1), on=date(2025, 9, 30)) is None
    assert unstored_in_force(listed, stored | {"3.0"}, after=date(2024, 6, 1), on=date(2025, 12, 1)) is None
