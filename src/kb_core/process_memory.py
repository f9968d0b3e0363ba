"""Fewer malloc arenas in a process that parses and embeds on several threads at once; freed memory handed
back to the system in a long-lived process that passes large values through.

glibc gives each thread that finds the heap busy an arena of its own (up to 8 per core) and keeps what is
freed in each for reuse, so a parse thread beside a model call per core holds several heaps' worth of
freed memory: the corpus ingest peaked at 526 MB with the default and at 454 MB with 2 arenas, ~4% slower
(bench/results.md, Ingest). mallopt(M_ARENA_MAX) does what the MALLOC_ARENA_MAX variable does at start-up;
called before those threads start, it binds them. Without glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import os

_M_ARENA_MAX = -8  # glibc's malloc.h


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Whether the limit was set (False where the C library has no mallopt, or MALLOC_ARENA_MAX chose)."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process already runs on
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))


def release_free_memory() -> bool:
    """malloc_trim(0): return the heap's free pages to the system (glibc keeps them for reuse otherwise, and a
    freed large block raises the size below which it serves blocks from the heap). Whether any was returned."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    return bool(trim(0))
