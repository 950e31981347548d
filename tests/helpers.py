"""A rule-following scripted model and conversation helpers shared by the agent-level tests."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command, interrupt

from mcp_state_versions.agent.build import build_agent, run_turn
from mcp_state_versions.agent.publish import publish
from mcp_state_versions.demo.run import get_aoi
from mcp_state_versions.demo.scripted import ScriptedChatModel, call
from mcp_state_versions.state.reducer import count_turns
from mcp_state_versions.walk.history import TurnAnswer
from mcp_state_versions.walk.resolve import resolve_turn

BBOX = "gazet/get_aoi/bbox"


def respond(messages: Sequence[BaseMessage]) -> AIMessage:
    """'find <place>' calls get_aoi; anything else, or a tool result, gets a short reply."""
    last = messages[-1]
    if isinstance(last, HumanMessage) and str(last.content).startswith("find "):
        place = str(last.content)[5:]
        return AIMessage("", tool_calls=[call("get_aoi", f"c{len(messages)}", place=place)])
    if isinstance(last, ToolMessage):
        return AIMessage("done")
    return AIMessage("noted")


def agent_on(saver: Any, **options: Any) -> Any:
    return build_agent(ScriptedChatModel(respond=respond), [get_aoi], checkpointer=saver, **options)


def count_decodes(saver: Any) -> list[Any]:
    """What ``saver``'s serializer decodes from now on, one item a value, in a list that the
    caller may clear between reads."""
    decoded: list[Any] = []
    loads = saver.serde.loads_typed

    def counting(data: Any) -> Any:
        decoded.append(data)
        return loads(data)

    saver.serde.loads_typed = counting
    return decoded


async def end_of_turn_checkpoint(agent: Any, thread_id: str, turn: int) -> str:
    """The id of the checkpoint that ended ``turn`` on the current branch (walking parents)."""
    snapshot = await agent.aget_state({"configurable": {"thread_id": thread_id}})
    while snapshot is not None:
        if count_turns(snapshot.values.get("messages")) <= turn:
            return snapshot.config["configurable"]["checkpoint_id"]
        parent = snapshot.parent_config
        snapshot = await agent.aget_state(parent) if parent else None
    raise AssertionError(f"turn {turn} not found")


async def fork_at(agent: Any, thread_id: str, turn: int, text: str) -> None:
    """Continue ``thread_id`` from the end of ``turn`` with a new user message (a fork)."""
    checkpoint_id = await end_of_turn_checkpoint(agent, thread_id, turn)
    await run_turn(agent, thread_id, text, checkpoint_id=checkpoint_id)


async def answers(agent: Any, thread_id: str, history: Any, key: str = BBOX) -> list[TurnAnswer]:
    """resolve_turn for every turn of the thread, as the tool would ask it."""
    state = (await agent.aget_state({"configurable": {"thread_id": thread_id}})).values
    total = count_turns(state["messages"])
    return [
        await resolve_turn(
            state.get("tool_state", {}),
            key,
            turn,
            current_turn=total,
            history=history,
            thread_id=thread_id,
        )
        for turn in range(1, total + 1)
    ]


def plain(answer: TurnAnswer) -> tuple[str, Any]:
    """An answer reduced to what must agree across ring, walk and reload."""
    return (type(answer).__name__, getattr(answer, "value", None))


def cli_command() -> list[str]:
    """The installed console script, as a user runs it (or the module, from a source tree)."""
    import sys
    from pathlib import Path

    script = Path(sys.executable).with_name("mcp-state-versions")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mcp_state_versions.cli"]


class free_port:
    """A free port on 127.0.0.1, released when the block ends (for a server to take)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        return None


def wait_for_http(url: str, server: Any, seconds: float = 30) -> Any:
    """GET ``url`` once the server process answers; fail if it exits or never does."""
    import time

    import httpx

    deadline = time.monotonic() + seconds
    while True:
        try:
            return httpx.get(url, timeout=2)
        except httpx.TransportError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise
            time.sleep(0.2)


