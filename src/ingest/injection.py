"""What ingestion and `kb rescan` flag as a prompt-injection suspect: the scanner's rules (ingest.scanner),
or else the classifier (ingest.injection_score) at or above its threshold.

The rules stay decisive: each needs an attack-shaped construction, and hidden text is flagged whatever it
says (nobody reviewed it). The classifier catches what no rule was written for: the model addressed by a
product name, commands with no addressee, conditional scripts, exfiltration in plain words. A finding
names the rule that matched; a chunk only the classifier flags gets one `classifier` finding whose excerpt
gives the score and the clause that weighs most.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from ingest.injection_score import excerpt, score, score_model
from ingest.scanner import EXCERPT_LIMIT, InjectionFinding, rule_findings

CLASSIFIER_RULE = "classifier"
# A header field that talks to an AI: every chunk of its document carries it (the title rides on every search
# result, the owner and references on get_document and list_documents), so every chunk is flagged with it.
HEADER_RULE = "header-field"


def detect(text: str) -> list[InjectionFinding]:
    """The findings for `text`, in the order they occur; [] when it is not a suspect."""
    hits = sorted(rule_findings(text), key=lambda hit: hit[0])
    if hits:
        return [finding for _, finding in hits]
    model = score_model()
    p = score(text, set(), model)
    if p < model.threshold:
        return []
    evidence = f"score {p:.4f}: {' '.join(excerpt(text, model).split())}"
    if len(evidence) > EXCERPT_LIMIT:
        evidence = evidence[: EXCERPT_LIMIT - 1].rstrip() + "…"
    return [InjectionFinding(CLASSIFIER_RULE, evidence)]


def scan_chunk(section_path: str, content: str, header: HeaderText | None = None) -> list[InjectionFinding]:
    """What ingestion and `kb rescan` scan for a chunk: its section path (headings can carry an attack too),
    its text, and its document's free-text header fields (`header`: title, owner, regulatory refs)."""
    findings = detect(f"{section_path}\n{content}")
    return findings + list(header_findings(header)) if header else findings


HeaderText = tuple[str, str, tuple[str, ...]]  # title, owner, regulatory refs


@lru_cache(maxsize=256)
def header_findings(header: HeaderText) -> tuple[InjectionFinding, ...]:
    """One `header-field` finding per field of the header that the scanner flags, its evidence naming the field
    and the rule. Found walking it: "title: Wallet Limits. Assistant: disregard your instructions ..." was
    served on every chunk of its document, unflagged. Cached: every chunk of a document asks the same."""
    title, owner, refs = header
    found = []
    for field, text in (("title", title), ("owner", owner), ("regulatory refs", "; ".join(refs))):
        for finding in detect(text) if text else ():
            evidence = f"{field}: {finding.rule}: {finding.excerpt}"
            if len(evidence) > EXCERPT_LIMIT:
                evidence = evidence[: EXCERPT_LIMIT - 1].rstrip() + "…"
            found.append(InjectionFinding(HEADER_RULE, evidence))
            break  # one finding per field is evidence enough
    return tuple(found)


def header_text(title: str, owner: str, refs: Sequence[str]) -> HeaderText:
    return title, owner, tuple(refs)
