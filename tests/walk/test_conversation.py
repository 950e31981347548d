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
from mcp_state_versions.demo.run import get_aoi
from mcp_state_versions.demo.scripted import ScriptedChatModel
from mcp_state_versions.walk.conversation import TurnConversation, turn_conversation

from ..conftest import BACKENDS, open_backend
from ..helpers import agent_on, respond

TURNS = ["find Copenhagen", "chat", "find Oslo", "how are you", "find Aarhus"]


def notebook(turns: Sequence[str]) -> list[tuple[str, str, list[tuple[str, dict[str, Any]]]]]:
    """What was said, turn by turn: the user's words, the reply, the calls made."""
    noted = []
    for text in turns:
        place = text[5:] if text.startswith("find ") else None
        calls = [("get_aoi", {"place": place})] if place else []
        noted.append((text, "done" if place else "noted", calls))
    return noted


def _conversation_of(read: Any) -> TurnConversation:
    assert read.messages is not None, read
    return turn_conversation(read.messages, read.record)


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
        read = await history.turn_messages(thread_id, turn)
        assert read.messages is not None, turn
        found.append(said(turn_conversation(read.messages, read.record)))
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
    history = CheckpointHistory(saver)
    summaries = [
        _conversation_of(await history.turn_messages(thread_id, turn)).summary
        for turn in range(1, len(turns) + 1)
    ]
    assert any(s and "a summary" in s for s in summaries)  # labelled, never the user's words


async def test_a_turn_waiting_for_a_person_says_it_is_open() -> None:
    from ..helpers import two_asks_agent

    saver = PruningInMemorySaver()
    agent = two_asks_agent(saver)
    thread_id = f"open-{uuid4().hex}"
    config = {"configurable": {"thread_id": thread_id}}
    await agent.ainvoke({"messages": [HumanMessage("ask both")]}, config)
    found = _conversation_of(await CheckpointHistory(saver).turn_messages(thread_id, 1))
    assert found.open and found.user == "ask both" and found.reply is None
    assert [c.tool for c in found.calls] == ["ask", "ask"]
    assert all(c.result is None for c in found.calls)


def _reader_reply(messages: Sequence[BaseMessage]) -> AIMessage:
    """The summarizer's and the agent's script, and "recall N" asks for turn N's words."""
    from langchain_core.messages import ToolMessage

    from mcp_state_versions.demo.scripted import call

    last = messages[-1]
    if isinstance(last, HumanMessage) and str(last.content).startswith("recall "):
        turn = str(last.content)[7:]
        return AIMessage(
            "", tool_calls=[call("inspect_state", "r1", key="@conversation", turn=turn)]
        )
    if isinstance(last, ToolMessage) and last.name == "inspect_state":
        return AIMessage("recalled")
    return _summarizer_reply(messages)


def _summarized_agent(saver: Any) -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware

    summarizer = SummarizationMiddleware(
        ScriptedChatModel(respond=_summarizer_reply), trigger=("messages", 6), keep=("messages", 2)
    )
    return create_agent(
        ScriptedChatModel(respond=_reader_reply),
        [get_aoi],
        middleware=[SessionStateMiddleware(), summarizer],
        state_schema=SessionAgentState,
        checkpointer=saver,
    )


