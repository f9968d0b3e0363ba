"""A request's transaction as one of the four reader roles.

The role switch is SET LOCAL, so it ends with the transaction. That only holds if the transaction
is a real one: on a connection already inside a transaction, `conn.transaction()` is a SAVEPOINT and
SET LOCAL ROLE would stay in force after the block (ENVIRONMENT.md). So the connection must be in
autocommit mode and idle, and this refuses anything else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from psycopg import AsyncConnection, sql
from psycopg.pq import TransactionStatus

from kb_server.roles import Role


class RoleSwitchUnsafe(RuntimeError):
    pass


@asynccontextmanager
async def reader_transaction(
    conn: AsyncConnection, role: Role, *, ef_search: int = 80
) -> AsyncIterator[AsyncConnection]:
    if not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        raise RoleSwitchUnsafe(
            "a reader transaction needs an idle autocommit connection; inside another transaction the "
            "role switch would be a SAVEPOINT and outlive the request"
        )
    role = Role(role)  # only the four reader roles, never a name from outside
    async with conn.transaction():
        await conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role.value)))
        await conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(int(ef_search))))
        # Without iterative scans a filtered HNSW search returns fewer rows than asked (ENVIRONMENT.md).
        await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        yield conn
