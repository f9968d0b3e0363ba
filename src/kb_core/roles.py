"""The four reader roles and the classification ceilings PostgreSQL enforces for them (sql/002)."""

from __future__ import annotations

from enum import StrEnum


class Classification(StrEnum):
    PUBLIC = "public"
    INTERNAL = "internal"
    CONFIDENTIAL = "confidential"
    RESTRICTED = "restricted"

    @property
    def level(self) -> int:
        return list(Classification).index(self)


class Role(StrEnum):
    DEMO_READONLY = "demo_readonly"
    SUPPORT_AGENT = "support_agent"
    ANALYST = "analyst"
    COMPLIANCE_OFFICER = "compliance_officer"

    @property
    def ceiling(self) -> Classification:
        return CEILINGS[self]

    def may_read(self, classification: Classification) -> bool:
        return classification.level <= self.ceiling.level


CEILINGS: dict[Role, Classification] = {
    Role.DEMO_READONLY: Classification.PUBLIC,
    Role.SUPPORT_AGENT: Classification.INTERNAL,
    Role.ANALYST: Classification.CONFIDENTIAL,
    Role.COMPLIANCE_OFFICER: Classification.RESTRICTED,
}
