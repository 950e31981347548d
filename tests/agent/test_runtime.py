"""``LeanToolRuntime``: injected as ``ToolRuntime`` is, hidden from the model, and kept out of
LangChain's per-call dump of a tool's arguments, in ``build_agent`` and in ``create_agent``."""

from __future__ import annotations

from typing import Any, TypedDict
from uuid import uuid4

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolRuntime

from mcp_state_versions import (
    LeanToolRuntime,
    SessionStateMiddleware,
    build_agent,
    publish,
    run_turn,
    values_of,
)
from mcp_state_versions.demo.scripted import ScriptedChatModel, call

SEEN: list[Any] = []


class _State(TypedDict):
    messages: list[Any]


@tool
def lean(place: str, runtime: LeanToolRuntime) -> Any:
    """Publish a place's name."""
    SEEN.append(runtime)
    return publish(runtime, "geo", "lean", {"name": place})


@tool
def typed(place: str, runtime: LeanToolRuntime[None, _State]) -> Any:
    """Publish a place's name (the runtime typed with the graph's state)."""
    SEEN.append(runtime)
    return publish(runtime, "geo", "typed", {"name": place})


@tool
def stock(place: str, runtime: ToolRuntime) -> str:
    """The same tool on LangGraph's own ``ToolRuntime``."""
    return place


def _runtime(messages: int) -> ToolRuntime:
    history = [HumanMessage(f"message {n}", id=f"m{n}") for n in range(messages)]
    return ToolRuntime(
        state={"messages": history, "tool_state": {}},
        context=None,
        config={},
        stream_writer=lambda _: None,
        tool_call_id="c1",
        store=None,
    )


def test_the_model_never_sees_the_runtime() -> None:
    for each in (lean, typed, stock):
        assert list(each.tool_call_schema.model_json_schema()["properties"]) == ["place"]


def test_langchain_dumps_the_state_of_a_tool_runtime_but_not_of_a_lean_one() -> None:
    # LangChain validates a call's arguments, then dumps them (BaseTool._parse_input): with
    # ToolRuntime the dump holds every message of the state; with LeanToolRuntime, None.
    runtime = _runtime(50)
    dumped = stock.args_schema.model_validate({"place": "Oslo", "runtime": runtime}).model_dump()
    assert len(dumped["runtime"]["state"]["messages"]) == 50
    for each in (lean, typed):
        parsed = each.args_schema.model_validate({"place": "Oslo", "runtime": runtime})
        assert parsed.model_dump() == {"place": "Oslo", "runtime": None}
        assert parsed.runtime is runtime  # passed through as the tool node built it


async def test_build_agent_injects_the_tool_nodes_runtime() -> None:
    SEEN.clear()
    script = [
        AIMessage("", tool_calls=[call("lean", "c1", place="Oslo")]),
        AIMessage("", tool_calls=[call("typed", "c2", place="Aarhus")]),
        AIMessage("done"),
    ]
    agent = build_agent(
        ScriptedChatModel(replies=script), [lean, typed], checkpointer=InMemorySaver()
    )
    state = await run_turn(agent, f"lean-{uuid4().hex[:8]}", "where?")
    assert values_of(state) == {"geo/lean/name": "Oslo", "geo/typed/name": "Aarhus"}
    assert [type(runtime) for runtime in SEEN] == [ToolRuntime, ToolRuntime]
    assert [runtime.tool_call_id for runtime in SEEN] == ["c1", "c2"]
    assert [len(runtime.state["messages"]) for runtime in SEEN] == [2, 4]


def test_create_agent_with_the_middleware_injects_it_too() -> None:
    SEEN.clear()
    script = [AIMessage("", tool_calls=[call("lean", "c1", place="Oslo")]), AIMessage("done")]
    agent = create_agent(
        ScriptedChatModel(replies=script),
        [lean],
        middleware=[SessionStateMiddleware(messages="whole")],
        checkpointer=InMemorySaver(),
    )
    state = agent.invoke(
        {"messages": [("user", "where?")]}, {"configurable": {"thread_id": "lean"}}
    )
    assert values_of(state) == {"geo/lean/name": "Oslo"}
    assert type(SEEN[0]) is ToolRuntime and SEEN[0].state["messages"][0].content == "where?"
