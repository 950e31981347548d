"""Storage: what a thread occupies on each backend, by ring size, against last-write-wins.

A thread of N turns is built per variant (ring 0, 4, 8, 16, and a last-write-wins reducer that
keeps no versions); the bytes the backend holds for it (checkpoints, metadata, blobs, writes)
are summed, per thread and per checkpoint, with the JSON size of ``tool_state`` itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from uuid import uuid4

from mcp_state_versions import CheckpointHistory, entries_of, run_turn

from .common import agent, opened


def _lww_reducer(current: dict[str, Any] | None, update: dict[str, Any]) -> dict[str, Any]:
    """Last write wins: a value per key, nothing else (clock writes are dropped)."""
    merged = dict(current or {})
    for key, write in update.items():
        if "value" in write:
            merged[key] = {"value": write["value"], "tool": write.get("tool")}
    return merged


STORAGE_VARIANTS: dict[str, dict[str, Any]] = {
    "ring 0": {"ring_size": 0},
    "ring 4": {"ring_size": 4},
    "ring 8": {"ring_size": 8},
    "ring 16": {"ring_size": 16},
    "last-write-wins": {"reducer": None},  # filled in with _lww_reducer below
}


async def _stored_bytes(saver: Any, thread_id: str) -> int:
    """What the backend holds for one thread: checkpoints, metadata, blobs and writes."""
    if hasattr(saver, "storage"):  # in memory: the serialized bytes the saver keeps
        total = sum(len(c) + len(m) for c, m, _ in saver.storage[thread_id][""].values())
        total += sum(len(v[1]) for k, v in saver.blobs.items() if k[0] == thread_id)
        total += sum(
            len(w[2][1]) for k, ws in saver.writes.items() if k[0] == thread_id for w in ws.values()
        )
        return total
    if hasattr(saver, "_cursor"):  # PostgreSQL
        queries = [
            "SELECT COALESCE(SUM(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) AS n "
            "FROM checkpoints WHERE thread_id = %s",
            "SELECT COALESCE(SUM(length(blob)), 0) AS n FROM checkpoint_blobs WHERE thread_id = %s",
            "SELECT COALESCE(SUM(length(blob)), 0) AS n FROM checkpoint_writes WHERE thread_id = %s",
        ]
        total = 0
        async with saver._cursor() as cursor:
            for query in queries:
                await cursor.execute(query, (thread_id,))
                total += int((await cursor.fetchone())["n"])
        return total
    total = 0  # SQLite
    for query in (
        "SELECT COALESCE(SUM(length(checkpoint) + length(metadata)), 0) FROM checkpoints WHERE thread_id = ?",
        "SELECT COALESCE(SUM(length(value)), 0) FROM writes WHERE thread_id = ?",
    ):
        async with saver.lock, saver.conn.execute(query, (thread_id,)) as cursor:
            total += (await cursor.fetchone())[0]
    return total


async def measure(backend: str, turns: int, workdir: Path) -> dict[str, Any]:
    """Per variant: bytes stored for the thread, bytes per checkpoint, tool_state JSON size."""
    out: dict[str, Any] = {}
    async with opened(backend, workdir) as (saver, _):
        for name, options in STORAGE_VARIANTS.items():
            if "reducer" in options:
                options = {"reducer": _lww_reducer}
            graph = agent(saver, **options)
            thread = f"store-{uuid4().hex}"
            for turn in range(1, turns + 1):
                await run_turn(graph, thread, f"measure {turn}")
            state = (await graph.aget_state({"configurable": {"thread_id": thread}})).values
            stored = await _stored_bytes(saver, thread)
            count = len(await CheckpointHistory(saver).checkpoint_ids(thread))
            out[name] = {
                "thread_bytes": stored,
                "per_checkpoint": stored / count,
                "tool_state_json": len(json.dumps(entries_of(state["tool_state"]))),
            }
    return out
