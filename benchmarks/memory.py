"""Peak memory of one turn read, in a fresh process: the library's walk against the full walk.

A child process opens the thread's saver (SQLite file or PostgreSQL; an in-memory saver lives
in one process only, so it is not measured here), reads the thread's present state as a tool
holds it, notes its peak resident size, performs one read of turn 1, and reports how far the
peak rose. ``python -m benchmarks.memory SPEC THREAD TURN walk|baseline`` is the child.
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
from typing import Any

from mcp_state_versions import CheckpointHistory, resolve_turn
from mcp_state_versions.savers.specs import open_checkpointer

from .common import KEY, agent, expected, full_walk_read, without_ring_values


def _reset_peak() -> None:
    """Start the peak from now: a child's ``ru_maxrss`` starts at its parent's peak (Linux
    carries it across fork), so the kernel's own high-water mark is reset instead."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def _peak_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def _child(spec: str, thread_id: str, turn: int, method: str) -> dict[str, Any]:
    async with open_checkpointer(spec, create=False) as saver:
        graph = agent(saver)
        history = CheckpointHistory(saver)
        present = await history.present(thread_id)  # the state a tool holds, messages aside
        assert present is not None
        total = present.turn
        entries = {**present.tool_state, KEY: without_ring_values(present.tool_state[KEY])}
        _reset_peak()
        idle = _peak_kb()
        if method == "walk":
            answer = await resolve_turn(
                entries, KEY, turn, current_turn=total, history=history, thread_id=thread_id
            )
            value = answer.value  # type: ignore[union-attr]
        else:
            value = await full_walk_read(graph, thread_id, turn)
        assert value == expected(turn), value
        return {"idle_kb": idle, "peak_kb": _peak_kb(), "rise_mb": (_peak_kb() - idle) / 1024}


def measure(spec: str, thread_id: str, turn: int, method: str) -> dict[str, Any]:
    """Run the child and return its report."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.memory", spec, thread_id, str(turn), method],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    spec_, thread_, turn_, method_ = sys.argv[1:5]
    print(json.dumps(asyncio.run(_child(spec_, thread_, int(turn_), method_))))
