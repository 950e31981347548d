"""tool_state stored as writes: what a checkpoint holds, rebuilds on every backend, old threads,
and retention that never leaves a kept checkpoint without what it rebuilds from."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolRuntime

from mcp_state_versions import build_agent, publish
from mcp_state_versions.agent.build import run_turn
from mcp_state_versions.backends import backend_for, forget_histories
from mcp_state_versions.demo.scripted import ScriptedChatModel, call
from mcp_state_versions.retention.prune import prune_thread
from mcp_state_versions.savers.memory import PruningInMemorySaver
from mcp_state_versions.savers.sqlite import PruningSqliteSaver
from mcp_state_versions.state.reducer import make_merge_tool_state, merge_tool_state, reducer_for
from mcp_state_versions.storage.messages import replay_messages
from mcp_state_versions.storage.tool_state import (
    NOTHING_STORED,
    batched,
    replay,
    snapshot,
    stored_value,
)
from mcp_state_versions.walk.checkpoints import CheckpointHistory

from ..conftest import BACKENDS, open_backend
from ..helpers import BBOX, agent_on, answers, count_decodes, fork_at, plain
from ..state.test_reducer import clocked_updates

FIXTURE = Path(__file__).parents[1] / "fixtures" / "previous_release.sqlite"

CPH = [12.4, 55.5, 12.7, 55.8]
AAR = [9.9, 56.1, 10.3, 56.2]
OSL = [10.6, 59.8, 10.9, 60.0]

PREVIOUS_RELEASE = {
    # turn by turn, what each thread of the fixture ended its turns with (read by that release)
    "plain": [CPH, CPH, AAR, AAR, OSL],
    "forked": [CPH, CPH],
    "small-ring": [CPH, AAR, OSL, CPH],
}


def _found(values: list[Any]) -> list[tuple[str, Any]]:
    return [("Found", value) for value in values]


def _kind(stored: Any) -> str:
    if stored is None:
        return "none"
    return "writes" if stored is NOTHING_STORED else type(stored).__name__


async def _checkpoints(agent: Any, thread_id: str) -> list[Any]:
    return [s async for s in agent.aget_state_history({"configurable": {"thread_id": thread_id}})]


def test_batched_is_one_function_per_reducer_and_folds_in_order() -> None:
    assert batched(merge_tool_state) is batched(merge_tool_state)
    fold = batched(merge_tool_state)
    writes = [{"a/b/c": {"value": 1}}, {"a/b/c": {"value": 2}}, {"a/b/d": {"value": 3}}]
    stepwise: dict[str, Any] = {}
    for write in writes:
        stepwise = merge_tool_state(stepwise, write)
    assert fold(None, writes) == stepwise
    assert fold(fold({}, writes[:1]), writes[1:]) == fold({}, writes)


def test_stored_value_tells_a_snapshot_a_whole_value_and_nothing_apart() -> None:
    value = {"a/b/c": {"value": 1}}
    assert stored_value(snapshot(value)) == value
    assert stored_value(value) is value
    assert stored_value(None) is NOTHING_STORED
    assert replay(snapshot(value), []) == value


def test_replay_merges_with_the_bounds_the_state_records() -> None:
    narrow = make_merge_tool_state(ring_size=0, budget_bytes=1000)
    state = narrow({}, {"a/b/c": {"value": 1, "turn": 1}})
    assert reducer_for(state) is not merge_tool_state
    later = [{"a/b/c": {"value": 2, "turn": 2}}, {"a/b/c": {"value": 3, "turn": 3}}]
    expected = state
    for write in later:
        expected = narrow(expected, write)
    assert replay(state, later) == expected
    assert replay(state, later)["a/b/c"]["ring"][-1].get("value") is None  # ring 0 kept
    assert reducer_for({}) is merge_tool_state


@pytest.mark.parametrize("kind", BACKENDS)
async def test_checkpoints_hold_writes_and_every_one_rebuilds_as_langgraph_does(
    kind: str, tmp_path: Any, thread_id: str
) -> None:
    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver, ring_size=1, snapshot_frequency=4)
        for text in ["find Copenhagen", "find Aarhus", "hi", "find Oslo", "find Copenhagen"]:
            await run_turn(agent, thread_id, text)
        await fork_at(agent, thread_id, 2, "find Oslo")
        backend = backend_for(saver)
        kinds: set[str] = set()
        for state in await _checkpoints(agent, thread_id):
            checkpoint_id = state.config["configurable"]["checkpoint_id"]
            _, stored = await backend.stored_tool_state(thread_id, "", checkpoint_id)
            kinds.add(_kind(stored))
            _, rebuilt = await backend.tool_state(thread_id, "", checkpoint_id)
            # (LangGraph shows a delta channel never written as {}; the library reads None)
            assert (rebuilt or {}) == state.values.get("tool_state"), checkpoint_id
        assert kinds == {"none", "writes", "_DeltaSnapshot"}
        history = CheckpointHistory(saver)
        assert [plain(a) for a in await answers(agent, thread_id, history)] == _found(
            [CPH, AAR, OSL]
        )


async def test_threads_of_the_previous_release_read_right_and_go_on(tmp_path: Any) -> None:
    path = tmp_path / "previous.sqlite"
    shutil.copy(FIXTURE, path)
    for _ in range(2):  # as found, then after new turns and a reopen
        async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
            agent = agent_on(saver)
            history = CheckpointHistory(saver)
            for thread_id, expected in PREVIOUS_RELEASE.items():
                got = [plain(a) for a in await answers(agent, thread_id, history)]
                assert got[: len(expected)] == _found(expected), thread_id
                small = agent_on(saver, ring_size=0)
                await run_turn(
                    small if thread_id == "small-ring" else agent, thread_id, "find Oslo"
                )
                got = [plain(a) for a in await answers(agent, thread_id, history)]
                assert got[len(expected)] == ("Found", OSL), thread_id
        for thread_id in PREVIOUS_RELEASE:
            PREVIOUS_RELEASE[thread_id] = [*PREVIOUS_RELEASE[thread_id], OSL]
    # the lineage is mixed: whole values first, writes after
    async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
        backend = backend_for(saver)
        stored = [
            (
                await backend.stored_tool_state(
                    "plain", "", s.config["configurable"]["checkpoint_id"]
                )
            )[1]
            for s in await _checkpoints(agent_on(saver), "plain")
        ]
        assert NOTHING_STORED in stored[:5]
        assert isinstance(stored[-3], dict)


@pytest.mark.parametrize("kind", BACKENDS)
async def test_prune_keeps_what_each_retained_turn_rebuilds_from(
    kind: str, tmp_path: Any, thread_id: str
) -> None:
    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver, ring_size=0, snapshot_frequency=1000)  # no snapshot at all
        texts = ["find Copenhagen", "find Aarhus", "find Oslo", "find Copenhagen", "find Aarhus"]
        for text in texts:
            await run_turn(agent, thread_id, text)
        config = {"configurable": {"thread_id": thread_id}}
        before = (await agent.aget_state(config)).values["tool_state"]
        result = await prune_thread(saver, thread_id, keep_turns=2)
        assert result.retained_turns == range(4, 6)
        assert (await agent.aget_state(config)).values["tool_state"] == before
        history = CheckpointHistory(saver)
        got = [plain(a) for a in await answers(agent, thread_id, history)]
        assert got[3:] == _found([CPH, AAR])
        assert [name for name, _ in got[:3]] == ["NotRetained"] * 3
        await run_turn(agent, thread_id, "find Oslo")
        got = [plain(a) for a in await answers(agent, thread_id, history)]
        assert got[3:] == _found([CPH, AAR, OSL])


@pytest.mark.parametrize("kind", BACKENDS)
async def test_keep_latest_never_empties_tool_state(
    kind: str, tmp_path: Any, thread_id: str
) -> None:
    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver, snapshot_frequency=1000)
        for text in ["find Copenhagen", "find Aarhus", "find Oslo"]:
            await run_turn(agent, thread_id, text)
        config = {"configurable": {"thread_id": thread_id}}
        before = (await agent.aget_state(config)).values
        await saver.aprune([thread_id], strategy="keep_latest")
        assert len(await _checkpoints(agent, thread_id)) == 1
        after = (await agent.aget_state(config)).values
        assert after["tool_state"] == before["tool_state"]
        assert [m.id for m in after["messages"]] == [m.id for m in before["messages"]]
        assert before["tool_state"][BBOX]["value"] == OSL
        await run_turn(agent, thread_id, "find Aarhus")  # and the thread goes on from there
        assert (await agent.aget_state(config)).values["tool_state"][BBOX]["versions"] == 4


async def _copied(source: Any, target: Any, suffix: str = "") -> None:
    """Every checkpoint of ``source`` put into ``target`` as it was stored, oldest first, with
    its writes (a thread of the previous release, in a saver that never ran it), each thread's
    id followed by ``suffix``."""
    for found in reversed([t async for t in source.alist(None)]):
        configurable = found.config["configurable"]
        parent = (found.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        thread = f"{configurable['thread_id']}{suffix}"
        config = {"configurable": {**configurable, "thread_id": thread, "checkpoint_id": parent}}
        versions = found.checkpoint["channel_versions"]
        saved = await target.aput(config, found.checkpoint, found.metadata, versions)
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in found.pending_writes or []:
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            await target.aput_writes(saved, writes, task_id)


@pytest.mark.parametrize("channel", ["tool_state", "messages"])
@pytest.mark.parametrize("kind", [*BACKENDS, "sqlite, indexed by an earlier release"])
async def test_the_savers_delta_history_of_tool_state_is_the_stock_read_done_cheaply(
    kind: str, channel: str, tmp_path: Any, thread_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What PruningInMemorySaver, PruningSqliteSaver and open_postgres_saver's saver (and the
    walk, on any such saver) read for tool_state's delta history, and for messages', is what
    the stock saver reads, checkpoint by checkpoint: on a forked thread with snapshots, on
    threads of the previous release (messages stored whole, then as writes), and after a
    prune sealed a checkpoint. A run start's read of either is one statement. A SQLite file
    indexed by an earlier release (no index of whole values) is read alike."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from mcp_state_versions.backends.sqlite import WHOLE_INDEX_NAME

    path = tmp_path / "previous.sqlite"
    shutil.copy(FIXTURE, path)
    sqlite = kind.startswith("sqlite")
    suffix = "" if sqlite else f"-{thread_id}"  # PostgreSQL's threads outlive a run
    async with (
        PruningSqliteSaver.from_conn_string(str(path)) as previous,
        await open_backend("sqlite" if sqlite else kind, tmp_path) as saver,
    ):
        if sqlite:
            saver = previous
            if kind != "sqlite":
                await previous.setup()
                await previous.conn.execute(f"DROP INDEX {WHOLE_INDEX_NAME}")
                del previous._mcp_state_versions_indexes  # as a reader opening it finds it
        else:
            await _copied(previous, saver, suffix)

        async def stock(config: Any) -> Any:
            if kind == "memory":  # its async read calls the sync one, which is overridden
                return InMemorySaver.get_delta_channel_history(
                    saver, config=config, channels=[channel]
                )
            if kind == "postgres":
                from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

                return await AsyncPostgresSaver.aget_delta_channel_history(
                    saver, config=config, channels=[channel]
                )
            return await AsyncSqliteSaver.aget_delta_channel_history(
                saver, config=config, channels=[channel]
            )

        agent = agent_on(saver, ring_size=1, snapshot_frequency=3)
        for text in ["find Copenhagen", "find Aarhus", "hi", "find Oslo", "find Copenhagen"]:
            await run_turn(agent, thread_id, text)
        await fork_at(agent, thread_id, 2, "find Oslo")
        await run_turn(agent, f"plain{suffix}", "find Aarhus")
        await prune_thread(saver, f"small-ring{suffix}", keep_turns=2)
        compared = 0
        forget_histories(saver)  # read from storage, as after a restart
        for thread in (
            thread_id,
            *(f"{name}{suffix}" for name in ("plain", "forked", "small-ring")),
        ):
            for state in await _checkpoints(agent, thread):
                config = state.config
                ours = (await saver.aget_delta_channel_history(config=config, channels=[channel]))[
                    channel
                ]
                theirs = (await stock(config))[channel]
                assert [w[:2] for w in ours["writes"]] == [w[:2] for w in theirs["writes"]]
                assert [w[2] for w in ours["writes"]] == [w[2] for w in theirs["writes"]]
                assert ("seed" in ours) == ("seed" in theirs)
                if "seed" in ours:
                    assert stored_value(ours["seed"]) == stored_value(theirs["seed"])
                compared += 1
                if ours["writes"] and "seed" in ours:
                    replayed = config  # one with a seed and writes after it
        assert compared > 60
        # the thread's newest checkpoint when none is named, as LangGraph's own read
        newest = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        ours = await saver.aget_delta_channel_history(config=newest, channels=[channel])
        assert ours == await stock(newest)
        if kind != "memory":  # one query at a run start: the stock read takes two or more
            from mcp_state_versions.backends.postgres import PostgresBackend
            from mcp_state_versions.backends.sqlite import SqliteBackend

            backend: Any = SqliteBackend if sqlite else PostgresBackend
            sent: list[str] = []
            rows = backend._rows

            async def counted(self: Any, sql: str, params: Any) -> Any:
                sent.append(sql)
                return await rows(self, sql, params)

            monkeypatch.setattr(backend, "_rows", counted)
            forget_histories(saver)
            await saver.aget_delta_channel_history(config=replayed, channels=[channel])
            assert len(sent) == 1, sent
            if sqlite:  # the climb asks the index of whole values where the file has it
                assert (WHOLE_INDEX_NAME in sent[0]) == (kind == "sqlite")
            if channel == "messages":  # a rebuild (a seal, a reader's) reads it the same way
                sent.clear()
                forget_histories(saver)
                where = replayed["configurable"]
                rebuilt = await backend_for(saver).rebuild_messages(
                    where["thread_id"], where["checkpoint_ns"], where["checkpoint_id"]
                )
                assert len(sent) == 1, sent
                theirs = (await stock(replayed))[channel]
                seed = stored_value(theirs.get("seed"))
                base = [] if seed is NOTHING_STORED else list(seed)
                assert rebuilt == replay_messages(base, [w[2] for w in theirs["writes"]])
        if sqlite:
            async with saver.conn.execute(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = ?", (WHOLE_INDEX_NAME,)
            ) as cursor:
                (held,) = await cursor.fetchone()
            assert held == (kind == "sqlite")  # a read never makes it


async def test_a_run_start_in_memory_decodes_the_writes_and_no_checkpoint_but_the_seeds(
    thread_id: str,
) -> None:
    """The stock in-memory read decodes every checkpoint back to the snapshot at every run
    start; PruningInMemorySaver's reads the checkpoints' delta counters (parsed once per
    checkpoint) and decodes the writes, the seed's checkpoint and the seed."""
    saver = PruningInMemorySaver()
    agent = agent_on(saver, snapshot_frequency=1000)
    for turn in range(12):
        await run_turn(agent, thread_id, "find Aarhus" if turn % 2 else "find Oslo")
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    decoded = count_decodes(saver)
    forget_histories(saver)  # what a run start reads with no earlier read to go on
    found = await saver.aget_delta_channel_history(config=config, channels=["tool_state"])
    first, decoded[:] = len(decoded), []
    forget_histories(saver)
    again = await saver.aget_delta_channel_history(config=config, channels=["tool_state"])
    assert again == found and len(found["tool_state"]["writes"]) > 12
    writes = len(found["tool_state"]["writes"])
    assert writes <= len(decoded) <= writes + 2 < first
    decoded[:] = []
    # (the stock async read calls the sync one, which the saver overrides: call that directly)
    InMemorySaver.get_delta_channel_history(saver, config=config, channels=["tool_state"])
    assert len(decoded) > writes + 12 * 4  # and every checkpoint on the way


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_run_start_reads_only_the_writes_since_the_last_one(
    kind: str, tmp_path: Any, thread_id: str
) -> None:
    """A run start reads tool_state's delta history up to the checkpoint the last run start
    read it at, and takes the rest from that read: what it decodes is the writes since then,
    not every write since the snapshot. The history is the one a fresh read gives, and a run
    on another branch, which never passes that checkpoint, reads its own in full."""
    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver, snapshot_frequency=1000)
        for turn in range(12):
            await run_turn(agent, thread_id, "find Aarhus" if turn % 2 else "find Oslo")
        head = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        config = (await saver.aget_tuple(head)).config
        decoded = count_decodes(saver)
        found = await saver.aget_delta_channel_history(config=config, channels=["tool_state"])
        assert len(found["tool_state"]["writes"]) > 24 and len(decoded) < 12  # one turn's
        forget_histories(saver)
        decoded.clear()
        fresh = await saver.aget_delta_channel_history(config=config, channels=["tool_state"])
        assert len(decoded) >= len(fresh["tool_state"]["writes"]) > 12
        assert [w[:2] for w in found["tool_state"]["writes"]] == [
            w[:2] for w in fresh["tool_state"]["writes"]
        ]
        assert [w[2] for w in found["tool_state"]["writes"]] == [
            w[2] for w in fresh["tool_state"]["writes"]
        ]
        assert ("seed" in found["tool_state"]) == ("seed" in fresh["tool_state"])
        await fork_at(agent, thread_id, 3, "find Copenhagen")  # another branch, read in full
        forked = (await saver.aget_tuple(head)).config
        ours = await saver.aget_delta_channel_history(config=forked, channels=["tool_state"])
        forget_histories(saver)
        theirs = await saver.aget_delta_channel_history(config=forked, channels=["tool_state"])
        assert [w[:2] for w in ours["tool_state"]["writes"]] == [
            w[:2] for w in theirs["tool_state"]["writes"]
        ]
        state = (await agent.aget_state(head)).values["tool_state"]
        assert state[BBOX]["value"] == CPH


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_run_turn_reads_the_head_and_its_history_in_one_round_trip(
    kind: str, tmp_path: Any, thread_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_turn's read of the head (for its turn stamp) is the head's link on every backend.
    On SQLite and PostgreSQL, with the library's saver, the same statement brings tool_state's
    history at the head and remembers it, so the run's own read at its start sends nothing:
    one round trip where there were two. That history is the one a fresh read gives. A stock
    saver reads the link alone and remembers nothing; a thread without checkpoints has no
    head."""
    from mcp_state_versions import backends

    async with await open_backend(kind, tmp_path) as saver:
        backend = backend_for(saver)
        assert await backend.run_start(thread_id, "") is None
        assert backends.known_history(saver, thread_id, "") is None
        agent = agent_on(saver, snapshot_frequency=1000)
        for text in ["find Oslo", "find Aarhus", "hi", "find Oslo"]:
            await run_turn(agent, thread_id, text)
        sent: list[str] = []
        if kind != "memory":  # (which reads its dicts: no statements to count)
            from mcp_state_versions.backends.postgres import PostgresBackend
            from mcp_state_versions.backends.sqlite import SqliteBackend

            sql_backend: Any = SqliteBackend if kind == "sqlite" else PostgresBackend
            rows = sql_backend._rows

            async def counted(self: Any, sql: str, params: Any) -> Any:
                sent.append(sql)
                return await rows(self, sql, params)

            monkeypatch.setattr(sql_backend, "_rows", counted)
        for remembered in (False, True):  # from nothing remembered, then from the head itself
            if not remembered:
                forget_histories(saver)
            sent.clear()
            head = await backend.run_start(thread_id, "")
            assert len(sent) == (0 if kind == "memory" else 1)
            assert head is not None and head == await backend.link(thread_id, "")
            assert head.source == "loop" and head.stamp in (4, "4")
            config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
            config["configurable"]["checkpoint_id"] = head.checkpoint_id
            sent.clear()
            found = await saver.aget_delta_channel_history(config=config, channels=["tool_state"])
            assert sent == []  # served from what run_start remembered
            forget_histories(saver)
            fresh = await saver.aget_delta_channel_history(config=config, channels=["tool_state"])
            ours, theirs = found["tool_state"], fresh["tool_state"]
            assert len(ours["writes"]) > 8
            assert [w[:2] for w in ours["writes"]] == [w[:2] for w in theirs["writes"]]
            assert [w[2] for w in ours["writes"]] == [w[2] for w in theirs["writes"]]
            assert ("seed" in ours) == ("seed" in theirs)
        if kind != "memory":
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            stock: Any = (
                AsyncSqliteSaver(saver.conn) if kind == "sqlite" else AsyncPostgresSaver(saver.conn)
            )
            sent.clear()
            assert await backend_for(stock).run_start(thread_id, "") == head
            assert [sql for sql in sent if "RECURSIVE" in sql] == []
            assert backends.known_history(stock, thread_id, "") is None


def test_remembered_histories_share_one_budget_least_recently_read_out_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A saver's remembered run-start histories stay within KNOWN_BYTES together: the least
    recently read give way first, the one just read is kept even alone over the budget, and a
    forgotten thread's bytes are free again."""
    from types import SimpleNamespace

    from mcp_state_versions import backends

    monkeypatch.setattr(backends.known, "KNOWN_BYTES", 100)
    saver = SimpleNamespace()

    def remember(thread: str, size: int) -> None:
        backends.remember_history(saver, thread, "", f"at-{thread}", {"writes": []}, size)

    def kept() -> set[str]:
        return {t for t in "abcdefg" if backends.known_history(saver, t, "") is not None}

    remember("a", 40)
    remember("b", 40)
    remember("a", 40)  # read again: now the most recent
    remember("c", 40)  # 120 bytes: b, the least recently read, gives way
    assert kept() == {"a", "c"}
    assert backends.known_history(saver, "c", "") == backends.Known("at-c", {"writes": []}, 40)
    remember("d", 500)  # over the budget alone: kept, and everything else gives way
    assert kept() == {"d"}
    forget_histories(saver, "d")
    remember("e", 60)
    remember("f", 40)  # 100 bytes: within the budget once d's are free
    assert kept() == {"e", "f"}
    forget_histories(saver)
    assert kept() == set()


async def test_what_memory_parses_once_per_checkpoint_goes_with_the_checkpoint(
    thread_id: str,
) -> None:
    """The links and versions PruningInMemorySaver parses once per checkpoint are dropped when
    a prune deletes the checkpoint or the thread is deleted (a long-running process would
    otherwise keep them for every thread it ever ran)."""
    saver = PruningInMemorySaver()
    agent = agent_on(saver)
    for text in ["find Copenhagen", "find Aarhus", "find Oslo", "find Aarhus"]:
        await run_turn(agent, thread_id, text)
    await answers(agent, thread_id, CheckpointHistory(saver))  # the walk parses every link

    def parsed() -> set[str]:
        caches = [
            saver.__dict__.get(name, {})
            for name in ("_mcp_state_versions_links", "_mcp_state_versions_tool_state_versions")
        ]
        return {key[2] for cache in caches for key in cache if key[0] == thread_id}

    assert len(parsed()) > 10
    await prune_thread(saver, thread_id, keep_turns=1)
    kept = {s.config["configurable"]["checkpoint_id"] for s in await _checkpoints(agent, thread_id)}
    assert parsed() and parsed() <= kept
    await saver.adelete_thread(thread_id)
    assert parsed() == set()


def test_a_writers_identity_is_checked_live_and_trusted_in_a_replay() -> None:
    from mcp_state_versions.state.reducer import ToolStateError
    from mcp_state_versions.state.versions import canonical

    digest, size = canonical("x" * 2000)
    good = {"t/a/b": {"value": "x" * 2000, "digest": digest, "size": size}}
    assert merge_tool_state({}, good)["t/a/b"]["digest"] == digest
    with pytest.raises(ToolStateError, match="does not match its value"):
        merge_tool_state({}, {"t/a/b": {"value": "y", "digest": digest, "size": size}})
    with pytest.raises(ToolStateError, match="does not match its value"):
        merge_tool_state({}, {"t/a/b": {"value": "x" * 2000, "size": 3}})
    assert replay(None, [good]) == batched(merge_tool_state)({}, [good])


@settings(max_examples=150, deadline=None)
@given(clocked_updates(), st.data())
def test_a_replay_of_stored_writes_is_what_the_live_merges_made(
    updates: list[dict[str, Any]], data: st.DataObject
) -> None:
    """The run-start fold (no validation, identities as stored) equals the live one, whatever
    the batching, with some writes carrying their identity as publish writes them; and a
    batch folded at once equals its updates merged one by one."""
    from mcp_state_versions.state.versions import canonical
    from mcp_state_versions.storage.tool_state import replayed

    stored = []
    for update in updates:
        written = {}
        for key, write in update.items():
            if key != "__clock__" and data.draw(st.booleans()):
                digest, size = canonical(write["value"])
                write = {**write, "digest": digest, "size": size}
            written[key] = write
        stored.append(written)
    live = batched(merge_tool_state)({}, stored)
    one_by_one: dict[str, Any] = {}
    for update in stored:
        one_by_one = merge_tool_state(one_by_one, update)
    assert live == one_by_one  # a batch opens the clock's books once, with the same result
    cut = data.draw(st.integers(0, len(stored)))
    assert (
        replayed(merge_tool_state)(replayed(merge_tool_state)({}, stored[:cut]), stored[cut:])
        == live
    )


@pytest.mark.parametrize("kind", BACKENDS)
async def test_the_walk_rebuilds_from_its_lineage_what_the_backend_rebuilds(
    kind: str, tmp_path: Any, thread_id: str
) -> None:
    """The walk rebuilds a checkpoint from the lineage it has read (the delta counters tell it
    where the nearest whole value is) and from a neighbour it rebuilt already; both equal the
    backend's own rebuild, on a forked thread with snapshots, edits, and a prune's seal."""
    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver, ring_size=1, snapshot_frequency=3)
        for text in ["find Copenhagen", "find Aarhus", "hi", "find Oslo", "find Copenhagen"]:
            await run_turn(agent, thread_id, text)
        config = {"configurable": {"thread_id": thread_id}}
        await agent.aupdate_state(config, {"tool_state": {BBOX: {"value": [0, 0, 1, 1]}}})
        await fork_at(agent, thread_id, 3, "find Oslo")
        await run_turn(agent, thread_id, "find Aarhus")
        await prune_thread(saver, thread_id, keep_turns=2)
        history = CheckpointHistory(saver)
        backend = history.backend
        chain = await history._chain(thread_id)
        expected = [(await backend.tool_state(thread_id, "", link[0]))[1] for link in chain.links]
        for index in range(len(chain.links)):  # each from scratch: the lineage's way
            fresh = await history._chain(thread_id)
            assert await fresh.tool_state(index) == expected[index], index
        for index in reversed(range(len(chain.links))):  # oldest first: each from its neighbour
            assert await chain.tool_state(index) == expected[index], index


