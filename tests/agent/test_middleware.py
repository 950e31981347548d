"""``SessionStateMiddleware`` in LangChain's own ``create_agent``, next to LangChain's own
middleware (summarization, human in the loop), on every backend, async and sync."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from typing import Any
from uuid import uuid4

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentState,
    HumanInTheLoopMiddleware,
    SummarizationMiddleware,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command
from pydantic import BaseModel

from mcp_state_versions import (
    SESSION_STATE_PROMPT,
    SessionAgentState,
    SessionStateMiddleware,
    ToolStateError,
    count_turns,
    current_turn,
    publish,
)
from mcp_state_versions.agent.middleware import WHOLE_MESSAGES_WARNING
from mcp_state_versions.demo.scripted import ScriptedChatModel, call

from ..conftest import BACKENDS, open_backend
from ..conversation import Conversation

PLACES = {"copenhagen": [12.4, 55.5, 12.7, 55.8], "aarhus": [9.9, 56.1, 10.3, 56.2]}


class Area(BaseModel):
    name: str
    bbox: list[float]


@tool
def find(place: str) -> Area:
    """Find a place's area (a pydantic result)."""
    return Area(name=place, bbox=PLACES[place.lower()])


@tool
def info(place: str) -> dict:
    """Facts about a place (a dict result)."""
    return {"name": place, "letters": len(place)}


@tool
def greet(who: str) -> str:
    """A plain-text result: captured as tools/greet/result."""
    return f"hello {who}"


def respond(messages: Sequence[BaseMessage]) -> AIMessage:
    """``find X`` calls find and info (and the MCP get_aoi when bound); ``compare`` reads
    turn 1; a tool result is acknowledged; anything else is chat."""
    last = messages[-1]
    n = len(messages)
    if isinstance(last, ToolMessage):
        return AIMessage("done")
    text = str(last.content)
    if text.startswith("find "):
        place = text.split()[1]
        calls = [call("find", f"f{n}", place=place), call("info", f"i{n}", place=place)]
        if "mcp" in text:
            calls.append(call("get_aoi", f"g{n}", place=place))
        return AIMessage("", tool_calls=calls)
    if text.startswith("compare"):
        return AIMessage(
            "", tool_calls=[call("inspect_state", f"s{n}", key="tools/find/bbox", turn=1)]
        )
    if text.startswith("greet"):
        return AIMessage("", tool_calls=[call("greet", f"h{n}", who="you")])
    return AIMessage("noted")


def summarizer() -> ScriptedChatModel:
    return ScriptedChatModel(respond=lambda messages: AIMessage("Earlier: places were found."))


def agent_on(
    saver: Any, tools: list[BaseTool], *, ring_size: int = 8, extra: Sequence[Any] = ()
) -> Any:
    def toolset(t: BaseTool) -> str:
        return "gazet" if t.name == "get_aoi" else "tools"

    return create_agent(
        ScriptedChatModel(respond=respond),
        tools,
        middleware=[
            SessionStateMiddleware(ring_size=ring_size, toolset=toolset, messages="whole"),
            SummarizationMiddleware(
                model=summarizer(), trigger=("messages", 8), keep=("messages", 3)
            ),
            *extra,
        ],
        checkpointer=saver,
    )


async def _mcp_tools() -> list[BaseTool]:
    client = MultiServerMCPClient(
        {
            "gazet": {
                "command": sys.executable,
                "args": ["-m", "mcp_state_versions.demo.gazetteer"],
                "transport": "stdio",
            }
        }
    )
    return await client.get_tools()


@pytest.mark.parametrize("ring_size", [8, 0])
@pytest.mark.parametrize("kind", BACKENDS)
async def test_capture_versions_and_summarization_on_every_backend(
    kind: str, ring_size: int, tmp_path: Any
) -> None:
    tools = [find, info, greet, *await _mcp_tools()]
    async with await open_backend(kind, tmp_path) as saver:
        agent = agent_on(saver, tools, ring_size=ring_size)
        conv = Conversation(agent, saver, f"mw-{uuid4().hex[:12]}", live=True)
        first = await conv.say("find Copenhagen mcp")
        crumbs = {
            m.tool_call_id: str(m.content) for m in first["messages"] if isinstance(m, ToolMessage)
        }
        assert any(
            c.startswith("[state updated: tools/find/name, tools/find/bbox]")
            for c in crumbs.values()
        )
        assert any(c.startswith("[state updated: gazet/get_aoi/") for c in crumbs.values())
        for text in ["chat", "find Aarhus mcp", "greet", "chat", "chat"]:
            state = await conv.say(text)
        assert count_turns(state["messages"]) < 6, "summarization did not run"
        assert current_turn(state) == 6
        state = await conv.say("compare")
        answer = str([m for m in state["messages"] if isinstance(m, ToolMessage)][-1].content)
        assert answer.startswith("tools/find/bbox at the end of turn 1 (held turns 1–2).")
        assert answer.endswith("[12.4, 55.5, 12.7, 55.8]")
        checked = await conv.check()
        assert checked["Found:history" if ring_size == 0 else "Found:ring"] > 0, checked
        await conv.check(ring_only=True)
        values = (await agent.aget_state(conv.config)).values["tool_state"]
        assert values["gazet/get_aoi/bbox"]["versions"] == 2
        assert values["tools/greet/result"]["value"] == "hello you"


