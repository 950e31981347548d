"""The physical limit of a turn read: the reads the storage needs, by hand, and nothing else.

What the storage itself allows for "what did KEY hold at the end of turn N" on a thread whose
runs carry turn stamps, now that ``tool_state`` is stored as writes with snapshots: one lineage
query (every checkpoint's id, parent, stamp and delta counter, nothing else), the end of turn N
found by its stamp, the nearest checkpoint on its parent chain that stores ``tool_state``
whole (the first without a delta counter), that one value, and the writes stored after it,
of which KEY's last is the answer (or the snapshot's, if none wrote KEY). No reducer, no
confirmation, no cache: the floor the library's walk is measured against, written with the same
drivers (psycopg, aiosqlite, the in-memory saver's dicts) and their cheapest calls (a SQLite
statement fetched in one hand-off to aiosqlite's thread, as the library's are).
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import writes_sort_key

from mcp_state_versions.backends.sqlite import INDEX_NAME, _unpack
from mcp_state_versions.state.reducer import TURN_METADATA_KEY

from .common import KEY

Row = tuple[str, str | None, Any, Any, Any]
"""id, parent, stamp, source, tool_state's delta counter."""


def _end_of_turn(rows: list[Row], turn: int) -> list[str]:
    """The chain from the end of ``turn`` to the nearest checkpoint without a delta counter
    (the seed), newest first: the checkpoints whose writes, after the seed, made it."""
    by_id = {row[0]: row for row in rows}
    link = by_id.get(max(by_id)) if by_id else None
    stamps = (turn, str(turn))  # SQLite and the in-memory saver give an int, PostgreSQL text
    while link is not None and not (link[3] == "loop" and link[2] in stamps):
        link = by_id.get(link[1]) if link[1] else None
    assert link is not None, f"no checkpoint stamped with turn {turn}"
    chain = [link[0]]
    while link[4] is not None and link[1] in by_id:
        link = by_id[link[1]]
        chain.append(link[0])
    return chain


def _answer(seed: Any, writes: list[tuple[int, Any, Any]]) -> Any:
    """KEY's last write after the seed, else the seed's value. ``writes``: (position in the
    chain, sort key within its step, the write)."""
    for _, _, write in sorted(writes, key=lambda w: (-w[0], w[1]), reverse=True):
        if KEY in write:
            return write[KEY]["value"]
    seed = getattr(seed, "value", seed)  # None: the chain reached the thread's start
    return seed[KEY]["value"]


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
        await cursor.execute(  # stamps and counters as text: no conversion per row
            f"SELECT checkpoint_id, parent_checkpoint_id, metadata ->> '{TURN_METADATA_KEY}', "
            "metadata ->> 'source', metadata -> 'counters_since_delta_snapshot' ->> 'tool_state' "
            "FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = ''",
            (thread_id,),
        )
        chain = _end_of_turn(list(await cursor.fetchall()), turn)
        await cursor.execute(
            "SELECT b.type, b.blob FROM checkpoints c JOIN checkpoint_blobs b "
            "ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns "
            "AND b.channel = 'tool_state' "
            "AND b.version = c.checkpoint -> 'channel_versions' ->> 'tool_state' "
            "WHERE c.thread_id = %s AND c.checkpoint_ns = '' AND c.checkpoint_id = %s",
            (thread_id, chain[-1]),
        )
        found = await cursor.fetchone()
        seed = saver.serde.loads_typed(tuple(found)) if found else None
        await cursor.execute(
            "SELECT checkpoint_id, task_path, task_id, idx, type, blob FROM checkpoint_writes "
            "WHERE thread_id = %s AND checkpoint_ns = '' AND channel = 'tool_state' "
            "AND checkpoint_id = ANY(%s)",
            (thread_id, chain[1:]),
            prepare=False,  # planned for these ids, as the library's own (backends.postgres._run)
        )
        rows = await cursor.fetchall()
    position = {checkpoint_id: i for i, checkpoint_id in enumerate(chain)}
    writes = [
        (position[r[0]], writes_sort_key(r[1], r[2], r[3]), saver.serde.loads_typed((r[4], r[5])))
        for r in rows
    ]
    return _answer(seed, writes)


async def _sqlite(saver: Any, thread_id: str, turn: int) -> Any:
    meta = "CAST(metadata AS TEXT)"
    async with saver.lock:
        links = await saver.conn.execute_fetchall(
            f"SELECT checkpoint_id, parent_checkpoint_id, "
            f"json_extract({meta}, '$.{TURN_METADATA_KEY}'), json_extract({meta}, '$.source'), "
            f"json_extract({meta}, '$.counters_since_delta_snapshot.tool_state') "
            f"FROM checkpoints INDEXED BY {INDEX_NAME} "
            "WHERE thread_id = ? AND checkpoint_ns = ''",
            (thread_id,),
        )
        chain = _end_of_turn(list(links), turn)
        ((data,),) = await saver.conn.execute_fetchall(
            "SELECT checkpoint FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
            (thread_id, chain[-1]),
        )
        marks = ",".join("?" * (len(chain) - 1))
        rows = await saver.conn.execute_fetchall(
            "SELECT checkpoint_id, task_path, task_id, idx, value FROM writes "
            "WHERE thread_id = ? AND checkpoint_ns = '' AND channel = 'tool_state' "
            f"AND checkpoint_id IN ({marks or 'NULL'})",
            (thread_id, *chain[1:]),
        )
    seed = _unpack(data)["channel_values"].get("tool_state")
    position = {checkpoint_id: i for i, checkpoint_id in enumerate(chain)}
    writes = [(position[r[0]], writes_sort_key(r[1], r[2], r[3]), _unpack(r[4])) for r in rows]
    return _answer(seed, writes)


def _memory(saver: Any, thread_id: str, turn: int) -> Any:
    stored = saver.storage[thread_id][""]
    rows: list[Row] = []
    for checkpoint_id, (_, metadata, parent) in stored.items():
        meta = saver.serde.loads_typed(metadata)
        counter = (meta.get("counters_since_delta_snapshot") or {}).get("tool_state")
        rows.append(
            (checkpoint_id, parent, meta.get(TURN_METADATA_KEY), meta.get("source"), counter)
        )
    chain = _end_of_turn(rows, turn)
    checkpoint = saver.serde.loads_typed(stored[chain[-1]][0])
    version = checkpoint["channel_versions"].get("tool_state")
    blob = saver.blobs.get((thread_id, "", "tool_state", version))
    seed = saver.serde.loads_typed(blob) if blob and blob[0] != "empty" else None
    position = {checkpoint_id: i for i, checkpoint_id in enumerate(chain)}
    writes = [
        (position[cid], writes_sort_key(w[3], w[0], idx), saver.serde.loads_typed(w[2]))
        for cid in chain[1:]
        for (_, idx), w in saver.writes.get((thread_id, "", cid), {}).items()
        if w[1] == "tool_state"
    ]
    return _answer(seed, writes)