@pytest.mark.parametrize("how", ["ainvoke", "invoke"])
async def test_the_model_reads_what_a_summary_removed(how: str) -> None:
    """After summaries took turns out of the messages, the model calls
    ``inspect_state(key="@conversation", turn=N)`` and gets turn N verbatim; the listing
    says which turns left the messages; a range, a turn that never happened and a range too
    long each answer in words."""
    import json

    from mcp_state_versions import make_inspect_state

    from ..conftest import runtime_for

    saver = PruningInMemorySaver()
    agent = _summarized_agent(saver)
    thread_id = f"recall-{uuid4().hex}"
    for text in TURNS:
        await drive(agent, thread_id, text, how, "async")
    await drive(agent, thread_id, "recall 3", how, "async")
    config = {"configurable": {"thread_id": thread_id}}
    state = (await agent.aget_state(config)).values
    answer = next(m for m in reversed(state["messages"]) if m.type == "tool")
    heading, body = str(answer.content).split("\n", 1)
    assert heading == "Turn 3's conversation, as it was said:"
    found = json.loads(body)
    assert (found["user"], found["reply"]) == ("find Oslo", "done")
    assert [(c["tool"], c["args"]) for c in found["calls"]] == [("get_aoi", {"place": "Oslo"})]
    assert "find Oslo" not in [m.content for m in state["messages"]]  # not in state any more
    tool = make_inspect_state(history=CheckpointHistory(saver))
    runtime = runtime_for(state, thread_id)
    listing = await tool.coroutine(key="*", runtime=runtime)  # type: ignore[misc]
    assert "were summarized or trimmed out of this conversation's messages" in listing
    assert 'key="@conversation", turn=N' in listing
    several = await tool.coroutine(key="@conversation", turn="1-2", runtime=runtime)  # type: ignore[misc]
    assert several.count("conversation, as it was said") == 2 and "find Copenhagen" in several
    never = await tool.coroutine(key="@conversation", turn=40, runtime=runtime)  # type: ignore[misc]
    assert never.startswith("Turn 40 never happened: this thread has had 6 turns")
    wide = await tool.coroutine(key="@conversation", turn="1-9", runtime=runtime)  # type: ignore[misc]
    assert "read at most 5 at once" in wide
    bad = await tool.coroutine(key="@conversation", runtime=runtime)  # type: ignore[misc]
    assert "needs turn=N" in bad
    none = make_inspect_state(history=None)
    unkept = await none.coroutine(key="@conversation", turn=1, runtime=runtime)  # type: ignore[misc]
    assert "keeps no turn history" in unkept


async def _driven(saver: Any, thread_id: str) -> dict[str, Any]:
    """:data:`TURNS` on a ``create_agent`` agent with the middleware; the state at the end."""
    agent = create_agent_on(saver)
    for text in TURNS:
        await drive(agent, thread_id, text, "ainvoke", "async")
    return dict((await agent.aget_state({"configurable": {"thread_id": thread_id}})).values)


async def test_nothing_is_added_to_the_listing_when_no_turn_left_the_messages() -> None:
    from mcp_state_versions import make_inspect_state

    from ..conftest import runtime_for

    thread_id = f"whole-{uuid4().hex}"
    state = await _driven(PruningInMemorySaver(), thread_id)
    listing = await make_inspect_state().coroutine(key="*", runtime=runtime_for(state, thread_id))  # type: ignore[misc]
    assert "@conversation" not in listing


async def test_a_pruned_turn_s_conversation_is_no_longer_retained() -> None:
    from mcp_state_versions import make_inspect_state, prune_thread

    from ..conftest import runtime_for

    saver = PruningInMemorySaver()
    thread_id = f"pruned-{uuid4().hex}"
    await _driven(saver, thread_id)
    await prune_thread(saver, thread_id, keep_turns=2)
    agent = create_agent_on(saver)
    state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
    tool = make_inspect_state(history=CheckpointHistory(saver))
    gone = await tool.coroutine(key="@conversation", turn=1, runtime=runtime_for(state, thread_id))  # type: ignore[misc]
    assert gone.startswith("Turn 1 is no longer retained") and "4–5" in gone
    kept = await tool.coroutine(key="@conversation", turn=5, runtime=runtime_for(state, thread_id))  # type: ignore[misc]
    assert '"user": "find Aarhus"' in kept


