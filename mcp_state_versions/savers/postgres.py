"""The library's PostgreSQL saver: LangGraph's ``AsyncPostgresSaver`` on a pool that finds a
dropped connection without a round trip, its delta histories read in one statement, and
``keep_latest`` pruning that seals each head first."""

from __future__ import annotations

import select
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

from ..backends.known import forget_histories
from ..retention.prune import seal
from ..walk.history import StoreUnavailable
from .base import NotesWhatItStores, delta_histories

if TYPE_CHECKING:
    from ..backends.postgres import PostgresBackend

__all__ = ["POOL_TIMEOUT_S", "RECONNECT_S", "open_postgres_saver"]

POOL_TIMEOUT_S = 10.0
"""How long a PostgreSQL query waits for a pooled connection before it fails."""

RECONNECT_S = 1.0
"""How long the pool keeps trying to replace a lost connection before leaving it to the next
query."""


@cache
def _postgres_saver_class() -> Any:
    """``AsyncPostgresSaver`` with a delta history of ``tool_state`` read in one statement
    (:meth:`~mcp_state_versions.backends.postgres.PostgresBackend.delta_history`); made when
    first asked for, as the ``postgres`` extra may be absent."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from ..backends.postgres import PostgresBackend

    class DeltaReadingPostgresSaver(NotesWhatItStores, AsyncPostgresSaver):
        """``AsyncPostgresSaver`` whose run starts read ``tool_state``'s delta history in one
        round trip, not two, and never by a prepared lookup of a list of checkpoints."""

        remembers_run_starts = True
        """Its run starts remember the history they read (see
        :func:`~mcp_state_versions.backends.remembers_run_starts`)."""

        async def aget_delta_channel_history(
            self, *, config: Any, channels: Sequence[str]
        ) -> Mapping[str, Any]:
            backend = PostgresBackend(self, sync=False, native_sync=False)
            stock = super().aget_delta_channel_history
            return await delta_histories(stock, backend, config, channels)

        async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
            """LangGraph's ``aprune``, with ``keep_latest`` for threads the library stores as
            writes: each namespace's head is sealed first (its ``tool_state`` and ``messages``
            stored whole in it), then LangGraph's own ``keep_latest`` statements delete the
            rest, in one transaction a thread, refusing (as LangGraph does) a thread with
            another ``DeltaChannel`` whose head still needs its ancestors."""
            if strategy != "keep_latest" or isinstance(thread_ids, str):
                await super().aprune(thread_ids, strategy=strategy)
                return
            for thread_id in [str(t) for t in thread_ids]:
                await _keep_latest_sealed(
                    self, PostgresBackend(self, sync=False, native_sync=False), thread_id
                )
                forget_histories(self, thread_id)

    return DeltaReadingPostgresSaver


class _HeadMoved(Exception):
    """A run stored a newer head between the seal and the prune: seal it, and prune again."""


_SEALED_ATTEMPTS = 5
"""How many times a prune seals a thread's heads and tries again while runs keep storing."""


async def _keep_latest_sealed(saver: Any, backend: PostgresBackend, thread_id: str) -> None:
    """Seal every namespace's head of ``thread_id``, then run LangGraph's ``keep_latest``
    statements for it (:func:`_sealed_statements`); again if a head moved meanwhile."""
    from langgraph.checkpoint.postgres.base import _aexecute

    for _ in range(_SEALED_ATTEMPTS):
        heads = dict(await backend.latest_per_namespace(thread_id))
        foreign = await backend.unsealable_channels(thread_id, list(heads.values()))
        if foreign:
            raise NotImplementedError(
                f"keep_latest can't prune thread {thread_id!r}: its DeltaChannel "
                f"{', '.join(sorted(foreign))} is not the library's, and its head still needs "
                "its ancestors; prune it with prune_thread(keep_turns=...) instead"
            )
        for namespace, head in heads.items():
            await seal(backend, thread_id, namespace, head)
        try:
            async with saver._cursor() as cur:
                if saver.pipe:
                    await saver.pipe.sync()
                async with cur.connection.transaction():
                    await _aexecute(cur, _sealed_statements(thread_id, heads))
            return
        except _HeadMoved:
            continue
    raise StoreUnavailable(
        f"thread {thread_id!r} kept storing new checkpoints while it was pruned; "
        "prune it again once its runs are done"
    )


