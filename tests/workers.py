"""Processes for the concurrency tests: a writer running turns and a pruner pruning beside it.

Run as ``python -m tests.workers write|prune <where> <thread_id> <count>``, where ``<where>`` is
a SQLite file or a PostgreSQL DSN. Separate processes, because that is how a deployment runs
a sweeper beside its agents, and because two processes share no lock a test could lean on.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp_state_versions.agent import run_turn
from mcp_state_versions.retention import PruningSqliteSaver, open_postgres_saver, prune_thread

from .helpers import agent_on

PLACES = ["Copenhagen", "Aarhus", "Oslo"]


def place_of(turn: int) -> str:
    """The place the writer looks up in ``turn`` (1-based)."""
    return PLACES[(turn - 1) % len(PLACES)]


@asynccontextmanager
async def opened(where: str) -> AsyncIterator[Any]:
    if where.startswith("postgres"):
        async with open_postgres_saver(where) as saver:
            yield saver
    else:
        async with PruningSqliteSaver.from_conn_string(where) as saver:
            await saver.setup()
            yield saver


async def write(where: str, thread_id: str, count: int) -> None:
    async with opened(where) as saver:
        agent = agent_on(saver, ring_size=0)
        for turn in range(1, count + 1):
            await run_turn(agent, thread_id, f"find {place_of(turn)}")


async def prune(where: str, thread_id: str, count: int) -> None:
    """Prune abandoned branches ``count`` times, as fast as it can."""
    async with opened(where) as saver:
        for _ in range(count):
            await prune_thread(saver, thread_id, drop_abandoned=True)


if __name__ == "__main__":
    command, where, thread, count = sys.argv[1:5]
    asyncio.run({"write": write, "prune": prune}[command](where, thread, int(count)))
