"""The nine departments: slug (used in citations) and the three-letter code that starts a doc code.

sql/001 loads the same list into kb.departments; a test keeps the two equal.
"""

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
