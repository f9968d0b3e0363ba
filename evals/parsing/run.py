"""Parse one fixture the way the worker does and score its text against the reference extraction."""

from __future__ import annotations

import multiprocessing
import queue
import resource
import time
from dataclasses import dataclass

from evals.parsing.fidelity import Fidelity, fidelity
from evals.parsing.fixtures import Fixture, with_header_block
from evals.parsing.reference import NoReference, reference_units

from ingest.document import Heading, Paragraph, ParsedDocument, ParseError, Table, Unit
from ingest.parsers import parse_document

MAX_BYTES = 50_000_000


@dataclass(frozen=True)
class Outcome:
    file: str
    kind: str
    outcome: str  # 'parsed', or the parse error's message
    seconds: float
    blocks: int
    headings: int
    fidelity: Fidelity | None  # None when the file did not parse or the reference reader cannot read it

    @property
    def parsed(self) -> bool:
        return self.outcome == "parsed"


def document_text(document: ParsedDocument) -> str:
    """Everything the parse indexes, in its order: headings, paragraphs, tables as rendered, units."""
    parts: list[str] = []
    for block in document.blocks:
        if isinstance(block, Heading | Paragraph | Unit):
            parts.append(block.text)
        elif isinstance(block, Table):
            parts.append(block.render())
    return "\n".join(parts)


def measure(fixture: Fixture) -> Outcome:
    original = fixture.read()
    data = with_header_block(fixture.kind, original)
    started = time.perf_counter()
    try:
        document = parse_document(data, fixture.file, max_bytes=MAX_BYTES)
    except ParseError as exc:
        return Outcome(fixture.file, fixture.kind, str(exc), time.perf_counter() - started, 0, 0, None)
    seconds = time.perf_counter() - started
    headings = sum(1 for b in document.blocks if isinstance(b, Heading))
    try:
        score = fidelity(reference_units(fixture.kind, original), document_text(document))
    except NoReference:
        score = None
    return Outcome(fixture.file, fixture.kind, "parsed", seconds, len(document.blocks), headings, score)


@dataclass(frozen=True)
class Measured:
    fixture: Fixture
    outcome: Outcome
    baseline_mb: float  # the child's peak RSS before parsing: the interpreter and the parsers' libraries
    peak_mb: float


def _in_child(fixture: Fixture, results: multiprocessing.Queue) -> None:
    import pymupdf  # noqa: F401  (the libraries are loaded before the baseline is read)

    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    outcome = measure(fixture)
    results.put((outcome, baseline, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def measure_in_process(fixture: Fixture, timeout: float = 600.0) -> Measured:
    """`measure` in a fresh process, so that its peak memory is this file's alone."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_in_child, args=(fixture, results))
    child.start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            outcome, baseline, peak = results.get(timeout=1.0)
            break
        except queue.Empty:
            if not child.is_alive() or time.monotonic() > deadline:
                child.kill()
                raise RuntimeError(f"{fixture.file}: the parsing process died (exit code {child.exitcode})") from None
    child.join()
    return Measured(fixture, outcome, baseline, peak)
