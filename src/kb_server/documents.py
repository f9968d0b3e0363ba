"""Reading documents and their sections under the caller's role (get_document, list_documents, kb:// URIs).

Each read is one round trip. A document the role may not see and a document that does not exist give
the same answer: nothing. Which version a read means (pinned, as of a date, current) is kb_server.versions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime

from psycopg import AsyncConnection

from kb_core.roles import Role
from kb_server.citations import Citation
from kb_server.db.reader import reader_transaction
from kb_server.versions import CHOSEN_DOC_ID, in_force_on, version_params

_DOCUMENT = f"""
SELECT doc_id, doc_code, title, version, status::text, effective_date, department, classification::text,
       owner, withdrawn_at, regulatory_refs
FROM kb.documents WHERE doc_id = ({CHOSEN_DOC_ID})"""
_CHUNKS = f"""
SELECT section_path, anchor, content, injection_suspect, injection_rule
FROM kb.chunks
WHERE doc_id = ({CHOSEN_DOC_ID}) AND NOT metadata ? 'rows_of'  -- a table's row groups repeat its rows
ORDER BY ordinal"""
_VERSIONS = (
    "SELECT version, effective_date, status::text FROM kb.documents WHERE doc_code = %(doc_code)s ORDER BY version_key"
)
_READABLE_VERSIONS = """
SELECT version, status::text, effective_date, withdrawn_at FROM kb.documents
WHERE doc_code = %(doc_code)s ORDER BY version_key DESC"""
# Withdrawn versions only when asked for by status, or as of a date when they were in force.
_LIST = f"""
SELECT doc_code, title, version, status::text, effective_date, department, classification::text, owner,
       withdrawn_at,
       -- A header field that talks to an AI flags every chunk (ingest.injection.HEADER_RULE): the title listed
       -- here is that text, so the entry says so too.
       (SELECT 'header-field' FROM kb.chunks c
        WHERE c.doc_id = d.doc_id AND c.injection_rule LIKE '%%header-field%%' LIMIT 1) AS injection_rule,
       count(*) OVER () AS total
FROM kb.documents d
WHERE (%(department)s::text IS NULL OR department = %(department)s)
  AND CASE WHEN %(status)s::text IS NOT NULL THEN status = %(status)s::kb.doc_status
           ELSE status <> 'withdrawn' OR %(as_of)s::date IS NOT NULL END
  AND (%(as_of)s::date IS NULL OR doc_id IN (SELECT doc_id FROM ({in_force_on()}) in_force))
ORDER BY department, doc_code, version_key DESC
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class StoredSection:
    section_path: str
    anchor: str
    content: str
    injection_suspect: bool
    injection_rule: str | None = None  # comma-separated rule ids, when suspect


@dataclass(frozen=True)
class ListedDocument:
    """A document version's metadata, as the caller's role may read it."""

    doc_code: str
    title: str
    version: str
    status: str
    effective_date: date
    department: str
    classification: str
    owner: str
    withdrawn_at: datetime | None = None
    injection_rule: str | None = None  # "header-field" when its title, owner or refs talk to an AI

    @property
    def citation(self) -> str:
        """The pinned citation of this version."""
        return str(Citation(self.department, self.doc_code, self.version))

    def section_citation(self, anchor: str) -> str:
        return str(Citation(self.department, self.doc_code, self.version, anchor))


@dataclass(frozen=True)
class StoredDocument(ListedDocument):
    """A version with its sections, and the other versions of its doc code."""

    regulatory_refs: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    sections: list[StoredSection] = field(default_factory=list)
    # (version, effective date, status) of every version of the doc code the role may read, this one included
    stored_versions: list[tuple[str, date, str]] = field(default_factory=list)

    def next_stored(self) -> tuple[str, date] | None:
        """The stored version that took effect after this one, drafts aside: the one that replaced it, as far as
        the knowledge base knows."""
        later = [(d, v) for v, d, status in self.stored_versions if d > self.effective_date and status != "draft"]
        return (min(later)[1], min(later)[0]) if later else None


async def fetch_document(
    conn: AsyncConnection, role: Role, doc_code: str, version: str | None = None, *, as_of: date | None = None
) -> StoredDocument | None:
    """The version `version` names, or the one in force on `as_of`, or the effective one."""
    params = version_params(doc_code, version=version, as_of=as_of)
    async with reader_transaction(conn, role) as tx:
        document = await tx.execute(_DOCUMENT, params)
        chunks = await tx.execute(_CHUNKS, params)
        versions = await tx.execute(_VERSIONS, params)
    row = await document.fetchone()
    if row is None:
        return None
    stored = await versions.fetchall()
    doc_code, title, version, status, effective_date, department, classification, owner, withdrawn, refs = row[1:]
    return StoredDocument(
        doc_code,
        title,
        version,
        status,
        effective_date,
        department,
        classification,
        owner,
        withdrawn,
        regulatory_refs=list(refs),
        versions=[v for v, _, _ in stored],
        stored_versions=[(v, d, status) for v, d, status in stored],
        sections=join_sections(await chunks.fetchall()),
    )