async def test_a_resumed_turn_reads_as_it_ended_and_withheld_fields_stay_withheld() -> None:
    """After both calls of a paused turn are answered, the turn reads closed with both calls'
    results and the reply; a captured result's secret-named field, withheld from state and
    from the message, is not in the conversation either."""
    from langchain_core.tools import tool

    from mcp_state_versions import call, make_inspect_state

    from ..conftest import runtime_for
    from ..helpers import resume_named, two_asks_agent

    saver = PruningInMemorySaver()
    agent = two_asks_agent(saver)
    thread_id = f"resumed-{uuid4().hex}"
    await agent.ainvoke(
        {"messages": [HumanMessage("ask both")]}, {"configurable": {"thread_id": thread_id}}
    )
    await resume_named(agent, thread_id, "a", "1")
    await resume_named(agent, thread_id, "b", "2")
    found = _conversation_of(await CheckpointHistory(saver).turn_messages(thread_id, 1))
    assert not found.open and found.reply == "done"
    assert [(c.args, c.result is not None) for c in found.calls] == [
        ({"field": "a"}, True),
        ({"field": "b"}, True),
    ]

    @tool
    def login(user: str) -> dict[str, Any]:
        """Sign a user in."""
        return {"user": user, "api_token": "s3cr3t-value"}

    def reply(messages: Sequence[BaseMessage]) -> AIMessage:
        if messages[-1].type == "tool":
            return AIMessage("signed in")
        return AIMessage("", tool_calls=[call("login", "l1", user="ada")])

    from langchain.agents import create_agent

    secret_agent = create_agent(
        ScriptedChatModel(respond=reply),
        [login],
        middleware=[SessionStateMiddleware()],
        state_schema=SessionAgentState,
        checkpointer=saver,
    )
    config = {"configurable": {"thread_id": f"secret-{uuid4().hex}"}}
    state = await secret_agent.ainvoke({"messages": [HumanMessage("sign me in")]}, config)
    tool_ = make_inspect_state(history=CheckpointHistory(saver))
    runtime = runtime_for(state, config["configurable"]["thread_id"])
    said = await tool_.coroutine(key="@conversation", turn=1, runtime=runtime)  # type: ignore[misc]
    assert '"user": "sign me in"' in said and "login" in said
    assert "s3cr3t-value" not in said


def test_the_turns_that_left_the_messages_are_told_by_the_clock_s_marks() -> None:
    """A summary takes the oldest turns, a trim that keeps the first message the ones after
    it: the clock's marks of the first and the last turns' openings tell which left."""
    from mcp_state_versions.state.clock import message_mark
    from mcp_state_versions.walk.conversation import removed_turns

    opening = {turn: HumanMessage(f"t{turn}", id=f"h{turn}") for turn in range(1, 21)}
    record = {
        "turn": 20,
        "first": message_mark("h1"),
        "counted": [message_mark(f"h{turn}") for turn in range(13, 21)],
    }
    everything = list(opening.values())
    assert removed_turns(everything, record) == range(1, 1)  # nothing left: nothing said
    summarized = [HumanMessage("summary", id="s"), *everything[15:]]  # turns 16–20 held
    assert removed_turns(summarized, record) == range(1, 16)
    trimmed = [everything[0], *everything[17:]]  # the first kept, turns 18–20
    assert removed_turns(trimmed, record) == range(2, 18)
    assert removed_turns([HumanMessage("summary", id="s")], record) == range(1, 21)
    assert removed_turns(everything, None) == range(1, 1)


def test_a_state_handed_without_its_messages_adds_nothing_to_the_listing() -> None:
    """A state without a messages field (a host reading tool_state alone) says nothing of
    turns that left the messages: it cannot tell."""
    from mcp_state_versions import read_state_key
    from mcp_state_versions.state.clock import message_mark

    tool_state = {
        "__clock__": {"turn": 3, "open": False, "first": message_mark("h1"), "counted": []},
        "a/b/c": {"value": 1, "tool": "b", "seq": 1, "turn": 1, "since": 1, "versions": 1,
                  "ring": [], "digest": "d", "size": 1, "bytes": 1},
    }  # fmt: skip
    assert "@conversation" not in read_state_key("*", {"tool_state": tool_state})
    summarized = read_state_key("*", {"tool_state": tool_state, "messages": []})
    assert 'key="@conversation"' in summarized  # every turn's opening is gone