async def test_a_write_stores_only_what_the_reducer_does_not_already_know(
    thread_id: str,
) -> None:
    """A key's first write names its tool; a rewrite of it stores the value alone (the entry
    names the tool, the clock places it), and the clock stores message marks, not ids. What
    each turn ended with, tool included, reads back as written."""

    from mcp_state_versions.state.clock import CLOCK_KEY

    saver = InMemorySaver()
    agent = agent_on(saver)
    for text in ["find Copenhagen", "find Aarhus"]:
        await run_turn(agent, thread_id, text)
    stored = [
        saver.serde.loads_typed(write[2])
        for (thread, _, _), writes in sorted(saver.writes.items(), key=lambda item: item[0][2])
        if thread == thread_id
        for write in writes.values()
        if write[1] == "tool_state"
    ]
    bboxes = [write[BBOX] for write in stored if BBOX in write]
    assert bboxes == [{"value": CPH, "tool": "get_aoi"}, {"value": AAR}]
    clock = [write[CLOCK_KEY] for write in stored if CLOCK_KEY in write]
    assert [len(tick.get("message") or tick["seen"]) for tick in clock] == [12] * len(clock)
    state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
    assert state["tool_state"][BBOX]["tool"] == "get_aoi"
    assert [plain(a) for a in await answers(agent, thread_id, CheckpointHistory(saver))] == [
        ("Found", CPH),
        ("Found", AAR),
    ]


