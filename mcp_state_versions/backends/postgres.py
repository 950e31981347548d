"""The PostgreSQL savers (``PostgresSaver``, ``AsyncPostgresSaver``): every query the library runs.

The saver keeps checkpoints (ids, parents, ``metadata`` as JSONB, and ``channel_versions``) in
``checkpoints`` and each channel's value once per version in ``checkpoint_blobs``. So:

* the **lineage** of a thread is one query over ``checkpoints`` returning ids, parents and the
  turn stamp as text (not as JSON to parse, nor cast on the server, per row), as tuples;
* **one channel** of one checkpoint is one primary-key lookup of its blob, found through the
  checkpoint's ``channel_versions`` (a lateral join, so the plan stays a key lookup), and the
  message list is never read;
* **deleting** checkpoints also deletes the blob versions no remaining checkpoint refers to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import asynccontextmanager
from functools import cache
from typing import Any

from ..storage.messages import MESSAGES
from ..storage.tool_state import NOTHING_STORED, snapshot
from .base import MAX_CHAIN, LinkRow, NeedsAsync
from .known import TOOL_STATE, forget_histories
from .sql import ChainRead, ChainReader, SqlBackend, start_link, writes_by_checkpoint

__all__ = ["PostgresBackend", "postgres_backend"]


def _lineage_sql() -> str:
    from ..state.reducer import TURN_METADATA_KEY

    # The stamp comes back as text, neither converted nor checked per row: ``stamp_turn``
    # interprets the few a search looks at. No ORDER BY: rows come back as they lie on disk,
    # and on a table whose statistics are stale the server's sort cost a fifth of the query;
    # the walk sorts them by id itself, for less.
    return (
        "SELECT checkpoint_id, parent_checkpoint_id, "
        f"metadata ->> '{TURN_METADATA_KEY}', metadata ->> 'source', "
        "metadata -> 'counters_since_delta_snapshot' ->> 'tool_state' "
        "FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s"
    )


_HEAD_SQL = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)
_CHANNEL_SQL = (
    "SELECT c.checkpoint -> 'channel_versions' ->> %s, b.type, b.blob "
    "FROM checkpoints c LEFT JOIN LATERAL ("
    "SELECT type, blob FROM checkpoint_blobs b WHERE b.thread_id = c.thread_id "
    "AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = %s "
    "AND b.version = c.checkpoint -> 'channel_versions' ->> %s LIMIT 1) b ON true "
    "WHERE c.thread_id = %s AND c.checkpoint_ns = %s AND c.checkpoint_id = %s"
)
_UPSERT_SNAPSHOT = (
    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
    "SELECT c.thread_id, c.checkpoint_ns, %s, c.checkpoint -> 'channel_versions' ->> %s, %s, %s "
    "FROM checkpoints c WHERE c.thread_id = %s AND c.checkpoint_ns = %s AND c.checkpoint_id = %s "
    "AND c.checkpoint -> 'channel_versions' ? %s "
    "ON CONFLICT (thread_id, checkpoint_ns, channel, version) "
    "DO UPDATE SET type = EXCLUDED.type, blob = EXCLUDED.blob"
)
_WRITES_SQL = (
    "SELECT checkpoint_id, task_path, task_id, idx, type, blob FROM checkpoint_writes "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND channel = %s AND checkpoint_id = ANY(%s)"
)


@cache
def _delta_history_sql(from_head: bool) -> str:
    """The statement of a delta-history read (:meth:`PostgresBackend.delta_history`): the
    parent chain from a checkpoint (itself first; the thread's newest where ``from_head``), one
    primary-key step at a time, up to and including the first ancestor without a delta counter
    (the nearest that can hold tool_state whole) or the one whose history is known
    (backends.known_history); then tool_state's writes at the chain above the checkpoint
    itself, the value stored at that ancestor's version, and the checkpoint's own link (its
    turn stamp and source, as the lineage returns them). One round trip, where the saver's own
    read takes two (its pages of checkpoints, then writes and seed)."""
    from ..state.reducer import TURN_METADATA_KEY

    start = (
        "(SELECT checkpoint_id FROM checkpoints WHERE thread_id = %(thread)s "
        "AND checkpoint_ns = %(ns)s ORDER BY checkpoint_id DESC LIMIT 1)"
        if from_head
        else "%(id)s"
    )
    return (
        "WITH RECURSIVE chain(id, parent, version, counter, depth, stamp, source) AS ("
        "SELECT checkpoint_id, parent_checkpoint_id, checkpoint -> 'channel_versions' ->> %(ch)s, "
        f"metadata -> 'counters_since_delta_snapshot' ->> %(ch)s, 0, "
        f"metadata ->> '{TURN_METADATA_KEY}', metadata ->> 'source' FROM checkpoints "
        f"WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s AND checkpoint_id = {start} "
        # (the step is a lateral lookup with LIMIT 1, which the planner cannot turn into a
        # join: as a join, it hashed all of the thread's checkpoints once per step)
        "UNION ALL SELECT c.checkpoint_id, c.parent_checkpoint_id, "
        "c.checkpoint -> 'channel_versions' ->> %(ch)s, "
        "c.metadata -> 'counters_since_delta_snapshot' ->> %(ch)s, chain.depth + 1, NULL, NULL "
        "FROM chain CROSS JOIN LATERAL (SELECT checkpoint_id, parent_checkpoint_id, checkpoint, "
        "metadata FROM checkpoints WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s "
        "AND checkpoint_id = chain.parent LIMIT 1) c "
        "WHERE (chain.depth = 0 OR chain.counter IS NOT NULL) AND chain.id <> %(known)s "
        f"AND chain.depth < {MAX_CHAIN}), "
        "last AS (SELECT id, version FROM chain WHERE depth > 0 ORDER BY depth DESC LIMIT 1) "
        "SELECT 'c', id, parent, version, depth, counter, NULL::bytea FROM chain "
        "UNION ALL SELECT 'h', id, parent, stamp, depth, source, NULL::bytea FROM chain "
        "WHERE depth = 0 "
        # (a lateral lookup per link too, OFFSET 0 keeping it one: as a join, it read all of
        # the thread's writes)
        "UNION ALL SELECT 'w', w.checkpoint_id, w.task_path, w.task_id, w.idx, w.type, w.blob "
        "FROM chain CROSS JOIN LATERAL (SELECT checkpoint_id, task_path, task_id, idx, type, "
        "blob FROM checkpoint_writes WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s "
        "AND checkpoint_id = chain.id AND channel = %(ch)s OFFSET 0) w WHERE chain.depth > 0 "
        "UNION ALL SELECT 's', last.id, NULL, NULL, NULL, b.type, b.blob FROM last "
        "CROSS JOIN LATERAL (SELECT type, blob FROM checkpoint_blobs WHERE thread_id = %(thread)s "
        "AND checkpoint_ns = %(ns)s AND channel = %(ch)s AND version = last.version OFFSET 0) b"
    )


_DELETES = (
    "DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = %s "
    "AND checkpoint_id = ANY(%s)",
    "DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
    "AND checkpoint_id = ANY(%s)",
)
_WRITTEN_AT_SQL = (
    "SELECT CASE WHEN current_setting('track_commit_timestamp') = 'on' THEN "
    "extract(epoch FROM pg_xact_commit_timestamp(xmin)) END, extract(epoch FROM now()) "
    "FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = %s"
)
"""When a checkpoint row was committed (where the server keeps commit times:
``track_commit_timestamp = on``; ``NULL`` for rows committed before it was turned on) and the
server's time now."""
_LOCK_WRITERS_OUT = (
    "LOCK TABLE checkpoints, checkpoint_writes, checkpoint_blobs IN SHARE ROW EXCLUSIVE MODE"
)
_DELETE_THREAD = tuple(
    f"DELETE FROM {table} WHERE thread_id = %s"
    for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints")
)
_DELETE_TASK_WRITES = (
    "DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = %s "
    "AND checkpoint_id = %s AND task_id = ANY(%s)"
)
_DELETE_UNUSED_BLOBS = (
    "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND b.checkpoint_ns = %s "
    "AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id "
    "AND c.checkpoint_ns = b.checkpoint_ns "
    "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
)


_EXCLUSIVE_BLOBS_SQL = (
    "SELECT COALESCE(SUM(length(b.blob)), 0) FROM checkpoint_blobs b "
    "WHERE b.thread_id = %s AND b.checkpoint_ns = %s AND EXISTS (SELECT 1 FROM checkpoints c "
    "WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
    "AND c.checkpoint_id = ANY(%s) "
    "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version) "
    "AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id "
    "AND c.checkpoint_ns = b.checkpoint_ns AND NOT (c.checkpoint_id = ANY(%s)) "
    "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
)

_THREADS_BYTES_SQL = (
    "SELECT t, "
    "(SELECT COALESCE(SUM(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) "
    "FROM checkpoints WHERE thread_id = t) "
    "+ (SELECT COALESCE(SUM(length(blob)), 0) FROM checkpoint_writes WHERE thread_id = t) "
    "+ (SELECT COALESCE(SUM(length(blob)), 0) FROM checkpoint_blobs WHERE thread_id = t) "
    "FROM unnest(%s::text[]) AS t"
)
"""Whole threads' stored bytes, as :meth:`PostgresBackend.stored_bytes` counts them, for a
list of threads in one statement."""


class PostgresBackend(SqlBackend):
    """:class:`~mcp_state_versions.backends.Backend` over either PostgreSQL saver."""

    #: PostgresSaver or AsyncPostgresSaver (their ``_cursor``): the two share no type that has
    #: it, and the extra that brings them may be absent.
    saver: Any

    head_sql = _HEAD_SQL
    mark = "%s"
    threads_sql = (
        "SELECT thread_id, MAX(checkpoint_id) FROM checkpoints WHERE checkpoint_ns = '' "
        "AND thread_id > %s GROUP BY thread_id ORDER BY thread_id LIMIT %s"
    )
    recent_sql = (
        "SELECT thread_id, MAX(checkpoint_id) AS head FROM checkpoints "
        "WHERE checkpoint_ns = '' AND strpos(thread_id, %s) > 0 GROUP BY thread_id "
        "HAVING %s = '' OR MAX(checkpoint_id) < %s OR (MAX(checkpoint_id) = %s "
        "AND thread_id < %s) ORDER BY head DESC, thread_id DESC LIMIT %s"
    )

    def __init__(self, saver: Any, *, sync: bool, native_sync: bool) -> None:
        super().__init__(saver, sync=sync)
        self.native_sync = native_sync
        self.link_sql = _lineage_sql()

    @asynccontextmanager
    async def _cursor(self) -> Any:
        if self.native_sync:
            with self.saver._cursor() as cursor:
                yield cursor
            return
        if self.sync:
            raise NeedsAsync(type(self.saver).__name__)
        async with self.saver._cursor() as cursor:
            yield cursor

    @asynccontextmanager
    async def _transaction(self) -> Any:
        """A cursor whose statements commit together or not at all.

        The stock savers' connections commit each statement on its own (autocommit). A change
        of several statements (a prune's deletes, a snapshot's two halves) cut by an outage
        between them left checkpoints without the writes their values are rebuilt from: turns
        that read as never set. In one transaction a cut leaves all of it or none."""
        async with self._cursor() as cursor:
            if self.native_sync:
                with cursor.connection.transaction():
                    yield cursor
            else:
                async with cursor.connection.transaction():
                    yield cursor

    async def _rows(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any]
    ) -> list[tuple[Any, ...]]:
        from psycopg.rows import tuple_row

        async with self._cursor() as cursor:
            cursor.row_factory = tuple_row
            await _run(cursor, sql, params, self.native_sync)
            if self.native_sync:
                return list(cursor.fetchall())
            return list(await cursor.fetchall())

    async def latest_per_namespace(self, thread_id: str) -> list[tuple[str, str]]:
        """``(namespace, newest checkpoint id)`` of each namespace of the thread."""
        rows = await self._rows(
            "SELECT checkpoint_ns, MAX(checkpoint_id) FROM checkpoints WHERE thread_id = %s "
            "GROUP BY checkpoint_ns",
            (thread_id,),
        )
        return [(str(row[0]), str(row[1])) for row in rows]

    async def unsealable_channels(self, thread_id: str, heads: Sequence[str]) -> set[str]:
        """The delta channels a seal does not cover (not ``tool_state`` or ``messages``) that
        these heads still rebuild from their ancestors (a counter since their snapshot)."""
        rows = await self._rows(
            "SELECT metadata -> 'counters_since_delta_snapshot' FROM checkpoints "
            "WHERE thread_id = %s AND checkpoint_id = ANY(%s)",
            (thread_id, list(heads)),
        )
        return {
            channel
            for (counters,) in rows
            if isinstance(counters, dict)
            for channel in counters
            if channel not in (TOOL_STATE, MESSAGES)
        }

    async def lineage(self, thread_id: str, namespace: str) -> list[LinkRow]:
        return await self._rows(_lineage_sql(), (thread_id, namespace))

    async def stored_tool_state(
        self, thread_id: str, namespace: str, checkpoint_id: str, channel: str = TOOL_STATE
    ) -> tuple[bool, Any]:
        rows = await self._rows(
            _CHANNEL_SQL, (channel, channel, channel, thread_id, namespace, checkpoint_id)
        )
        if not rows:
            return False, None
        version, kind, blob = rows[0]
        if version is None:
            return True, None
        if kind is None or kind == "empty":
            return True, NOTHING_STORED
        return True, self.saver.serde.loads_typed((kind, blob))

    def _chain_read(self, thread_id: str, namespace: str, channel: str) -> ChainReader:
        """See :meth:`SqlBackend._chain_read`: one statement (:func:`_delta_history_sql`) that
        stops where the SQLite backend's does. The saver's own read takes two round trips, and
        its lookup of writes by a list of checkpoints is a prepared statement, which PostgreSQL
        soon plans for any list: it then scans the thread's writes (see :func:`_run`)."""
        loads = self.saver.serde.loads_typed

        async def read(start: str | None, stop: str) -> ChainRead:
            params = {"thread": thread_id, "ns": namespace, "id": start, "known": stop}
            sql = _delta_history_sql(start is None)
            found = await self._rows(sql, {**params, "ch": channel})
            links = sorted((r for r in found if r[0] == "c"), key=lambda r: r[4])
            stored = [r for r in found if r[0] == "s" and r[5] != "empty"]
            return ChainRead(
                [(r[1], r[2], r[5] is not None) for r in links],
                [r[1:] for r in found if r[0] == "w"],
                lambda: loads((stored[0][5], stored[0][6])) if stored else NOTHING_STORED,
                start_link(found),
            )

        return read

    async def writes_of(
        self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[Any]]:
        params = (thread_id, namespace, TOOL_STATE, list(checkpoint_ids))
        rows = await self._rows(_WRITES_SQL, params)
        return writes_by_checkpoint(rows, checkpoint_ids, self.saver.serde.loads_typed)

    async def write_snapshot(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str,
        value: Any,
        channel: str = TOOL_STATE,
    ) -> None:
        # Blobs are keyed by channel version, and checkpoints sharing a version share a value,
        # so the snapshot serves each of them.
        kind, blob = self.saver.serde.dumps_typed(snapshot(value))
        async with self._transaction() as cursor:
            # Its delta counter goes too: it says a checkpoint stores no value (backends.COUNTER).
            await _run(
                cursor,
                "UPDATE checkpoints SET metadata = metadata #- "
                "ARRAY['counters_since_delta_snapshot', %s] "
                "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
                (channel, thread_id, namespace, checkpoint_id),
                self.native_sync,
            )
            await _run(
                cursor,
                _UPSERT_SNAPSHOT,
                (channel, channel, kind, blob, thread_id, namespace, checkpoint_id, channel),
                self.native_sync,
            )

    async def stored_bytes(
        self, thread_id: str, namespace: str | None, checkpoint_ids: Sequence[str] | None
    ) -> int:
        # A blob counts when every checkpoint using it is among those counted: a value that
        # another checkpoint shares stays when these go.
        ns = "" if namespace is None else " AND checkpoint_ns = %s"
        chosen = "" if checkpoint_ids is None else " AND checkpoint_id = ANY(%s)"
        params: list[Any] = [thread_id]
        if namespace is not None:
            params.append(namespace)
        if checkpoint_ids is not None:
            params.append(list(checkpoint_ids))
        rows = await self._rows(
            "SELECT COALESCE(SUM(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) "
            f"FROM checkpoints WHERE thread_id = %s{ns}{chosen}",
            params,
        )
        total = int(rows[0][0])
        rows = await self._rows(
            "SELECT COALESCE(SUM(length(blob)), 0) FROM checkpoint_writes "
            f"WHERE thread_id = %s{ns}{chosen}",
            params,
        )
        total += int(rows[0][0])
        if checkpoint_ids is None:
            blobs = (
                "SELECT COALESCE(SUM(length(blob)), 0) FROM checkpoint_blobs WHERE thread_id = %s"
            )
            rows = await self._rows(blobs + ns, params)
        else:
            ids = list(checkpoint_ids)
            rows = await self._rows(_EXCLUSIVE_BLOBS_SQL, [thread_id, namespace or "", ids, ids])
        return total + int(rows[0][0])

    async def threads_stored_bytes(self, thread_ids: Sequence[str]) -> dict[str, int]:
        rows = await self._rows(_THREADS_BYTES_SQL, [list(thread_ids)])
        return {str(row[0]): int(row[1]) for row in rows}

    async def delete(self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]) -> None:
        forget_histories(self.saver, thread_id)
        if not checkpoint_ids:
            return
        ids = list(checkpoint_ids)
        async with self._transaction() as cursor:
            for sql in _DELETES:
                await _run(cursor, sql, (thread_id, namespace, ids), self.native_sync)
            await _run(cursor, _DELETE_UNUSED_BLOBS, (thread_id, namespace), self.native_sync)

    async def written_at(self, thread_id: str, checkpoint_id: str) -> tuple[float | None, ...]:
        rows = await self._rows(_WRITTEN_AT_SQL, (thread_id, checkpoint_id))
        if not rows:
            return None, None
        committed, now = rows[0]
        return (None if committed is None else float(committed)), float(now)

    async def delete_idle_thread(self, thread_id: str, head: str) -> bool:
        # The table lock (for this transaction's few statements) holds off any writer's
        # INSERT: no run stores a checkpoint or a write between the check and the delete;
        # reads go on.
        from psycopg.rows import tuple_row

        forget_histories(self.saver, thread_id)
        async with self._transaction() as cursor:
            cursor.row_factory = tuple_row
            await _run(cursor, _LOCK_WRITERS_OUT, (), self.native_sync)
            await _run(cursor, _HEAD_SQL, (thread_id, ""), self.native_sync)
            found = cursor.fetchall() if self.native_sync else await cursor.fetchall()
            if not found or found[0][0] != head:
                return False
            for sql in _DELETE_THREAD:
                await _run(cursor, sql, (thread_id,), self.native_sync)
        return True

    async def delete_writes(
        self, thread_id: str, namespace: str, checkpoint_id: str, task_ids: Sequence[str]
    ) -> None:
        forget_histories(self.saver, thread_id)
        async with self._cursor() as cursor:
            await _run(
                cursor,
                _DELETE_TASK_WRITES,
                (thread_id, namespace, checkpoint_id, list(task_ids)),
                self.native_sync,
            )


