"""What ingestion and `kb rescan` flag as a prompt-injection suspect: the scanner's rules (ingest.scanner),
or else the classifier (ingest.injection_score) at or above its threshold.

The rules stay decisive: each needs an attack-shaped construction, and hidden text is flagged whatever it
says (nobody reviewed it). The classifier catches what no rule was written for: the model addressed by a
product name, commands with no addressee, conditional scripts, exfiltration in plain words. A finding
names the rule that matched; a chunk only the classifier flags gets one `classifier` finding whose excerpt
gives the score and the clause that weighs most.
"""

from __future__ import annotations

from ingest.injection_score import excerpt, score, score_model
from ingest.scanner import EXCERPT_LIMIT, InjectionFinding, rule_findings

CLASSIFIER_RULE = "classifier"


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


def scan_chunk(section_path: str, content: str) -> list[InjectionFinding]:
    """What ingestion and `kb rescan` scan for a chunk: its section path (headings can carry an attack too)
    and its text."""
    return detect(f"{section_path}\n{content}")
