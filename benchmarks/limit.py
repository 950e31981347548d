"""The physical limit of a turn read: one lineage query and one ``tool_state`` read, by hand.

What the storage itself allows for "what did KEY hold at the end of turn N" on a thread whose
runs carry turn stamps: read every checkpoint's id, parent and stamp (nothing else), follow
parents from the head, take the last checkpoint stamped with turn N, read that checkpoint's
``tool_state`` channel alone. No abstraction, no confirmation, no cache: the floor the library's
walk is measured against, written with the same drivers (psycopg, aiosqlite, the in-memory
saver's dicts).
"""

from __future__ import annotations

from typing import Any

import ormsgpack

from mcp_state_versions.state import TURN_METADATA_KEY

from .common import KEY


def _end_of_turn(rows: list[tuple[str, str | None, Any, Any]], turn: int) -> str | None:
    by_id = {row[0]: row for row in rows}
    link = by_id.get(max(by_id)) if by_id else None
    stamps = (turn, str(turn))  # SQLite and the in-memory saver give an int, PostgreSQL text
    while link is not None:
        if link[3] == "loop" and link[2] in stamps:
            return link[0]  # the newest checkpoint of that turn's run: its end
        link = by_id.get(link[1]) if link[1] else None
    return None


async def read(saver: Any, backend: str, thread_id: str, turn: int) -> Any:
    if backend == "postgres":
        return await _postgres(saver, thread_id, turn)
    if backend == "sqlite":
        return await _sqlite(saver, thread_id, turn)
    return _memory(saver, thread_id, turn)


async def _postgres(saver: Any, thread_id: str, turn: int) -> Any:
    from psycopg.rows import tuple_row

    async with saver._cursor() as cursor:
        cursor.row_factory = tuple_row
        await cursor.execute(  # the stamp as text: no conversion per row on the server
            f"SELECT checkpoint_id, parent_checkpoint_id, metadata ->> '{TURN_METADATA_KEY}', "
            "metadata ->> 'source' "
            "FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = ''",
            (thread_id,),
        )
        target = _end_of_turn(list(await cursor.fetchall()), turn)
        await cursor.execute(
            "SELECT b.type, b.blob FROM checkpoints c JOIN checkpoint_blobs b "
            "ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns "
            "AND b.channel = 'tool_state' "
            "AND b.version = c.checkpoint -> 'channel_versions' ->> 'tool_state' "
            "WHERE c.thread_id = %s AND c.checkpoint_ns = '' AND c.checkpoint_id = %s",
            (thread_id, target),
        )
        kind, blob = await cursor.fetchone()
    return saver.serde.loads_typed((kind, blob))[KEY]["value"]


async def _sqlite(saver: Any, thread_id: str, turn: int) -> Any:
    from mcp_state_versions.backends.sqlite import INDEX_NAME

    meta = "CAST(metadata AS TEXT)"
    async with saver.lock:
        cursor = await saver.conn.execute(
            f"SELECT checkpoint_id, parent_checkpoint_id, "
            f"json_extract({meta}, '$.{TURN_METADATA_KEY}'), json_extract({meta}, '$.source') "
            f"FROM checkpoints INDEXED BY {INDEX_NAME} "
            "WHERE thread_id = ? AND checkpoint_ns = ''",
            (thread_id,),
        )
        target = _end_of_turn(list(await cursor.fetchall()), turn)
        cursor = await saver.conn.execute(
            "SELECT checkpoint FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
            (thread_id, target),
        )
        (data,) = await cursor.fetchone()
    checkpoint = ormsgpack.unpackb(
        data, ext_hook=lambda code, raw: None, option=ormsgpack.OPT_NON_STR_KEYS
    )
    return checkpoint["channel_values"]["tool_state"][KEY]["value"]


def _memory(saver: Any, thread_id: str, turn: int) -> Any:
    stored = saver.storage[thread_id][""]
    rows = []
    for checkpoint_id, (_, metadata, parent) in stored.items():
        meta = saver.serde.loads_typed(metadata)
        rows.append((checkpoint_id, parent, meta.get(TURN_METADATA_KEY), meta.get("source")))
    target = _end_of_turn(rows, turn)
    checkpoint = saver.serde.loads_typed(stored[target][0])
    version = checkpoint["channel_versions"]["tool_state"]
    blob = saver.blobs[(thread_id, "", "tool_state", version)]
    return saver.serde.loads_typed(blob)[KEY]["value"]
