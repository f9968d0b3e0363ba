"""Small real documents written for a test: a Markdown file with a header block and sections."""

from __future__ import annotations

from pathlib import Path

from kb_core.departments import DEPARTMENTS


def markdown_document(
    doc_code: str = "CMP-SOP-901",
    *,
    version: str = "1.0",
    status: str = "effective",
    effective_date: str = "2026-01-01",
    classification: str = "internal",
    title: str = "Test Procedure",
    sections: dict[str, str] | None = None,
) -> str:
    department = next(slug for slug, code in DEPARTMENTS.items() if doc_code.startswith(code))
    sections = sections or {
        "1. Purpose": "This procedure explains how reconciliation breaks are escalated.",
        "2. Escalation": "Breaks above $5,000 go to the Treasury Operations Lead within 2 business hours.",
    }
    body = "\n\n".join(f"## {heading}\n\n{text}" for heading, text in sections.items())
    return (
        f'---\ndoc_code: {doc_code}\ntitle: {title}\nversion: "{version}"\nstatus: {status}\n'
        f"effective_date: {effective_date}\nowner: Test Owner\ndepartment: {department}\n"
        f"classification: {classification}\nregulatory_refs: []\n---\n\n# {title}\n\n{body}\n"
    )


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path
