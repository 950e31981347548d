"""Turn reads side by side: ring, the library's walk, the physical limit, the full history walk.

One thread per backend grows through the lengths asked (100, 500, 1000 in the full run). At each
length, turn 1, T/2 and T-3 are read four ways, every one checked to return the right value
before its time counts:

* **ring**: ``resolve_turn`` on the entry the tool already holds (only where the ring reaches);
* **walk**: ``resolve_turn`` with the entry's ring values removed, so the library's checkpoint
  walk answers (what a ``ring_size=0`` deployment, or any read older than the ring, costs);
* **limit**: :mod:`benchmarks.limit`, one lineage query and one ``tool_state`` read by hand;
* **baseline**: what a host does without this library: a full ``aget_state_history`` walk
  taking the newest checkpoint with N human messages (up to 500 turns; it is quadratic).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import uuid4

from mcp_state_versions import CheckpointHistory, resolve_turn

from . import limit, memory
from .common import (
    KEY,
    agent,
    expected,
    full_walk_read,
    grow,
    opened,
    progress,
    timed,
    timed_side_by_side,
    without_ring_values,
)

BASELINE_MAX_TURNS = 500


async def measure(
    backend: str, lengths: list[int], repeat: int, workdir: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Reads by length, and (SQLite, PostgreSQL) peak memory of one read of turn 1 in a fresh
    process: the full walk at the longest length it is run at, the library at the longest."""
    out: dict[str, Any] = {}
    peaks: dict[str, Any] = {}
    base_turns = max((n for n in lengths if n <= BASELINE_MAX_TURNS), default=None)
    async with opened(backend, workdir) as (saver, spec):
        graph = agent(saver)
        thread_id = f"reads-{uuid4().hex}"
        history = CheckpointHistory(saver)
        for length in lengths:
            progress(f"{backend}: growing the thread to {length} turns")
            await grow(graph, thread_id, length)
            state = (await graph.aget_state({"configurable": {"thread_id": thread_id}})).values
            entries = state["tool_state"]
            bare = {**entries, KEY: without_ring_values(entries[KEY])}
            row: dict[str, Any] = {"checkpoints": len(await history.checkpoint_ids(thread_id))}
            baseline_ms: dict[str, float] | None = None
            for label, asked in (
                ("turn 1", 1),
                ("turn T/2", length // 2),
                ("turn T-3", length - 3),
            ):
                want = expected(asked)

                async def ring(asked: int = asked) -> Any:
                    return await resolve_turn(entries, KEY, asked, current_turn=length)

                async def walk(asked: int = asked) -> Any:
                    return await resolve_turn(
                        bare, KEY, asked, current_turn=length, history=history, thread_id=thread_id
                    )

                async def floor(asked: int = asked) -> Any:
                    return await limit.read(saver, backend, thread_id, asked)

                async def baseline(asked: int = asked) -> Any:
                    return await full_walk_read(graph, thread_id, asked)

                in_ring = getattr(await ring(), "value", None) == want
                walked = await walk()
                assert walked.value == want and walked.source == "history", walked
                assert await floor() == want
                result: dict[str, Any] = {
                    "ring": await timed(ring, repeat * 4) if in_ring else None,
                    **await timed_side_by_side({"walk": walk, "limit": floor}, repeat),
                }
                if length <= BASELINE_MAX_TURNS:
                    if baseline_ms is None:
                        # aget_state_history reads the whole thread before it yields anything,
                        # so the baseline costs the same whichever turn is asked: once a length.
                        assert await baseline() == want
                        baseline_ms = await timed(baseline, 1 if length >= 500 else 3)
                    result["baseline"] = baseline_ms
                row[label] = result
                progress(f"{backend} {length} turns: {label} measured")
            out[str(length)] = row
            if backend != "memory" and length == base_turns:
                progress(f"{backend} {length} turns: peak memory of the full history walk")
                peaks["baseline"] = memory.measure(spec, thread_id, 1, "baseline")
                peaks["baseline_turns"] = length
            if backend != "memory" and length == max(lengths):
                progress(f"{backend} {length} turns: peak memory of the library walk")
                peaks["walk"] = memory.measure(spec, thread_id, 1, "walk")
                peaks["walk_turns"] = length
    return out, peaks
