"""Retention: LangGraph's conformance suite on all three savers (prune included); prune_thread."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate

from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.retention.prune import prune_thread
from mcp_state_versions.savers.memory import PruningInMemorySaver
from mcp_state_versions.walk.checkpoints import CheckpointHistory

from ..conftest import BACKENDS, open_backend
from ..helpers import agent_on, fork_at


@pytest.mark.parametrize("kind", BACKENDS)
async def test_conformance_suite_passes_with_prune(kind: str, tmp_path: Any) -> None:
    counter = iter(range(1000))

    async def factory() -> Any:
        async with await open_backend(kind, tmp_path, f"{next(counter)}.sqlite") as saver:
            yield saver

    registered = checkpointer_test(name=f"mcp-state-versions-{kind}")(factory)
    report = await validate(registered)
    print(f"\nconformance report, {kind}:")
    for capability, result in report.results.items():
        print(
            f"  {capability}: detected={result.detected} passed={result.passed} "
            f"({result.tests_passed} passed, {result.tests_failed} failed)"
        )
    prune = report.results["prune"]
    assert prune.detected and prune.passed, prune.failures
    failed = {c: r.failures for c, r in report.results.items() if r.passed is False}
    assert not failed, failed


async def test_drop_abandoned_removes_only_other_branches(thread_id: str) -> None:
    saver = PruningInMemorySaver()
    agent = agent_on(saver, ring_size=0)
    for text in ["find Copenhagen", "chat", "find Aarhus"]:
        await run_turn(agent, thread_id, text)
    await fork_at(agent, thread_id, 1, "find Oslo")
    history = CheckpointHistory(saver)
    on_branch = len(await history.branch_checkpoint_ids(thread_id))
    everything = len(await history.checkpoint_ids(thread_id))
    assert everything > on_branch
    result = await prune_thread(saver, thread_id, drop_abandoned=True)
    assert result.deleted == everything - on_branch
    assert result.retained_turns == range(1, 3)
    assert len(await history.checkpoint_ids(thread_id)) == on_branch


async def test_prune_thread_refuses_unclear_requests(thread_id: str) -> None:
    with pytest.raises(ValueError, match="say what to prune"):
        await prune_thread(PruningInMemorySaver(), thread_id)
    with pytest.raises(ValueError, match="keep_turns must be at least 1"):
        await prune_thread(PruningInMemorySaver(), thread_id, keep_turns=0)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_pruner_in_another_process_beside_a_writer_loses_nothing(
    kind: str, tmp_path: Any, thread_id: str
) -> None:
    """A writer runs turns while another process prunes abandoned branches over and over. The
    thread never forked, so nothing may go: every checkpoint stays, and every turn reads."""
    import subprocess
    import sys

    from mcp_state_versions.walk.checkpoints import CheckpointHistory

    from ..conftest import PG_DSN
    from ..workers import place_of

    where = PG_DSN if kind == "postgres" else str(tmp_path / "shared.sqlite")
    turns = 12
    async with await open_backend(kind, tmp_path, "shared.sqlite") as saver:
        agent = agent_on(saver, ring_size=0)
        await run_turn(agent, thread_id, f"find {place_of(1)}")  # the thread exists
        command = [sys.executable, "-m", "tests.workers"]
        writer = subprocess.Popen([*command, "write", where, thread_id, str(turns)])
        pruner = subprocess.Popen([*command, "prune", where, thread_id, "400"])
        assert writer.wait(timeout=300) == 0
        pruner.kill()
        pruner.wait()
        history = CheckpointHistory(saver)
        everything = await history.checkpoint_ids(thread_id)
        assert sorted(await history.branch_checkpoint_ids(thread_id)) == sorted(everything)
        index = await history.turns(thread_id)
        assert index.total == turns + 1 and index.retained == range(1, turns + 2)
        from mcp_state_versions.demo.run import GAZETTEER

        from ..helpers import BBOX

        for turn in range(1, turns + 2):
            snapshot = await history.tool_state_at(thread_id, turn)
            assert snapshot.tool_state is not None, turn
            expected = GAZETTEER[place_of(turn - 1 if turn > 1 else 1).lower()]["bbox"]
            assert snapshot.tool_state[BBOX]["value"] == expected, turn


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_prune_of_one_branch_leaves_every_other_branch_rebuildable(
    kind: str, tmp_path: Any
) -> None:
    """Four turns, then a fork from the end of turn 3 becomes the head. Keeping one turn of
    the head's branch deletes turns 1-3, which the first branch stands on: its first
    remaining checkpoint is sealed, so its turn 4 still reads back whole."""
    from uuid import uuid4

    from ..conversation import PUT, Conversation, agent_graph

    async with await open_backend(kind, tmp_path) as saver:
        conv = Conversation(agent_graph(saver, 0), saver, f"branches-{uuid4().hex[:12]}")
        for turn in range(1, 5):
            await conv.say(f"put k=v{turn} j=w{turn}" if turn == 1 else f"put k=v{turn}")
        first_tip = (await conv.graph.aget_state(conv.config)).config["configurable"]
        await conv.fork(3, "put k=fork")
        await prune_thread(saver, conv.thread_id, keep_turns=1)
        other = CheckpointHistory(saver, checkpoint_id=first_tip["checkpoint_id"])
        present = await other.present(conv.thread_id)
        assert present is not None and present.turn == 4
        assert present.tool_state[PUT + "k"]["value"] == "v4"
        assert present.tool_state[PUT + "j"]["value"] == "w1"  # written in a deleted turn
        head = await CheckpointHistory(saver).present(conv.thread_id)
        assert head is not None and head.tool_state[PUT + "k"]["value"] == "fork"


@pytest.mark.postgres
async def test_the_pool_asks_the_server_only_about_a_connection_it_spoke_to() -> None:
    """A quiet connection is handed out without a round trip; one whose session the server
    ended (its notice and close arrive while it is idle) is replaced, not handed to a query."""
    import psycopg

    from mcp_state_versions.savers.postgres import open_postgres_saver

    from ..conftest import PG_DSN, _check_postgres

    await _check_postgres()
    sent: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return await execute(self, query, *args, **kwargs)

    async with open_postgres_saver(PG_DSN, max_size=1) as saver:
        async with saver._cursor() as cursor:
            await cursor.execute("SELECT pg_backend_pid() AS pid")
            pid = (await cursor.fetchone())["pid"]
        psycopg.AsyncConnection.execute = counted  # type: ignore[method-assign]
        try:
            for _ in range(3):
                async with saver._cursor() as cursor:
                    await cursor.execute("SELECT 1")
            assert "" not in sent, "a quiet connection was checked with a round trip"
            async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as other:
                await other.execute("SELECT pg_terminate_backend(%s)", (pid,))
                gone = "SELECT count(*) FROM pg_stat_activity WHERE pid = %s"
                while (await (await other.execute(gone, (pid,))).fetchone())[0]:
                    await asyncio.sleep(0.01)  # its notice and close reach the idle socket
            async with saver._cursor() as cursor:
                await cursor.execute("SELECT pg_backend_pid() AS pid")
                now = (await cursor.fetchone())["pid"]
            assert now != pid
            assert "" in sent, "the ended connection was not checked"
        finally:
            psycopg.AsyncConnection.execute = execute  # type: ignore[method-assign]


async def test_deletes_fit_sqlite_builds_limited_to_999_variables(tmp_path: Any) -> None:
    """Some SQLite builds bind at most 999 variables a statement: a prune of more checkpoints
    than that, the bytes it counts and a run's writes taken back go in batches, in one
    transaction."""
    import sqlite3

    from mcp_state_versions.backends import backend_for

    async with await open_backend("sqlite", tmp_path) as saver:
        raw = saver.conn._conn
        await saver.conn._execute(raw.setlimit, sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
        agent = agent_on(saver, ring_size=0)
        await run_turn(agent, "limited", "find Copenhagen")
        history = CheckpointHistory(saver)
        real = await history.branch_checkpoint_ids("limited")
        ids = [*real[1:], *(f"absent-{n:05d}" for n in range(1200))]
        backend = backend_for(saver)
        assert await backend.stored_bytes("limited", "", ids) > 0
        await backend.delete_writes("limited", "", real[0], [f"t{n}" for n in range(1200)])
        await backend.delete("limited", "", ids)
        assert await history.branch_checkpoint_ids("limited") == real[:1]


@pytest.mark.postgres
@pytest.mark.parametrize("step", ["delete", "snapshot"])
async def test_a_postgres_change_of_several_statements_is_one_transaction(
    step: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prune's deletes, and a snapshot's two halves, commit together: when the last
    statement fails (as an outage would cut it), the first ones are rolled back, and every
    turn still reads."""
    from uuid import uuid4

    import mcp_state_versions.backends.postgres as postgres
    from mcp_state_versions.backends import backend_for

    async with await open_backend("postgres", tmp_path) as saver:
        agent = agent_on(saver, ring_size=0)
        thread_id = f"atomic-{uuid4().hex}"
        for place in ("Copenhagen", "Aarhus", "Oslo"):
            await run_turn(agent, thread_id, f"find {place}")
        history = CheckpointHistory(saver)
        before = await history.branch_checkpoint_ids(thread_id)
        values = [(await history.tool_state_at(thread_id, t)).tool_state for t in (1, 2, 3)]
        backend = backend_for(saver)
        if step == "delete":
            monkeypatch.setattr(postgres, "_DELETE_UNUSED_BLOBS", "SELECT no_such_column, %s, %s")
            failing = backend.delete(thread_id, "", before[1:])
        else:
            monkeypatch.setattr(postgres, "_UPSERT_SNAPSHOT", "SELECT no_such_column" + ", %s" * 8)
            failing = backend.write_snapshot(thread_id, "", before[2], values[2] or {})
        with pytest.raises(Exception, match="no_such_column"):
            await failing
        if step == "snapshot":  # its counter says it stores no value: still so
            config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
            config["configurable"]["checkpoint_id"] = before[2]
            stored = await saver.aget_tuple(config)
            assert "tool_state" in stored.metadata["counters_since_delta_snapshot"]
        again = CheckpointHistory(saver)
        assert await again.branch_checkpoint_ids(thread_id) == before
        assert [(await again.tool_state_at(thread_id, t)).tool_state for t in (1, 2, 3)] == values


def test_the_async_sqlite_saver_refuses_a_sync_connection_in_words() -> None:
    """A sync app handing it ``sqlite3.connect(...)`` is told what to use, at once, instead of
    a "no running event loop" from inside LangGraph's saver at the first run."""
    import sqlite3

    from mcp_state_versions import PruningSqliteSaver

    with pytest.raises(TypeError, match="use LangGraph's SqliteSaver in a sync app"):
        PruningSqliteSaver(sqlite3.connect(":memory:"))
