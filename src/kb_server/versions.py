"""Which version of a document a read means: a pinned version, the version in force on a date, or the current one.

- Pinned (`CMP-SOP-004@2.0`): exactly that version, whatever its status (superseded and withdrawn too).
- As of a date: per doc code, the latest version (by effective date, then version number) whose effective date
  is on or before that date, drafts aside; none when that version had been withdrawn by then (a version
  withdrawn after the date was still in force on it).
- Neither: the effective version; none for a doc code with no effective version (drafts only, or withdrawn),
  whose versions the caller then has to name. A draft served as "the current version" under an unpinned
  citation was quoted as policy in force (found walking it; the README and the tools say "the effective one").

Everything runs under the caller's role, so the ceiling applies to every version. The SQL fragments here are
also used inside larger statements (search, get_document, list_documents) to keep each read one round trip.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from psycopg import AsyncConnection

from kb_core.roles import Role
from kb_server.citations import Citation
from kb_server.db.reader import reader_transaction

# Per doc code, the version in force on %(as_of)s, with whether it is the current effective version (its
# chunks are then in the partial search indexes; the others are read through the doc_id index). A version
# withdrawn on the date itself (UTC) was no longer in force on it. (`withdrawn_from IS NULL OR ...` rather than IS
# DISTINCT FROM: the planner estimates the latter from the column's null fraction as matching no row.)
IN_FORCE_ON = """
SELECT doc_id, doc_code, status = 'effective' AS is_effective FROM (
    SELECT DISTINCT ON (doc_code) doc_id, doc_code, status, withdrawn_at
    FROM kb.documents
    WHERE effective_date <= %(as_of)s::date AND status <> 'draft'
      AND (withdrawn_from IS NULL OR withdrawn_from <> 'draft')
      {and_doc_code}
    ORDER BY doc_code, effective_date DESC, version_key DESC
) latest
WHERE withdrawn_at IS NULL OR (withdrawn_at AT TIME ZONE 'UTC')::date > %(as_of)s::date"""


def in_force_on(*, doc_code: bool = False) -> str:
    """IN_FORCE_ON for every doc code, or (doc_code=True) for %(doc_code)s only."""
    return IN_FORCE_ON.format(and_doc_code="AND doc_code = %(doc_code)s" if doc_code else "")


# The doc_id of %(doc_code)s's version that a read means: %(version)s if set, else the one in force on
# %(as_of)s if set, else the current one.
CHOSEN_DOC_ID = f"""
SELECT doc_id FROM kb.documents
WHERE doc_code = %(doc_code)s
  AND CASE WHEN %(version)s::text IS NOT NULL THEN version = %(version)s
           WHEN %(as_of)s::date IS NOT NULL THEN doc_id IN (SELECT doc_id FROM ({in_force_on(doc_code=True)}) in_force)
           ELSE status = 'effective' END
ORDER BY status = 'effective' DESC, effective_date DESC, version_key DESC
LIMIT 1"""

_RESOLVE = f"""
SELECT doc_id, doc_code, version, status::text, effective_date, department, classification::text, withdrawn_at
FROM kb.documents WHERE doc_id = ({CHOSEN_DOC_ID})"""


@dataclass(frozen=True)
class ResolvedVersion:
    """One stored version of a document, as the caller's role may read it."""

    doc_id: int
    doc_code: str
    version: str
    status: str  # effective, superseded, draft or withdrawn
    effective_date: date
    department: str
    classification: str
    withdrawn_at: datetime | None

    def citation(self, section: str | None = None) -> Citation:
        """The pinned citation of this version (or of one of its sections)."""
        return Citation(self.department, self.doc_code, self.version, section)


def version_params(doc_code: str, *, version: str | None = None, as_of: date | None = None) -> dict[str, object]:
    """The parameters CHOSEN_DOC_ID reads."""
    if version is not None and as_of is not None:
        raise ValueError("name a version or an as_of date, not both")
    return {"doc_code": doc_code, "version": version, "as_of": as_of}


async def resolve_version(
    conn: AsyncConnection, role: Role, doc_code: str, *, version: str | None = None, as_of: date | None = None
) -> ResolvedVersion | None:
    """The version a read of `doc_code` means (see the module docstring); None when there is none the role
    may read. One round trip."""
    async with reader_transaction(conn, role) as tx:
        cursor = await tx.execute(_RESOLVE, version_params(doc_code, version=version, as_of=as_of))
    row = await cursor.fetchone()
    return ResolvedVersion(*row) if row else None


async def resolve_citation(conn: AsyncConnection, role: Role, citation: Citation) -> ResolvedVersion | None:
    """The version a kb:// citation names: pinned, exactly that version; unpinned, the current one. A citation
    whose department is not the document's resolves to nothing."""
    resolved = await resolve_version(conn, role, citation.doc_code, version=citation.version)
    if resolved is None or resolved.department != citation.department:
        return None
    return resolved
