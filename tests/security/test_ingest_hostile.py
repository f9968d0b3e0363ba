"""Hostile files for ingestion: fuzzed bytes for every parser, mutations of real corpus files (truncated,
bytes flipped, junk inserted, spans deleted or repeated), YAML alias bombs, NUL characters and documents
with nothing to index. Through `parse_document` each either parses (and then chunks and scans) or fails
with a ParseError; through `Ingestor.ingest` each either ingests or fails alone with that same reason,
nothing else escapes, and nothing partial is stored (no chunk without its document, no document without
chunks, and a failed file leaves the stored rows exactly as they were)."""

from __future__ import annotations

import time
import zlib

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ingest.parsers import FORMATS
from tests.conftest import REPO
from tests.security.ingest_checks import ingest_and_check, parse_or_reason, stored
from tests.support.documents import markdown_document

EXTENSIONS = sorted(FORMATS)
SAMPLES = {  # the smallest real corpus file of each format: mutations of them reach deep into each parser
    suffix: min((REPO / "corpus").rglob(f"*{suffix}"), key=lambda p: p.stat().st_size)
    for suffix in (".md", ".pdf", ".docx", ".html", ".yaml", ".json")
}
MAGIC = [  # how each format starts, so fuzzed bytes get past the first check
    b"---\ndoc_code: CMP-SOP-901\n",
    b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<",
    b"PK\x03\x04\x14\x00\x06\x00",
    b'<html><body><dl class="document-control"><dt>Doc code</dt><dd>',
    b"openapi: 3.0.3\ninfo:\n  x-document-control:\n",
    b'{"openapi": "3.1.0", "info": {"x-document-control": ',
    b"\xef\xbb\xbf",
    b"\xff\xfe",
]
JUNK = st.binary(max_size=64) | st.sampled_from(
    [
        b"\x00",
        b"\xff\xfe\xfd",
        b"\xed\xa0\x80",
        b"\n---\n",
        b"\n## 9. Injected\n",
        b"|a|b|\n|-|-|\n|" + b"x|" * 200 + b"\n",
        b"<h2>",
        b"<table><tr><td>",
        b"]]>",
        b"&a [*a, *a]",
        b"*missing",
        b"!!python/object/apply:os.system ['true']",
        b"$ref: '#/components/schemas/Nope'",
        b'"$ref": "#/"',
        b"endstream endobj",
        b"xref\n0 1\n0000000000 65535 f \n",
        b"trailer << /Root 99 0 R /Size 1 >>",
        b"PK\x05\x06" + b"\x00" * 18,
        "\u202e\u200b\ufeff".encode(),
        b"[" * 500,
        b"{" * 500,
        b"> " * 500,
    ]
)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    path = draw(st.sampled_from(sorted(SAMPLES.values())))
    data = bytearray(path.read_bytes())
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "repeat", "overwrite"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "truncate":
            del data[at:]
        elif kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[at:at] = draw(JUNK)
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 512))]
        elif kind == "repeat":
            data[at:at] = data[at : at + draw(st.integers(1, 256))] * draw(st.integers(2, 20))
        elif kind == "overwrite":
            junk = draw(JUNK)
            data[at : at + len(junk)] = junk
        event(f"{path.suffix} {kind}")
    return path.name, bytes(data)


FUZZED = st.tuples(
    st.sampled_from(EXTENSIONS).map(lambda ext: f"fuzzed{ext}"),
    st.binary(max_size=2048) | st.builds(lambda m, b: m + b, st.sampled_from(MAGIC), st.binary(max_size=2048)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=FUZZED)
def test_fuzzed_bytes_in_any_format_parse_or_fail_with_a_parse_error(case):
    name, data = case
    event("parsed" if parse_or_reason(data, name) is None else "ParseError")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_mutated_corpus_files_parse_or_fail_with_a_parse_error(case):
    name, data = case
    event("parsed" if parse_or_reason(data, name) is None else "ParseError")


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=mutated())
def test_mutated_corpus_files_through_the_ingestor_ingest_or_fail_alone_with_the_parsers_reason(
    ingestor, database, case
):
    name, data = case
    event(ingest_and_check(ingestor, database, name, data, f"s3://hostile/{name}").outcome)


