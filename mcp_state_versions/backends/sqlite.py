"""The SQLite savers (``SqliteSaver``, ``AsyncSqliteSaver``): every query the library runs on them.

SQLite stores each checkpoint whole in one row: the serialized checkpoint (every channel value,
the message list included) followed by ``metadata``. Two consequences decide how this reads:

* **Lineage from an index.** Reading ``metadata`` of every row means reading every row's
  overflow pages, most of a long thread's file. The library therefore creates one covering
  expression index, ``mcp_state_versions_lineage``, over ids, parents and the two metadata
  fields the walk reads (the turn stamp and ``source``); the lineage of a thread is then a scan
  of that index, O(chain) instead of O(file bytes). The saver's own tables are not changed, and
  other readers are not affected; where the index cannot be created (a read-only file), ids
  and parents are scanned and stamps read per visited link instead.
* **A channel without the messages.** ``tool_state`` is read from the row with a msgpack decoder
  whose extension hook skips every object it would have to construct (LangChain messages are
  extension objects; ``tool_state`` is plain data and has none, except the snapshot wrapper of
  a delta channel, which is unwrapped), so nothing is rebuilt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import EXT_DELTA_SNAPSHOT

from ..storage import NOTHING_STORED, snapshot
from . import ID, PARENT, TOOL_STATE, UNREAD, Link, LinkRow, NeedsAsync, SqlBackend

__all__ = ["INDEX_NAME", "SqliteBackend", "sqlite_backend"]

INDEX_NAME = "mcp_state_versions_lineage"

_META_TEXT = "CAST(metadata AS TEXT)"


def _index_sql() -> str:
    from ..state import TURN_METADATA_KEY

    return (
        f"CREATE INDEX IF NOT EXISTS {INDEX_NAME} ON checkpoints (thread_id, checkpoint_ns, "
        f"checkpoint_id, parent_checkpoint_id, "
        f"json_extract({_META_TEXT}, '$.{TURN_METADATA_KEY}'), "
        f"json_extract({_META_TEXT}, '$.source'))"
    )


def _lineage_sql() -> str:
    from ..state import TURN_METADATA_KEY

    return (
        "SELECT checkpoint_id, parent_checkpoint_id, "
        f"json_extract({_META_TEXT}, '$.{TURN_METADATA_KEY}'), "
        f"json_extract({_META_TEXT}, '$.source') "
        f"FROM checkpoints INDEXED BY {INDEX_NAME} WHERE thread_id = ? AND checkpoint_ns = ? "
        "ORDER BY checkpoint_id DESC"
    )


_IDS_SQL = (
    "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC"
)
_HEAD_SQL = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)
_ROW_SQL = (
    "SELECT type, checkpoint FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)


def _skip_ext(code: int, data: bytes) -> Any:
    # A snapshot of a delta channel is the one extension object tool_state can be stored in;
    # its payload is plain data again.
    if code == EXT_DELTA_SNAPSHOT:
        return snapshot(_unpack(data))
    return None


def _unpack(data: bytes) -> Any:
    return ormsgpack.unpackb(data, ext_hook=_skip_ext, option=ormsgpack.OPT_NON_STR_KEYS)


class SqliteBackend(SqlBackend):
    """:class:`~mcp_state_versions.backends.Backend` over either SQLite saver."""

    head_sql = _HEAD_SQL

    def __init__(self, saver: Any, *, sync: bool, native_sync: bool) -> None:
        super().__init__(saver, sync=sync)
        self.native_sync = native_sync  # SqliteSaver (sqlite3), else AsyncSqliteSaver (aiosqlite)

    async def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        if self.native_sync:
            with self.saver.cursor(transaction=False) as cursor:
                cursor.execute(sql, tuple(params))
                return list(cursor.fetchall())
        if self.sync:
            raise NeedsAsync(type(self.saver).__name__)
        await self.saver.setup()
        async with self.saver.lock, self.saver.conn.execute(sql, tuple(params)) as cursor:
            return list(await cursor.fetchall())

    async def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        if self.native_sync:
            with self.saver.cursor(transaction=True) as cursor:
                for sql, params in statements:
                    cursor.execute(sql, tuple(params))
            return
        if self.sync:
            raise NeedsAsync(type(self.saver).__name__)
        await self.saver.setup()
        async with self.saver.lock:
            for sql, params in statements:
                await self.saver.conn.execute(sql, tuple(params))
            await self.saver.conn.commit()

    async def _indexed(self) -> bool:
        """Create the lineage index once per saver; ``False`` where it cannot be created."""
        state = getattr(self.saver, "_mcp_state_versions_index", None)
        if state is None:
            import sqlite3

            try:
                await self._write([(_index_sql(), ())])
                state = True
            except sqlite3.Error:
                state = False
            self.saver._mcp_state_versions_index = state  # type: ignore[attr-defined]
        return bool(state)

    async def lineage(self, thread_id: str, namespace: str) -> list[LinkRow]:
        if await self._indexed():
            return await self._rows(_lineage_sql(), (thread_id, namespace))
        rows = await self._rows(_IDS_SQL, (thread_id, namespace))
        return [(row[0], row[1], None, UNREAD) for row in rows]

    async def stamp(self, thread_id: str, namespace: str, link: LinkRow) -> LinkRow:
        from ..state import TURN_METADATA_KEY

        rows = await self._rows(
            f"SELECT json_extract({_META_TEXT}, '$.{TURN_METADATA_KEY}'), "
            f"json_extract({_META_TEXT}, '$.source') FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (thread_id, namespace, link[ID]),
        )
        if not rows:
            return link
        stamp, source = rows[0]
        return Link(link[ID], link[PARENT], stamp, source)

    async def stored_tool_state(
        self, thread_id: str, namespace: str, checkpoint_id: str
    ) -> tuple[bool, Any]:
        rows = await self._rows(_ROW_SQL, (thread_id, namespace, checkpoint_id))
        if not rows:
            return False, None
        kind, data = rows[0]
        if kind == "msgpack":
            checkpoint = _unpack(data)
        else:
            checkpoint = self.saver.serde.loads_typed((kind, data))
        if TOOL_STATE not in (checkpoint.get("channel_versions") or {}):
            return True, None
        return True, (checkpoint.get("channel_values") or {}).get(TOOL_STATE, NOTHING_STORED)

    async def write_snapshot(
        self, thread_id: str, namespace: str, checkpoint_id: str, value: Mapping[str, Any]
    ) -> None:
        # SQLite keeps a checkpoint's values inside its row, so the row is written again with
        # the snapshot in it (through the saver's serializer: the row holds messages too).
        rows = await self._rows(_ROW_SQL, (thread_id, namespace, checkpoint_id))
        if not rows:
            return
        checkpoint = self.saver.serde.loads_typed(tuple(rows[0]))
        checkpoint.setdefault("channel_values", {})[TOOL_STATE] = snapshot(value)
        kind, data = self.saver.serde.dumps_typed(checkpoint)
        await self._write(
            [
                (
                    "UPDATE checkpoints SET type = ?, checkpoint = ? WHERE thread_id = ? "
                    "AND checkpoint_ns = ? AND checkpoint_id = ?",
                    (kind, data, thread_id, namespace, checkpoint_id),
                )
            ]
        )

    async def delete(self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]) -> None:
        if not checkpoint_ids:
            return
        marks = ",".join("?" * len(checkpoint_ids))
        await self._write(
            [
                (
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? "
                    f"AND checkpoint_id IN ({marks})",
                    (thread_id, namespace, *checkpoint_ids),
                )
                for table in ("writes", "checkpoints")
            ]
        )

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
