"""Synchronous runs (``graph.invoke``) read beyond the ring exactly as asynchronous ones do,
through the savers' synchronous API: in memory, ``SqliteSaver`` and ``PostgresSaver``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import uuid4

import pytest
from langchain_core.messages import ToolMessage

from mcp_state_versions import CheckpointHistory, build_agent
from mcp_state_versions.backends import run_sync

from ..conftest import PG_DSN, postgres_unavailable
from ..conversation import PUT, Conversation, agent_graph, model


@contextmanager
def sync_saver(kind: str, tmp_path: Any) -> Iterator[Any]:
    """A saver with a synchronous API: InMemorySaver, SqliteSaver or PostgresSaver."""
    if kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        connection = sqlite3.connect(tmp_path / "sync.sqlite", check_same_thread=False)
        try:
            yield SqliteSaver(connection)
        finally:
            connection.close()
    else:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        try:
            connection = psycopg.Connection.connect(
                PG_DSN,
                autocommit=True,
                prepare_threshold=0,
                row_factory=dict_row,
                connect_timeout=3,
            )
        except psycopg.OperationalError as error:
            postgres_unavailable(error)
        try:
            saver = PostgresSaver(connection)  # type: ignore[arg-type]
            saver.setup()
            yield saver
        finally:
            connection.close()


KINDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("kind", KINDS)
def test_invoke_answers_beyond_the_ring_like_ainvoke(kind: str, tmp_path: Any) -> None:
    with sync_saver(kind, tmp_path) as saver:
        conv = Conversation(agent_graph(saver, 0), saver, f"sync-{uuid4().hex[:12]}", sync=True)
        for text in ["put k=a", "chat", "put k=b j=1", "put k=c"]:
            run_sync(conv.say(text))
        checked = run_sync(conv.check())
        assert checked["Found:history"] > 0, checked
        history = CheckpointHistory(saver, sync=True)
        assert run_sync(history.turns(conv.thread_id)).total == 4


@pytest.mark.parametrize("kind", KINDS)
def test_the_tool_under_invoke_reads_history(kind: str, tmp_path: Any) -> None:
    from langchain_core.messages import AIMessage

    from mcp_state_versions.demo.scripted import ScriptedChatModel, call

    from ..conversation import put

    script = [
        AIMessage("", tool_calls=[call("put", "a", key="k", value="first")]),
        AIMessage("ok"),
        AIMessage("", tool_calls=[call("put", "b", key="k", value="second")]),
        AIMessage("ok"),
        AIMessage("", tool_calls=[call("inspect_state", "c", key=PUT + "k", turn=1)]),
        AIMessage("done"),
        AIMessage("", tool_calls=[call("inspect_state", "d", key=PUT + "k", versions=True)]),
        AIMessage("done"),
    ]
    with sync_saver(kind, tmp_path) as saver:
        agent = build_agent(
            ScriptedChatModel(replies=script), [put], checkpointer=saver, ring_size=0
        )
        config = {"configurable": {"thread_id": f"tool-{uuid4().hex[:12]}"}}
        for text in ["one", "two", "three", "four"]:
            state = agent.invoke({"messages": [("user", text)]}, config)
        replies = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        assert str(replies[-2].content) == (
            f"{PUT}k at the end of turn 1 (held turn 1). A later turn replaced it; the current "
            'value differs.\n"first"'
        )
        # The whole version list under invoke: turn 1's value from history (no ring).
        assert str(replies[-1].content).splitlines() == [
            f"{PUT}k has held 2 values, oldest first:",
            '- turn 1: "first"',
            '- turn 2 on (current): "second"',
        ]


def test_an_async_only_saver_under_invoke_says_so(tmp_path: Any) -> None:
    """AsyncSqliteSaver has no synchronous API; a sync tool cannot read it, and says so."""
    import asyncio

    from mcp_state_versions.savers.sqlite import PruningSqliteSaver

    from ..conftest import runtime_for
    from ..conversation import put

    async def build() -> dict[str, Any]:
        async with PruningSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as saver:
            agent = build_agent(model(), [put], checkpointer=saver, ring_size=0)
            config = {"configurable": {"thread_id": "t"}}
            for text in ["put k=a", "put k=b"]:
                await agent.ainvoke({"messages": [("user", text)]}, config)
            state = (await agent.aget_state(config)).values
            from mcp_state_versions import make_inspect_state

            tool = make_inspect_state()
            runtime = runtime_for(state, "t")
            runtime.config["configurable"]["__pregel_checkpointer"] = saver  # type: ignore[index]
            return {"text": tool.func(key=PUT + "k", turn=1, runtime=runtime)}  # type: ignore[misc]

    text = asyncio.run(build())["text"]
    assert "only offers to asynchronous runs" in text and '"b"' not in text
