"""Counts in sentences a person reads: "1 message", "2 messages"."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
