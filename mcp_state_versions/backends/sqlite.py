"""The SQLite savers (``SqliteSaver``, ``AsyncSqliteSaver``): every query the library runs on them.

SQLite stores each checkpoint whole in one row: the serialized checkpoint (every channel value,
the message list included) followed by ``metadata``. Two consequences decide how this reads:

* **Lineage from an index.** Reading ``metadata`` of every row means reading every row's
  overflow pages, most of a long thread's file. A writer therefore creates one covering
  expression index (:data:`INDEX_NAME`) over ids, parents and the metadata fields the walk
  reads (the turn stamp, ``source``, the delta counters); the lineage of a thread is then a
  scan of that index, O(chain) instead of O(file bytes). Beside it, a partial index
  (:data:`WHOLE_INDEX_NAME`) lists the few checkpoints that may hold a delta channel whole,
  where a delta-history read's climb up the chain stops. The saver's own tables are not
  changed, and other readers are not affected. A reader never creates them; on a file without
  them, ids and parents are scanned and stamps read per visited link instead.
* **A channel without the messages.** ``tool_state`` is read from the row with a msgpack decoder
  whose extension hook skips every object it would have to construct (LangChain messages are
  extension objects; ``tool_state`` is plain data and has none, except the snapshot wrapper of
  a delta channel, which is unwrapped), so nothing is rebuilt.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from functools import cache
from typing import Any, TypeVar

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import EXT_DELTA_SNAPSHOT

from ..storage.tool_state import NOTHING_STORED, snapshot
from .base import ID, MAX_CHAIN, UNREAD, Link, LinkRow, NeedsAsync
from .known import CHANNELS, TOOL_STATE, forget_histories
from .sql import ChainRead, ChainReader, SqlBackend, start_link, writes_by_checkpoint

__all__ = [
    "INDEX_NAME",
    "MIGRATIONS",
    "MIGRATIONS_TABLE",
    "WHOLE_INDEX_NAME",
    "SqliteBackend",
    "sqlite_backend",
]

INDEX_NAME = "mcp_state_versions_lineage_v3"
"""The covering index over what a walk reads: ids, parents, the turn stamp, ``source``, and
how many steps ago ``tool_state`` was last stored whole (LangGraph's delta counters)."""

WHOLE_INDEX_NAME = "mcp_state_versions_whole_v1"
"""A partial index of the checkpoints where a delta channel (``tool_state``, ``messages``) may
be stored whole: those whose metadata has no delta counter for it (a snapshot, or a checkpoint
from before the channel's first write), a few in a hundred. A delta-history read climbs the
parent chain until it meets one; it asks this index at each link instead of the link's
metadata, which SQLite reads from the row and parses as JSON at every step (its releases before
3.41 do not take an expression's value from an index that holds it): about a fifth of a run
start's statement at the far end of a long snapshot cycle."""

_META_TEXT = "CAST(metadata AS TEXT)"


def _meta(path: str, table: str = "") -> str:
    """The metadata field at ``path`` of a checkpoint row, ``NULL`` where the row's metadata
    is not JSON: one damaged row (written by hand, cut short on disk) must not fail the index
    that every read of the file goes through, nor every read of its thread. Where the row's
    field mattered, the walk reads the checkpoint itself (no stamp: its clock places it; no
    delta counter: its value, or its parents' writes where it stores none)."""
    text = f"CAST({table}metadata AS TEXT)"
    return f"(CASE WHEN json_valid({text}) THEN json_extract({text}, '$.{path}') END)"


def _link_sql() -> str:
    from ..state.reducer import TURN_METADATA_KEY

    return (
        f"SELECT checkpoint_id, parent_checkpoint_id, "
        f"{_meta(TURN_METADATA_KEY)}, "
        f"{_meta('source')} FROM checkpoints "
        "WHERE thread_id = ? AND checkpoint_ns = ?"
    )


def _counter(table: str = "", channel: str = TOOL_STATE) -> str:
    return _meta(f"counters_since_delta_snapshot.{channel}", table)


_COUNTER = _counter()
"""``tool_state``'s delta counters in a checkpoint's metadata. LangGraph drops them when the
channel is stored whole there (a snapshot) and leaves them out before it is first written, so
only a checkpoint without them can hold a stored value (a whole value of the previous release
has none either)."""


def _whole(table: str = "") -> str:
    """The condition of :data:`WHOLE_INDEX_NAME`: a checkpoint with no delta counter for one
    of the delta channels (written alike in the index and in every query that uses it, which
    SQLite requires of a partial index's condition)."""
    return "(" + " OR ".join(f"{_counter(table, name)} IS NULL" for name in CHANNELS) + ")"


def _stored_whole(channel: str) -> str:
    """For the link ``c`` of a walk: ``NULL`` where :data:`WHOLE_INDEX_NAME` lists it with no
    delta counter for ``channel`` (it may hold the value whole, and the walk stops there),
    else 1. Only such a listed row is read."""
    return (
        f"CASE WHEN EXISTS (SELECT 1 FROM checkpoints s INDEXED BY {WHOLE_INDEX_NAME} "
        "WHERE s.thread_id = c.thread_id AND s.checkpoint_ns = c.checkpoint_ns "
        f"AND s.checkpoint_id = c.checkpoint_id AND {_whole('s.')} "
        f"AND {_counter('s.', channel)} IS NULL) THEN NULL ELSE 1 END"
    )


def _create_whole_index_sql() -> str:
    return (
        f"CREATE INDEX IF NOT EXISTS {WHOLE_INDEX_NAME} ON checkpoints "
        f"(thread_id, checkpoint_ns, checkpoint_id) WHERE {_whole()}"
    )


def _create_index_sql() -> str:
    from ..state.reducer import TURN_METADATA_KEY

    return (
        f"CREATE INDEX IF NOT EXISTS {INDEX_NAME} ON checkpoints (thread_id, checkpoint_ns, "
        f"checkpoint_id, parent_checkpoint_id, "
        f"{_meta(TURN_METADATA_KEY)}, "
        f"{_meta('source')}, {_COUNTER})"
    )


MIGRATIONS_TABLE = "mcp_state_versions_migrations"
"""The table recording which of :data:`MIGRATIONS` a file has had (one row a migration)."""

MIGRATIONS: list[str] = [
    f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (v INTEGER PRIMARY KEY)",
    # The first release's lineage index: ids, parents, the turn stamp and ``source``.
    "DROP INDEX IF EXISTS mcp_state_versions_lineage",
    # The second's added tool_state's delta counter; the third reads metadata as JSON only
    # where it is valid JSON (one damaged row must not fail the index every read goes through).
    "DROP INDEX IF EXISTS mcp_state_versions_lineage_v2",
    _create_index_sql(),
    # The checkpoints that may hold a delta channel whole, so that a walk reads no row's
    # metadata to learn where to stop.
    _create_whole_index_sql(),
]
"""What a writer does to a SQLite file, in order, numbered by position, as LangGraph's
PostgreSQL saver numbers its own: the library adds two indexes beside the saver's tables (never
changing them) and a table recording the migrations a file has had, so a writer opening a file
runs only those it has not (each is idempotent too: files of earlier releases, which recorded
none, run them all). A new index definition is a new name, created by a new migration after
the drop of the one it replaces. The migrations a writer runs, and their records, are one
transaction (:meth:`SqliteBackend._write` begins it explicitly): a failure leaves the file as
it was."""


@cache
def _delta_history_sql(
    task_path: str, from_head: bool, channel: str = TOOL_STATE, whole: bool = True
) -> str:
    """The statement of a delta-history read (:meth:`SqliteBackend.delta_history`): the parent
    chain from a checkpoint (itself first; the thread's newest where ``from_head``), by
    primary-key steps on the covering index, up to and including the first ancestor without
    delta counters (the nearest one that can hold tool_state whole) or the one whose history is
    known (backends.known_history), as rows ``'c'`` (id, parent, counter, depth); tool_state's
    writes at the chain above the checkpoint itself (``'w'``: checkpoint, task path, task,
    index, type, value); the row of the link it stopped at (``'s'``: its type and data); and
    the checkpoint's own link (``'h'``: id, parent, turn stamp, depth, source, all from the
    index). One call to the database thread, not four. SQLite yields recursive rows as it
    makes them. ``task_path``: the column, or ``''`` where the table has none. ``channel``:
    ``tool_state`` or ``messages``. ``whole``: each step asks :data:`WHOLE_INDEX_NAME`
    whether the link may hold the channel whole; without it (a file an earlier release
    indexed), each step reads the link's delta counter from its metadata. The ``'c'`` rows'
    counter is then ``1`` or ``NULL``, its value from the metadata or ``NULL``: only whether
    there is one matters.

    Parameters: thread and namespace, the checkpoint's id (left out ``from_head``: thread and
    namespace again), thread, namespace, the known checkpoint's id, thread, namespace, the
    channel, thread, namespace."""
    from ..state.reducer import TURN_METADATA_KEY

    start = "(SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    start = f"{start}ORDER BY checkpoint_id DESC LIMIT 1)" if from_head else "?"
    stops = _stored_whole(channel) if whole else _counter("c.", channel)
    return (
        "WITH RECURSIVE chain(id, parent, counter, depth, stamp, source) AS ("
        f"SELECT checkpoint_id, parent_checkpoint_id, {_counter('', channel)}, 0, "
        f"{_meta(TURN_METADATA_KEY)}, "
        f"{_meta('source')} FROM checkpoints INDEXED BY {INDEX_NAME} "
        f"WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = {start} "
        f"UNION ALL SELECT c.checkpoint_id, c.parent_checkpoint_id, {stops}, "
        f"chain.depth + 1, NULL, NULL FROM chain CROSS JOIN checkpoints c INDEXED BY {INDEX_NAME} "
        "ON c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = chain.parent "
        "WHERE (chain.depth = 0 OR chain.counter IS NOT NULL) AND chain.id <> ? "
        f"AND chain.depth < {MAX_CHAIN}) "
        "SELECT 'c', id, parent, counter, depth, NULL, NULL FROM chain "
        "UNION ALL SELECT 'h', id, parent, stamp, depth, source, NULL FROM chain WHERE depth = 0 "
        f"UNION ALL SELECT 'w', w.checkpoint_id, {task_path}, w.task_id, w.idx, w.type, "
        "w.value FROM chain CROSS JOIN writes w ON w.thread_id = ? AND w.checkpoint_ns = ? "
        "AND w.checkpoint_id = chain.id AND w.channel = ? WHERE chain.depth > 0 "
        "UNION ALL SELECT 's', c.checkpoint_id, NULL, NULL, NULL, c.type, c.checkpoint "
        "FROM checkpoints c WHERE c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id "
        "= (SELECT id FROM chain WHERE depth > 0 ORDER BY depth DESC LIMIT 1)"
    )


