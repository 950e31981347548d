"""Known histories (``mcp_state_versions.backends.known``): a run start that continues what
this process wrote extends the remembered history by what its saver noted, with no read of
writes; and that history is, write for write, the one storage gives, through turns, parallel
tool calls, failed steps that leave writes behind, forks, updates and snapshots."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolRuntime

from mcp_state_versions import (
    SessionState,
    build_agent,
    current_turn,
    publish,
    run_turn,
    tool_state_writes,
)
from mcp_state_versions.backends import known_history
from mcp_state_versions.backends.postgres import PostgresBackend
from mcp_state_versions.backends.sqlite import SqliteBackend
from mcp_state_versions.demo.scripted import ScriptedChatModel, call

from ..conftest import open_backend

SQL_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@tool
def put(key: str, value: int, runtime: ToolRuntime) -> Any:
    """Publish one value."""
    return publish(runtime, "t", "put", {key: value})


@tool
def boom() -> str:
    """Fail the step (not a tool error the model is told about: the run fails)."""
    raise RuntimeError("boom")


def _respond(messages: Sequence[BaseMessage]) -> AIMessage:
    """'put a=1 b=2' calls put once per pair, in parallel; 'fail a=1' also calls boom."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage("done")
    verb, *pairs = str(last.content).split()
    if verb not in ("put", "fail"):
        return AIMessage("noted")
    calls = [
        call("put", f"c{len(messages)}-{i}", key=k, value=int(v))
        for i, (k, v) in enumerate(pair.split("=") for pair in pairs)
    ]
    if verb == "fail":
        calls.append(call("boom", f"c{len(messages)}-boom"))
    return AIMessage("", tool_calls=calls)


def _fresh_saver(saver: Any) -> Any:
    """Another saver object on the same storage (SQLite's connection, PostgreSQL's pool): it
    remembers nothing, so it reads."""
    return type(saver)(saver.conn)


async def _at_head(saver: Any, config: dict[str, Any]) -> dict[str, Any]:
    """The config of the thread's newest checkpoint, as a run start reads its history."""
    head = (await saver.aget_tuple(config)).config["configurable"]
    return {"configurable": {**head, "checkpoint_ns": ""}}


async def _history(saver: Any, at: dict[str, Any]) -> dict[str, Any]:
    """``tool_state``'s delta history at ``at``, as a run start reads it from ``saver``."""
    found = await saver.aget_delta_channel_history(config=at, channels=["tool_state"])
    return found["tool_state"]


async def _same_as_fresh(saver: Any, fresh: Any, config: dict[str, Any]) -> None:
    """The history a run start at the head gets equals the one a fresh saver reads."""
    at = await _at_head(saver, config)
    _same(await _history(saver, at), await _history(fresh, at))


