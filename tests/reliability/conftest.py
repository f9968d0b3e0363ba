"""The reliability checks `make test` runs: a small load, the database restarted, the embedding endpoint
down, the local AWS down and the worker killed at each stage of an upsert, each against real processes
(reliability/harness.py). The full figures come from `poe reliability` (reliability/report.md)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evals.cache import CachingEmbedder
from reliability.faults import Rig, ingest_paths, ingest_rig, sample_documents
from reliability.harness import Cluster, database_url, fresh_database

from tests.conftest import server_dir


@pytest.fixture(scope="session")
def restartable_database(local_embedder: Any) -> Iterator[tuple[Cluster, str]]:
    """A PostgreSQL of its own (the fault stops it), outside pytest's temporary root, with a few corpus
    documents of each classification; (its cluster, its DATABASE_URL)."""
    state = server_dir("reliability")
    cluster = Cluster(state)
    try:
        superuser = cluster.start()
        targets = fresh_database(superuser, "reliability_restart", local_embedder.space)
        cache = Path.home() / ".cache" / "kosha-kb" / "corpus-vectors.npz"
        ingest_paths(targets, CachingEmbedder(local_embedder, cache), sample_documents())
        yield cluster, database_url(targets.owner)
    finally:
        cluster.destroy()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def rig(postgres_superuser: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    """moto's server as a process, the proxy the workers reach it through, and the local embeddings endpoint."""
    with ingest_rig(postgres_superuser, tmp_path_factory.mktemp(f"rig-{os.getpid()}")) as ingest:
        yield ingest