def test_a_snapshot_is_due_by_the_bytes_or_the_writes_since_the_seed() -> None:
    """ToolStateChannel's cadence: due (1) once the writes since its seed reach SNAPSHOT_RATIO
    times the state's size or its cap (snapshot_frequency) in key writes, then counted from
    there again; otherwise the cap it was given."""
    import typing

    import ormsgpack

    from mcp_state_versions.storage.channels import tool_state_channel
    from mcp_state_versions.storage.tool_state import SNAPSHOT_RATIO

    narrow = make_merge_tool_state(ring_size=0)  # the size is the current values alone
    spec = typing.get_args(tool_state_channel(narrow, 777))[1]
    seed = narrow({}, {"t/a/b": {"value": "x" * 10_000}})
    channel = spec.from_checkpoint(snapshot(seed))
    assert channel.snapshot_frequency == 777  # nothing written since the seed
    state, writes = seed, 0
    while True:
        state = narrow(state, {"t/a/b": {"value": f"{writes}" + "y" * 10_000}})
        writes += 1
        channel.value = state
        if channel.snapshot_frequency == 1:
            break
        assert writes < 10
    record, base = state["__clock__"], seed["__clock__"]
    size = len(ormsgpack.packb(state))  # what the snapshot stores, as measured when nearly due
    since = record["written"] - base["written"]
    last = 10_001 + len(str(writes - 1)) + len("t/a/b") + 10  # as the reducer counts a write
    assert since - last < SNAPSHOT_RATIO * size <= since  # due at the first write past it
    assert channel.snapshot_frequency == 1  # asked again, nothing written: the same answer
    channel.value = narrow(state, {"t/a/b": {"value": "z"}})
    assert channel.snapshot_frequency == 777  # and counted from there again
    # a large state written to a bit at a time: the writes' count, not their bytes, calls it
    state = narrow({}, {"t/a/big": {"value": "x" * 1_000_000}})
    small = spec.from_checkpoint(snapshot(state))
    for n in range(777 - 1):
        state = narrow(state, {"t/a/b": {"value": n % 2}})
    small.value = state
    assert small.snapshot_frequency == 777  # one short of a replay's worth of writes
    small.value = narrow(state, {"t/a/b": {"value": 7}})
    assert small.snapshot_frequency == 1  # the cap's worth of tiny writes: a replay's worth
    assert small.snapshot_frequency == 1  # however often it is asked
    copied = small.copy()
    copied.value = narrow(small.value, {"t/a/b": {"value": 8}})
    assert copied.snapshot_frequency == 777  # the copy carries the new base


