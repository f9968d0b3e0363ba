"""Shared fixtures: one real PostgreSQL (embedded, or KB_TEST_DATABASE_URL) for the whole session.

A template database is migrated once; each test that needs a database gets a fresh copy of it.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from evals.cache import CachingEmbedder
from psycopg import conninfo as pg_conninfo
from psycopg import sql

from kb_core.db.embedded import EmbeddedPostgres
from kb_core.db.migrations import migrate
from kb_core.db.targets import INGEST_LOGIN, SERVER_LOGIN, DatabaseTargets
from kb_core.embedders import embedding_space_for
from kb_core.settings import EmbeddingSettings

REPO = Path(__file__).resolve().parents[1]

# The suite configures what it uses itself; a developer's own settings must not leak in.
for _name in list(os.environ):
    if (_name.startswith("KB_") and _name != "KB_TEST_DATABASE_URL") or _name in (
        "DATABASE_URL",
        "AWS_ENDPOINT_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        del os.environ[_name]
TEMPLATE = "kb_test_template"
_counter = itertools.count()


def server_dir(prefix: str) -> Path:
    """A folder for a PostgreSQL data directory, outside pytest's temporary root: each pytest session
    (another developer's, a helper's) resets that root to mode 0700 when it starts, which would cut a
    running server (it runs as its own system user) off from its own data."""
    return Path(tempfile.mkdtemp(prefix=f"kosha-kb-{prefix}-"))


@pytest.fixture(scope="session")
def test_state_dir() -> Iterator[Path]:
    path = server_dir("tests")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fresh_state_dir() -> Iterator[Path]:
    path = server_dir("state")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_superuser(test_state_dir: Path) -> Iterator[str]:
    """Superuser conninfo of the session's PostgreSQL."""
    external = os.environ.get("KB_TEST_DATABASE_URL")
    if external:
        yield external
        return
    server = EmbeddedPostgres(test_state_dir)
    yield server.start()
    # Stopped here, before test_state_dir's teardown removes its data directory: left to the exit hook, the
    # stop found no data directory and the server outlived `make test`, one per test process.
    server.stop()


def targets_for(superuser: str, dbname: str) -> DatabaseTargets:
    owner = pg_conninfo.make_conninfo(superuser, dbname=dbname)
    return DatabaseTargets(
        owner_login=owner,
        server_login=pg_conninfo.make_conninfo(owner, user=SERVER_LOGIN, password=""),
        ingest_login=pg_conninfo.make_conninfo(owner, user=INGEST_LOGIN, password=""),
        description=f"test database {dbname}",
    )


def create_database(superuser: str, name: str, template: str | None = None) -> None:
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        conn.execute(statement)


def drop_database(superuser: str, name: str) -> None:
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def local_space():
    return embedding_space_for(EmbeddingSettings())


@pytest.fixture(scope="session")
def template_database(postgres_superuser: str, local_space) -> str:
    create_database(postgres_superuser, TEMPLATE)
    migrate(targets_for(postgres_superuser, TEMPLATE).owner, local_space)
    return TEMPLATE


@pytest.fixture
def database(postgres_superuser: str, template_database: str) -> Iterator[DatabaseTargets]:
    """A freshly migrated, empty database of its own."""
    name = f"kb_test_{os.getpid()}_{next(_counter)}"
    create_database(postgres_superuser, name, template=template_database)
    yield targets_for(postgres_superuser, name)
    drop_database(postgres_superuser, name)


@pytest.fixture
def empty_database(postgres_superuser: str) -> Iterator[DatabaseTargets]:
    """A database with no schema at all."""
    name = f"kb_test_{os.getpid()}_{next(_counter)}"
    create_database(postgres_superuser, name)
    yield targets_for(postgres_superuser, name)
    drop_database(postgres_superuser, name)


@pytest.fixture(scope="session")
def local_embedder():
    """The real default embedder, loaded once."""
    from kb_core.embedders.local import LocalEmbedder

    embedder = LocalEmbedder()
    embedder.load()
    return embedder


class CountingEmbedder:
    """The real local embedder, counting how many texts it was asked to embed."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.texts = 0
        self.calls = 0

    @property
    def space(self):  # type: ignore[no-untyped-def]
        return self.inner.space

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed(texts)

    def embed_query(self, text):  # type: ignore[no-untyped-def]
        return self.inner.embed_query(text)


@pytest.fixture
def counting_embedder(local_embedder) -> CountingEmbedder:
    return CountingEmbedder(local_embedder)


@pytest.fixture
def ingestor(database, counting_embedder):
    from ingest.pipeline import Ingestor

    with Ingestor(database.ingest, counting_embedder, max_bytes=2_000_000) as ingestor:
        yield ingestor


@dataclass
class IngestedCorpus:
    targets: DatabaseTargets
    results: list
    skipped: list[Path]


@pytest.fixture(scope="session")
def corpus_database(postgres_superuser, template_database, local_embedder) -> Iterator[IngestedCorpus]:
    """corpus/ ingested once for the session (about a minute): the server, eval and corpus tests read it."""
    from ingest.pipeline import Ingestor, document_files, ingest_files

    name = f"kb_test_corpus_{os.getpid()}"
    create_database(postgres_superuser, name, template=template_database)
    targets = targets_for(postgres_superuser, name)
    files, skipped = document_files([REPO / "corpus"])
    cache = Path.home() / ".cache" / "kosha-kb" / "corpus-vectors.npz"
    cache.parent.mkdir(parents=True, exist_ok=True)
    # Parallel test workers (make test runs pytest-xdist) would each embed the corpus on a fresh machine, on
    # the same cores: the first one embeds under the lock and saves, the others then read its vectors.
    with open(cache.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        embedder = CachingEmbedder(local_embedder, cache)
        with Ingestor(targets.ingest, embedder, max_bytes=25_000_000) as ingestor:
            results = list(ingest_files(ingestor, files))
        embedder.save()
    with psycopg.connect(targets.owner, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    yield IngestedCorpus(targets, results, skipped)
    drop_database(postgres_superuser, name)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
