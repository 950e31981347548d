"""A conversation driven through a real graph, next to what a careful person wrote down.

:class:`Conversation` runs turns, edits, forks, prunes and reloads on a real graph and saver.
:class:`Notebook` is the careful person: it knows nothing of the library, only the values each
turn ended with on the current branch, kept from what the test itself did (every write is a
``put k=v`` the test chose, every edit a value the test set). :meth:`Conversation.check` asks
the library for every ``(key, turn)`` and compares.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt import ToolNode, ToolRuntime, tools_condition
from langgraph.types import Command, Overwrite, interrupt

from mcp_state_versions import (
    CheckpointHistory,
    Found,
    KeyNotSetYet,
    NotRetained,
    UnknownKey,
    build_agent,
    close_turn,
    current_turn,
    entries_of,
    make_merge_tool_state,
    make_session_state,
    open_turn,
    publish,
    resolve_turn,
    with_session_state,
)
from mcp_state_versions.demo.scripted import ScriptedChatModel, call

PUT = "ts/put/"

_ASSIGNMENT = re.compile(r"(\w+)=(\S+)")


@tool
def put(key: str, value: str, runtime: ToolRuntime) -> Command:
    """Publish ``value`` under ts/put/<key>."""
    return publish(runtime, "ts", "put", {key: value})


@tool
def gated_put(key: str, value: str, runtime: ToolRuntime) -> Command:
    """Ask a person first (an interrupt), then publish ``value`` under ts/put/<key>, or the
    person's answer when it is a text (another value)."""
    answer = interrupt(f"publish {key}={value}?")
    return publish(runtime, "ts", "put", {key: answer if isinstance(answer, str) else value})


@tool
def raw_put(key: str, value: str, runtime: ToolRuntime) -> Command:
    """Write ts/put/<key> the way a host's own tool might: a bare write with no turn stamp."""
    return Command(
        update={
            "tool_state": {PUT + key: {"value": value}},
            "messages": [ToolMessage("written", tool_call_id=runtime.tool_call_id)],
        }
    )


