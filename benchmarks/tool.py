"""``inspect_state`` through a real ``ToolNode``, against the cheapest tool LangChain can run.

The floor is a tool with the same arguments (``key``, ``runtime``, ``pattern``, ``path``, ``turn``,
``versions``), under the very argument schema ``inspect_state`` declares, that returns a
constant: whatever it costs is LangChain's and LangGraph's own price for a tool call (argument
validation, runtime injection, the message). Both run in the same one-node graph with the same
state, so the ratio is what the library adds. The listing is measured the same way: ``key="*"``
over 40 keys with rewrite markers, against the same listing of plain values (nothing to mark).

Last, what a tool's ``runtime`` argument costs a call in a 1,000-turn thread (4,000 messages):
``runtime: ToolRuntime``, which LangChain dumps with the whole state on every call
(langchain-ai/langchain#34770), against ``runtime: LeanToolRuntime``, which it does not.
"""

# No ``from __future__ import annotations``: the floor is a LangChain tool, and string
# annotations would make LangChain re-evaluate them on every call (the floor would be slow).

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, ToolRuntime

from mcp_state_versions import (
    CLOCK_KEY,
    LeanToolRuntime,
    SessionState,
    make_inspect_state,
    make_merge_tool_state,
)
from mcp_state_versions.agent.inspect_state import _InspectStateArgs
from mcp_state_versions.demo.scripted import call

from .common import ratio, runtime_over, timed_side_by_side


@tool("inspect_state", args_schema=_InspectStateArgs)
async def floor(
    key: Any,
    runtime: ToolRuntime,
    pattern: Any = None,
    path: Any = None,
    turn: Any = None,
    versions: Any = False,
) -> str:
    """The cheapest tool with inspect_state's arguments (async, as inspect_state is: a sync
    tool would pay for a thread under ainvoke)."""
    return "ok"


@tool
async def with_tool_runtime(place: str, runtime: ToolRuntime) -> str:
    """A tool taking LangGraph's ``ToolRuntime``."""
    return "ok"


@tool
async def with_lean_runtime(place: str, runtime: LeanToolRuntime) -> str:
    """The same tool taking ``LeanToolRuntime``."""
    return "ok"


RUNTIME_TURNS = 1000
"""The turns of the thread whose state a tool's runtime carries: four messages each (the
user's, the model's tool call, the tool's answer, the model's reply)."""


def _runtime_call(tool_: BaseTool) -> dict[str, Any]:
    """A call of ``tool_`` as LangGraph's tool node makes it, the runtime injected."""
    messages: list[AnyMessage] = []
    for n in range(RUNTIME_TURNS):
        messages += [
            HumanMessage(f"look up place {n}", id=f"h{n}"),
            AIMessage("", tool_calls=[call("get_aoi", f"c{n}", place=f"place {n}")], id=f"a{n}"),
            ToolMessage(
                f"[state updated: gazet/get_aoi/bbox] {n}", tool_call_id=f"c{n}", id=f"t{n}"
            ),
            AIMessage(f"Place {n} is at {n}.", id=f"r{n}"),
        ]
    return call(tool_.name, "c", place="Oslo", runtime=runtime_over({}, "c", messages))


class PlainState(TypedDict):
    """A host without versions: tool_state is a plain dict channel."""

    messages: Annotated[list[AnyMessage], add_messages]
    tool_state: dict[str, Any]


def _graph(tool_: BaseTool, schema: type = SessionState) -> Any:
    graph = StateGraph(schema)
    graph.add_node("tools", ToolNode([tool_]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


def _state(tool_state: dict[str, Any], **args: Any) -> dict[str, Any]:
    message = AIMessage("", tool_calls=[call("inspect_state", "c", **args)])
    return {"messages": [message], "tool_state": tool_state}


def _versioned_state() -> dict[str, Any]:
    reducer = make_merge_tool_state()
    state: dict[str, Any] = {}
    for turn in range(1, 21):
        state = reducer(state, {CLOCK_KEY: {"turn": turn, "open": True, "message": f"m{turn}"}})
        writes = {
            f"s/t/k{i}": {"value": {"i": i, "t": turn if i < 5 else 0}, "tool": "t"}
            for i in range(40)
        }
        state = reducer(state, writes)
        state = reducer(state, {CLOCK_KEY: {"turn": turn, "open": False, "seen": f"a{turn}"}})
    return state


async def measure(repeat: int) -> dict[str, Any]:
    versioned = _versioned_state()
    plain = {k: e["value"] for k, e in versioned.items() if k.startswith("s/")}
    inspect = _graph(make_inspect_state(history=None))
    # The listings run where tool_state is a plain channel, so neither pays the reducer's merge
    # of the input state: what is compared is the listing itself, markers against none.
    inspect_plain = _graph(make_inspect_state(history=None), PlainState)
    cheapest = _graph(floor)
    out: dict[str, Any] = {}
    read = _state(versioned, key="s/t/k0", turn=18)
    assert "at the end of turn 18" in str((await inspect.ainvoke(read))["messages"][-1].content)

    async def ring_read() -> Any:
        return await inspect.ainvoke(read)

    async def floor_read() -> Any:
        return await cheapest.ainvoke(read)

    runs = repeat * 20
    out.update(await timed_side_by_side({"ring read": ring_read, "floor": floor_read}, runs))
    out["ring read ÷ floor"] = ratio(out["ring read"], out["floor"])
    marked, unmarked = _state(versioned, key="*"), _state(plain, key="*")
    assert "rewritten" in str((await inspect_plain.ainvoke(marked))["messages"][-1].content)

    async def listing() -> Any:
        return await inspect_plain.ainvoke(marked)

    async def plain_listing() -> Any:
        return await inspect_plain.ainvoke(unmarked)

    out.update(await timed_side_by_side({"listing": listing, "plain listing": plain_listing}, runs))
    out["listing ÷ plain"] = ratio(out["listing"], out["plain listing"])
    stock_call, lean_call = _runtime_call(with_tool_runtime), _runtime_call(with_lean_runtime)

    async def stock_runtime() -> Any:
        return await with_tool_runtime.ainvoke(stock_call)

    async def lean_runtime() -> Any:
        return await with_lean_runtime.ainvoke(lean_call)

    calls = {"call, ToolRuntime": stock_runtime, "call, LeanToolRuntime": lean_runtime}
    out.update(await timed_side_by_side(calls, repeat * 5))
    out["ToolRuntime ÷ LeanToolRuntime"] = ratio(
        out["call, ToolRuntime"], out["call, LeanToolRuntime"]
    )
    return out