def test_a_channel_answers_the_cadence_the_same_however_often_it_is_asked() -> None:
    """LangGraph asks twice at ``durability="exit"``; both channels answer as they did while
    nothing was written since, "due" included."""
    import typing

    from mcp_state_versions.storage.channels import messages_channel
    from mcp_state_versions.storage.messages import MIN_SNAPSHOT_MESSAGES

    spec = typing.get_args(messages_channel("delta"))[1]
    channel = spec.from_checkpoint(None)
    answers = []
    for n in range(4 * MIN_SNAPSHOT_MESSAGES):
        channel.update([[HumanMessage(f"m{n}", id=f"m{n}")]])
        answers.append((channel.snapshot_frequency, channel.snapshot_frequency))
    assert all(first == second for first, second in answers)
    assert (1, 1) in answers


def test_the_cadence_counts_what_a_snapshot_really_stores_rings_included() -> None:
    """Small values rewritten every turn fill their rings, so a snapshot stores more than the
    per-entry estimate says; the cadence measures it before calling a snapshot due, and the
    writes since the seed then reach SNAPSHOT_RATIO times what the snapshot really stores."""
    import typing

    import ormsgpack

    from mcp_state_versions.storage.channels import tool_state_channel
    from mcp_state_versions.storage.tool_state import _ENTRY_BYTES, SNAPSHOT_RATIO

    wide = make_merge_tool_state(ring_size=8)
    spec = typing.get_args(tool_state_channel(wide, 10**6))[1]
    state = wide({}, {f"t/a/k{i}": {"value": "v" * 198, "turn": 1} for i in range(5)})
    channel = spec.from_checkpoint(snapshot(state))
    base = state["__clock__"]["written"]
    for turn in range(2, 500):
        update = {f"t/a/k{i}": {"value": f"{turn:04}" + "w" * 194, "turn": turn} for i in (0, 1)}
        state = wide(state, update)
        channel.value = state
        if channel.snapshot_frequency == 1:
            break
    else:
        raise AssertionError("no snapshot came due")
    real = len(ormsgpack.packb(state))
    estimate = state["__clock__"]["bytes"] + _ENTRY_BYTES * len(state)
    assert estimate < real  # the estimate alone would have called it early
    assert state["__clock__"]["written"] - base >= SNAPSHOT_RATIO * real * 0.95


