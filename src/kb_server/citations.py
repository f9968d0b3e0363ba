"""kb:// citations: what the server emits and what a client hands back to read or check a quote.

`kb://{department}/{doc_code}@{version}#{section}` names one version's section (a pinned citation: it
resolves to exactly that text, whatever has superseded it since). Without `@{version}` it means the
effective version; without `#{section}`, the whole document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SCHEME = "kb://"

_CITATION = re.compile(
    # The department in any case, so that a wrong case is refused by name ("unknown department 'Compliance'"),
    # as a resource read refuses it, rather than as no citation at all.
    # The scheme in any case too (RFC 3986: schemes are case-insensitive).
    r"^(?i:kb)://(?P<department>[A-Za-z][A-Za-z0-9-]{0,39})/(?P<doc_code>[A-Za-z0-9-]{1,40})"
    r"(?:@(?P<version>[0-9A-Za-z.+-]{1,20}))?(?:#(?P<section>[^\s#]{1,200}))?$"
)


class CitationError(ValueError):
    """A string that is not a kb:// citation; the message says what the form is."""


@dataclass(frozen=True)
class Citation:
    department: str
    doc_code: str
    version: str | None = None  # None: the effective version
    section: str | None = None  # None: the whole document

    @property
    def pinned(self) -> bool:
        return self.version is not None

    def __str__(self) -> str:
        uri = f"{SCHEME}{self.department}/{self.doc_code}"
        if self.version is not None:
            uri += f"@{self.version}"
        if self.section is not None:
            uri += f"#{self.section}"
        return uri


def parse_citation(text: str) -> Citation:
    match = _CITATION.match(text.strip())
    if match is None:
        raise CitationError(
            f"{text[:80]!r} is not a kb:// citation: expected kb://department/DOC-CODE@version#section "
            "(@version and #section are optional), as the tools return it"
        )
    return Citation(match["department"], match["doc_code"].upper(), match["version"], match["section"])