def inside_a_parent(agent: Any, saver: Any) -> Any:
    """``agent`` as a persistent subgraph (its own checkpoints, namespace ``agent``) of a parent
    graph that keeps only messages, compiled on ``saver``."""
    from langgraph.graph import END, START, MessagesState, StateGraph

    parent = StateGraph(MessagesState)
    parent.add_node("agent", agent.copy(update={"checkpointer": True}))
    parent.add_edge(START, "agent")
    parent.add_edge("agent", END)
    return parent.compile(checkpointer=saver)


ASKED = "ts/ask/k"
"""The key :func:`asking_agent`'s tool publishes the person's answer under."""


def _meet(barrier: str | None, parties: int) -> None:
    """With ``barrier`` (a directory), leave a file there and wait until ``parties`` calls
    have: every run answering has then loaded the paused checkpoint, and none has stored."""
    if barrier is None:
        return
    Path(barrier, uuid4().hex).touch()
    deadline = time.monotonic() + 120  # a guard against a hang, not a timing
    while len(list(Path(barrier).iterdir())) < parties:
        assert time.monotonic() < deadline, "the other run never resumed"
        time.sleep(0.005)


def asking_agent(saver: Any, barrier: str | None = None, *, parties: int = 2) -> Any:
    """An agent whose one tool asks a person for a value (an interrupt) and publishes the
    answer under :data:`ASKED`. With ``barrier`` (a directory), the tool, once answered,
    waits until ``parties`` runs have been answered (each leaves a file there): every run
    resuming the interrupt has then loaded the paused checkpoint, and none has stored yet."""

    @tool
    def ask(runtime: ToolRuntime) -> Command:
        """Ask a person for the value of k."""
        answer = interrupt("the value of k?")
        _meet(barrier, parties)
        return publish(runtime, "ts", "ask", {"k": answer})

    def respond(messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("done")
        return AIMessage("", tool_calls=[call("ask", f"ask-{len(messages)}")])

    return build_agent(ScriptedChatModel(respond=respond), [ask], checkpointer=saver)


async def resume_answer(agent: Any, thread_id: str, answer: str, **options: Any) -> Any:
    """Resume the thread's pending interrupt with ``answer``; the run's final state."""
    config = {"configurable": {"thread_id": thread_id}}
    return await agent.ainvoke(Command(resume=answer), config, **options)


def two_asks_agent(saver: Any, barrier: str | None = None, *, parties: int = 4) -> Any:
    """A ``create_agent`` agent (each tool call its own task) whose model calls ``ask`` for
    ``a`` and ``b`` at once; each call waits for a person (an interrupt of its own) and
    publishes the answer under ``ts/put/<name>``. With ``barrier`` (a directory), a call,
    once answered, waits until ``parties`` calls have been (as :func:`asking_agent`)."""
    from langchain.agents import create_agent

    from mcp_state_versions import SessionAgentState, SessionStateMiddleware

    @tool
    def ask(field: str, runtime: ToolRuntime) -> Command:
        """Ask a person for the value of ``field``."""
        answer = interrupt(f"the value of {field}?")
        _meet(barrier, parties)
        return publish(runtime, "ts", "put", {field: answer})

    def respond(messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and str(last.content) == "ask both":
            calls = [call("ask", f"{field}{len(messages)}", field=field) for field in "ab"]
            return AIMessage("", tool_calls=calls)
        return AIMessage("done")

    return create_agent(
        ScriptedChatModel(respond=respond),
        [ask],
        middleware=[SessionStateMiddleware()],
        state_schema=SessionAgentState,
        checkpointer=saver,
    )


async def resume_named(agent: Any, thread_id: str, name: str, answer: str) -> Any:
    """Resume only the pending interrupt that asks for ``name``, with ``answer``."""
    config = {"configurable": {"thread_id": thread_id}}
    state = await agent.aget_state(config)
    asked = f"the value of {name}?"
    pending = [i for task in state.tasks for i in task.interrupts if str(i.value) == asked]
    assert len(pending) == 1, state.tasks
    return await agent.ainvoke(Command(resume={pending[0].id: answer}), config)
