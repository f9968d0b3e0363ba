"""A request's transaction as one of the four reader roles, sent to PostgreSQL in one round trip.

BEGIN, SET LOCAL ROLE, the HNSW settings, the caller's statement(s) and COMMIT are pipelined: the
client sends them all and waits once. Read the cursors' rows after the block ends.

The role switch is SET LOCAL, so it ends with the transaction. That only holds if the transaction
is a real one: on a connection already inside a transaction, BEGIN would be ignored (and psycopg's
`conn.transaction()` would only be a SAVEPOINT), so SET LOCAL ROLE would outlive the request
(ENVIRONMENT.md). The connection must therefore be in autocommit mode and idle; anything else is
refused. If anything fails, the transaction is rolled back before the connection is given back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from psycopg import AsyncConnection, sql
from psycopg.pq import TransactionStatus

from kb_core.roles import Role


class RoleSwitchUnsafe(RuntimeError):
    pass


@asynccontextmanager
async def reader_transaction(
    conn: AsyncConnection, role: Role, *, ef_search: int = 80, custom_plans: bool = False
) -> AsyncIterator[AsyncConnection]:
    if not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        raise RoleSwitchUnsafe(
            "a reader transaction needs an idle autocommit connection; inside another transaction the "
            "role switch would outlive the request"
        )
    role = Role(role)  # only the four reader roles, never a name from outside
    try:
        async with conn.pipeline():
            await conn.execute("BEGIN READ ONLY")
            await conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role.value)))
            await conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(int(ef_search))))
            # Without iterative scans a filtered HNSW search returns fewer rows than asked (ENVIRONMENT.md).
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            if custom_plans:
                # psycopg prepares a statement from its sixth use on a connection, and PostgreSQL may then
                # keep one generic plan for every value; see kb_server.search for when that costs.
                await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
            yield conn
            await conn.execute("COMMIT")
    except BaseException:
        if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
            await conn.execute("ROLLBACK")
        raise
