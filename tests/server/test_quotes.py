"""verify_quote's matching and score, on the functions themselves (the tool's own tests: test_version_tools)."""

from __future__ import annotations

from kb_server.quotes import check_quote

SECTION = (
    "Enhanced due diligence applies to customers rated high risk. **Activity trigger:** $7,500 or more in "
    "cash-equivalent activity in a calendar month. The analyst reviews the file within 10 business days."
)


def test_a_quote_found_as_written_scores_one():
    match = check_quote("$7,500 or more in cash\u2013equivalent activity in a calendar month", [SECTION])
    assert match is not None and match.found and match.score == 1.0


def test_an_altered_number_scores_high_but_not_one_and_shows_the_real_sentence():
    match = check_quote("$10,000 or more in cash-equivalent activity in a calendar month", [SECTION])
    assert match is not None and not match.found and 0.8 < match.score < 1.0
    assert "$7,500 or more" in match.passage


def test_unrelated_words_score_low_whatever_their_letters_have_in_common():
    # Found walking it: character similarity alone gave "the moon is made of cheese" 0.54 against a policy.
    nonsense = check_quote("the moon is made of cheese", [SECTION])
    assert nonsense is not None and not nonsense.found and nonsense.score < 0.3


def test_a_quote_sharing_most_of_its_words_outscores_one_sharing_none():
    near = check_quote("the analyst reviews the case within 10 business days", [SECTION])
    far = check_quote("the auditor signs the ledger every quarter", [SECTION])
    assert near is not None and far is not None and near.score > 0.7 > far.score


def test_underscore_emphasis_in_a_quote_is_ignored_as_asterisks_are():
    # Found walking it: "within _20 calendar days_" was not found where "*20 calendar days*" was.
    for quote in ("within _20 calendar days_ of", "within __20 calendar days__ of", "within *20 calendar days* of"):
        match = check_quote(quote, ["Respond within **20 calendar days** of the chargeback notice."])
        assert match is not None and match.found, quote


TABLE = (
    "| Record category | Retention period | Trigger event |\n"
    "|---|---|---|\n"
    "| BSA/AML records | 5 years | Account closure |\n"
    "| Sanctions screening records | 5 years | Date of the screening |\n"
    "| Card dispute and chargeback records | 18 months | Resolution of the dispute |"
)


def test_a_table_excerpt_as_search_serves_it_is_found_though_its_rows_are_not_next_to_the_header():
    # Found walking it: a big table's row group (its header row, then rows further down) was served under the
    # section's citation, and verify_quote said that very text was not found there.
    excerpt = (
        "| Record category | Retention period | Trigger event |\n|---|---|---|\n"
        "| Card dispute and chargeback records | 18 months | Resolution of the dispute |"
    )
    match = check_quote(excerpt, [TABLE])
    assert match is not None and match.found and match.score == 1.0
    assert (
        match.passage.splitlines()[-1]
        == "| Card dispute and chargeback records | 18 months | Resolution of the dispute |"
    )


def test_a_table_excerpt_with_a_row_that_is_not_in_the_table_is_not_found():
    altered = (
        "| Record category | Retention period | Trigger event |\n| Card dispute and chargeback records | 6 months | x |"
    )
    match = check_quote(altered, [TABLE])
    assert match is not None and not match.found


def test_lines_of_prose_are_not_looked_for_apart():
    # Only table rows are records of their own: two sentences of a section, quoted as adjacent lines, are not.
    section = "Staff must share files through the portal.\nThe portal logs every download.\nNever share passwords."
    match = check_quote("Staff must share files through the portal.\nNever share passwords.", [section])
    assert match is not None and not match.found


def test_a_row_copied_from_a_rendered_table_is_found_without_its_pipes():
    # Found walking it: a client shows search's Markdown table rendered, and a row copied from it (cells apart
    # by tabs or spaces, no pipes) was "not found" in the very section that holds it.
    for quote in ("Sanctions screening records\t5 years\tDate of the screening", "BSA/AML records 5 years"):
        match = check_quote(quote, [TABLE])
        assert match is not None and match.found and match.score == 1.0, quote
    match = check_quote("Sanctions screening records\t5 years\tDate of the screening", [TABLE])
    assert match is not None and match.passage == "Sanctions screening records | 5 years | Date of the screening"


def test_a_rendered_header_row_and_a_row_further_down_are_found_row_by_row():
    quote = (
        "Record category\tRetention period\tTrigger event\n"
        "Card dispute and chargeback records\t18 months\tResolution of the dispute"
    )
    match = check_quote(quote, [TABLE])
    assert match is not None and match.found
    assert match.passage.splitlines() == [
        "| Record category | Retention period | Trigger event |",
        "| Card dispute and chargeback records | 18 months | Resolution of the dispute |",
    ]