def join_sections(chunk_rows: list[tuple[str, str, str, bool, str | None]]) -> list[StoredSection]:
    """One entry per section: its chunks joined, each continuation's repeated opening removed; the section
    is suspect when any of its chunks is, with every rule that flagged one of them."""
    sections: list[StoredSection] = []
    for section_path, anchor, content, suspect, rule in chunk_rows:
        if sections and sections[-1].anchor == anchor:
            previous = sections[-1]
            first, _, rest = content.partition("\n\n")
            joined = previous.content + "\n\n" + (rest if rest and previous.content.endswith(first) else content)
            rules = _merge_rules(previous.injection_rule, rule)
            sections[-1] = StoredSection(section_path, anchor, joined, previous.injection_suspect or suspect, rules)
        else:
            sections.append(StoredSection(section_path, anchor, content, suspect, rule))
    return sections


def _merge_rules(first: str | None, second: str | None) -> str | None:
    rules = [r for text in (first, second) if text for r in text.split(",")]
    return ",".join(dict.fromkeys(rules)) or None


async def list_documents(
    conn: AsyncConnection,
    role: Role,
    *,
    department: str | None,
    status: str | None,
    limit: int,
    as_of: date | None = None,
) -> tuple[list[ListedDocument], int]:
    """Every version the role may read (withdrawn ones only when `status` asks for them); with `as_of`, per
    doc code the version in force on that date."""
    params = {"department": department, "status": status, "limit": limit, "as_of": as_of}
    async with reader_transaction(conn, role) as tx:
        cursor = await tx.execute(_LIST, params)
    rows = await cursor.fetchall()
    total = rows[0][-1] if rows else 0
    return [ListedDocument(*row[:-1]) for row in rows], total


EMPTY_HINT = (
    "the knowledge base has no documents your role can read: nothing has been ingested yet (run "
    "`kb ingest corpus/` or `make run`), this server opened another database than the one you ingested into "
    "(a client such as Claude Desktop passes on no environment: give the server KB_STATE_DIR or DATABASE_URL), "
    "or every document is above your role's ceiling"
)


# Drafts are never in force; a withdrawn version was, until it was withdrawn. Under the role's ceiling (RLS), so the
# date says nothing about documents above it.
_EARLIEST_IN_FORCE = """
SELECT EXISTS (SELECT 1 FROM kb.chunks),
       (SELECT min(effective_date) FROM kb.documents
        WHERE status <> 'draft' AND (%(departments)s::text[] IS NULL OR department = ANY(%(departments)s)))"""


async def empty_knowledge_base_hint(
    conn: AsyncConnection, role: Role, *, as_of: date | None = None, departments: list[str] | None = None
) -> str | None:
    """Why a search found nothing, when the reason is that there is nothing to find (nothing readable at all,
    or nothing yet in force on `as_of` in these departments); else None."""
    async with reader_transaction(conn, role) as tx:
        cursor = await tx.execute(_EARLIEST_IN_FORCE, {"departments": departments})
    row = await cursor.fetchone()
    if not row or not row[0]:
        return EMPTY_HINT
    earliest = row[1]
    if as_of is not None and earliest is not None and as_of < earliest:
        return (
            f"nothing you may read was in force on {as_of.isoformat()}: the earliest took effect on "
            f"{earliest.isoformat()}; ask with a later as_of, or without one for the effective versions"
        )
    return None


@dataclass(frozen=True)
class VersionStatus:
    version: str
    status: str
    effective_date: date
    withdrawn_at: datetime | None

    def describe(self) -> str:
        if self.withdrawn_at is not None:
            return f"{self.version} (withdrawn {self.withdrawn_at:%Y-%m-%d})"
        # "superseded from <date>" read as the date it was superseded; the date is when it took effect.
        if self.status == "effective":
            return f"{self.version} (effective from {self.effective_date.isoformat()})"
        return f"{self.version} ({self.status}; its effective date {self.effective_date.isoformat()})"


async def readable_versions(conn: AsyncConnection, role: Role, doc_code: str) -> list[VersionStatus]:
    """Every version of a doc code the role may read, newest first: what a not-found answer can point to.
    Under the role's ceiling like every read, so a document above it still looks like no document at all."""
    async with reader_transaction(conn, role) as tx:
        cursor = await tx.execute(_READABLE_VERSIONS, {"doc_code": doc_code})
    return [VersionStatus(*row) for row in await cursor.fetchall()]