async def test_the_rewrite_marker_reaches_the_model_in_the_breadcrumb() -> None:
    saver = InMemorySaver()
    conv = Conversation(agent_on(saver, [find, info]), saver, "marker", live=True)
    await conv.say("find Copenhagen")
    state = await conv.say("find Aarhus")
    crumb = next(
        str(m.content)
        for m in reversed(state["messages"])
        if isinstance(m, ToolMessage) and m.tool_call_id.startswith("f")
    )
    assert crumb.startswith(
        "[state updated: tools/find/name, tools/find/bbox — each replaces the value it held "
        "since turn 1]"
    )
    assert '"bbox": [9.9, 56.1, 10.3, 56.2]' in crumb  # small: kept inline


async def test_one_inspect_state_and_the_guidance_in_the_system_prompt() -> None:
    seen: list[list[BaseMessage]] = []

    def record(messages: Sequence[BaseMessage]) -> AIMessage:
        seen.append(list(messages))
        return AIMessage("ok")

    agent = create_agent(
        ScriptedChatModel(respond=record),
        [find],
        system_prompt="You are a geographer.",
        middleware=[SessionStateMiddleware(messages="whole")],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "p"}})
    system = str(seen[0][0].content)
    assert system.startswith("You are a geographer.") and SESSION_STATE_PROMPT in system
    tool_node = agent.get_graph().nodes["tools"].data
    assert sorted(tool_node.tools_by_name) == ["find", "inspect_state"]


async def test_human_in_the_loop_does_not_count_a_resume_as_a_turn() -> None:
    saver = InMemorySaver()
    agent = agent_on(
        saver, [find, info], extra=[HumanInTheLoopMiddleware(interrupt_on={"find": True})]
    )
    conv = Conversation(agent, saver, "hitl", live=True)
    await conv.say("find Copenhagen")
    assert conv.notebook.ends == []  # paused inside turn 1
    await conv.resume({"decisions": [{"type": "approve"}]})
    await conv.say("find Aarhus")
    await conv.resume({"decisions": [{"type": "approve"}]})
    values = (await agent.aget_state(conv.config)).values
    assert current_turn(values) == 2
    assert values["tool_state"]["tools/find/bbox"]["since"] == 2
    await conv.check()


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_sync_runs_capture_and_walk(kind: str, tmp_path: Any) -> None:
    from mcp_state_versions.backends import run_sync

    from .test_sync import sync_saver

    with sync_saver(kind, tmp_path) as saver:
        agent = agent_on(saver, [find, info], ring_size=0)
        conv = Conversation(agent, saver, f"sync-mw-{uuid4().hex[:12]}", live=True, sync=True)
        for text in ["find Copenhagen", "find Aarhus", "compare"]:
            state = run_sync(conv.say(text))
        answer = str([m for m in state["messages"] if isinstance(m, ToolMessage)][-1].content)
        assert answer.endswith("[12.4, 55.5, 12.7, 55.8]"), answer
        assert run_sync(conv.check())["Found:history"] > 0


def test_a_publishing_tool_without_the_middleware_fails_loudly() -> None:
    """Without the channel, LangGraph would drop the update and the model would be told
    '[state updated: ...]' about state that does not exist."""

    @tool
    def put(value: str, runtime: ToolRuntime) -> Any:
        """Publish a value."""
        return publish(runtime, "ts", "put", {"k": value})

    agent = create_agent(
        ScriptedChatModel(
            replies=[AIMessage("", tool_calls=[call("put", "p", value="v")]), AIMessage("ok")]
        ),
        [put],
        checkpointer=InMemorySaver(),
    )
    with pytest.raises(ToolStateError, match="SessionStateMiddleware"):
        agent.invoke({"messages": [HumanMessage("put")]}, {"configurable": {"thread_id": "x"}})


