"""Agents inside other graphs: a persistent subgraph reads its own history, a subgraph that
shares ``tool_state`` with its parent loses no version records."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, StateGraph

from mcp_state_versions import CheckpointHistory, build_agent, history_for_run
from mcp_state_versions.demo.scripted import ScriptedChatModel, call

from ..conftest import BACKENDS, open_backend
from ..conversation import PUT, put
from ..helpers import inside_a_parent

KEY = PUT + "k"


def _script() -> list[AIMessage]:
    return [
        AIMessage("", tool_calls=[call("put", "a", key="k", value="first")]),
        AIMessage("ok"),
        AIMessage("", tool_calls=[call("put", "b", key="k", value="second")]),
        AIMessage("ok"),
        AIMessage("", tool_calls=[call("inspect_state", "c", key=KEY, turn=1)]),
        AIMessage("done"),
    ]


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_persistent_subgraph_reads_its_own_namespace(kind: str, tmp_path: Any) -> None:
    """The parent keeps only messages; tool_state lives in the subgraph's own checkpoints."""
    inner = build_agent(ScriptedChatModel(replies=_script()), [put], ring_size=0)
    async with await open_backend(kind, tmp_path) as saver:
        graph = inside_a_parent(inner, saver)
        thread_id = f"persistent-{uuid4().hex[:12]}"
        config = {"configurable": {"thread_id": thread_id}}
        for text in ["one", "two", "three"]:
            state = await graph.ainvoke({"messages": [("user", text)]}, config)
        reply = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
        assert str(reply.content).endswith('"first"'), reply.content
        assert "A later turn replaced it" in str(reply.content)
        # The namespace is addressable from outside the run, as the API and CLI do.
        history = CheckpointHistory(saver, namespace="agent")
        assert (await history.turns(thread_id)).total == 3
        present = await history.present(thread_id)
        assert present is not None and present.tool_state[KEY]["value"] == "second"
        assert await CheckpointHistory(saver).present(thread_id) is not None


async def test_history_for_run_settles_on_the_subgraph_namespace_only_when_it_has_one() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    inside = {"__pregel_checkpointer": saver, "checkpoint_ns": "agent:1|tools:2"}
    history = history_for_run({"configurable": inside})
    assert history is not None
    await history.turns("nobody")
    assert history.namespace == ""  # nothing saved under "agent": the root holds the thread
    assert history_for_run({"configurable": {"thread_id": "t"}}) is None  # no checkpointer


@pytest.mark.parametrize("kind", BACKENDS)
async def test_graph_compiled_without_a_checkpointer_reads_the_one_attached_later(
    kind: str, tmp_path: Any
) -> None:
    """What the Agent Server does: compile without one, attach with graph.copy."""
    agent = build_agent(ScriptedChatModel(replies=_script()), [put], ring_size=0)
    async with await open_backend(kind, tmp_path) as saver:
        attached = agent.copy(update={"checkpointer": saver})
        config = {"configurable": {"thread_id": f"copy-{uuid4().hex[:12]}"}}
        for text in ["one", "two", "three"]:
            state = await attached.ainvoke({"messages": [("user", text)]}, config)
        reply = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
        assert str(reply.content).endswith('"first"'), reply.content


async def test_a_graph_built_on_one_saver_and_run_on_another_reads_the_second(
    tmp_path: Any,
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    first, second = InMemorySaver(), InMemorySaver()
    agent = build_agent(
        ScriptedChatModel(replies=_script()), [put], checkpointer=first, ring_size=0
    )
    moved = agent.copy(update={"checkpointer": second})
    config = {"configurable": {"thread_id": "moved"}}
    for text in ["one", "two", "three"]:
        state = await moved.ainvoke({"messages": [("user", text)]}, config)
    reply = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
    assert str(reply.content).endswith('"first"'), reply.content
    assert not first.storage  # nothing was ever written to, or read from, the first saver


async def test_a_graph_without_any_checkpointer_says_it_keeps_no_history() -> None:
    agent = build_agent(ScriptedChatModel(replies=_script()[:4]), [put], ring_size=0)
    state: dict[str, Any] = {"messages": [], "tool_state": {}}
    for text in ["one", "two"]:  # the host carries state from run to run itself
        state = await agent.ainvoke(
            {"messages": [*state["messages"], ("user", text)], "tool_state": state["tool_state"]}
        )
    assert state["tool_state"][KEY]["versions"] == 2
    from mcp_state_versions import make_inspect_state

    from ..conftest import runtime_for

    tool = make_inspect_state()
    text = await tool.coroutine(key=KEY, turn=1, runtime=runtime_for(state, "none"))  # type: ignore[misc]
    assert "keeps no turn history" in text and "second" not in text


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_persistent_subgraph_sharing_tool_state_reads_what_its_parent_wrote(
    kind: str, tmp_path: Any
) -> None:
    """The parent writes a key after the agent (a persistent subgraph) has run in each turn.
    The subgraph's own checkpoints never saw those writes; the parent's hold every turn, and
    a read from inside the subgraph answers from them."""
    from mcp_state_versions import (
        close_turn,
        current_turn,
        make_merge_tool_state,
        make_session_state,
        open_turn,
    )

    stamped = "host/stamp/p"
    script = [
        AIMessage("ok"),
        AIMessage("ok"),
        AIMessage("", tool_calls=[call("inspect_state", "c", key=stamped, turn=1)]),
        AIMessage("done"),
    ]
    inner = build_agent(ScriptedChatModel(replies=script), [put], ring_size=0)
    inner = inner.copy(update={"checkpointer": True})

    def stamp(state: Any) -> dict[str, Any]:
        return {"tool_state": {stamped: {"value": f"p{current_turn(state)}"}}}

    async with await open_backend(kind, tmp_path) as saver:
        parent = StateGraph(make_session_state(make_merge_tool_state(ring_size=0)))
        for name, node in [("open_turn", open_turn), ("agent", inner), ("stamp", stamp)]:
            parent.add_node(name, node)
        parent.add_node("close_turn", close_turn)
        parent.add_edge(START, "open_turn")
        parent.add_edge("open_turn", "agent")
        parent.add_edge("agent", "stamp")
        parent.add_edge("stamp", "close_turn")
        parent.add_edge("close_turn", END)
        graph = parent.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": f"shared-{uuid4().hex[:12]}"}}
        for text in ["one", "two", "three"]:
            state = await graph.ainvoke({"messages": [("user", text)]}, config)
        reply = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
        assert str(reply.content).endswith('"p1"'), reply.content