async def _run(
    cursor: Any, sql: str, params: Sequence[Any] | Mapping[str, Any], native_sync: bool
) -> None:
    """Every statement the library runs. One given a list (of checkpoint ids) is never
    prepared: once a statement is prepared, PostgreSQL soon plans it for any parameters,
    estimates one thread's rows as a handful, and leaves the ids out of the index lookup,
    scanning all of the thread's rows for the few asked (6 ms instead of 0.2 for a walk's
    writes at 1,000 turns). Planned for the ids given, the lookup is by the whole key."""
    given = params if isinstance(params, Mapping) else tuple(params)
    values = params.values() if isinstance(params, Mapping) else params
    prepare = False if any(isinstance(param, list) for param in values) else None
    if native_sync:
        cursor.execute(sql, given, prepare=prepare)
    else:
        await cursor.execute(sql, given, prepare=prepare)


def postgres_backend(saver: Any, *, sync: bool) -> PostgresBackend | None:
    """A :class:`PostgresBackend` when ``saver`` is a PostgreSQL saver (extra ``postgres``)."""
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        return None
    if isinstance(saver, PostgresSaver):
        return PostgresBackend(saver, sync=True, native_sync=True)  # it has no async API
    if isinstance(saver, AsyncPostgresSaver):
        return PostgresBackend(saver, sync=sync, native_sync=False)
    return None
