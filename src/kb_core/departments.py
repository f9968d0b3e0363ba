"""The nine departments: slug (used in citations) and the three-letter code that starts a doc code; the form of a
doc code and a version, and the statuses a stored version can have.

sql/001 loads the same list into kb.departments; a test keeps the two equal.
"""

import re

# A doc code: its department's three-letter code, the document type's, then a number (ASCII digits: \d would take
# any script's).
DOC_CODE = re.compile(r"^([A-Z]{3})-([A-Z]{3})-([0-9]{3,6})$")

# A document version: dotted numbers, ASCII digits too (sql: the CHECK on kb.documents.version).
DOC_VERSION = re.compile(r"^[0-9]+(\.[0-9]+){0,3}$")

# A stored version's status (sql: kb.doc_status); a header block may declare any but the last.
DOC_STATUSES = ("effective", "superseded", "draft", "withdrawn")

DEPARTMENTS: dict[str, str] = {
    "compliance": "CMP",
    "risk": "RSK",
    "payments": "PAY",
    "lending": "LND",
    "support": "CSP",
    "security": "SEC",
    "engineering": "ENG",
    "finance": "FIN",
    "legal": "LEG",
}
