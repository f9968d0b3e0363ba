"""Fewer malloc arenas in an ingesting process (kb_core.process_memory), seen in a real process: the model
runs one call per core at once, as ingestion runs it, and glibc's own report counts the heaps it made."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tests.conftest import REPO

PROBE = """
import ctypes, sys
from concurrent.futures import ThreadPoolExecutor
from kb_core.embedders.local import LocalEmbedder
from kb_core.process_memory import limit_malloc_arenas
limited = limit_malloc_arenas() if sys.argv[1] == "limit" else False
embedder = LocalEmbedder(threads=2, bulk=True)
embedder.load()
text = "The settlement file arrives at 06:00 MT and is reconciled against the ledger. " * 30
with ThreadPoolExecutor(4) as pool:
    list(pool.map(embedder.embed, [[text] * 3] * 8))
libc = ctypes.CDLL(None)
libc.open_memstream.restype = ctypes.c_void_p
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
buffer, size = ctypes.c_char_p(), ctypes.c_size_t()
stream = libc.open_memstream(ctypes.byref(buffer), ctypes.byref(size))
libc.malloc_info(0, stream)
libc.fclose(stream)
print(limited, ctypes.string_at(buffer, size.value).decode().count("<heap nr="))
"""


def heaps(mode: str, **env: str) -> tuple[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": f"{REPO / 'src'}:{REPO}", "PATH": "/usr/bin:/bin", **env},
        timeout=120,
        check=True,
    )
    limited, count = done.stdout.split()
    return limited, int(count)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_info: Linux only")
def test_with_the_limit_threads_embedding_at_once_share_two_heaps():
    assert heaps("limit") == ("True", 2)
    _, unlimited = heaps("none")
    assert unlimited > 2  # the control: without the limit the same work makes more


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_info: Linux only")
def test_an_operators_malloc_arena_max_is_left_as_set():
    limited, count = heaps("limit", MALLOC_ARENA_MAX="3")
    assert limited == "False" and count <= 3