async def test_a_thread_takes_snapshots_by_what_it_writes(thread_id: str) -> None:
    """With the step cap (1,000 updates) far away, a key rewritten each turn still gets
    snapshots every few turns, so a run start replays a few turns' writes, not the thread's."""

    saver = PruningInMemorySaver()
    agent = agent_on(saver, snapshot_frequency=1000)
    texts = ["find Copenhagen", "find Aarhus", "find Oslo"] * 14
    for text in texts:
        await run_turn(agent, thread_id, text)
    backend = backend_for(saver)
    stored = [
        (await backend.stored_tool_state(thread_id, "", s.config["configurable"]["checkpoint_id"]))[
            1
        ]
        for s in await _checkpoints(agent, thread_id)
    ]
    assert sum(type(value).__name__ == "_DeltaSnapshot" for value in stored) >= 2


async def test_a_thread_rewriting_a_few_of_many_values_takes_no_snapshot_before_its_cadence(
    thread_id: str,
) -> None:
    """A hundred values published in turn 1, then two rewritten a turn: turn 1 snapshots its
    catalogue, and the next snapshot is due by the bytes (three times a snapshot's size, some
    two hundred turns on) or the cap, not at a run start that replays the writes since turn 1
    as if one step had written them (it did, every thirty turns or so)."""

    @tool
    def refresh(turn: int, runtime: ToolRuntime) -> Any:
        """Publish a hundred fields; two of them change every turn."""
        fields = {f"f{n}": f"{turn if n < 2 else 0}:" + "x" * 196 for n in range(100)}
        return publish(runtime, "t", "refresh", fields)

    def respond(messages: Any) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            turn = int(str(last.content).split()[-1])
            return AIMessage("", tool_calls=[call("refresh", f"r{len(messages)}", turn=turn)])
        return AIMessage("ok")

    saver = PruningInMemorySaver()
    agent = build_agent(ScriptedChatModel(respond=respond), [refresh], checkpointer=saver)
    for turn in range(1, 46):
        await run_turn(agent, thread_id, f"refresh {turn}")
    backend = backend_for(saver)
    kinds = [
        _kind(
            (
                await backend.stored_tool_state(
                    thread_id, "", s.config["configurable"]["checkpoint_id"]
                )
            )[1]
        )
        for s in await _checkpoints(agent, thread_id)
    ]
    assert kinds.count("_DeltaSnapshot") == 1  # turn 1's, and none since


