"""The offline default embedder: a real model; texts beyond its 256-piece input are windowed, not cut."""

from __future__ import annotations

import numpy as np

from kb_core.embedders.local import DIMENSIONS, WINDOW, split_windows


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
