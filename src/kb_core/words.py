"""Counts in sentences a person reads: "1 message", "2 messages"."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """`noun` in the singular; 'process' and 'class' take -es."""
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {noun}es" if noun.endswith(("s", "sh", "ch", "x")) else f"{n} {noun}s"
