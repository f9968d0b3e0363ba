"""The read-out of evals.table_readout: what the embedder would be given for a chunk holding a pipe table."""

from evals.table_readout import read_out

from ingest.document import Table

RETENTION = Table(
    (
        ("Record category", "Examples", "Retention period"),
        ("E-mail", "All workforce mailboxes", "7 years"),
        ("Workplace chat messages", "Channels | direct messages", ""),
    )
)


def test_each_row_is_read_out_under_its_headers() -> None:
    assert read_out(RETENTION.render()) == (
        "Record category: E-mail; Examples: All workforce mailboxes; Retention period: 7 years\n"
        "Record category: Workplace chat messages; Examples: Channels | direct messages"
    )


def test_text_around_a_table_is_kept_and_text_without_one_is_unchanged() -> None:
    text = "Only the current schedule is authoritative.\n\n" + RETENTION.render() + "\n\nCount from the trigger."
    said = read_out(text)
    assert said.startswith("Only the current schedule is authoritative.\n\nRecord category: E-mail;")
    assert said.endswith("\n\nCount from the trigger.")
    assert read_out("a | b, with a pipe but no table") == "a | b, with a pipe but no table"


def test_a_cell_without_a_header_is_read_out_alone() -> None:
    assert read_out("| Code | |\n| --- | --- |\n| R01 | insufficient funds |") == "Code: R01; insufficient funds"
