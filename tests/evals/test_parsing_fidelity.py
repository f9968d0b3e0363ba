"""The real-world fixture gate (issue 20): public files of every format (tests/fixtures/real_world), each given
its header block and parsed as the worker parses it, must keep the outcome the manifest records and at least
the word and reading-order trigram recall recorded there against an independent reference extraction
(evals/parsing), and the word precision recorded there (PDF, DOCX, HTML: text read twice or added lowers it).
The floors sit two points under what the files measured when they were recorded; a parser
change that loses or reorders text on a real file fails here. Memory and time are in the report only
(`python -m evals.parsing`): they are measured per process, never in a timed test."""

from __future__ import annotations

import pytest
from evals.parsing.__main__ import REPORT
from evals.parsing.fidelity import fidelity
from evals.parsing.fixtures import FIXTURES, load_manifest
from evals.parsing.run import measure

MANIFEST = load_manifest()


@pytest.mark.parametrize("fixture", MANIFEST, ids=[f.file for f in MANIFEST])
def test_each_real_world_file_keeps_its_outcome_and_its_text_fidelity(fixture):
    outcome = measure(fixture)
    if fixture.expect != "parsed":
        assert not outcome.parsed and fixture.expect in outcome.outcome, outcome.outcome
        return
    assert outcome.parsed, outcome.outcome
    assert outcome.fidelity is not None
    assert outcome.fidelity.word_recall >= fixture.min_word_recall, outcome.fidelity
    assert outcome.fidelity.trigram_recall >= fixture.min_trigram_recall, outcome.fidelity
    assert outcome.fidelity.word_precision >= fixture.min_word_precision, outcome.fidelity


def test_every_fixture_file_is_in_the_manifest_with_its_source_commit_and_licence():
    on_disk = {str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*") if p.is_file()}
    assert on_disk == {f.file for f in MANIFEST}
    for fixture in MANIFEST:
        assert "/" in fixture.repository and len(fixture.commit) == 40 and fixture.path and fixture.licence
    assert sum(f.expect == "parsed" for f in MANIFEST) >= 20
    assert {f.kind for f in MANIFEST if f.expect == "parsed"} == {"pdf", "docx", "html", "openapi"}
    assert sum(len(f.read()) for f in MANIFEST) < 3_000_000  # small files: the repository carries them


def test_the_committed_report_lists_every_fixture():
    report = REPORT.read_text(encoding="utf-8")
    for fixture in MANIFEST:
        assert f"| {fixture.file} |" in report


def test_text_read_out_of_order_keeps_its_words_but_loses_its_trigrams():
    reference = ["the reconciliation break is escalated", "to the treasury operations lead today"]
    in_order = fidelity(reference, "The reconciliation break is escalated. To the Treasury Operations Lead today!")
    shuffled = fidelity(reference, "escalated is break reconciliation the today lead operations treasury the to")
    missing = fidelity(reference, "the reconciliation break is escalated")
    assert (in_order.word_recall, in_order.trigram_recall) == (1.0, 1.0)
    assert shuffled.word_recall == 1.0 and shuffled.trigram_recall == 0.0
    assert missing.word_recall == 5 / 11 and missing.trigram_recall == 3 / 7
    assert in_order.word_precision == shuffled.word_precision == missing.word_precision == 1.0


def test_text_read_twice_keeps_its_recall_but_loses_its_precision():
    reference = ["merchant category", "5411 grocery stores"]
    once = fidelity(reference, "merchant category 5411 grocery stores")
    repeated = fidelity(reference, "merchant category 5411 grocery stores 5411 grocery stores 5411 grocery stores")
    assert once.word_precision == 1.0 and repeated.word_recall == 1.0 and repeated.trigram_recall == 1.0
    assert repeated.word_precision == 5 / 11
