"""The ``Backend`` contract, one spec a capability, on every saver family the backends know.

Each backend reads a saver's storage directly (dicts, SQL). The reference is the contract's
own default, :class:`~mcp_state_versions.backends.base.Backend`, reading the same storage
through a stock LangGraph saver's public API a checkpoint at a time, as it does for a saver
the library does not know. On the same stored threads (several turns, a republished key, a
fork, a pruned thread), every method must give the reference's answer, on the in-memory saver,
SQLite (async and sync) and PostgreSQL (async and sync).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any
from uuid import uuid4

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.backends import (
    ID,
    PARENT,
    SOURCE,
    STAMP,
    UNREAD,
    Backend,
    backend_for,
    stamp_turn,
)
from mcp_state_versions.retention.prune import prune_thread
from mcp_state_versions.savers.memory import PruningInMemorySaver
from mcp_state_versions.savers.postgres import open_postgres_saver
from mcp_state_versions.savers.sqlite import PruningSqliteSaver
from mcp_state_versions.storage.tool_state import NOTHING_STORED
from mcp_state_versions.walk.history import DamagedState

from ..conftest import PG_DSN, _check_postgres
from ..helpers import agent_on, fork_at

FAMILIES = [
    "memory",
    "sqlite",
    "sqlite-sync",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("postgres-sync", marks=pytest.mark.postgres),
]

TURNS = ["find Paris", "find Lyon", "hello", "find Nice", "find Paris"]


@dataclass
class Stored:
    """Threads stored by the library's agent, and two backends over that storage: the one
    :func:`backend_for` picks for the family (``subject``) and the contract's default over a
    stock saver (``reference``)."""

    subject: Backend
    reference: Backend
    threads: list[str] = field(default_factory=list)


async def _store(saver: BaseCheckpointSaver, prefix: str) -> list[str]:
    """A thread of five turns forked at turn 2, and a thread pruned to its last two turns."""
    agent = agent_on(saver)
    forked, pruned = f"{prefix}-forked", f"{prefix}-pruned"
    for text in TURNS:
        await run_turn(agent, forked, text)
        await run_turn(agent, pruned, text)
    await fork_at(agent, forked, 2, "find Rome")
    await prune_thread(saver, pruned, keep_turns=2)
    return [forked, pruned]


@pytest.fixture(params=FAMILIES)
async def stored(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Stored]:
    family: str = request.param
    prefix = f"conformance-{uuid4().hex[:8]}"
    async with AsyncExitStack() as stack:
        with ExitStack() as sync_stack:
            subject, reference = await _open(family, tmp_path, prefix, stack, sync_stack)
            yield Stored(subject, reference, threads=[f"{prefix}-forked", f"{prefix}-pruned"])


async def _open(
    family: str, tmp_path: Any, prefix: str, stack: AsyncExitStack, sync_stack: ExitStack
) -> tuple[Backend, Backend]:
    """The family's backend and the reference over the same storage, threads stored."""
    if family == "memory":
        saver = PruningInMemorySaver()
        await _store(saver, prefix)
        stock = InMemorySaver()
        stock.storage, stock.writes, stock.blobs = saver.storage, saver.writes, saver.blobs
        return backend_for(saver), Backend(stock)
    if family.startswith("sqlite"):
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        path = str(tmp_path / "conformance.sqlite")
        saver = await stack.enter_async_context(PruningSqliteSaver.from_conn_string(path))
        await saver.setup()
        await _store(saver, prefix)
        stock = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(path))
        if family == "sqlite":
            return backend_for(saver), Backend(stock)
        sync_saver = sync_stack.enter_context(SqliteSaver.from_conn_string(path))
        return backend_for(sync_saver, sync=True), Backend(stock)
    await _check_postgres()
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    saver = await stack.enter_async_context(open_postgres_saver(PG_DSN))
    await _store(saver, prefix)
    stock = AsyncPostgresSaver(saver.conn)
    if family == "postgres":
        return backend_for(saver), Backend(stock)
    sync_saver = sync_stack.enter_context(PostgresSaver.from_conn_string(PG_DSN))
    return backend_for(sync_saver, sync=True), Backend(stock)


