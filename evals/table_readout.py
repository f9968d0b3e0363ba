"""`python -m evals.table_readout [--held-out]`: tables embedded read out row by row instead of as pipe tables.

A chunk shows its tables as Markdown pipe tables; the variant gives the embedder the same rows read out, each one
line of `Header: cell; Header: cell` (only the embedded text changes: search would still return, and verify_quote
check against, the pipe table). The pipes and the `| --- |` line say nothing, and a row's cells sit under headers
named once, lines above: for "how long do we have to keep emails?" the row group holding `| E-mail | All workforce
mailboxes | 7 years |` has cosine 0.39 as a pipe table and 0.46 read out (the vector leg's first scored 0.44).

corpus/ is ingested once more with every chunk's tables read out (vectors cached beside the eval run's), and the
development golden questions are asked as served, beside the served database's figures. `--held-out` also asks
the held-out questions: run once, on 2026-12-07, under the rule declared before it (evals/report.md quotes both).
"""

from __future__ import annotations

import argparse
import asyncio
import re

from evals.cache import CachingEmbedder
from evals.golden import load_golden
from evals.report import tables_at_rank_3
from evals.retrieval import Run, run_questions
from evals.run import CACHE, STATE, fresh_database, ingest_corpus, reusable_database
from evals.split import golden_part
from ingest.chunker import Chunk
from kb_core.db.embedded import EmbeddedPostgres
from kb_core.embedders.local import LocalEmbedder

# A pipe table as Table.render writes it (and Markdown sources do): a header line, a `| --- |` line (colons
# allowed), then rows; each line opens with a pipe. A pipe inside a cell is escaped (`\|`).
_DIVIDER = re.compile(r"^\|(?:\s*:?-{3,}:?\s*\|)+\s*$")
_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:-1] if inner.endswith("|") and len(inner) > 1 else inner[1:]
    return [cell.strip().replace("\\|", "|") for cell in _UNESCAPED_PIPE.split(inner)]


def _row(header: list[str], cells: list[str]) -> str:
    names = [*header, *[""] * (len(cells) - len(header))]
    return "; ".join(f"{name}: {cell}" if name else cell for name, cell in zip(names, cells, strict=False) if cell)


def read_out(text: str) -> str:
    """`text` with each pipe table in it read out row by row; text without one comes back as it was."""
    if "|" not in text:
        return text
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|") and i + 1 < len(lines) and _DIVIDER.match(lines[i + 1].strip()):
            header = _cells(lines[i])
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                if row := _row(header, _cells(lines[i])):
                    out.append(row)
                i += 1
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def _read_out_embedding_text(self: Chunk, title: str) -> str:
    prefix = f"{title} — {self.section_path}" if self.section_path else title
    return f"{prefix}\n\n{read_out(self.content)}"


def _line(name: str, run: Run) -> str:
    top3, tables = tables_at_rank_3(run)
    paraphrase = run.by("category").get("paraphrase")
    return (
        f"{name}: recall@5 {run.overall.recall_at_5:.3f} MRR {run.overall.mrr:.3f}; paraphrase recall@5 "
        f"{paraphrase.recall_at_5 if paraphrase else 0:.3f}; table questions at rank ≤ 3: {top3} of {tables}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--held-out", action="store_true", help="also ask the held-out questions (see above)")
    args = parser.parse_args(argv)
    superuser = EmbeddedPostgres(STATE).start()
    served = reusable_database(superuser, "eval_corpus")
    if served is None:
        print("run `python -m evals.run --skip-public` first: it builds the served eval database this compares with")
        return 2
    model = LocalEmbedder()
    model.load()
    plain = Chunk.embedding_text
    Chunk.embedding_text = _read_out_embedding_text  # type: ignore[method-assign]
    try:
        variant = fresh_database(superuser, "eval_tables_read_out", model.space)
        ingest_corpus(variant, CachingEmbedder(model, CACHE / "eval-vectors.npz"), prefix=True)
    finally:
        Chunk.embedding_text = plain  # type: ignore[method-assign]
    for part in ("dev", "held_out") if args.held_out else ("dev",):
        questions = [q for q in golden_part(load_golden(), part) if q.answerable]
        for name, db in (("served (pipe tables)", served), ("tables read out", variant)):
            run = asyncio.run(run_questions(db.server, model, questions, mode="hybrid", name=name))
            print(f"{part}, {_line(name, run)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
