"""What a tool sees of session state (``mcp_state_versions.agent.view``): ``tool_state`` read-only,
through ``ToolRuntime`` and ``InjectedState``, in ``build_agent`` and in ``create_agent`` with
``SessionStateMiddleware``, async and sync; the graph's own state stays a dict."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import InjectedState, ToolRuntime

from mcp_state_versions import SessionStateMiddleware, build_agent, publish
from mcp_state_versions.demo.scripted import ScriptedChatModel, call

SEEN: list[dict[str, Any]] = []


def _look(tool_state: Any) -> dict[str, Any]:
    """What a tool can and cannot do with the ``tool_state`` it was given."""
    found: dict[str, Any] = {
        "type": type(tool_state),
        "mapping": isinstance(tool_state, Mapping),
        "value": tool_state["ts/put/k"]["value"] if "ts/put/k" in tool_state else None,
        "copy": dict(tool_state),
    }
    for name, change in {
        "assign": lambda: tool_state.__setitem__("ts/put/k", {"value": "forged"}),
        "delete": lambda: tool_state.__delitem__("ts/put/k"),
        "update": lambda: tool_state.update({"x": 1}),
    }.items():
        try:
            change()
        except (TypeError, AttributeError):
            found[name] = "refused"
        else:
            found[name] = "done"
    return found


@tool
def put(value: str, runtime: ToolRuntime) -> Any:
    """Look at tool_state through the runtime, then publish a value."""
    SEEN.append(_look(runtime.state["tool_state"]))
    return publish(runtime, "ts", "put", {"k": value})


@tool
def peek(tool_state: Annotated[Any, InjectedState("tool_state")]) -> str:
    """Look at tool_state injected as a state field."""
    SEEN.append(_look(tool_state))
    return "looked"


def _script() -> ScriptedChatModel:
    def respond(messages: Any) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            name, _, value = str(last.content).partition(" ")
            args = {"value": value} if name == "put" else {}
            return AIMessage("", tool_calls=[call(name, f"c{len(messages)}", **args)])
        return AIMessage("ok")

    return ScriptedChatModel(respond=respond)


def _agents() -> dict[str, Any]:
    return {
        "build_agent": build_agent(_script(), [put, peek], checkpointer=InMemorySaver()),
        "create_agent": create_agent(
            _script(),
            [put, peek],
            middleware=[SessionStateMiddleware(messages="whole")],
            checkpointer=InMemorySaver(),
        ),
    }


@pytest.mark.parametrize("kind", ["build_agent", "create_agent"])
@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
async def test_a_tool_sees_tool_state_read_only_and_the_graph_keeps_its_dict(
    kind: str, sync: bool
) -> None:
    agent = _agents()[kind]
    config = {"configurable": {"thread_id": f"view-{kind}-{sync}"}}
    SEEN.clear()
    for text in ("put first", "put second", "peek"):
        message = {"messages": [HumanMessage(text)]}
        if sync:
            agent.invoke(message, config)
        else:
            await agent.ainvoke(message, config)
    # through ToolRuntime (put, twice) and InjectedState (peek): the same read-only view
    assert [seen["type"] for seen in SEEN] == [MappingProxyType] * 3
    assert all(seen["mapping"] for seen in SEEN)
    assert [seen["value"] for seen in SEEN] == [None, "first", "second"]
    for seen in SEEN:
        assert (seen["assign"], seen["delete"], seen["update"]) == ("refused",) * 3
    state = (await agent.aget_state(config)).values["tool_state"]
    assert type(state) is dict  # the view is the tool's, not the graph's
    assert state["ts/put/k"]["value"] == "second"
    # what the last tool saw is the state's own entry (the clock has moved on since)
    assert SEEN[-1]["copy"]["ts/put/k"] == state["ts/put/k"]


def test_langchain_passes_the_view_through_its_argument_dump_unwalked() -> None:
    """Why the view is cheaper than the dict: LangChain dumps a tool's arguments, runtime state
    included, on every call; a mapping proxy comes back as the same object, not copied entry
    by entry (a dict of entries does)."""
    entries = {f"k{i}": {"value": i, "ring": []} for i in range(3)}
    dumped = {}
    for label, tool_state in (("dict", entries), ("view", MappingProxyType(entries))):
        runtime = ToolRuntime(
            state={"messages": [], "tool_state": tool_state},
            context=None,
            config={},
            stream_writer=lambda _: None,
            tool_call_id="c",
            store=None,
        )
        model = put.args_schema.model_validate({"value": "v", "runtime": runtime})
        dumped[label] = model.model_dump()["runtime"]["state"]["tool_state"]
    assert dumped["view"] is not None and dumped["view"].__class__ is MappingProxyType
    assert dumped["dict"] == entries and dumped["dict"] is not entries