def test_a_step_that_publishes_a_catalogue_is_snapshotted_at_once() -> None:
    """BULK_WRITES key writes in one step, with a third of a snapshot's bytes, are due at once (so
    they are not replayed at every run start after it); fewer in the step are not."""
    import typing

    from mcp_state_versions.storage.channels import tool_state_channel
    from mcp_state_versions.storage.tool_state import BULK_WRITES

    spec = typing.get_args(tool_state_channel(merge_tool_state, 777))[1]
    seed = merge_tool_state({}, {"t/a/seed": {"value": "x"}})
    channel = spec.from_checkpoint(snapshot(seed))
    few = {f"t/a/k{n}": {"value": "v" * 200} for n in range(BULK_WRITES - 1)}
    channel.value = merge_tool_state(seed, few)
    assert channel.snapshot_frequency == 777  # one short of a catalogue
    catalogue = {f"t/b/k{n}": {"value": "w" * 200} for n in range(BULK_WRITES * 4)}
    channel.value = merge_tool_state(channel.value, catalogue)
    assert channel.snapshot_frequency == 1
    channel.value = merge_tool_state(channel.value, {"t/a/seed": {"value": "y"}})
    assert channel.snapshot_frequency == 777  # a small step after it is counted from there


def test_writes_replayed_at_a_run_start_are_not_one_step_s_catalogue() -> None:
    """A run start replays the writes of many earlier steps; the step after it has written two
    values, not all of those, so no catalogue snapshot is due (the bytes and the cap still
    count every write since the seed)."""
    import typing

    from mcp_state_versions.storage.channels import tool_state_channel
    from mcp_state_versions.storage.tool_state import BULK_WRITES

    narrow = make_merge_tool_state(ring_size=0)
    spec = typing.get_args(tool_state_channel(narrow, 777))[1]
    seed = narrow({}, {f"t/a/k{n}": {"value": "v" * 200} for n in range(200)})
    channel = spec.from_checkpoint(snapshot(seed))
    state, writes = seed, []
    for turn in range(60):  # 120 key writes, 24 KB: a third of the state's size and more
        update = {f"t/a/k{n}": {"value": f"{turn:03}" + "w" * 197} for n in (0, 1)}
        state = narrow(state, update)
        writes.append((f"task-{turn}", "tool_state", update))
    channel.replay_writes(writes)
    assert channel.value == state
    since = state["__clock__"]["writes"] - seed["__clock__"]["writes"]
    assert since >= BULK_WRITES
    channel.value = narrow(state, {"t/a/k0": {"value": "next"}})
    assert channel.snapshot_frequency == 777


