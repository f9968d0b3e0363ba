"""The offline default embedder: a real model; texts beyond its 256-piece input are windowed, not cut."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from kb_core.embedders import make_embedder
from kb_core.embedders.local import DIMENSIONS, WINDOW, LocalEmbedder, available_cores, split_windows
from kb_core.settings import EmbeddingSettings


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_vectors_are_384_dimensional_and_unit_length(local_embedder):
    result = local_embedder.embed(["wire transfer cut-off", "password length"])
    assert result.vectors.shape == (2, DIMENSIONS)
    assert np.allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)


def test_it_is_a_real_language_model(local_embedder):
    fee = local_embedder.embed_query("How much does it cost to send a domestic wire?")
    close = local_embedder.embed_query("Domestic wire transfer fee: $30 per outgoing wire.")
    far = local_embedder.embed_query("Passwords must be at least 14 characters long.")
    assert cosine(fee, close) > cosine(fee, far) + 0.2


def test_windows_cover_every_piece_with_overlap():
    ids = list(range(1000))
    windows = split_windows(ids)
    assert all(len(w) <= WINDOW for w in windows)
    assert sorted(set().union(*map(set, windows))) == ids
    assert windows[1][0] < windows[0][-1]  # consecutive windows overlap


def test_a_text_longer_than_the_model_input_is_windowed_not_silently_truncated(local_embedder):
    head = "The settlement file arrives at 06:00 MT and is reconciled against the ledger. " * 12
    tail = "Passwords for administrator consoles must be rotated after any suspected compromise. " * 20
    assert len(local_embedder.pieces(head + tail)) > 256
    result = local_embedder.embed([head + tail, head])
    assert result.windows[0] >= 2 and result.windows[1] == 1
    password = local_embedder.embed_query("administrator password rotation")
    # The tail beyond the first 256 pieces counts: the long text is closer to it than its head alone.
    assert cosine(result.vectors[0], password) > cosine(result.vectors[1], password) + 0.05


# In bulk (ingest) the model runs one call per core at once; see kb_core.embedders.local.

LONG = "The settlement file arrives at 06:00 MT and is reconciled against the ledger by the payments team. " * 40


class CallsInFlight:
    """Wraps the real ONNX session: counts the calls inside it at once. With `wait_for`, a call waits (at most
    10 s) until that many are inside, so calls that can overlap are sure to, whatever the machine's load."""

    def __init__(self, session, wait_for: int = 0) -> None:  # type: ignore[no-untyped-def]
        self.session, self.wait_for = session, wait_for
        self.lock, self.crowd = threading.Lock(), threading.Event()
        self.inside = self.peak = 0

    def run(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        with self.lock:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
            if self.inside >= self.wait_for:
                self.crowd.set()
        if self.wait_for:
            self.crowd.wait(timeout=10)
        try:
            return self.session.run(*args, **kwargs)
        finally:
            with self.lock:
                self.inside -= 1


@pytest.fixture(scope="module")
def bulk_embedder():
    embedder = LocalEmbedder(threads=2, bulk=True)
    embedder.load()
    return embedder


@pytest.fixture
def calls_in_flight(bulk_embedder):  # type: ignore[no-untyped-def]
    real = bulk_embedder._session

    def wrap(wait_for: int = 0) -> CallsInFlight:
        bulk_embedder._session = CallsInFlight(real, wait_for)
        return bulk_embedder._session

    yield wrap
    bulk_embedder._session = real


def test_in_bulk_the_model_gives_the_vectors_it_gives_to_queries(local_embedder, bulk_embedder):
    texts = ["wire transfer cut-off", LONG, "Passwords must be at least 14 characters long.", ""]
    query, bulk = local_embedder.embed(texts), bulk_embedder.embed(texts)
    assert bulk.windows == query.windows and bulk.windows[1] >= 3
    assert bulk.tokens == query.tokens
    assert np.allclose(bulk.vectors, query.vectors, atol=1e-4)


def test_in_bulk_a_long_texts_windows_run_on_two_cores_at_once(bulk_embedder, calls_in_flight):
    session = calls_in_flight(wait_for=2)
    bulk_embedder.embed([LONG])
    assert session.peak == 2


def test_in_bulk_texts_embedded_from_many_threads_share_one_cap_of_calls(bulk_embedder, calls_in_flight):
    session = calls_in_flight()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(bulk_embedder.embed, [[LONG, LONG]] * 4))
    assert 1 <= session.peak <= bulk_embedder.requests_in_flight == 2


def test_the_server_runs_one_call_at_a_time_and_ingest_one_per_core():
    settings = EmbeddingSettings()
    assert make_embedder(settings).requests_in_flight == 1  # type: ignore[attr-defined]
    assert make_embedder(settings, bulk=True).requests_in_flight == available_cores()  # type: ignore[attr-defined]
