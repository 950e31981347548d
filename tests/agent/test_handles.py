"""``@state:`` handles, resolved before a tool runs: in build_agent, create_agent's middleware,
a plain ToolNode and the MCP interceptor; on a thread whose turn 1 is beyond the ring."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from mcp_state_versions import build_agent, run_turn
from mcp_state_versions.demo.run import get_aoi
from mcp_state_versions.demo.scripted import ScriptedChatModel, call
from mcp_state_versions.retention.prune import prune_thread

BBOX = "gazet/get_aoi/bbox"
COPENHAGEN, OSLO = [12.4, 55.5, 12.7, 55.8], [10.6, 59.8, 10.9, 60.0]
RECEIPT = f"[state used: {BBOX}@turn=1, {BBOX}@turn=4]"


class Received:
    """What compare_areas was called with, call by call."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, Any]] = []

    def tool(self) -> Any:
        @tool
        def compare_areas(a: list[float], b: list[float]) -> str:
            """Compare two bounding boxes (west, south, east, north)."""
            self.calls.append((a, b))
            wider = "a" if a[2] - a[0] > b[2] - b[0] else "b"
            return f"{wider} is wider"

        return compare_areas


def scripted(compare_args: dict[str, Any]) -> ScriptedChatModel:
    """'find X' calls get_aoi; 'compare' calls compare_areas with ``compare_args``."""

    def respond(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and str(last.content).startswith("find "):
            return AIMessage("", tool_calls=[call("get_aoi", "f", place=str(last.content)[5:])])
        if isinstance(last, HumanMessage) and str(last.content) == "compare":
            return AIMessage("", tool_calls=[call("compare_areas", "cmp", **compare_args)])
        return AIMessage("ok")

    return ScriptedChatModel(respond=respond)


HANDLES = {"a": f"@state:{BBOX}@turn=1", "b": f"@state:{BBOX}"}


async def three_areas_then(agent: Any, thread_id: str, last: str = "compare") -> ToolMessage:
    for place in ("Copenhagen", "Aarhus", "Oslo"):
        await run_turn(agent, thread_id, f"find {place}")
    state = await run_turn(agent, thread_id, last)
    return next(m for m in state["messages"] if getattr(m, "tool_call_id", None) == "cmp")


async def test_compare_areas_gets_turn_one_from_history_and_the_current_value(
    saver: Any, thread_id: str
) -> None:
    received = Received()
    agent = build_agent(
        scripted(HANDLES), [get_aoi, received.tool()], checkpointer=saver, ring_size=1
    )
    reply = await three_areas_then(agent, thread_id)
    assert received.calls == [(COPENHAGEN, OSLO)]  # turn 1 beyond a ring of one: from history
    # The text result is captured (tools/compare_areas/result), and the receipt ends the reply.
    captured = "[state updated: tools/compare_areas/result] b is wider"
    assert reply.content == f"{captured}\n{RECEIPT}" and reply.status == "success"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"a": f"@state:{BBOX}@turn=9", "b": f"@state:{BBOX}"}, "Turn 9 never happened"),
        ({"a": "@state:gazet/get_aoi/country@turn=1", "b": "@state:x"}, "not set yet"),
        ({"a": "@state:gazet/get_aoi/bboxx", "b": "@state:x"}, f"Did you mean {BBOX}"),
        ({"a": f"compare @state:{BBOX}", "b": [1, 2]}, "inside a longer text"),
        ({"a": [f"@state:{BBOX}"], "b": [1, 2]}, "inside a list or object"),
        ({"a": {"box": f"@state:{BBOX}"}, "b": [1, 2]}, "inside a list or object"),
    ],
)
async def test_a_handle_that_does_not_resolve_stops_the_call(
    args: dict[str, Any], expected: str, thread_id: str
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    received = Received()
    agent = build_agent(
        scripted(args), [get_aoi, received.tool()], checkpointer=InMemorySaver(), ring_size=1
    )
    if "country" in str(args):  # a turn before the first find: turn 1 published nothing
        await run_turn(agent, thread_id, "chat")
    reply = await three_areas_then(agent, thread_id)
    assert received.calls == []  # the tool did not run
    assert reply.status == "error" and "compare_areas did not run" in reply.content
    assert expected in reply.content, reply.content
    if "inside" in expected:
        assert '"@state:<key>@turn=N"' in reply.content  # says how to pass one


async def test_a_pruned_turn_is_said_to_be_pruned(saver: Any, thread_id: str) -> None:
    received = Received()
    agent = build_agent(
        scripted(HANDLES), [get_aoi, received.tool()], checkpointer=saver, ring_size=1
    )
    for place in ("Copenhagen", "Aarhus", "Oslo"):
        await run_turn(agent, thread_id, f"find {place}")
    await prune_thread(saver, thread_id, keep_turns=1)
    state = await run_turn(agent, thread_id, "compare")
    reply = next(m for m in state["messages"] if getattr(m, "tool_call_id", None) == "cmp")
    assert received.calls == [] and reply.status == "error"
    assert "Turn 1 is no longer retained" in reply.content
    assert "Do not use the current value in its place" in reply.content


def test_a_sync_run_resolves_too() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    received = Received()
    agent = build_agent(
        scripted(HANDLES), [get_aoi, received.tool()], checkpointer=InMemorySaver(), ring_size=1
    )
    config = {"configurable": {"thread_id": "sync"}}
    for text in ("find Copenhagen", "find Aarhus", "find Oslo", "compare"):
        state = agent.invoke({"messages": [HumanMessage(text)]}, config)
    reply = next(m for m in state["messages"] if getattr(m, "tool_call_id", None) == "cmp")
    assert received.calls == [(COPENHAGEN, OSLO)] and reply.content.endswith(RECEIPT)


async def test_create_agent_with_the_middleware(saver: Any, thread_id: str) -> None:
    from langchain.agents import create_agent

    from mcp_state_versions.agent.middleware import SessionStateMiddleware

    received = Received()
    agent = create_agent(
        scripted(HANDLES),
        [get_aoi, received.tool()],
        middleware=[SessionStateMiddleware(ring_size=1, messages="whole")],
        checkpointer=saver,
    )
    reply = await three_areas_then(agent, thread_id)
    assert received.calls == [(COPENHAGEN, OSLO)]
    # The middleware also captures the text result under tools/compare_areas/result.
    assert reply.content.endswith(RECEIPT), reply.content


def own_graph(
    saver: Any, tools: list[Any], *, handles: bool, args: dict[str, Any] = HANDLES
) -> Any:
    """A graph of one's own: a model node and a plain ToolNode, with StateHandles' wrappers
    when ``handles``."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from mcp_state_versions import make_session_state, with_session_state
    from mcp_state_versions.agent.handles import StateHandles
    from mcp_state_versions.state.clock import ticks_around

    model = scripted(args)

    async def agent(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        reply = await model.ainvoke(state["messages"])
        return {"messages": [reply], **ticks_around(state, reply, config)}

    wrappers: dict[str, Any] = {}
    if handles:
        resolver = StateHandles()
        wrappers = {
            "wrap_tool_call": resolver.wrap_tool_call,
            "awrap_tool_call": resolver.awrap_tool_call,
        }
    graph = StateGraph(make_session_state())
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(with_session_state(tools, saver), **wrappers))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


async def test_a_plain_tool_node(saver: Any, thread_id: str) -> None:
    received = Received()
    graph = own_graph(saver, [get_aoi, received.tool()], handles=True)
    reply = await three_areas_then(graph, thread_id)
    assert received.calls == [(COPENHAGEN, OSLO)] and reply.content.endswith(RECEIPT)


async def test_the_mcp_interceptor_over_stdio(thread_id: str) -> None:
    """MCP tools in a plain ToolNode with no wrapper of ours: the adapters' interceptor
    resolves the handles before the server is called; the server's structured comparison is
    published, and the receipt ends the reply. A handle that does not resolve never reaches
    the server."""
    from langgraph.checkpoint.memory import InMemorySaver

    from mcp_state_versions.agent.mcp_servers import load_publishing_tools

    tools = await load_publishing_tools(
        {
            "gazet": {
                "command": sys.executable,
                "args": ["-m", "mcp_state_versions.demo.gazetteer"],
                "transport": "stdio",
            }
        }
    )
    graph = own_graph(InMemorySaver(), tools, handles=False)
    reply = await three_areas_then(graph, thread_id)
    assert reply.status == "success" and reply.content.endswith(RECEIPT), reply.content
    state = (await graph.aget_state({"configurable": {"thread_id": thread_id}})).values
    assert state["tool_state"]["gazet/compare_areas/east_offset"]["value"] == -1.8
    # Copenhagen's centre lies 1.8° east of Oslo's. A turn that never happened stops the call
    # before the server sees it: nothing is published for it.
    wrong = own_graph(InMemorySaver(), tools, handles=False, args={"a": f"@state:{BBOX}@turn=9"})
    reply = await three_areas_then(wrong, thread_id)
    assert reply.status == "error" and "Turn 9 never happened" in reply.content
    state = (await wrong.aget_state({"configurable": {"thread_id": thread_id}})).values
    assert not any(key.startswith("gazet/compare_areas/") for key in state["tool_state"])


def test_the_model_is_told_handles_exist() -> None:
    from mcp_state_versions.agent.inspect_state import INSPECT_STATE_DESCRIPTION

    assert '"@state:<key>"' in INSPECT_STATE_DESCRIPTION
    assert '"@state:<key>@turn=N"' in INSPECT_STATE_DESCRIPTION
    assert "[state used: <key>@turn=N]" in INSPECT_STATE_DESCRIPTION