def test_a_rendered_row_with_an_altered_cell_is_not_found():
    for quote in (
        "Sanctions screening records\t7 years\tDate of the screening",
        "Record category\tRetention period\tTrigger event\nCard dispute and chargeback records\t6 months\tx",
    ):
        match = check_quote(quote, [TABLE])
        assert match is not None and not match.found, quote


def test_pipes_are_read_as_cell_breaks_only_in_a_table():
    match = check_quote("share files through the portal", ["Staff must share files | through the portal."])
    assert match is not None and not match.found


def test_a_quote_that_drops_the_start_or_end_of_a_number_or_word_is_not_found():
    # Found walking it as a compliance officer: "500 or more in cash-equivalent activity" was found in "$7,500 or
    # more …", and "0 business days" in "10 business days": certified verbatim, though not the text.
    section = SECTION + " Report within 10 business days. Rates rise by 3.5% a year."
    for quote in (
        "500 or more in cash-equivalent activity",
        "0 business days",
        "$7,5",
        "rated high ris",
        "nhanced due diligence",
        "rise by 3",
    ):
        match = check_quote(quote, [section])
        assert match is not None and not match.found, quote
    for quote in ("$7,500 or more in cash-equivalent activity", "10 business days", "a", "3.5% a year", "high risk"):
        match = check_quote(quote, [section])
        assert match is not None and match.found, quote


def test_the_differences_name_the_altered_number_and_the_words_left_out():
    altered = check_quote("$10,000 or more in cash-equivalent activity in a calendar month", [SECTION])
    assert altered is not None and [(d.quote, d.passage) for d in altered.differences] == [("10,000", "7,500")]
    shortened = check_quote("the analyst reviews the file within 10 days", [SECTION])
    assert shortened is not None and [(d.quote, d.passage) for d in shortened.differences] == [(None, "business")]
    added = check_quote("the senior analyst reviews the file within 10 business days", [SECTION])
    assert added is not None and [(d.quote, d.passage) for d in added.differences] == [("senior", None)]


def test_no_differences_are_listed_for_a_text_that_is_not_the_passage_altered():
    # Word by word, "the moon is made of cheese" against a policy would list every word: noise, not a finding.
    nonsense = check_quote("the moon is made of cheese", [SECTION])
    assert nonsense is not None and nonsense.differences == ()
    found = check_quote("within 10 business days", [SECTION])
    assert found is not None and found.found and found.differences == ()


def test_a_list_copied_with_other_bullets_is_found():
    # Found walking it: a list copied from the PDF ("• involves funds") was not found in the stored "- ...".
    stored = "Report it if you suspect that it:\n- involves funds from illegal activity;\n- evades BSA reporting"
    for bullet in ("\u2022", "\u25e6", "-", "*", "+"):
        quote = f"suspect that it:\n{bullet} involves funds from illegal activity;\n{bullet} evades BSA reporting"
        match = check_quote(quote, [stored])
        assert match is not None and match.found, bullet
    # A numbered list copied with bullets or with no markers at all, as a client renders it (found walking it).
    numbered = "EDD applies when:\n1. Activity trigger: $7,500 a month;\n2. Geography trigger: a high-risk country;"
    for copied in (
        "\u2022 Activity trigger: $7,500 a month;\n\u2022 Geography trigger: a high-risk country;",
        "Activity trigger: $7,500 a month;\nGeography trigger: a high-risk country;",
    ):
        match = check_quote(copied, [numbered])
        assert match is not None and match.found, copied
    # A minus sign that is no bullet still counts.
    assert not check_quote("from 3 5 percent", ["Rates go from 3 - 5 percent."]).found  # type: ignore[union-attr]


def test_a_quote_running_from_one_table_row_into_the_next_is_not_found():
    # Found walking it: "Business need Customer call recordings Support and collections calls 2 years" was
    # certified: the last cell of one row run on into the next, a sentence no row says.
    table = (
        "| Record | Kept | Purpose |\n| --- | --- | --- |\n| Call notes | 1 year | Business need |\n"
        "| Customer call recordings | 2 years | Support and collections calls |"
    )
    spliced = check_quote("Business need Customer call recordings 2 years", [table])
    assert spliced is not None and not spliced.found
    one_row = check_quote("Customer call recordings\t2 years\tSupport and collections calls", [table])
    assert one_row is not None and one_row.found
    header_and_row = check_quote("Record Kept Purpose\nCall notes 1 year Business need", [table])
    assert header_and_row is not None and header_and_row.found