async def _every_checkpoint(stored: Stored, thread_id: str) -> list[str]:
    return sorted(await stored.reference.checkpoint_ids(thread_id, ""))


def _link(link: Any) -> tuple[Any, ...]:
    """A link's id, parent, turn stamp (as a number: PostgreSQL reads it as text) and source."""
    return (link[ID], link[PARENT], stamp_turn(link[STAMP]), link[SOURCE])


async def _read_stamps(backend: Backend, thread_id: str, links: Any) -> list[Any]:
    """``links`` with any stamp a backend defers (``UNREAD``) read."""
    return [
        await backend.stamp(thread_id, "", link) if link[SOURCE] is UNREAD else link
        for link in links
    ]


async def test_checkpoint_ids_are_every_checkpoint_on_every_branch(stored: Stored) -> None:
    for thread_id in stored.threads:
        found = sorted(await stored.subject.checkpoint_ids(thread_id, ""))
        assert found == await _every_checkpoint(stored, thread_id)
        assert found  # the threads were stored


async def test_lineage_is_every_checkpoint_with_its_parent_stamp_and_source(
    stored: Stored,
) -> None:
    for thread_id in stored.threads:
        links = await stored.subject.lineage(thread_id, "")
        assert links is not None, "every family the backends know reads a lineage"
        found = sorted(_link(link) for link in await _read_stamps(stored.subject, thread_id, links))
        expected = []
        for checkpoint_id in await _every_checkpoint(stored, thread_id):
            link = await stored.reference.parent_of(thread_id, "", checkpoint_id)
            assert link is not None
            expected.append(_link(link))
        assert found == sorted(expected)
        assert any(link[2] is not None for link in found), "run_turn stamps its runs"


async def test_parent_of_and_link_give_each_checkpoint_s_link(stored: Stored) -> None:
    for thread_id in stored.threads:
        for checkpoint_id in await _every_checkpoint(stored, thread_id):
            found = await stored.subject.parent_of(thread_id, "", checkpoint_id)
            expected = await stored.reference.parent_of(thread_id, "", checkpoint_id)
            assert found is not None and expected is not None
            assert _link(found) == _link(expected)
            named = await stored.subject.link(thread_id, "", checkpoint_id)
            assert named is not None and _link(named) == _link(expected)
        assert await stored.subject.parent_of(thread_id, "", "no-such-checkpoint") is None


async def test_head_link_and_run_start_name_the_newest_checkpoint(stored: Stored) -> None:
    for thread_id in stored.threads:
        head = await stored.reference.head(thread_id, "")
        assert head is not None and await stored.subject.head(thread_id, "") == head
        for found in (
            await stored.subject.link(thread_id, ""),
            await stored.subject.run_start(thread_id, ""),
        ):
            assert found is not None and found[ID] == head
            expected = await stored.reference.link(thread_id, "")
            assert expected is not None and _link(found) == _link(expected)
    assert await stored.subject.head("conformance-no-such-thread", "") is None
    assert await stored.subject.link("conformance-no-such-thread", "") is None


async def test_tool_state_and_its_rebuild_are_what_langgraph_rebuilds(stored: Stored) -> None:
    """At every checkpoint of every branch: the value, whether the checkpoint stores it
    whole, and the rebuild from the seed and writes, as the stock saver's own reads give."""
    for thread_id in stored.threads:
        for checkpoint_id in await _every_checkpoint(stored, thread_id):
            expected = await stored.reference.tool_state(thread_id, "", checkpoint_id)
            assert await stored.subject.tool_state(thread_id, "", checkpoint_id) == expected
            found, kept = await stored.subject.stored_tool_state(thread_id, "", checkpoint_id)
            assert (found, kept) == await stored.reference.stored_tool_state(
                thread_id, "", checkpoint_id
            )
            if kept is not NOTHING_STORED:
                continue  # stored whole: nothing to rebuild (a seal rebuilds only the others)
            assert await stored.subject.rebuild(thread_id, "", checkpoint_id) == (
                await stored.reference.rebuild(thread_id, "", checkpoint_id)
            )
    assert await stored.subject.tool_state(stored.threads[0], "", "no-such-checkpoint") == (
        False,
        None,
    )


