"""/readyz: can this server answer a question right now?

Three checks, each named in the answer: the database is reachable (as the server's login), its schema is
at the migration level this version was built for (and built for its embedder), and the query embedder is
loaded. /healthz only says the process is alive; a load balancer should route by /readyz.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import anyio
import psycopg

from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.db.readiness import schema_problem

CHECK_TIMEOUT_S = 2


@dataclass
class ReadinessProbe:
    conninfo: str
    space: EmbeddingSpace | None
    embedder_loaded: bool = False

    def _database(self) -> tuple[bool, str | None]:
        try:
            with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=CHECK_TIMEOUT_S) as conn:
                return True, schema_problem(conn, self.space)
        except psycopg.Error as exc:
            return False, " ".join(str(exc).split())[:300] or exc.__class__.__name__

    async def check(self) -> tuple[bool, dict[str, Any]]:
        reachable, problem = await anyio.to_thread.run_sync(self._database)
        checks = {
            "database": "ok" if reachable else f"unreachable: {problem}",
            "migrations": ("ok" if problem is None else problem) if reachable else "unknown",
            "embedder": "ok" if self.embedder_loaded else "not loaded yet",
        }
        return all(value == "ok" for value in checks.values()), checks


_PROBES: weakref.WeakKeyDictionary[Any, ReadinessProbe] = weakref.WeakKeyDictionary()


def attach_probe(server: Any, probe: ReadinessProbe) -> None:
    _PROBES[server] = probe


def probe_of(server: Any) -> ReadinessProbe | None:
    return _PROBES.get(server)