async def test_a_run_start_resumes_this_process_s_last_replay_and_gives_the_same_state(
    thread_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run start replays the writes since the last snapshot; the next run's replay starts
    from where the last one left off (storage.REPLAYS). Every checkpoint of a forked thread,
    read in a shuffled order with replays remembered, equals the same checkpoint rebuilt with
    nothing remembered."""
    import random

    from mcp_state_versions.storage import tool_state as storage

    saver = PruningInMemorySaver()
    agent = agent_on(saver)
    storage.REPLAYS.clear()
    for text in ["find Copenhagen", "find Aarhus", "find Oslo", "hi", "find Aarhus"]:
        await run_turn(agent, thread_id, text)
    served = storage.REPLAYS.served
    await run_turn(agent, thread_id, "find Copenhagen")
    assert storage.REPLAYS.served > served  # the run start merged only what the last run added
    await fork_at(agent, thread_id, 2, "find Oslo")
    await run_turn(agent, thread_id, "find Copenhagen")
    configs = [snapshot.config for snapshot in await _checkpoints(agent, thread_id)]
    random.Random(7).shuffle(configs)
    remembered = [(await agent.aget_state(config)).values.get("tool_state") for config in configs]
    monkeypatch.setattr(storage.REPLAYS, "size", 0)
    storage.REPLAYS.clear()
    served = storage.REPLAYS.served
    replayed = [(await agent.aget_state(config)).values.get("tool_state") for config in configs]
    assert storage.REPLAYS.served == served  # nothing remembered: every write merged again
    assert remembered == replayed
    assert len({str(state) for state in replayed}) > 5  # the checkpoints differ


def test_a_remembered_replay_is_used_only_for_the_same_seed_and_writes() -> None:
    """A remembered replay serves a later one only when that one's seed and leading writes are
    equal to those remembered; it is bounded by its size."""
    from mcp_state_versions.storage.tool_state import _Replays

    fold = batched(merge_tool_state)
    replays = _Replays(size=2)
    writes = [("t1", "tool_state", {"a/b/c": {"value": n}}) for n in range(3)]
    seed = merge_tool_state({}, {"a/b/c": {"value": 0}})
    value = fold(seed, [write[2] for write in writes])
    replays.remember(fold, seed, writes, value)
    later = [*writes, ("t2", "tool_state", {"a/b/c": {"value": 9}})]
    assert replays.start(fold, seed, later) == (3, value)
    assert replays.start(fold, {**seed}, later) == (3, value)  # equal, not the same object
    reread = [(task, channel, {**update}) for task, channel, update in later]
    assert replays.start(fold, seed, reread) == (3, value)  # writes read again from storage
    renamed = [("t0", *writes[0][1:]), *later[1:]]
    assert replays.start(fold, seed, renamed) == (0, seed)  # another task's write
    other = merge_tool_state({}, {"a/b/c": {"value": 1}})
    assert replays.start(fold, other, later) == (0, other)  # another seed
    changed = [writes[0], ("t1", "tool_state", {"a/b/c": {"value": 5}}), *later[2:]]
    assert replays.start(fold, seed, changed) == (0, seed)  # a leading write differs
    assert replays.start(fold, seed, writes[:2]) == (0, seed)  # fewer writes than remembered
    replays.remember(fold, seed, writes[:2], fold(seed, [write[2] for write in writes[:2]]))
    assert replays.start(fold, seed, later) == (3, value)  # a shorter one does not replace it
    for task in ("t3", "t4", "t5"):
        replays.remember(fold, seed, [(task, "tool_state", {})], seed)
    assert replays.start(fold, seed, later) == (0, seed)  # forgotten: two chains are kept


def test_an_overwrite_after_a_remembered_replay_follows_langgraph_s_rules() -> None:
    """The writes a remembered replay merged are not looked at again, but one stored after
    them that is an ``Overwrite`` still resets the value, as LangGraph's own channel does."""
    from langgraph.types import Overwrite

    from mcp_state_versions.storage.channels import ToolStateChannel
    from mcp_state_versions.storage.tool_state import REPLAYS

    REPLAYS.clear()
    channel = ToolStateChannel(batched(merge_tool_state), dict)
    writes = [(f"t{n}", "tool_state", {"a/b/c": {"value": n}}) for n in range(3)]
    channel.replay_writes(writes)
    assert channel.value["a/b/c"]["value"] == 2
    reset = merge_tool_state({}, {"x/y/z": {"value": "reset"}})
    later = [*writes, ("t3", "tool_state", Overwrite(reset)), ("t4", "tool_state", {})]
    served = REPLAYS.served
    again = ToolStateChannel(batched(merge_tool_state), dict)
    again.replay_writes(later)
    assert REPLAYS.served == served  # LangGraph's rules: every write from the seed
    assert "a/b/c" not in again.value
    assert again.value["x/y/z"]["value"] == "reset"


def test_an_overwrite_keeps_the_clock_live_and_replayed_alike() -> None:
    """An Overwrite built from what readers see (no clock record) keeps the clock and the kept
    keys' entries, drops the rest; the live channel, a replay of its writes and
    :func:`replay` agree."""
    from langgraph.types import Overwrite

    from mcp_state_versions.state.clock import CLOCK_KEY
    from mcp_state_versions.storage.channels import ToolStateChannel
    from mcp_state_versions.storage.tool_state import REPLAYS, replay

    def tick(turn: int, open_: bool) -> dict[str, Any]:
        return {CLOCK_KEY: {"turn": turn, "open": open_, "message": f"m{turn}"}}

    updates: list[Any] = []
    for turn in range(1, 6):
        updates += [tick(turn, True), {"a/b/k": {"value": turn}, "a/b/j": {"value": "j"}}]
        updates.append(tick(turn, False))
    live = ToolStateChannel(batched(merge_tool_state), dict)
    for update in updates:
        live.update([update])
    before = live.value
    visible = {key: entry for key, entry in before.items() if key != CLOCK_KEY}
    updates.append(Overwrite({"a/b/k": visible["a/b/k"]["value"]}))  # plain, j dropped
    updates += [tick(6, True), {"a/b/k": {"value": 6}}, tick(6, False)]
    for update in updates[len(updates) - 4 :]:
        live.update([update])
    after = live.value
    assert after[CLOCK_KEY]["turn"] == 6 and "a/b/j" not in after
    entry = after["a/b/k"]
    assert (entry["value"], entry["since"]) == (6, 6)
    assert [item["value"] for item in entry["ring"]][-1] == 5  # turn 5's value, kept
    REPLAYS.clear()
    writes = [(f"t{n}", "tool_state", update) for n, update in enumerate(updates)]
    replayed_channel = ToolStateChannel(batched(merge_tool_state), dict)
    replayed_channel.replay_writes(writes)
    assert replayed_channel.value == after
    assert replay(None, updates) == after
    dropped = ToolStateChannel(batched(merge_tool_state), dict)
    dropped.value = after
    dropped.update([Overwrite(None)])
    assert dropped.value[CLOCK_KEY]["turn"] == 6 and len(dropped.value) == 1
    assert dropped.value[CLOCK_KEY]["bytes"] == 0


@pytest.mark.parametrize(
    "value",
    [
        {"__overwrite__": {"a": 1}},
        {"__overwrite__": None},
        {"type": "__overwrite__", "value": [1]},
        {"type": "__overwrite__"},
        {"__overwrite__": 1, "other": 2},
        {"gazet/get_aoi/bbox": {"value": 1}},
        {},
        [1, 2],
        None,
        "__overwrite__",
    ],
)
def test_overwrite_of_answers_as_langgraph_does(value: Any) -> None:
    """The replay's test for an ``Overwrite`` (asked without importing LangGraph's runtime)
    gives LangGraph's own answer on every form, the typed one included."""
    from langgraph.channels.binop import _get_overwrite
    from langgraph.types import Overwrite

    from mcp_state_versions.storage.tool_state import overwrite_of

    assert overwrite_of(value) == _get_overwrite(value)
    assert overwrite_of(Overwrite(value)) == _get_overwrite(Overwrite(value)) == (True, value)


async def test_a_writer_runs_the_sqlite_migrations_a_file_has_not_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file holding the lineage indexes earlier releases made, and no record of migrations,
    gets the current indexes and loses the old ones when a writer opens it; the next writer runs
    nothing; an index dropped by hand is made again."""
    import sqlite3

    from mcp_state_versions.backends.sqlite import (
        INDEX_NAME,
        MIGRATIONS,
        MIGRATIONS_TABLE,
        WHOLE_INDEX_NAME,
        SqliteBackend,
    )

    ours = sorted([INDEX_NAME, WHOLE_INDEX_NAME])

    path = tmp_path / "earlier.sqlite"

    async def open_as_writer() -> None:
        async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
            await saver.setup()

    def indexes() -> list[str]:
        with sqlite3.connect(path) as db:
            return sorted(
                row[0]
                for row in db.execute(
                    "SELECT name FROM sqlite_master "
                    "WHERE type = 'index' AND name LIKE 'mcp_state_versions%'"
                )
            )

    await open_as_writer()
    with sqlite3.connect(path) as db:  # as an earlier release left it
        db.execute(f"DROP TABLE {MIGRATIONS_TABLE}")
        db.execute(f"DROP INDEX {INDEX_NAME}")
        db.execute(f"DROP INDEX {WHOLE_INDEX_NAME}")
        db.execute("CREATE INDEX mcp_state_versions_lineage ON checkpoints (thread_id)")
        db.execute("CREATE INDEX mcp_state_versions_lineage_v2 ON checkpoints (checkpoint_id)")
    await open_as_writer()
    assert indexes() == ours
    with sqlite3.connect(path) as db:
        applied = [row[0] for row in db.execute(f"SELECT v FROM {MIGRATIONS_TABLE} ORDER BY v")]
    assert applied == list(range(len(MIGRATIONS)))

    written: list[Any] = []
    real_write = SqliteBackend._write

    async def recording(self: SqliteBackend, statements: Any) -> None:
        written.append(list(statements))
        await real_write(self, statements)

    monkeypatch.setattr(SqliteBackend, "_write", recording)
    await open_as_writer()
    assert written == [] and indexes() == ours
    for dropped in ours:
        with sqlite3.connect(path) as db:
            db.execute(f"DROP INDEX {dropped}")
        await open_as_writer()
        assert indexes() == ours
    assert len(written) == 2


async def test_a_process_serving_fifty_conversations_at_once_indexes_none_of_them_again(
    tmp_path: Path,
) -> None:
    """Fifty threads' turns interleaved in one process (each thread's next turn comes after
    forty-nine others'): once each thread has run, no run start replays a thread's writes
    since its snapshot afresh, and no merge indexes its conversation afresh; the answers are
    those of a fresh process."""
    from mcp_state_versions.storage.messages import MESSAGE_INDEXES
    from mcp_state_versions.storage.tool_state import REPLAYS

    threads = [f"served-{n}" for n in range(50)]
    path = tmp_path / "served.sqlite"
    REPLAYS.clear()  # a process serving these alone (not the test run's other threads)
    MESSAGE_INDEXES.clear()
    async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()
        agent = agent_on(saver)
        script = ["find Copenhagen", "chat", "find Aarhus", "chat", "find Oslo"]
        for number, text in enumerate(script):
            rebuilt, served = MESSAGE_INDEXES.rebuilt, REPLAYS.served
            for thread in threads:
                await run_turn(agent, thread, text)
            if number >= 2:  # (turn 1 starts each thread; turn 2 replays its first writes)
                assert MESSAGE_INDEXES.rebuilt == rebuilt, number
                assert REPLAYS.served > served
        live = [await answers(agent, thread, CheckpointHistory(saver)) for thread in threads]
    REPLAYS.clear()
    MESSAGE_INDEXES.clear()
    async with PruningSqliteSaver.from_conn_string(str(path)) as fresh:
        again = agent_on(fresh)
        assert [await answers(again, t, CheckpointHistory(fresh)) for t in threads] == live


@pytest.mark.parametrize("index", ["mcp_state_versions_lineage_v3", "mcp_state_versions_whole_v1"])
async def test_an_index_dropped_by_another_connection_is_read_around(
    tmp_path: Path, index: str
) -> None:
    """A saver remembers which of the library's indexes its file has. When another connection
    drops one (a newer release's writer migrating the file, or a hand), the next statement
    naming it fails; the memo is forgotten and the read made again: reads answer as a fresh
    saver's do, and the thread goes on, with ring_size=0 so that every answer walks storage."""
    import sqlite3

    path = tmp_path / "dropped.sqlite"
    async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()
        agent = agent_on(saver, ring_size=0)
        for text in ["find Copenhagen", "chat", "find Aarhus", "chat"]:
            await run_turn(agent, "t", text)
        before = await answers(agent, "t", CheckpointHistory(saver))
        with sqlite3.connect(path) as db:
            db.execute(f"DROP INDEX {index}")
        assert await answers(agent, "t", CheckpointHistory(saver)) == before
        await run_turn(agent, "t", "find Oslo")
        after = await answers(agent, "t", CheckpointHistory(saver))
    async with PruningSqliteSaver.from_conn_string(str(path)) as fresh:
        assert await answers(agent_on(fresh, ring_size=0), "t", CheckpointHistory(fresh)) == after
    assert len(after) == 5 and after[4].value == [10.6, 59.8, 10.9, 60.0]  # type: ignore[union-attr]


@pytest.mark.parametrize("sync", [False, True])
async def test_a_failed_sqlite_migration_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sync: bool
) -> None:
    """The migrations a writer runs are one transaction: Python's sqlite3 runs DDL outside the
    transaction it opens for an INSERT, so without an explicit one a migration failing after
    the index drops and creates would leave them done with no record of them. Here the last
    migration fails: no index is dropped or made, and none is recorded; the next writer, with
    the migrations mended, runs them all. Both paths: the async saver's setup, and the sync
    one (``mcp-state-versions index``, on LangGraph's ``SqliteSaver``)."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from mcp_state_versions.backends import sqlite as backend_module
    from mcp_state_versions.backends.sqlite import MIGRATIONS, MIGRATIONS_TABLE, SqliteBackend

    path = tmp_path / "failing.sqlite"
    with sqlite3.connect(path, check_same_thread=False) as plain:
        SqliteSaver(plain).setup()  # LangGraph's tables, none of the library's

    def ours() -> list[str]:
        """The library's tables and indexes in the file."""
        with sqlite3.connect(path) as db:
            return [
                row[0]
                for row in db.execute(
                    "SELECT name FROM sqlite_master WHERE name LIKE 'mcp_state_versions%' "
                    "ORDER BY name"
                )
            ]

    async def migrate() -> None:
        if sync:
            with sqlite3.connect(path, check_same_thread=False) as conn:
                await SqliteBackend(SqliteSaver(conn), sync=True, native_sync=True).create_index()
        else:
            async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
                await saver.setup()

    assert ours() == []
    failing = [*MIGRATIONS, "CREATE INDEX broken ON nosuch (x)"]
    monkeypatch.setattr(backend_module, "MIGRATIONS", failing)
    with pytest.raises(sqlite3.OperationalError, match="nosuch"):
        await migrate()
    assert ours() == []  # nothing made or recorded
    monkeypatch.setattr(backend_module, "MIGRATIONS", MIGRATIONS)
    await migrate()
    with sqlite3.connect(path) as db:
        applied = [row[0] for row in db.execute(f"SELECT v FROM {MIGRATIONS_TABLE} ORDER BY v")]
    assert applied == list(range(len(MIGRATIONS)))


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("messages", ["delta", "whole"])
async def test_exit_durability_stores_every_run_when_a_snapshot_falls_due(
    kind: str, messages: str, tmp_path: Path, thread_id: str
) -> None:
    """LangGraph asks a delta channel twice at ``durability="exit"`` whether a snapshot is
    due: once to leave out the writes the snapshot will hold, once to write it. Both answers
    must agree, or a run whose end falls on a snapshot stores neither (the conversation froze
    at run 10 and ``tool_state`` lost runs). Every run, stored, reloaded and live, agrees."""
    config = {"configurable": {"thread_id": thread_id}}
    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver, messages=messages, snapshot_frequency=3)
        for run in range(1, 41):
            text = f"find P{run}" if run % 3 else f"hello {run}"
            live = await agent.ainvoke(
                {"messages": [HumanMessage(text)]}, config, durability="exit"
            )
            stored = (await agent.aget_state(config)).values
            assert [m.id for m in stored["messages"]] == [m.id for m in live["messages"]], run
            assert stored.get("tool_state") == live.get("tool_state"), run
    if kind == "sqlite":  # a fresh saver on the same file reads the same thread
        async with await open_backend(kind, tmp_path) as saver:
            reloaded = (await agent_on(saver, messages=messages).aget_state(config)).values
            assert [m.id for m in reloaded["messages"]] == [m.id for m in live["messages"]]
            assert reloaded.get("tool_state") == live.get("tool_state")