@pytest.mark.parametrize("session_first", [True, False])
async def test_a_reviewers_edit_notice_survives_capture_in_either_order(
    session_first: bool,
) -> None:
    """A reviewer edits a captured call (Copenhagen becomes Aarhus). The tool's reply is the
    breadcrumb, and HumanInTheLoopMiddleware's note that a reviewer replaced the call stays
    in it whether SessionStateMiddleware is listed before it or after it."""
    hitl = HumanInTheLoopMiddleware(interrupt_on={"find": True})
    session = SessionStateMiddleware(toolset="tools", messages="whole")
    agent = create_agent(
        ScriptedChatModel(respond=respond),
        [find, info],
        middleware=[session, hitl] if session_first else [hitl, session],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": f"edited-{session_first}"}}
    await agent.ainvoke({"messages": [("user", "find Copenhagen")]}, config)
    edit = {"type": "edit", "edited_action": {"name": "find", "args": {"place": "Aarhus"}}}
    pending = [i.id for t in (await agent.aget_state(config)).tasks for i in t.interrupts]
    state = await agent.ainvoke(
        Command(resume={key: {"decisions": [edit]} for key in pending}), config
    )
    reply = next(
        str(m.content)
        for m in state["messages"]
        if isinstance(m, ToolMessage) and m.tool_call_id.startswith("f")
    )
    assert "a human reviewer replaced this tool call" in reply, reply
    assert "[state updated: tools/find/name, tools/find/bbox]" in reply, reply
    assert state["tool_state"]["tools/find/bbox"]["value"] == PLACES["aarhus"]


async def test_text_results_are_captured_and_a_tool_can_opt_out() -> None:
    """Most LangChain tools return text: it is published as <toolset>/<tool>/result, with
    the breadcrumb, so session state is not empty after them; ``capture=`` opts a tool out."""
    from mcp_state_versions import read_state_key

    for capture, captured in [(True, True), (lambda t: t.name != "greet", False)]:
        agent = create_agent(
            ScriptedChatModel(respond=respond),
            [greet],
            middleware=[SessionStateMiddleware(capture=capture, messages="whole")],
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": f"text-{captured}"}}
        state = await agent.ainvoke({"messages": [("user", "greet")]}, config)
        reply = next(str(m.content) for m in state["messages"] if isinstance(m, ToolMessage))
        listing = read_state_key("*", state)
        if captured:
            assert reply == "[state updated: tools/greet/result] hello you"
            assert "tools/greet/result" in listing
        else:
            assert reply == "hello you" and "Session state is empty" in listing


def test_the_turn_closes_in_the_model_s_own_step() -> None:
    """The final reply's model step closes the turn: no node of the middleware's own runs
    after the agent, so a turn costs the steps (and checkpoints) a plain create_agent's does,
    plus the opening tick."""
    from mcp_state_versions.state.clock import CLOCK_KEY

    agent = create_agent(
        ScriptedChatModel(
            replies=[AIMessage("", tool_calls=[call("greet", "g", who="Ada")]), AIMessage("Hi.")]
        ),
        [greet],
        middleware=[SessionStateMiddleware(messages="whole")],
        checkpointer=InMemorySaver(),
    )
    assert not [node for node in agent.get_graph().nodes if "after_agent" in node]
    config = {"configurable": {"thread_id": f"closed-{uuid4()}"}}
    agent.invoke({"messages": [HumanMessage("Greet Ada.")]}, config)
    record = agent.get_state(config).values["tool_state"][CLOCK_KEY]
    assert record["turn"] == 1 and record["open"] is False
    steps = [s.metadata["step"] for s in agent.get_state_history(config)]
    # the input, the start, before_agent, model, tools, model: a plain create_agent's five
    # checkpoints and the opening tick's (an after_agent node made a seventh)
    assert steps == [4, 3, 2, 1, 0, -1], steps


class _OwnSessionState(SessionAgentState):
    """A user's own schema extending the library's: its messages stay stored as writes."""

    notes: str


class _OwnPlainState(AgentState):
    """A user's own schema on LangChain's AgentState: its messages are stored whole."""

    notes: str


@pytest.mark.parametrize(
    ("schema", "messages", "warns"),
    [
        (None, "delta", True),
        (_OwnPlainState, "delta", True),
        (SessionAgentState, "delta", False),
        (_OwnSessionState, "delta", False),
        (None, "whole", False),
        (_OwnPlainState, "whole", False),
    ],
)
def test_an_agent_storing_its_whole_conversation_is_told_once_as_it_is_built(
    schema: type | None, messages: str, warns: bool
) -> None:
    """create_agent without state_schema=SessionAgentState stores the whole message list at
    every checkpoint; the middleware says so once, at the user's create_agent line, unless
    the user chose messages="whole"."""
    session = SessionStateMiddleware(messages=messages)  # type: ignore[arg-type]
    model = ScriptedChatModel(replies=[AIMessage("ok")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent = create_agent(model, [], middleware=[session], state_schema=schema)
        line = sys._getframe().f_lineno - 1
    told = [w for w in caught if str(w.message) == WHOLE_MESSAGES_WARNING]
    assert len(told) == (1 if warns else 0), [str(w.message) for w in caught]
    if warns:
        assert (told[0].filename, told[0].lineno) == (__file__, line)
        assert "state_schema=SessionAgentState" in str(told[0].message)
    stores_writes = isinstance(agent.channels["messages"], DeltaChannel)
    assert stores_writes is (schema in (SessionAgentState, _OwnSessionState))


def test_the_middleware_refuses_an_unknown_messages_choice() -> None:
    with pytest.raises(ValueError, match="'delta' or 'whole'"):
        SessionStateMiddleware(messages="deltas")  # type: ignore[arg-type]