def _same(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert [w[:2] for w in ours["writes"]] == [w[:2] for w in theirs["writes"]]
    assert [w[2] for w in ours["writes"]] == [w[2] for w in theirs["writes"]]
    assert ("seed" in ours) == ("seed" in theirs)
    assert ours.get("seed") == theirs.get("seed")


@pytest.mark.parametrize("kind", SQL_BACKENDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_an_extended_history_is_the_one_storage_gives(
    kind: str, seed: int, tmp_path: Any, thread_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """36 random steps on one thread: turns (run_turn and ainvoke), parallel tool calls, runs
    that fail, forks from earlier checkpoints, updates that write tool_state. After each, the
    history a run start at the head gets (extended where it can be, with no statement) equals
    a fresh saver's read and LangGraph's own, and the state is what a fresh process rebuilds."""
    rng = random.Random(seed)
    async with await open_backend(kind, tmp_path) as saver:
        agent = build_agent(
            ScriptedChatModel(respond=_respond),
            [put, boom],
            checkpointer=saver,
            snapshot_frequency=9,
        )
        fresh = _fresh_saver(saver)
        backend: Any = SqliteBackend if kind == "sqlite" else PostgresBackend
        rows = backend._rows
        sent: list[str] = []

        async def counted(self: Any, sql: str, params: Any) -> Any:
            sent.append(sql)
            return await rows(self, sql, params)

        monkeypatch.setattr(backend, "_rows", counted)
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
        extended = checked = 0
        done = []
        for step in range(36):
            pairs = " ".join(
                f"{rng.choice('abcde')}={rng.randint(0, 3)}" for _ in range(rng.randint(1, 3))
            )
            action = rng.choice(["turn", "turn", "turn", "invoke", "fail", "fork", "update"])
            if step < 2:
                action = "turn"
            if action == "turn":
                await run_turn(agent, thread_id, f"put {pairs}")
            elif action == "invoke":
                await agent.ainvoke({"messages": [HumanMessage(f"put {pairs}")]}, config)
            elif action == "fail":
                with pytest.raises(RuntimeError, match="boom"):
                    await agent.ainvoke({"messages": [HumanMessage(f"fail {pairs}")]}, config)
            elif action == "fork":
                earlier = rng.choice(done)
                forked = {"configurable": {"thread_id": thread_id, "checkpoint_id": earlier}}
                await agent.ainvoke({"messages": [HumanMessage(f"put {pairs}")]}, forked)
            else:
                # an update's writes are stored at the head itself, then a child is made
                update = tool_state_writes("t", "update", {"u": step}, turn=None)
                values = {"messages": [HumanMessage("a note")], "tool_state": update}
                await agent.aupdate_state(config, values)
            at = await _at_head(saver, config)
            done.append(at["configurable"]["checkpoint_id"])
            sent.clear()
            ours = await _history(saver, at)
            if not sent:
                extended += 1
            stock = await super(type(fresh), fresh).aget_delta_channel_history(
                config=at, channels=["tool_state"]
            )
            _same(ours, await _history(fresh, at))
            _same(ours, stock["tool_state"])
            checked += 1
            known = known_history(saver, thread_id, "")
            assert known is not None and known.checkpoint_id == done[-1]
        # the state the agent runs with is the one a process that remembers nothing rebuilds
        again = build_agent(
            ScriptedChatModel(respond=_respond),
            [put, boom],
            checkpointer=fresh,
            snapshot_frequency=9,
        )
        assert (await again.aget_state(config)).values == (await agent.aget_state(config)).values
        assert checked == 36
        assert extended >= 12, extended  # most run starts read no writes


@pytest.mark.parametrize("kind", SQL_BACKENDS)
async def test_writes_a_failed_step_left_at_the_head_are_in_the_extended_history(
    kind: str, tmp_path: Any, thread_id: str
) -> None:
    """Two nodes run in parallel; when one fails, the other's tool_state write stays stored at
    the checkpoint the step ran from, which is then the head. The runs after it continue from
    there, and the history they extend holds that write as storage does."""

    def write(state: dict[str, Any]) -> dict[str, Any]:
        text = str(state["messages"][-1].content)
        fields: dict[str, Any] = {"n": len(state["messages"]), "text": text}
        if text == "one":  # a large first value: no snapshot is due in this short thread
            fields["large"] = "x" * 50_000
        return {"tool_state": tool_state_writes("t", "w", fields, turn=current_turn(state))}

    def check(state: dict[str, Any]) -> dict[str, Any]:
        if "fail" in str(state["messages"][-1].content):
            raise RuntimeError("failed on purpose")
        return {}

    graph = StateGraph(SessionState)
    graph.add_node("write", write)
    graph.add_node("check", check)
    graph.add_edge(START, "write")
    graph.add_edge(START, "check")
    graph.add_edge("write", END)
    graph.add_edge("check", END)
    async with await open_backend(kind, tmp_path) as saver:
        app = graph.compile(checkpointer=saver)
        fresh = _fresh_saver(saver)
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
        for text in ["one", "two", "fail three", "four", "fail five", "fail six", "seven"]:
            message = {"messages": [HumanMessage(text)]}
            if text.startswith("fail"):
                with pytest.raises(RuntimeError, match="on purpose"):
                    await app.ainvoke(message, config)
            else:
                await app.ainvoke(message, config)
            await _same_as_fresh(saver, fresh, config)
        state = (await app.aget_state(config)).values["tool_state"]
        assert state["t/w/text"]["value"] == "seven"


@pytest.mark.parametrize("kind", SQL_BACKENDS)
async def test_notes_give_way_to_a_read_when_they_cannot_be_trusted(
    kind: str, tmp_path: Any, thread_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Notes past their byte budget are dropped and the remembered history stops being
    extended (the next run start reads); a checkpoint that fails to store forgets the thread's
    history. Either way the history a run start gets is the one storage gives."""
    from mcp_state_versions.backends import known

    async with await open_backend(kind, tmp_path) as saver:
        agent = build_agent(ScriptedChatModel(respond=_respond), [put], checkpointer=saver)
        fresh = _fresh_saver(saver)
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}

        for text in ["put a=1", "put b=2", "put a=3"]:
            await run_turn(agent, thread_id, text)
        assert known_history(saver, thread_id, "").tracked  # type: ignore[union-attr]
        monkeypatch.setattr(known, "KNOWN_BYTES", 10)
        await run_turn(agent, thread_id, "put c=4")
        remembered = known_history(saver, thread_id, "")
        # untracked, or given way to the thread's messages history, read after it
        assert remembered is None or not remembered.tracked
        assert known.caught_up(saver, thread_id, "", None) is None
        await _same_as_fresh(saver, fresh, config)
        monkeypatch.undo()

        stored = type(saver).__mro__[2].aput  # the saver's own put, under the library's

        async def failing(self: Any, *args: Any) -> Any:
            raise OSError("disk full")

        monkeypatch.setattr(type(saver).__mro__[2], "aput", failing)
        with pytest.raises(OSError, match="disk full"):
            await run_turn(agent, thread_id, "put d=5")
        assert known_history(saver, thread_id, "") is None
        monkeypatch.setattr(type(saver).__mro__[2], "aput", stored)
        await run_turn(agent, thread_id, "put e=6")
        await _same_as_fresh(saver, fresh, config)
        state = (await agent.aget_state(config)).values["tool_state"]
        assert state["t/put/e"]["value"] == 6 and "t/put/d" not in state
