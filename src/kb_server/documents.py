"""Reading documents and their sections under the caller's role (get_document, list_documents, kb:// URIs).

Each read is one round trip. A document the role may not see and a document that does not exist give
the same answer: nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from psycopg import AsyncConnection

from kb_core.roles import Role
from kb_server.db.reader import reader_transaction

# The version asked for, or else the effective one, or else the newest.
_CHOSEN = """
FROM kb.documents
WHERE doc_code = %(doc_code)s AND (%(version)s::text IS NULL OR version = %(version)s)
ORDER BY status = 'effective' DESC, effective_date DESC, version_key DESC
LIMIT 1"""
_DOCUMENT = f"""
SELECT doc_id, doc_code, title, version, status::text, effective_date, department, classification::text,
       owner, regulatory_refs {_CHOSEN}"""
_CHUNKS = f"""
SELECT section_path, anchor, content, injection_suspect
FROM kb.chunks
WHERE doc_id = (SELECT doc_id {_CHOSEN})
ORDER BY ordinal"""
_VERSIONS = "SELECT version FROM kb.documents WHERE doc_code = %(doc_code)s ORDER BY version_key"
_LIST = """
SELECT doc_code, title, version, status::text, effective_date, department, classification::text, owner,
       count(*) OVER () AS total
FROM kb.documents
WHERE (%(department)s::text IS NULL OR department = %(department)s)
  AND (%(status)s::text IS NULL OR status = %(status)s::kb.doc_status)
ORDER BY department, doc_code, version_key DESC
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class StoredSection:
    section_path: str
    anchor: str
    content: str
    injection_suspect: bool


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

    @property
    def citation(self) -> str:
        return f"kb://{self.department}/{self.doc_code}"


@dataclass(frozen=True)
class StoredDocument(ListedDocument):
    """A version with its sections, and the other versions of its doc code."""

    regulatory_refs: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    sections: list[StoredSection] = field(default_factory=list)


async def fetch_document(
    conn: AsyncConnection, role: Role, doc_code: str, version: str | None = None
) -> StoredDocument | None:
    params = {"doc_code": doc_code, "version": version}
    async with reader_transaction(conn, role) as tx:
        document = await tx.execute(_DOCUMENT, params)
        chunks = await tx.execute(_CHUNKS, params)
        versions = await tx.execute(_VERSIONS, params)
    row = await document.fetchone()
    if row is None:
        return None
    doc_code, title, version, status, effective_date, department, classification, owner, refs = row[1:]
    return StoredDocument(
        doc_code,
        title,
        version,
        status,
        effective_date,
        department,
        classification,
        owner,
        list(refs),
        versions=[v for (v,) in await versions.fetchall()],
        sections=join_sections(await chunks.fetchall()),
    )


def join_sections(chunk_rows: list[tuple[str, str, str, bool]]) -> list[StoredSection]:
    """One entry per section: its chunks joined, each continuation's repeated opening removed."""
    sections: list[StoredSection] = []
    for section_path, anchor, content, suspect in chunk_rows:
        if sections and sections[-1].anchor == anchor:
            previous = sections[-1]
            first, _, rest = content.partition("\n\n")
            joined = previous.content + "\n\n" + (rest if rest and previous.content.endswith(first) else content)
            sections[-1] = StoredSection(section_path, anchor, joined, previous.injection_suspect or suspect)
        else:
            sections.append(StoredSection(section_path, anchor, content, suspect))
    return sections


async def list_documents(
    conn: AsyncConnection, role: Role, *, department: str | None, status: str | None, limit: int
) -> tuple[list[ListedDocument], int]:
    async with reader_transaction(conn, role) as tx:
        cursor = await tx.execute(_LIST, {"department": department, "status": status, "limit": limit})
    rows = await cursor.fetchall()
    total = rows[0][-1] if rows else 0
    return [ListedDocument(*row[:-1]) for row in rows], total
