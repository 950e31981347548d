"""One definition of a turn's conversation on every path that drives a thread: ``run_turn``,
``invoke``/``ainvoke``/``astream``, sync and async, every durability mode, ``build_agent`` and
``create_agent`` with the middleware, a summarized thread and a turn still waiting for a
person, each read against a notebook of what was said."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import uuid4

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from mcp_state_versions import (
    CheckpointHistory,
    PruningInMemorySaver,
    SessionAgentState,
    SessionStateMiddleware,
    run_turn,
)
from mcp_state_versions.conversation import TurnConversation, turn_conversation
from mcp_state_versions.demo import get_aoi
from mcp_state_versions.scripted import ScriptedChatModel

from .conftest import BACKENDS, open_backend
from .helpers import agent_on, respond

TURNS = ["find Copenhagen", "chat", "find Oslo", "how are you", "find Aarhus"]


def notebook(turns: Sequence[str]) -> list[tuple[str, str, list[tuple[str, dict[str, Any]]]]]:
    """What was said, turn by turn: the user's words, the reply, the calls made."""
    noted = []
    for text in turns:
        place = text[5:] if text.startswith("find ") else None
        calls = [("get_aoi", {"place": place})] if place else []
        noted.append((text, "done" if place else "noted", calls))
    return noted


def said(found: TurnConversation) -> tuple[Any, Any, list[tuple[str, dict[str, Any]]]]:
    return found.user, found.reply, [(c.tool, c.args) for c in found.calls]


def create_agent_on(saver: Any, *middleware: Any) -> Any:
    from langchain.agents import create_agent

    return create_agent(
        ScriptedChatModel(respond=respond),
        [get_aoi],
        middleware=[SessionStateMiddleware(), *middleware],
        state_schema=SessionAgentState,
        checkpointer=saver,
    )


async def drive(agent: Any, thread_id: str, text: str, how: str, durability: str) -> None:
    config = {"configurable": {"thread_id": thread_id}}
    payload = {"messages": [HumanMessage(text)]}
    if how == "run_turn":
        await run_turn(agent, thread_id, text)
    elif how == "ainvoke":
        await agent.ainvoke(payload, config, durability=durability)
    elif how == "astream":
        async for _ in agent.astream(payload, config, durability=durability):
            pass
    else:  # the sync API, as a sync app drives it
        agent.invoke(payload, config, durability=durability)


async def conversations(saver: Any, thread_id: str, total: int) -> list[Any]:
    history = CheckpointHistory(saver)
    found = []
    for turn in range(1, total + 1):
        messages = await history.turn_messages(thread_id, turn)
        assert messages is not None, turn
        found.append(said(turn_conversation(*messages)))
    return found


PATHS = [("run_turn", "async")] + [
    (how, durability)
    for how in ("ainvoke", "astream", "invoke")
    for durability in ("async", "sync", "exit")
]


@pytest.mark.parametrize(("how", "durability"), PATHS)
@pytest.mark.parametrize("kind", ["build_agent", "create_agent"])
async def test_every_turn_s_conversation_is_what_was_said_on_every_path(
    kind: str, how: str, durability: str
) -> None:
    saver = PruningInMemorySaver()
    agent = agent_on(saver) if kind == "build_agent" else create_agent_on(saver)
    thread_id = f"talk-{uuid4().hex}"
    for text in TURNS:
        await drive(agent, thread_id, text, how, durability)
    assert await conversations(saver, thread_id, len(TURNS)) == notebook(TURNS)


@pytest.mark.parametrize("kind", BACKENDS)
async def test_the_api_answers_each_turn_s_own_conversation_after_invoke(
    kind: str, tmp_path: Any
) -> None:
    """The quick start's own pattern (``ainvoke``), read through the HTTP API on every
    backend: turn 1 is "Oslo?" / "Rain.", never the next turn's message."""
    import httpx

    from mcp_state_versions.api import create_app

    thread_id = f"api-{uuid4().hex}"
    async with await open_backend(kind, tmp_path) as saver:
        agent = create_agent_on(saver)
        for text in TURNS[:3]:
            await drive(agent, thread_id, text, "ainvoke", "async")
        transport = httpx.ASGITransport(app=create_app(saver))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            for turn, (user, reply, calls) in enumerate(notebook(TURNS[:3]), start=1):
                body = (await http.get(f"/threads/{thread_id}/turns/{turn}")).json()
                assert (body["user"], body["reply"], body["open"]) == (user, reply, False)
                assert [(c["tool"], c["args"]) for c in body["calls"]] == calls


def _summarizer_reply(messages: Sequence[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if "Messages to summarize" in str(last.content):
        return AIMessage("a summary")
    return respond(messages)


async def test_a_summary_is_never_a_turn_s_user_message() -> None:
    """LangChain's summarization replaces the history with a summary (a human message):
    each turn still reads its own words, and a later turn's user is never the summary."""
    from langchain.agents.middleware import SummarizationMiddleware

    saver = PruningInMemorySaver()
    summarizer = SummarizationMiddleware(
        ScriptedChatModel(respond=_summarizer_reply), trigger=("messages", 6), keep=("messages", 2)
    )
    agent = create_agent_on(saver, summarizer)
    thread_id = f"sum-{uuid4().hex}"
    turns = [*TURNS, "find Bergen", "chat again", "find Malmo"]
    for text in turns:
        await drive(agent, thread_id, text, "ainvoke", "async")
    state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
    assert "summary" in str(state["messages"][0].content)  # summarized: turns left state
    assert await conversations(saver, thread_id, len(turns)) == notebook(turns)


async def test_a_turn_waiting_for_a_person_says_it_is_open() -> None:
    from .helpers import two_asks_agent

    saver = PruningInMemorySaver()
    agent = two_asks_agent(saver)
    thread_id = f"open-{uuid4().hex}"
    config = {"configurable": {"thread_id": thread_id}}
    await agent.ainvoke({"messages": [HumanMessage("ask both")]}, config)
    found = turn_conversation(*await CheckpointHistory(saver).turn_messages(thread_id, 1))  # type: ignore[misc]
    assert found.open and found.user == "ask both" and found.reply is None
    assert [c.tool for c in found.calls] == ["ask", "ask"]
    assert all(c.result is None for c in found.calls)
