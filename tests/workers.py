"""Processes for the concurrency tests: a writer running turns, a pruner pruning beside it, and
a run resuming an interrupt.

Run as ``python -m tests.workers write|prune <where> <thread_id> <count>``, or ``python -m
tests.workers resume <where> <thread_id> <answer> <barrier directory> <durability>``, where
``<where>`` is a SQLite file or a PostgreSQL DSN. Separate processes, because that is how a
deployment runs a sweeper beside its agents, and because two processes share no lock a test
could lean on.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.retention.prune import prune_thread
from mcp_state_versions.savers.postgres import open_postgres_saver
from mcp_state_versions.savers.sqlite import PruningSqliteSaver

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


async def resume(where: str, thread_id: str, answer: str, barrier: str, durability: str) -> None:
    """Resume the thread's interrupt with ``answer``; the asking tool waits, once answered,
    until every resuming process has loaded the paused checkpoint (``barrier``), so the runs
    overlap. Prints ``stored <value>`` or ``refused <error>``."""
    from mcp_state_versions import ConcurrentResume, entries_of

    from .helpers import ASKED, asking_agent, resume_answer

    async with opened(where) as saver:
        try:
            state = await resume_answer(
                asking_agent(saver, barrier), thread_id, answer, durability=durability
            )
        except ConcurrentResume as refused:
            print(f"refused {refused}", flush=True)
        else:
            print(f"stored {entries_of(state['tool_state'])[ASKED]['value']}", flush=True)


async def resume_one(where: str, thread_id: str, name: str, answer: str) -> None:
    """Resume only the interrupt of :func:`~tests.helpers.two_asks_agent` asking for
    ``name``; prints ``resumed``."""
    from .helpers import resume_named, two_asks_agent

    async with opened(where) as saver:
        await resume_named(two_asks_agent(saver), thread_id, name, answer)
    print("resumed", flush=True)


async def edit_and_run(where: str, thread_id: str, edit: str, text: str) -> None:
    """Another process's operator edit (``k=v``, an ``update_state`` of one key) and then a
    turn saying ``text``, on the thread of :func:`~tests.conversation.agent_graph`; prints
    ``ran``."""
    from .conversation import PUT, agent_graph

    key, value = edit.split("=")
    async with opened(where) as saver:
        graph = agent_graph(saver, 8)
        config = {"configurable": {"thread_id": thread_id}}
        update = {"tool_state": {PUT + key: {"value": value}}}
        await graph.aupdate_state(config, update, as_node="tools")
        await graph.ainvoke({"messages": [("user", text)]}, config)
    print("ran", flush=True)


if __name__ == "__main__":
    command, where, thread, argument = sys.argv[1:5]
    if command == "edit-run":
        asyncio.run(edit_and_run(where, thread, argument, sys.argv[5]))
    elif command == "resume-one":
        asyncio.run(resume_one(where, thread, argument, sys.argv[5]))
    elif command == "resume":
        asyncio.run(resume(where, thread, argument, *sys.argv[5:7]))
    else:
        asyncio.run({"write": write, "prune": prune}[command](where, thread, int(argument)))
