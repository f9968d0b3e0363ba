"""One connection pool per reader role, each on that role's own login (sql/010).

A connection taken for a caller can become the caller's role and no other: even a statement that ran
`RESET ROLE; SET ROLE compliance_officer` on an analyst's connection would be refused by PostgreSQL,
because the analyst login is a member of `analyst` only. So a caller is answered only on the pool of
its own role.

The pool of the role the server starts with (KB_ROLE, the stdio caller's) opens at start-up, so a
login that cannot connect stops the server there; the others open on their role's first request, so a
stdio server holds connections for one role only.
"""

from __future__ import annotations

import anyio
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from kb_core.db.targets import reader_conninfo, reader_login
from kb_core.roles import Role
from kb_core.settings import DatabaseSettings


class ReaderPools:
    def __init__(self, server_conninfo: str, settings: DatabaseSettings) -> None:
        self.server_conninfo = server_conninfo
        self.settings = settings
        self._pools: dict[Role, AsyncConnectionPool] = {}
        self._lock = anyio.Lock()

    def _new_pool(self, conninfo: str, role: Role) -> AsyncConnectionPool:
        settings = self.settings
        return AsyncConnectionPool(
            conninfo,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            kwargs={"autocommit": True, "options": f"-c statement_timeout={settings.statement_timeout_ms}"},
            configure=register_vector_async,
            check=AsyncConnectionPool.check_connection,
            timeout=settings.connect_timeout_s,
            # The pool's pauses between reconnection attempts double until this runs out (its default, five
            # minutes, let them reach a minute during a long outage); then the next request starts afresh,
            # so the server is back within seconds of the database.
            reconnect_timeout=settings.reconnect_timeout_s,
            open=False,
            name=reader_login(role),
        )

    async def get(self, role: Role) -> AsyncConnectionPool:
        role = Role(role)
        pool = self._pools.get(role)
        if pool is not None:
            return pool
        async with self._lock:
            pool = self._pools.get(role)
            if pool is None:
                pool = self._new_pool(reader_conninfo(self.server_conninfo, role), role)
                try:
                    await pool.open(wait=True, timeout=self.settings.connect_timeout_s * 3)
                except BaseException:
                    await pool.close()  # the next request of this role tries afresh
                    raise
                self._pools[role] = pool
        return pool

    async def close(self) -> None:
        async with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.close()


class RoleConnections:
    """One plain connection per reader role, each on that role's own login, opened on first use: for the
    evaluations, the bench and `kb search`, which ask as several roles in turn without a pool.

        async with RoleConnections(server_conninfo) as connections:
            hits = await hybrid_search(await connections.get(role), role, ...)
    """

    def __init__(self, server_conninfo: str) -> None:
        self.server_conninfo = server_conninfo
        self._connections: dict[Role, AsyncConnection] = {}

    async def get(self, role: Role) -> AsyncConnection:
        role = Role(role)
        conn = self._connections.get(role)
        if conn is None:
            conn = await AsyncConnection.connect(reader_conninfo(self.server_conninfo, role), autocommit=True)
            await register_vector_async(conn)
            self._connections[role] = conn
        return conn

    async def __aenter__(self) -> RoleConnections:
        return self

    async def __aexit__(self, *_: object) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for conn in connections:
            await conn.close()