def respond(messages: Sequence[BaseMessage]) -> AIMessage:
    """``put a=1 b=2`` calls put once per assignment, in one message (parallel calls);
    ``raw a=1`` calls raw_put (an unstamped write inside a turn); ``gate a=1`` calls
    gated_put; a tool result is acknowledged; anything else is chat."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage("done")
    text = str(last.content) if isinstance(last, HumanMessage) else ""
    verb, _, rest = text.partition(" ")
    if verb in ("put", "gate", "raw"):
        name = {"put": "put", "gate": "gated_put", "raw": "raw_put"}[verb]
        calls = [
            call(name, f"c{len(messages)}-{i}", key=key, value=value)
            for i, (key, value) in enumerate(_ASSIGNMENT.findall(rest))
        ]
        return AIMessage("", tool_calls=calls)
    return AIMessage("noted")


def model() -> ScriptedChatModel:
    return ScriptedChatModel(respond=respond)


def trim_to(keep: int) -> Any:
    """A node keeping the last ``keep`` human messages (and what follows them)."""

    def trim(state: dict[str, Any]) -> dict[str, Any]:
        humans = [i for i, m in enumerate(state["messages"]) if isinstance(m, HumanMessage)]
        if len(humans) <= keep:
            return {}
        cut = humans[-keep]
        return {"messages": [RemoveMessage(id=m.id) for m in state["messages"][:cut]]}

    return trim


def summarize(state: dict[str, Any]) -> dict[str, Any]:
    """A node doing what LangChain's SummarizationMiddleware does to the message list: remove
    everything, then a summary human message and the last two messages."""
    messages = state["messages"]
    if len(messages) < 6:
        return {}
    return {
        "messages": [
            RemoveMessage(id=REMOVE_ALL_MESSAGES),
            HumanMessage("Summary of the conversation so far: values were published."),
            *messages[-2:],
        ]
    }


def host_graph(saver: Any, *, ring_size: int, compact: Any = None) -> Any:
    """A host's own StateGraph, wiring the clock with the documented helpers."""
    reducer = make_merge_tool_state(ring_size=ring_size)
    tools = with_session_state([put, gated_put, raw_put])
    bound = model()

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(make_session_state(reducer))
    graph.add_node("open_turn", open_turn)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_node("close_turn", close_turn)
    graph.add_edge(START, "open_turn")
    if compact is not None:
        graph.add_node("compact", compact)
        graph.add_edge("open_turn", "compact")
        graph.add_edge("compact", "agent")
    else:
        graph.add_edge("open_turn", "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "close_turn"})
    graph.add_edge("tools", "agent")
    graph.add_edge("close_turn", END)
    return graph.compile(checkpointer=saver)


def agent_graph(saver: Any, ring_size: int) -> Any:
    return build_agent(model(), [put, gated_put, raw_put], checkpointer=saver, ring_size=ring_size)


def subgraph_host(saver: Any, ring_size: int, *, persistent: bool = False) -> Any:
    """A parent graph sharing tool_state with the agent, used as a node (a subgraph); with
    ``persistent`` the agent keeps its own state across the parent's runs
    (``checkpointer=True``)."""
    reducer = make_merge_tool_state(ring_size=ring_size)
    inner = build_agent(
        model(),
        [put, gated_put, raw_put],
        ring_size=ring_size,
        checkpointer=True if persistent else None,
    )
    graph = StateGraph(make_session_state(reducer))
    graph.add_node("open_turn", open_turn)
    graph.add_node("agent", inner)
    graph.add_node("close_turn", close_turn)
    graph.add_edge(START, "open_turn")
    graph.add_edge("open_turn", "agent")
    graph.add_edge("agent", "close_turn")
    graph.add_edge("close_turn", END)
    return graph.compile(checkpointer=saver)


@dataclass
class Notebook:
    """What a careful person wrote down: each turn's end values, on the current branch."""

    ends: list[dict[str, Any]] = field(default_factory=list)
    current: dict[str, Any] = field(default_factory=dict)
    pending: list[tuple[str, str]] = field(default_factory=list)
    retained_from: int = 1

    def turn(self, writes: Sequence[tuple[str, str]]) -> None:
        for key, value in writes:
            self.current[PUT + key] = value
        self.ends.append(dict(self.current))

    def fork(self, turn: int) -> None:
        self.ends = self.ends[:turn]
        self.current = dict(self.ends[-1]) if self.ends else {}
        self.retained_from = min(self.retained_from, turn + 1) if turn else 1


@dataclass
class Conversation:
    graph: Any
    saver: Any
    thread_id: str
    notebook: Notebook = field(default_factory=Notebook)
    end_ids: list[str] = field(default_factory=list)
    sync: bool = False
    #: Note each turn's end values by reading them from the live state as the turn ends (for
    #: tools whose values the test does not choose); only current values are read, which
    #: last-write-wins state gets right without any versioning.
    live: bool = False

    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread_id}}

    async def _invoke(
        self, payload: Any, config: dict[str, Any], durability: str | None = None
    ) -> dict[str, Any]:
        options = {} if durability is None else {"durability": durability}
        if self.sync:
            return self.graph.invoke(payload, config, **options)
        return await self.graph.ainvoke(payload, config, **options)

    async def _state(self) -> Any:
        if self.sync:
            return self.graph.get_state(self.config)
        return await self.graph.aget_state(self.config)

    async def _ended(self, writes: Sequence[tuple[str, str]]) -> None:
        snapshot = await self._state()
        if self.live:
            values = entries_of(snapshot.values.get("tool_state"))
            self.notebook.current = {k: e["value"] for k, e in values.items()}
            self.notebook.ends.append(dict(self.notebook.current))
        else:
            self.notebook.turn(writes)
        self.end_ids.append(snapshot.config["configurable"]["checkpoint_id"])

    async def say(
        self, text: str, config: dict[str, Any] | None = None, *, durability: str | None = None
    ) -> dict[str, Any]:
        """One user turn; ``put`` assignments are noted as the turn's writes, in order."""
        payload = {"messages": [HumanMessage(text)]}
        result = await self._invoke(payload, config or self.config, durability)
        if (await self._state()).tasks:  # paused on an interrupt: the turn goes on
            self.notebook.pending = _ASSIGNMENT.findall(text)
            return result
        if text.startswith("gate "):
            self.notebook.pending = _ASSIGNMENT.findall(text)
            return result
        await self._ended(_ASSIGNMENT.findall(text) if text.startswith(("put ", "raw ")) else [])
        return result

    async def resume(self, answer: Any = True) -> None:
        """Answer every pending interrupt; the gated writes land and the turn ends."""
        while pending := [i.id for task in (await self._state()).tasks for i in task.interrupts]:
            await self._invoke(Command(resume=dict.fromkeys(pending, answer)), self.config)
        writes, self.notebook.pending = self.notebook.pending, []
        await self._ended(writes)

    async def update(self, update: dict[str, Any]) -> None:
        """An operator's update_state between turns (as the tools node, or as the last node
        where the graph has no tools node of its own)."""
        as_node = "tools" if "tools" in self.graph.nodes else "close_turn"
        if self.sync:
            self.graph.update_state(self.config, update, as_node=as_node)
        else:
            await self.graph.aupdate_state(self.config, update, as_node=as_node)

    async def edit(self, key: str, value: str) -> None:
        """An operator's update_state of one key, in the documented form."""
        await self.update({"tool_state": {PUT + key: {"value": value}}})
        self.notebook.current[PUT + key] = value

    async def edit_in_place(self, key: str, value: str) -> None:
        """An operator's edit as people write it: the whole ``tool_state`` from get_state,
        one value changed in it, written back."""
        tool_state = copy.deepcopy((await self._state()).values["tool_state"])
        tool_state[PUT + key]["value"] = value
        await self.update({"tool_state": tool_state})
        self.notebook.current[PUT + key] = value

    async def overwrite(self, keep: Sequence[str], *, plain: bool = False) -> None:
        """An operator's ``Overwrite`` of ``tool_state`` with the keys ``keep`` as readers see
        them (entries without the clock, or with ``plain`` their values alone): the other
        keys are dropped."""
        entries = entries_of((await self._state()).values["tool_state"])
        kept = {PUT + key: entries[PUT + key] for key in keep}
        if plain:
            kept = {key: entry["value"] for key, entry in kept.items()}
        await self.update({"tool_state": Overwrite(copy.deepcopy(kept))})
        self.notebook.current = {key: self.notebook.current[key] for key in kept}

    async def fork(self, turn: int, text: str) -> None:
        """Go back to the end of ``turn`` and continue from there with a new user message."""
        config = {
            "configurable": {"thread_id": self.thread_id, "checkpoint_id": self.end_ids[turn - 1]}
        }
        self.notebook.fork(turn)
        self.end_ids = self.end_ids[:turn]
        await self.say(text, config)

    async def check(
        self,
        saver: Any | None = None,
        *,
        ring_only: bool = False,
        checkpoint_id: str | None = None,
        notebook: Notebook | None = None,
    ) -> Counter[str]:
        """Every ``(key, turn)`` answer against the notebook; returns how many of each kind
        (``Found:ring``, ``Found:history``, ``KeyNotSetYet`` ...) were checked.

        ``saver`` reads through another saver on the same storage (a reload); ``ring_only``
        reads without history, where only answers the entries hold are allowed;
        ``checkpoint_id`` reads the branch that ends there (as a run on it reads), against
        ``notebook`` (default: the conversation's own).
        """
        reader = CheckpointHistory(saver or self.saver, checkpoint_id=checkpoint_id)
        history = None if ring_only else reader
        if saver is None and checkpoint_id is None:
            values = (await self._state()).values
            tool_state, now = values.get("tool_state") or {}, current_turn(values)
        else:
            present = await reader.present(self.thread_id)
            assert present is not None
            tool_state, now = present.tool_state, present.turn
        book = notebook or self.notebook
        assert now == len(book.ends), f"the clock says {now}, the notebook {len(book.ends)}"
        live = {k: e["value"] for k, e in entries_of(tool_state).items()}
        assert live == book.current
        keys = sorted({key for end in book.ends for key in end} | set(live))
        checked: Counter[str] = Counter()
        for key in keys:
            for turn in range(1, now + 1):
                answer = await resolve_turn(
                    entries_of(tool_state),
                    key,
                    turn,
                    current_turn=now,
                    history=history,
                    thread_id=self.thread_id,
                )
                expected = book.ends[turn - 1].get(key)
                where = f"{key} at turn {turn}: {answer!r}, expected {expected!r}"
                if isinstance(answer, Found):
                    assert expected is not None and answer.value == expected, where
                elif isinstance(answer, UnknownKey) and ring_only and key not in live:
                    pass  # dropped since: without history, the present knows nothing of it
                elif isinstance(answer, KeyNotSetYet | UnknownKey):
                    assert expected is None, where
                elif isinstance(answer, NotRetained):
                    assert turn < book.retained_from, where
                else:
                    assert ring_only, where
                checked[
                    type(answer).__name__
                    + (f":{answer.source}" if isinstance(answer, Found) else "")
                ] += 1
        return checked