HOSTILE_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=400) | st.sampled_from(
    [
        "ignore " * 3000,
        "AI assistants: " * 2000,
        "https://x.example/?" + "a=" * 5000,
        "A" * 50_000,
        "aGVsbG8gd29ybGQgaWdub3JlIGFsbA==" * 500,
        "| a " * 3000 + "|",
        "<!--" * 2000,
        "```" * 1000,
        "# " * 3000,
        "1." * 5000,
        "\u202e\u200b" * 2000,
    ]
)
HEADINGS = st.text(alphabet=st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sections=st.dictionaries(HEADINGS, HOSTILE_TEXT, min_size=1, max_size=4),
    kind=st.sampled_from(["markdown", "html"]),
)
def test_a_valid_header_with_a_hostile_body_parses_chunks_and_scans_or_fails_with_a_parse_error(sections, kind):
    if kind == "markdown":
        name, data = "hostile.md", markdown_document("CMP-SOP-940", sections=sections).encode()
    else:
        control = "".join(
            f"<dt>{label}</dt><dd>{value}</dd>"
            for label, value in [
                ("Doc code", "LEG-GDE-940"),
                ("Title", "Hostile"),
                ("Version", "1.0"),
                ("Status", "effective"),
                ("Effective date", "2026-01-01"),
                ("Owner", "Legal"),
                ("Department", "legal"),
                ("Classification", "public"),
                ("Regulatory refs", ""),
            ]
        )
        body = "".join(f"<h2>{heading}</h2><p>{text}</p>" for heading, text in sections.items())
        name, data = (
            "hostile.html",
            f'<html><body><dl class="document-control">{control}</dl>{body}</body></html>'.encode(),
        )
    event("parsed" if parse_or_reason(data, name) is None else "ParseError")


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A 'billion laughs' in YAML: a few hundred bytes that expand to width**levels strings."""
    refs = ", ".join(["*l{}"] * width)
    lines = ['  l0: &l0 ["lol"]'] + [f"  l{i}: &l{i} [{refs.format(*[i - 1] * width)}]" for i in range(1, levels + 1)]
    return "\n".join(lines)


def bombs() -> dict[str, bytes]:
    front_matter = markdown_document("CMP-SOP-931").replace(
        "regulatory_refs: []", "bomb:\n" + alias_bomb() + f"\nregulatory_refs: *l{9}"
    )
    title_bomb = markdown_document("CMP-SOP-932").replace(
        "title: Test Procedure", "bomb:\n" + alias_bomb() + "\ntitle: *l9"
    )
    openapi = (
        "openapi: 3.0.3\nx-bomb:\n" + alias_bomb() + "\ninfo:\n  title: Bomb\n  version: '1.0'\n"
        "  x-document-control:\n    doc_code: ENG-API-933\n    status: effective\n    effective_date: 2026-01-01\n"
        "    owner: X\n    department: engineering\n    classification: public\n    regulatory_refs: []\n"
        "paths:\n  /x:\n    get:\n      summary: bomb\n      description: *l9\n      responses:\n"
        "        '200':\n          description: ok\n          content:\n            application/json:\n"
        "              example: *l9\n"
    )
    cycle = openapi.replace("x-bomb:\n" + alias_bomb(), "x-bomb: &loop [*loop]").replace("*l9", "*loop")
    return {
        "front-matter-bomb.md": front_matter.encode(),
        "title-bomb.md": title_bomb.encode(),
        "openapi-bomb.yaml": openapi.encode(),
        "openapi-cycle.yaml": cycle.encode(),
    }


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(bombs()))
def test_a_yaml_alias_bomb_fails_fast_with_a_reason(ingestor, database, name):
    started = time.perf_counter()
    result = ingest_and_check(ingestor, database, name, bombs()[name], f"s3://hostile/{name}")
    assert result.outcome == "failed" and "YAML" in (result.reason or ""), result.reason
    assert time.perf_counter() - started < 10


def test_a_document_with_headings_but_no_text_fails_with_a_reason_and_stores_nothing(ingestor, database):
    empty = markdown_document("CMP-SOP-934", sections={"1. Purpose": "", "2. Scope": "<!-- nothing -->"})
    result = ingest_and_check(ingestor, database, "empty-sections.md", empty.encode(), "s3://hostile/empty.md")
    assert result.outcome == "failed" and "nothing to index" in (result.reason or "")


NUL_JSON = (
    '{"openapi": "3.0.3", "info": {"title": "T", "version": "1.0", "x-document-control": {"doc_code": '
    '"ENG-API-937", "status": "effective", "effective_date": "2026-01-01", "owner": "Eng", "department": '
    '"engineering", "classification": "public", "regulatory_refs": []}}, "paths": {"/x": {"get": '
    '{"summary": "nul\\u0000here", "description": "a\\u0000b", "responses": {"200": {"description": "ok"}}}}}}'
)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("nul-after-4k.md", markdown_document("CMP-SOP-935", sections={"1. A": "word " * 1000 + "\x00 and after"})),
        ("nul-in-title.md", markdown_document("CMP-SOP-936", title='"Nul\\0Title"')),  # YAML's \0 escape
        ("nul-escape.json", NUL_JSON),  # JSON's \u0000 escape: no NUL byte in the file at all
    ],
)
def test_nul_characters_anywhere_in_a_text_file_fail_alone_with_a_parse_error_or_are_dropped(
    ingestor, database, name, text
):
    """PostgreSQL text cannot hold NUL: the file must not reach the database with one and fail there."""
    ingest_and_check(ingestor, database, name, text.encode(), f"s3://hostile/{name}")


def ruled_grid_pdf(rows: int = 60, columns: int = 40) -> bytes:
    """One page ruled into a rows x columns table with digits across its rows: 122 KB like it in pypdf's test
    files (issue-301.pdf) took 53 s to read, one clipped text extraction of the whole page per cell."""
    import pymupdf

    document = pymupdf.open()
    page = document.new_page(width=612, height=792)
    left, top, width, height = 20, 20, 14, 12
    for r in range(rows + 1):
        page.draw_line((left, top + r * height), (left + columns * width, top + r * height), width=0.5)
    for c in range(columns + 1):
        page.draw_line((left + c * width, top), (left + c * width, top + rows * height), width=0.5)
    for r in range(rows):  # one line of digits per row, about one digit per cell
        page.insert_text((left + 2, top + r * height + 9), "   ".join(str(r % 10) * columns), fontsize=6)
    return document.tobytes()


def test_a_pdf_ruled_into_a_huge_table_is_read_with_bounded_work(monkeypatch):
    import pymupdf

    clipped = 0
    get_text = pymupdf.Page.get_text

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal clipped
        clipped += kwargs.get("clip") is not None
        return get_text(self, *args, **kwargs)

    monkeypatch.setattr(pymupdf.Page, "get_text", counting)
    reason = parse_or_reason(ruled_grid_pdf(), "grid.pdf")
    assert reason is not None  # no header block: it fails, with a reason
    assert clipped <= 500, f"{clipped} clipped re-reads of the page for one table (2,400 cells)"


def flate_bomb_pdf(inflated_mb: int) -> bytes:
    """A one-page PDF whose content stream is ~1 MB of Flate that inflates to `inflated_mb` MB of spaces (valid
    page content: nothing to draw), with a correct cross-reference table, so the parser reads all of it."""
    deflate = zlib.compressobj(1)
    block = b" " * (1 << 20)
    body = b"".join(deflate.compress(block) for _ in range(inflated_mb)) + deflate.flush()
    objects = [
        b"<</Type/Catalog/Pages 2 0 R>>",
        b"<</Type/Pages/Kids[3 0 R]/Count 1>>",
        b"<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]/Contents 4 0 R/Resources<<>>>>",
        b"<</Length %d/Filter/FlateDecode>>stream\n" % len(body) + body + b"\nendstream",
    ]
    pdf, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, content in enumerate(objects, start=1):
        offsets.append(len(pdf))
        pdf += b"%d 0 obj\n" % number + content + b"\nendobj\n"
    xref = len(pdf)
    pdf += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    pdf += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    pdf += b"trailer\n<</Size %d/Root 1 0 R>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(pdf)


@pytest.mark.timeout(60)
def test_a_pdf_whose_stream_inflates_a_thousandfold_is_stopped_by_the_parse_budget_and_stores_nothing(
    database, counting_embedder, monkeypatch
):
    """A 9 MB file inflating to 2 GB of page content, read by the PDF library in one call (several seconds):
    the parse child, under its memory cap, is stopped at its hard stop (KB_MAX_PARSE_SECONDS, here 1 s, plus the
    grace the parser has to notice the limit itself between pages, cut here from 10 s to 1 s to keep the test
    short); the file fails alone with the setting named, and the ingestor and what is stored are untouched."""
    from ingest.parsers import child
    from ingest.pipeline import Ingestor

    monkeypatch.setattr(child, "HARD_STOP_GRACE_S", 1.0)

    bomb = flate_bomb_pdf(2048)
    assert len(bomb) < 10_000_000
    with Ingestor(
        database.ingest,
        counting_embedder,
        max_bytes=25_000_000,
        max_parse_seconds=1,
        max_parse_memory_bytes=512 * 1024 * 1024,
    ) as ingestor:
        before = stored(database.owner)
        started = time.perf_counter()
        result = ingestor.ingest(bomb, name="bomb.pdf", source_uri="s3://hostile/bomb.pdf")
        elapsed = time.perf_counter() - started
        assert result.outcome == "failed" and "KB_MAX_PARSE_SECONDS" in (result.reason or ""), result.reason
        assert elapsed < 8  # stopped at about 2 s, not read to its end
        assert stored(database.owner) == before and counting_embedder.calls == 0
        # The ingestor goes on: the next file is ingested as usual.
        fine = markdown_document("CMP-SOP-938", sections={"1. Purpose": "Why this exists, in a sentence."})
        assert ingestor.ingest(fine.encode(), name="fine.md", source_uri="s3://hostile/fine.md").outcome == "ingested"