def _lineage_sql() -> str:
    from ..state.reducer import TURN_METADATA_KEY

    return (
        "SELECT checkpoint_id, parent_checkpoint_id, "
        f"{_meta(TURN_METADATA_KEY)}, "
        f"{_meta('source')}, {_COUNTER} "
        f"FROM checkpoints INDEXED BY {INDEX_NAME} WHERE thread_id = ? AND checkpoint_ns = ? "
        "ORDER BY checkpoint_id DESC"
    )


_OUR_INDEXES = frozenset({INDEX_NAME, WHOLE_INDEX_NAME})
_INDEXES_SQL = "SELECT name FROM sqlite_master WHERE type = 'index' AND name IN " + (
    "(" + ", ".join(f"'{name}'" for name in sorted(_OUR_INDEXES)) + ")"
)

_IDS_SQL = (
    "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC"
)
_HEAD_SQL = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)
_PRIMARY_KEY_READ = (
    "SELECT checkpoint_id FROM checkpoints INDEXED BY sqlite_autoindex_checkpoints_1 "
    "WHERE thread_id = ? AND checkpoint_ns = ?"
)
"""A thread's checkpoints read through the table's primary key, not the lineage index: what a
damaged index is checked against."""
_TABLES = ("writes", "checkpoints")
"""The stock savers' tables, in the order a whole thread's rows are deleted."""
_ROW_SQL = (
    "SELECT type, checkpoint FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)


BATCH = 500
"""Ids bound in one statement: within the 999 variables older SQLite builds allow, with room
for the statement's own."""


def _batches(ids: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``ids`` in batches of :data:`BATCH`, each with its ``?, ?, …`` marks."""
    ids = list(ids)
    return [
        (",".join("?" * len(ids[i : i + BATCH])), ids[i : i + BATCH])
        for i in range(0, len(ids), BATCH)
    ]


def _skip_ext(code: int, data: bytes) -> Any:
    # A snapshot of a delta channel is the one extension object tool_state can be stored in;
    # its payload is plain data again.
    if code == EXT_DELTA_SNAPSHOT:
        return snapshot(_unpack(data))
    return None


def _unpack(data: bytes) -> Any:
    return ormsgpack.unpackb(data, ext_hook=_skip_ext, option=ormsgpack.OPT_NON_STR_KEYS)


_INDEXES_MEMO = "_mcp_state_versions_indexes"
"""Where a saver remembers which of the library's indexes its file has (once it has the
lineage index): a cache of the file's schema, forgotten when a statement finds one gone."""


class _IndexesChanged(Exception):
    """A statement named an index the file no longer has (another connection dropped it: a
    newer release's writer migrating the file, or a hand): the memo is forgotten, and the read
    is made again with the indexes the file has now."""


_Read = TypeVar("_Read", bound=Callable[..., Awaitable[Any]])


def _with_current_indexes(read: _Read) -> _Read:
    """``read`` made once more, on the indexes the file has now, where the memo was stale."""

    @functools.wraps(read)
    async def reading(self: SqliteBackend, *args: Any, **kwargs: Any) -> Any:
        try:
            return await read(self, *args, **kwargs)
        except _IndexesChanged:
            return await read(self, *args, **kwargs)

    return reading  # type: ignore[return-value]


class SqliteBackend(SqlBackend):
    """:class:`~mcp_state_versions.backends.Backend` over either SQLite saver."""

    #: SqliteSaver (its ``conn`` and ``cursor``) or AsyncSqliteSaver (its ``conn``, ``lock`` and
    #: ``setup``): the two share no type that has them.
    saver: Any

    head_sql = _HEAD_SQL
    mark = "?"
    threads_sql = (
        "SELECT thread_id, MAX(checkpoint_id) FROM checkpoints WHERE checkpoint_ns = '' "
        "AND thread_id > ? GROUP BY thread_id ORDER BY thread_id LIMIT ?"
    )
    recent_sql = (
        "SELECT thread_id, MAX(checkpoint_id) AS head FROM checkpoints "
        "WHERE checkpoint_ns = '' AND instr(thread_id, ?) > 0 GROUP BY thread_id "
        "HAVING ? = '' OR MAX(checkpoint_id) < ? OR (MAX(checkpoint_id) = ? "
        "AND thread_id < ?) ORDER BY head DESC, thread_id DESC LIMIT ?"
    )

    def __init__(self, saver: Any, *, sync: bool, native_sync: bool) -> None:
        super().__init__(saver, sync=sync)
        self.native_sync = native_sync  # SqliteSaver (sqlite3), else AsyncSqliteSaver (aiosqlite)
        self.link_sql = _link_sql()

    async def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        try:
            if self.native_sync:
                with self.saver.cursor(transaction=False) as cursor:
                    cursor.execute(sql, tuple(params))
                    return list(cursor.fetchall())
            if self.sync:
                raise NeedsAsync(type(self.saver).__name__)
            await self.saver.setup()
            async with self.saver.lock:
                return list(await self.saver.conn.execute_fetchall(sql, tuple(params)))
        except sqlite3.OperationalError as error:
            if "no such index" in str(error) and hasattr(self.saver, _INDEXES_MEMO):
                delattr(self.saver, _INDEXES_MEMO)  # another connection dropped it since
                raise _IndexesChanged from error
            raise

    async def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """``statements`` in one transaction, begun explicitly: Python's sqlite3 opens one
        by itself only before an INSERT, UPDATE or DELETE, so a ``CREATE`` or ``DROP`` ahead
        of them would otherwise commit on its own, and a failure after it leave it done."""
        if self.native_sync:
            conn = self.saver.conn
            with self.saver.cursor(transaction=False) as cursor:
                began = not conn.in_transaction
                if began:
                    cursor.execute("BEGIN IMMEDIATE")
                try:
                    for sql, params in statements:
                        cursor.execute(sql, tuple(params))
                except BaseException:
                    if began:
                        conn.rollback()
                    raise
                conn.commit()
            return
        if self.sync:
            raise NeedsAsync(type(self.saver).__name__)
        await self.saver.setup()
        async with self.saver.lock:
            conn = self.saver.conn
            began = not conn.in_transaction
            if began:
                await conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    await conn.execute(sql, tuple(params))
            except BaseException:
                if began:
                    await conn.rollback()
                raise
            await conn.commit()

    async def _indexed(self) -> bool:
        """Whether the file has the lineage index.

        A read never creates it: a reader may be pointed at a file it must not change (a
        copy, a read-only mount, another program's database). A writer creates it
        (:meth:`create_index`, which :class:`~mcp_state_versions.savers.sqlite.
        PruningSqliteSaver` runs in its ``setup``), and so does ``mcp-state-versions index``.
        """
        return INDEX_NAME in await self._indexes()

    async def _indexes(self) -> frozenset[str]:
        """Which of the library's indexes the file has: remembered once it has the lineage
        index (a file an earlier release indexed has only that one, and its delta-history reads
        climb by the links' metadata, unless this process's writer adds the other)."""
        found = getattr(self.saver, _INDEXES_MEMO, None)
        if found is not None:
            return found  # type: ignore[no-any-return]
        found = frozenset(row[0] for row in await self._rows(_INDEXES_SQL, ()))
        if INDEX_NAME in found:
            setattr(self.saver, _INDEXES_MEMO, found)
        return found

    async def _check_index(self, thread_id: str, namespace: str, checkpoint_id: str | None) -> None:
        """Raise :class:`~mcp_state_versions.walk.history.DamagedState` when the lineage index has
        no entry where the table, read through its primary key, has the checkpoint (the
        thread's newest when ``None``): random bytes in the index's pages make a thread look
        empty, and every answer then an ordinary one (``0 keys``, ``0 turns``)."""
        from ..walk.history import DamagedState

        chosen = "" if checkpoint_id is None else " AND checkpoint_id = ?"
        try:
            rows = await self._rows(
                f"{_PRIMARY_KEY_READ}{chosen} LIMIT 1",
                (thread_id, namespace) + (() if checkpoint_id is None else (checkpoint_id,)),
            )
        except sqlite3.OperationalError:  # a table made without that primary key: no check
            return
        if rows:
            raise DamagedState(
                thread_id,
                None,
                f"the lineage index {INDEX_NAME} has no entry for checkpoint {rows[0][0]}, "
                "which the file holds: the index's pages are damaged (check the file with "
                "PRAGMA integrity_check)",
            )

    async def create_index(self) -> None:
        """Run the :data:`MIGRATIONS` the file has not had (creating the lineage index and the
        index of whole values, and dropping the ones earlier releases made), in one
        transaction; the indexes again if one was dropped by hand since."""
        try:
            rows = await self._rows(f"SELECT MAX(v) FROM {MIGRATIONS_TABLE}", ())
            applied = -1 if rows[0][0] is None else int(rows[0][0])
        except sqlite3.OperationalError:  # no such table: a file no migration has run on
            applied = -1
        statements: list[tuple[str, Sequence[Any]]] = [
            (sql, ()) for sql in MIGRATIONS[applied + 1 :]
        ]
        statements += [
            (f"INSERT OR IGNORE INTO {MIGRATIONS_TABLE} (v) VALUES (?)", (number,))
            for number in range(applied + 1, len(MIGRATIONS))
        ]
        if not statements and await self._indexes() != _OUR_INDEXES:
            statements = [(_create_index_sql(), ()), (_create_whole_index_sql(), ())]
        if statements:
            await self._write(statements)
        setattr(self.saver, _INDEXES_MEMO, _OUR_INDEXES)

    @_with_current_indexes
    async def lineage(self, thread_id: str, namespace: str) -> list[LinkRow]:
        if await self._indexed():
            rows = await self._rows(_lineage_sql(), (thread_id, namespace))
            if not rows:
                await self._check_index(thread_id, namespace, None)
            return rows
        rows = await self._rows(_IDS_SQL, (thread_id, namespace))
        return [(row[0], row[1], None, UNREAD) for row in rows]

    async def stamp(self, thread_id: str, namespace: str, link: LinkRow) -> LinkRow:
        return await self.parent_of(thread_id, namespace, link[ID]) or link

    async def stored_tool_state(
        self, thread_id: str, namespace: str, checkpoint_id: str, channel: str = TOOL_STATE
    ) -> tuple[bool, Any]:
        rows = await self._rows(_ROW_SQL, (thread_id, namespace, checkpoint_id))
        if not rows:
            return False, None
        return True, self._stored_in(*rows[0], channel=channel)

    def _stored_in(self, kind: str, data: bytes, *, channel: str = TOOL_STATE) -> Any:
        """What a checkpoint row (its ``type`` and ``checkpoint``) stores for ``channel``, as
        :meth:`stored_tool_state` answers it (for ``tool_state``, msgpack decoded without the
        messages)."""
        if kind == "msgpack" and channel == TOOL_STATE:
            checkpoint = _unpack(data)
        else:
            checkpoint = self.saver.serde.loads_typed((kind, data))
        if channel not in (checkpoint.get("channel_versions") or {}):
            return None
        return (checkpoint.get("channel_values") or {}).get(channel, NOTHING_STORED)

    async def write_snapshot(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str,
        value: Any,
        channel: str = TOOL_STATE,
    ) -> None:
        # SQLite keeps a checkpoint's values inside its row, so the row is written again with
        # the snapshot in it (through the saver's serializer: the row holds messages too).
        rows = await self._rows(_ROW_SQL, (thread_id, namespace, checkpoint_id))
        if not rows:
            return
        checkpoint = self.saver.serde.loads_typed(tuple(rows[0]))
        checkpoint.setdefault("channel_values", {})[channel] = snapshot(value)
        kind, data = self.saver.serde.dumps_typed(checkpoint)
        # Its delta counters go too: they say a checkpoint stores no value (see _COUNTER).
        await self._write(
            [
                (
                    "UPDATE checkpoints SET type = ?, checkpoint = ?, metadata = CASE WHEN "
                    f"json_valid({_META_TEXT}) THEN CAST(json_remove({_META_TEXT}, "
                    f"'$.counters_since_delta_snapshot.{channel}') AS BLOB) ELSE metadata END "
                    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                    (kind, data, thread_id, namespace, checkpoint_id),
                )
            ]
        )

    @_with_current_indexes
    async def delta_history(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str,
        *,
        remember: bool = False,
        channel: str = TOOL_STATE,
    ) -> dict[str, Any]:
        """``channel``'s delta history at a checkpoint (``tool_state``'s, or ``messages``'), in
        LangGraph's form (a ``DeltaChannelHistory``: the seed, and the writes after it, oldest
        first); up to the checkpoint whose history a run start read last
        (:func:`known_history`), it is that history. ``remember``: keep this one as that (a run
        start).

        The saver's own ``get_delta_channel_history`` decodes every checkpoint on the way to the
        seed, each with the whole message list, so a run start on a long thread cost seconds.
        Here the chain comes from the covering index (ids, parents and delta counters), only
        the checkpoint it stops at is decoded (with the decoder that skips messages), and the
        chain, its writes and that checkpoint are one statement (:func:`_delta_history_sql`).
        """
        if not await self._indexed():
            return dict(
                await self._stock_delta_history(thread_id, namespace, checkpoint_id, channel)
            )
        return await super().delta_history(
            thread_id, namespace, checkpoint_id, remember=remember, channel=channel
        )

    @_with_current_indexes
    async def run_start(self, thread_id: str, namespace: str) -> Link | None:
        if not await self._indexed():  # (a file no writer indexed: not the library's saver's)
            return await self.link(thread_id, namespace)
        return await super().run_start(thread_id, namespace)

    def _chain_read(self, thread_id: str, namespace: str, channel: str) -> ChainReader:
        path = "w.task_path" if getattr(self.saver, "_has_task_path", True) else "''"

        async def read(start: str | None, stop: str) -> ChainRead:
            where = (thread_id, namespace)
            whole = WHOLE_INDEX_NAME in await self._indexes()
            sql = _delta_history_sql(path, start is None, channel, whole)
            begin = where if start is None else (start,)
            found = await self._rows(sql, (*where, *begin, *where, stop, *where, channel, *where))
            links = sorted((r for r in found if r[0] == "c"), key=lambda r: r[4])
            if not links:
                await self._check_index(thread_id, namespace, start)
            row = next((r for r in found if r[0] == "s"), None)

            def seed() -> Any:
                stored = None if row is None else self._stored_in(row[5], row[6], channel=channel)
                return NOTHING_STORED if stored is None else stored  # None: never written

            return ChainRead(
                [(r[1], r[2], r[3] is not None) for r in links],
                [r[1:] for r in found if r[0] == "w"],
                seed,
                start_link(found),
            )

        return read

    async def writes_of(
        self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[Any]]:
        rows = await self._write_rows(thread_id, namespace, checkpoint_ids)
        return writes_by_checkpoint(rows, checkpoint_ids, self.saver.serde.loads_typed)

    async def _write_rows(
        self, thread_id: str, namespace: str, chain: Sequence[str]
    ) -> list[tuple[Any, ...]]:
        """``tool_state``'s stored write rows at ``chain``: ``(checkpoint_id, task_path,
        task_id, idx, type, blob)``."""
        path = "task_path" if getattr(self.saver, "_has_task_path", True) else "''"
        found: list[tuple[Any, ...]] = []
        for marks, part in _batches(chain):
            found += await self._rows(
                f"SELECT checkpoint_id, {path}, task_id, idx, type, value FROM writes "
                "WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? "
                f"AND checkpoint_id IN ({marks})",
                (thread_id, namespace, TOOL_STATE, *part),
            )
        return found

    async def delete(self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]) -> None:
        forget_histories(self.saver, thread_id)
        if not checkpoint_ids:
            return
        await self._write(  # one transaction, however many batches
            [
                (
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? "
                    f"AND checkpoint_id IN ({marks})",
                    (thread_id, namespace, *part),
                )
                for marks, part in _batches(checkpoint_ids)
                for table in ("writes", "checkpoints")
            ]
        )

    async def delete_idle_thread(self, thread_id: str, head: str) -> bool:
        # BEGIN IMMEDIATE takes the file's write lock before the head is read: no writer,
        # in this process or another, stores a checkpoint between the check and the delete.
        forget_histories(self.saver, thread_id)
        statements = [(f"DELETE FROM {t} WHERE thread_id = ?", (thread_id,)) for t in _TABLES]
        if self.native_sync:
            with self.saver.lock:
                conn = self.saver.conn
                conn.execute("BEGIN IMMEDIATE")
                try:
                    found = conn.execute(_HEAD_SQL, (thread_id, "")).fetchall()
                    if found and found[0][0] == head:
                        for sql, params in statements:
                            conn.execute(sql, params)
                finally:
                    conn.commit()
            return bool(found and found[0][0] == head)
        if self.sync:
            raise NeedsAsync(type(self.saver).__name__)
        await self.saver.setup()
        async with self.saver.lock:
            conn = self.saver.conn
            await conn.execute("BEGIN IMMEDIATE")
            try:
                found = await conn.execute_fetchall(_HEAD_SQL, (thread_id, ""))
                if found and found[0][0] == head:
                    for sql, params in statements:
                        await conn.execute(sql, params)
            finally:
                await conn.commit()
        return bool(found and found[0][0] == head)

    async def delete_writes(
        self, thread_id: str, namespace: str, checkpoint_id: str, task_ids: Sequence[str]
    ) -> None:
        forget_histories(self.saver, thread_id)
        await self._write(
            [
                (
                    "DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? "
                    f"AND checkpoint_id = ? AND task_id IN ({marks})",
                    (thread_id, namespace, checkpoint_id, *part),
                )
                for marks, part in _batches(task_ids)
            ]
        )

    async def stored_bytes(
        self, thread_id: str, namespace: str | None, checkpoint_ids: Sequence[str] | None
    ) -> int:
        # SQLite keeps every value in the checkpoint's own row: rows and writes are all.
        where, params = "thread_id = ?", [thread_id]
        if namespace is not None:
            where, params = where + " AND checkpoint_ns = ?", [*params, namespace]
        total = 0
        batches = _batches(checkpoint_ids) if checkpoint_ids is not None else [("", [])]
        for marks, part in batches:
            chosen, args = where, params
            if checkpoint_ids is not None:
                chosen, args = f"{where} AND checkpoint_id IN ({marks})", [*params, *part]
            for sql in (
                f"SELECT COALESCE(SUM(length(checkpoint) + length(metadata)), 0) "
                f"FROM checkpoints WHERE {chosen}",
                f"SELECT COALESCE(SUM(length(value)), 0) FROM writes WHERE {chosen}",
            ):
                total += int((await self._rows(sql, args))[0][0])
        return total

    async def threads_stored_bytes(self, thread_ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = dict.fromkeys(thread_ids, 0)
        for marks, part in _batches(thread_ids):
            rows = await self._rows(
                f"WITH listed(t) AS (VALUES {marks.replace('?', '(?)')}) "
                "SELECT thread_id, SUM(size) FROM ("
                "SELECT thread_id, length(checkpoint) + length(metadata) AS size FROM checkpoints "
                "WHERE thread_id IN listed UNION ALL "
                "SELECT thread_id, length(value) FROM writes WHERE thread_id IN listed"
                ") GROUP BY thread_id",
                part,
            )
            found.update((str(row[0]), int(row[1] or 0)) for row in rows)
        return found

    async def vacuum(self) -> int:
        """``VACUUM`` the file (and truncate its WAL); the bytes the database shrank by."""

        async def size() -> int:
            pages = (await self._rows("PRAGMA page_count", ()))[0][0]
            return int(pages) * int((await self._rows("PRAGMA page_size", ()))[0][0])

        before = await size()
        if self.native_sync:
            with self.saver.cursor(transaction=False) as cursor:
                cursor.execute("VACUUM")
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            await self.saver.setup()
            async with self.saver.lock:
                await self.saver.conn.commit()
                await self.saver.conn.execute("VACUUM")
                await self.saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return before - await size()

    async def latest_per_namespace(self, thread_id: str) -> list[tuple[str, str]]:
        """``(namespace, newest checkpoint id)`` of each namespace of the thread."""
        return [
            (row[0], row[1])
            for row in await self._rows(
                "SELECT checkpoint_ns, MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ? "
                "GROUP BY checkpoint_ns",
                (thread_id,),
            )
        ]

    async def keep_latest(self, thread_id: str) -> None:
        """``aprune(strategy="keep_latest")``: every namespace keeps its newest checkpoint."""
        forget_histories(self.saver, thread_id)
        await self._write(
            [
                (
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id < ("
                    "SELECT MAX(c.checkpoint_id) FROM checkpoints c WHERE c.thread_id = "
                    f"{table}.thread_id AND c.checkpoint_ns = {table}.checkpoint_ns)",
                    (thread_id,),
                )
                for table in ("writes", "checkpoints")
            ]
        )


def sqlite_backend(saver: Any, *, sync: bool) -> SqliteBackend | None:
    """A :class:`SqliteBackend` when ``saver`` is a SQLite saver, else ``None``."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if isinstance(saver, SqliteSaver):
        return SqliteBackend(saver, sync=True, native_sync=True)  # it has no async API
    if isinstance(saver, AsyncSqliteSaver):
        return SqliteBackend(saver, sync=sync, native_sync=False)
    return None
