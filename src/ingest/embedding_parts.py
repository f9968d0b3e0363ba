"""A large file's chunks are embedded in parts, so that it can say how far it has got.

A file near the size limit has thousands of chunks and took minutes in one embedding call, during which
`kb worker`, `make run > log` and the Lambda's log said nothing: an operator could not tell a slow file from a
stuck one. Embedded a part at a time, it reports its progress at most every EVERY_S. A text's vector does not
depend on which texts share its call (the model sees each text alone; batching only pads).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kb_core.embedders.base import Embedder, Embeddings

# Texts per embedding call at least: about 1.5 s on the local model on 2 cores, 5-12 s on a loaded machine
# (found walking it: parts of 512 took 22-48 s under load, and the lines came that far apart, not every 10 s).
PART = 128
# ... and at least this many per request the embedder may have in flight (OpenAI's batch), so that a part
# keeps every parallel request of KB_EMBED_CONCURRENCY busy.
TEXTS_PER_REQUEST = 64
EVERY_S = 10.0


@dataclass(frozen=True)
class EmbeddingProgress:
    name: str  # the file's name
    done: int  # texts embedded so far
    total: int
    seconds: float

    def line(self) -> str:
        return f"embedding {self.name}: {self.done:,}/{self.total:,} chunks · {self.seconds:.0f} s"


Report = Callable[[EmbeddingProgress], None]


def embed_in_parts(
    embedder: Embedder,
    texts: Sequence[str],
    *,
    name: str,
    report: Report | None,
    part: int | None = None,
    every_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Embeddings:
    """`embedder.embed(texts)`, a part at a time when there is more than one part and someone to tell
    (defaults: PART and EVERY_S)."""
    if part is None:
        part = max(PART, TEXTS_PER_REQUEST * getattr(embedder, "requests_in_flight", 1))
    every_s = EVERY_S if every_s is None else every_s
    if report is None or len(texts) <= part:
        return embedder.embed(texts)
    started = last = clock()
    parts: list[Embeddings] = []
    for start in range(0, len(texts), part):
        parts.append(embedder.embed(texts[start : start + part]))
        done, now = min(start + part, len(texts)), clock()
        if now - last >= every_s and done < len(texts):
            last = now
            report(EmbeddingProgress(name, done, len(texts), now - started))
    return Embeddings(
        vectors=np.vstack([p.vectors for p in parts]),
        tokens=sum(p.tokens for p in parts),
        windows=[w for p in parts for w in p.windows],
    )