async def test_values_and_messages_are_what_langgraph_rebuilds(stored: Stored) -> None:
    for thread_id in stored.threads:
        for checkpoint_id in await _every_checkpoint(stored, thread_id):
            found = await stored.subject.values(thread_id, "", checkpoint_id)
            expected = await stored.reference.values(thread_id, "", checkpoint_id)
            assert _ids(found) == _ids(expected)
            assert (found or {}).get("tool_state") == (expected or {}).get("tool_state")
            rebuilt = await stored.subject.rebuild_messages(thread_id, "", checkpoint_id)
            assert [m.id for m in rebuilt or []] == [
                m.id
                for m in await stored.reference.rebuild_messages(thread_id, "", checkpoint_id) or []
            ]


def _ids(values: Any) -> list[str]:
    return [message.id for message in (values or {}).get("messages") or []]


async def test_writes_of_are_each_checkpoint_s_stored_writes(stored: Stored) -> None:
    for thread_id in stored.threads:
        ids = await _every_checkpoint(stored, thread_id)
        found = await stored.subject.writes_of(thread_id, "", ids)
        expected = await stored.reference.writes_of(thread_id, "", ids)
        assert found == expected
        assert any(found.values()), "the turns stored writes of tool_state"


async def test_delete_removes_the_checkpoints_it_names_and_delete_thread_the_rest(
    stored: Stored,
) -> None:
    thread_id = stored.threads[0]
    ids = await _every_checkpoint(stored, thread_id)
    abandoned = [
        checkpoint_id
        for checkpoint_id in ids
        if checkpoint_id not in {link[ID] for link in await _branch(stored.reference, thread_id)}
    ]
    assert abandoned, "the fork left a branch"
    await stored.subject.delete(thread_id, "", abandoned)
    assert await _every_checkpoint(stored, thread_id) == sorted(set(ids) - set(abandoned))
    await stored.subject.delete_thread(thread_id)
    assert await stored.reference.checkpoint_ids(thread_id, "") == []
    assert await stored.reference.head(stored.threads[1], "") is not None  # others stay


async def _branch(backend: Backend, thread_id: str) -> list[Any]:
    """The head's branch, walked a parent at a time (to a parent a prune removed)."""
    links, checkpoint_id = [], await backend.head(thread_id, "")
    while checkpoint_id is not None:
        link = await backend.parent_of(thread_id, "", checkpoint_id)
        if link is None:
            break
        links.append(link)
        checkpoint_id = link[PARENT]
    return links


async def test_a_value_held_as_writes_whose_parent_is_gone_is_damage(stored: Stored) -> None:
    """A checkpoint held as writes since a snapshot needs its parents to be rebuilt. With one
    of them deleted by hand (no prune sealed anything), every backend reports the damage from
    both reads that rebuild, never a value replayed from what is left."""
    thread_id = stored.threads[0]
    branch = await _branch(stored.reference, thread_id)
    held = [
        link
        for link in branch
        if (await stored.reference.stored_tool_state(thread_id, "", link[ID]))[1] is NOTHING_STORED
    ]
    child, doomed = next(
        (child, parent) for child, parent in pairwise(held) if child[PARENT] == parent[ID]
    )
    await stored.subject.delete(thread_id, "", [doomed[ID]])
    with pytest.raises(DamagedState):
        await stored.subject.tool_state(thread_id, "", child[ID])
    with pytest.raises(DamagedState):
        await stored.subject.rebuild(thread_id, "", child[ID])
