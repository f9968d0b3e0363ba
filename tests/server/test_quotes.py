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