def _sealed_statements(thread_id: str, sealed: Mapping[str, str]) -> Any:
    """LangGraph's ``keep_latest`` statements for one thread, without its refusal of delta
    channels (every head was sealed), and stopped (rolled back) if a head is not the one
    sealed: a run stored a newer one after the seal."""
    from langgraph.checkpoint.postgres.base import (
        PRUNE_DELTA_THREADS_SQL,
        PRUNE_HEADS_SQL,
        _keep_latest,
    )

    statements = _keep_latest(thread_id)
    try:
        sql, params, fetch = next(statements)
        while True:
            if sql == PRUNE_DELTA_THREADS_SQL:
                sql, params, fetch = statements.send([])
                continue
            rows = yield sql, params, fetch
            if sql == PRUNE_HEADS_SQL and any(
                sealed.get(row["checkpoint_ns"]) != row["head"] for row in rows
            ):
                raise _HeadMoved(thread_id)
            sql, params, fetch = statements.send(rows)
    except StopIteration:
        return


async def _check_idle(connection: Any) -> None:
    """The pool's check of a connection handed out: raises if it no longer works.

    psycopg's own ``check_connection`` sends the server an empty query at every checkout: 0.43
    ms, more than a whole lookup (0.26 ms) on loopback, and a turn checks out a connection a
    dozen times or more. An idle connection has nothing to read unless the server spoke: a
    server that shuts down or ends the session sends its notice and closes the socket, and an
    asynchronous notice arrives the same way. So the socket is polled (no round trip), and only
    a connection with something to read, or one already closed or broken, gets the server's
    answer to an empty query. What neither check can see is a link cut without the server
    closing it; there the query fails, or waits for its timeout, as it would after the
    round trip.
    """
    from psycopg_pool import AsyncConnectionPool

    if connection.closed or connection.broken or _readable(connection.fileno()):
        await AsyncConnectionPool.check_connection(connection)


def _readable(fd: int) -> bool:
    """Whether ``fd`` has something to read now (``poll``, so any descriptor number works;
    where there is no ``poll``, always, which falls back to asking the server)."""
    if not hasattr(select, "poll"):  # pragma: no cover - Windows
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


@asynccontextmanager
async def open_postgres_saver(
    dsn: str, *, max_size: int = 4, read_only: bool = False
) -> AsyncIterator[Any]:
    """An ``AsyncPostgresSaver`` on a connection pool to ``dsn``, set up (extra ``postgres``).

    The pool's connections use the settings the saver's documentation gives: autocommit (its
    ``setup`` creates indexes concurrently, which cannot run in a transaction), statements
    prepared at their first execution (``prepare_threshold=0``; the library's lookups by a
    list of checkpoints opt out, see :mod:`mcp_state_versions.backends.postgres`), and dict
    rows.

    ``read_only=True`` is a reader's pool: nothing is set up (a reader never creates tables, and
    a role allowed only to read may not), the server refuses any write on its connections
    (``default_transaction_read_only``, set as each connection opens, so a DSN's own
    ``options`` stay as given), and it opens one connection up front, growing to ``max_size``
    only as reads overlap. Whether the tables are there to read is the caller's to check
    (:func:`mcp_state_versions.savers.specs.open_checkpointer` does).
    """
    try:
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "PostgreSQL support needs the 'postgres' extra: "
            "pip install 'mcp-state-versions[postgres]'"
        ) from error
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    # ``check``: a connection the server dropped (a restart, an outage) is found at checkout
    # and replaced, rather than failing the query it was handed to (:func:`_check_idle`, which
    # asks the server only when it has said something). ``timeout``: a query
    # waiting for a connection while the server is away fails in seconds, not half a minute.
    # ``reconnect_timeout``: the pool gives up a reconnection after a moment instead of
    # retrying with a backoff that doubles for minutes, so the next query after the server is
    # back starts a fresh attempt and is served at once (the backoff, after a 46 s outage,
    # kept the pool away for 9 s more).
    pool = AsyncConnectionPool(
        dsn,
        # the pool's default, or fewer for a smaller pool; a reader's commands read once
        min_size=1 if read_only else min(4, max_size),
        max_size=max_size,
        kwargs=kwargs,
        open=False,
        configure=_refuse_writes if read_only else None,
        check=_check_idle,
        timeout=POOL_TIMEOUT_S,
        reconnect_timeout=RECONNECT_S,
    )
    async with pool:
        saver = _postgres_saver_class()(pool)
        if not read_only:
            await saver.setup()
        yield saver


async def _refuse_writes(connection: Any) -> None:
    """A reader's connection, as it opens: every transaction on it is read-only, so a write
    from any code path fails at the server instead of changing the store."""
    await connection.execute("SET default_transaction_read_only = on")
