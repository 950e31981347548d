"""The whole thread: bytes stored ÷ bytes added, and a turn's time, against the thread's length.

    python -m benchmarks.thread [--turns 1000] [--backends sqlite,postgres]

Four agents, one tool publishing a 300-byte value each turn and a one-sentence reply, each on
its own thread of the same checkpointer (the library's saver for the backend):

* **library**: ``build_agent``, ``messages`` and ``tool_state`` stored as writes (the default);
* **library, messages whole**: ``build_agent(messages="whole")``, LangGraph's stock channel;
* **plain**: a plain LangGraph agent (``StateGraph`` + ``ToolNode``, ``add_messages``, a
  last-write-wins dict for the tool's value);
* **plain, experimental delta**: the same plain agent on LangGraph's private
  ``_messages_delta_reducer`` in a ``DeltaChannel``;
* **middleware**: LangChain's ``create_agent`` with ``SessionStateMiddleware`` and
  ``state_schema=SessionAgentState``, as the quick start builds it, invoked as ``create_agent``
  agents are (``ainvoke``);
* **plain create_agent**: ``create_agent`` with ``AgentState`` (``add_messages``) and a
  last-write-wins dict for the tool's value, the same tool as the plain agent's.

Each tool takes what it needs at the least cost LangChain offers: the library's, which read
state, ``runtime: LeanToolRuntime`` (LangChain dumps a ``ToolRuntime`` argument, the whole
message list with it, on every call); the plain ones, which need only their call's id,
``InjectedToolCallId``. Neither pays for the thread's length in its arguments.

*Added* is what the turns brought: every message's own serialized size once, plus the tool's
value once a turn. *Stored* is what the saver holds for the thread (rows, writes, blobs). A
turn's time is the median over a window of turns (10–20, 90–100, 990–1000, 9,990–10,000).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict
from uuid import uuid4

import orjson
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from mcp_state_versions import LeanToolRuntime, build_agent, publish, run_turn
from mcp_state_versions.backends import backend_for, forget_histories
from mcp_state_versions.demo.scripted import ScriptedChatModel, call
from mcp_state_versions.storage.messages import MESSAGE_INDEXES
from mcp_state_versions.storage.tool_state import REPLAYS

from .common import RESULTS, create_agent_path, last_write_wins, opened, progress
from .report import plot_thread

VALUE_BYTES = 300


def _value(turn: int) -> str:
    return f"{turn:06d}" + "x" * (VALUE_BYTES - 6)


@tool
def lookup(turn: int, runtime: LeanToolRuntime) -> Any:
    """Publish this turn's 300-byte value."""
    return publish(runtime, "bench", "lookup", {"value": _value(turn)})


@tool
def lookup_plain(turn: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Any:
    """Return this turn's 300-byte value into a plain dict channel."""
    return Command(
        update={
            "tool_state": {"bench/lookup/value": _value(turn)},
            "messages": [ToolMessage("stored", tool_call_id=tool_call_id)],
        }
    )


def _respond(name: str) -> Any:
    def respond(messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            turn = int(str(last.content).split()[-1])
            return AIMessage("", tool_calls=[call(name, f"c{len(messages)}", turn=turn)])
        return AIMessage("The value is stored and ready for the next question.")

    return respond


class _Plain(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    tool_state: Annotated[dict[str, Any], last_write_wins]


class _PlainDelta(TypedDict):
    messages: Annotated[list[BaseMessage], DeltaChannel(_messages_delta_reducer)]
    tool_state: Annotated[dict[str, Any], last_write_wins]


def _plain(saver: Any, schema: type) -> Any:
    model = ScriptedChatModel(respond=_respond("lookup_plain"))

    async def agent(state: Any) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(schema)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([lookup_plain]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


AGENTS = {
    "library": lambda saver: build_agent(
        ScriptedChatModel(respond=_respond("lookup")), [lookup], checkpointer=saver
    ),
    "library, messages whole": lambda saver: build_agent(
        ScriptedChatModel(respond=_respond("lookup")),
        [lookup],
        checkpointer=saver,
        messages="whole",
    ),
    "plain": lambda saver: _plain(saver, _Plain),
    "plain, experimental delta": lambda saver: _plain(saver, _PlainDelta),
    "middleware": lambda saver: create_agent_path(
        saver, ScriptedChatModel(respond=_respond("lookup")), lookup, middleware=True
    ),
    "plain create_agent": lambda saver: create_agent_path(
        saver, ScriptedChatModel(respond=_respond("lookup_plain")), lookup_plain, middleware=False
    ),
}
AGENTS["library, exit"] = AGENTS["library"]
AGENTS["middleware, exit"] = AGENTS["middleware"]
"""Each agent by name; ``library`` is compared with ``plain``, ``middleware`` with
``plain create_agent``. The ``, exit`` ones are the same agents run with
``durability="exit"`` (one checkpoint a run, the cheapest way to store a turn), each of whose
sizes is checked as the reload (a fresh read of the head) equalling the live state."""

EXIT = {"library, exit", "middleware, exit"}
"""The agents run with ``durability="exit"``."""


WHOLE = {"library, messages whole", "plain", "plain create_agent"}
"""The agents that store the whole message list at every checkpoint."""

WHOLE_MOST = 1000
"""The most turns a :data:`WHOLE` agent's thread runs to: at 1,000 turns it already stores
2-3 GB, and at 10,000 it would store about a hundred times that. The others run to ``--turns``
(10,000 for the long run)."""


RESTART_EVERY = 25
"""Every this many turns (at turns 3 past a multiple, so never inside a timed window) the
thread's head is read as the first run start after a restart reads it: the process's memory of
delta histories, replays and message indexes cleared (``forget_histories``,
``REPLAYS.clear()``, ``MESSAGE_INDEXES.clear()``), then
``aget_state``, which rebuilds every channel from storage as a run start does; the median of
three. A library thread's cost grows through a snapshot cycle and drops at its snapshot; a
plain agent's grows with the list it reads whole."""


async def _restart_read(agent: Any, saver: Any, config: Any) -> float:
    samples = []
    for _ in range(3):
        REPLAYS.clear()
        MESSAGE_INDEXES.clear()
        forget_histories(saver)
        started = time.perf_counter()
        await agent.aget_state(config)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _windows(turns: int) -> list[tuple[int, int]]:
    return [(max(1, n - 10), n) for n in (20, 100, 1000, 10_000) if n <= turns]


async def _thread(name: str, saver: Any, turns: int) -> dict[str, Any]:
    agent = AGENTS[name](saver)
    thread_id = f"thread-bench-{uuid4().hex[:10]}"
    config = {"configurable": {"thread_id": thread_id}}
    times: list[float] = []
    sizes: dict[int, dict[str, int]] = {}
    restarts: dict[int, float] = {}
    checkpoints = {10, 100, 1000, 10_000, turns}
    backend = backend_for(saver)
    for turn in range(1, turns + 1):
        text = f"look it up {turn}"
        started = time.perf_counter()
        if name in EXIT:
            live = await agent.ainvoke(
                {"messages": [HumanMessage(text)]}, config, durability="exit"
            )
        elif name.startswith("library"):
            await run_turn(agent, thread_id, text)
        else:
            await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
        times.append(time.perf_counter() - started)
        if turn in checkpoints:
            messages = (await agent.aget_state(config)).values["messages"]
            if name in EXIT:  # what a reload reads is what the run ended with
                REPLAYS.clear()
                MESSAGE_INDEXES.clear()
                forget_histories(saver)
                reloaded = (await agent.aget_state(config)).values
                same = [m.id for m in reloaded["messages"]] == [m.id for m in live["messages"]]
                same = same and reloaded.get("tool_state") == live.get("tool_state")
                assert same, f"{name}: the reload differs from the live state at turn {turn}"
            added = sum(len(saver.serde.dumps_typed(m)[1]) for m in messages)
            added += turn * len(orjson.dumps(_value(turn)))
            stored = await backend.stored_bytes(thread_id, None, None)
            sizes[turn] = {"stored": stored, "added": added}
        if turn % RESTART_EVERY == 3:
            restarts[turn] = await _restart_read(agent, saver, config)
        if turn % 1000 == 0 and turn < turns:
            progress(f"{name}: {turn:,} of {turns:,} turns")
    windows = {f"{a}-{b}": statistics.median(times[a - 1 : b]) * 1000 for a, b in _windows(turns)}
    return {"sizes": sizes, "turn_ms": windows, "restart_ms": restarts}


async def measure(
    backends: Sequence[str], turns: int, workdir: Path, agents: Sequence[str] = tuple(AGENTS)
) -> dict[str, Any]:
    """Every agent's thread (of ``agents``) on every backend, to ``turns``."""
    found: dict[str, Any] = {}
    for backend in backends:
        found[backend] = {}
        for name in agents:
            progress(f"{backend}: a thread of up to {turns} turns, {name}")
            async with opened(backend, workdir) as (saver, _):
                length = min(turns, WHOLE_MOST) if name in WHOLE else turns
                found[backend][name] = await _thread(name, saver, length)
    return found


SERVED = 50
"""Conversations one process serves at once in the interleaved cell (:func:`measure_served`)."""


async def _turn(name: str, agent: Any, thread_id: str, text: str) -> float:
    started = time.perf_counter()
    if name.startswith("library"):
        await run_turn(agent, thread_id, text)
    else:
        config = {"configurable": {"thread_id": thread_id}}
        await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
    return time.perf_counter() - started


async def _served(name: str, saver: Any, threads: int, turns: int) -> dict[str, float]:
    """``threads`` threads of ``turns`` turns in one process, a turn of each in turn (each
    thread's next turn after all the others'): the median time of the last turns (at least
    ten in all), and how often one of them indexed its conversation's messages afresh
    (``MESSAGE_INDEXES.rebuilt``)."""
    agent = AGENTS[name](saver)
    ids = [f"served-{uuid4().hex[:10]}" for _ in range(threads)]
    last = max(1, 10 // threads)  # rounds timed: at least ten turns in all
    times: list[float] = []
    rebuilt = 0
    for turn in range(1, turns + 1):
        if turn == turns - last + 1:
            rebuilt, times = MESSAGE_INDEXES.rebuilt, []
        times += [await _turn(name, agent, thread_id, f"look it up {turn}") for thread_id in ids]
    return {
        "turn_ms": statistics.median(times) * 1000,
        "rebuilds_per_turn": (MESSAGE_INDEXES.rebuilt - rebuilt) / len(times),
    }


async def measure_served(
    backends: Sequence[str],
    turns: int,
    workdir: Path,
    agents: Sequence[str] = ("library", "middleware"),
) -> dict[str, Any]:
    """Each path's turn at ``turns`` with :data:`SERVED` threads served at once, beside one
    thread alone at the same length, in one process, side by side: the per-process caches
    (message indexes, replays, remembered histories) must serve a deployment, not only a
    benchmark that runs one thread at a time."""
    found: dict[str, Any] = {}
    for backend in backends:
        found[backend] = {}
        for name in agents:
            progress(f"{backend}: {SERVED} threads served at once, {turns} turns each, {name}")
            async with opened(backend, workdir) as (saver, _):
                alone = await _served(name, saver, 1, turns)
                served = await _served(name, saver, SERVED, turns)
            found[backend][name] = {"alone": alone, "served": served}
    return found


def served_table(found: dict[str, Any]) -> str:
    """One row a path on a backend: the last turn with :data:`SERVED` threads served at once
    ÷ one thread alone, and the turns that indexed their messages afresh."""
    lines = [
        f"| backend | path | turn, {SERVED} served ÷ alone | rebuilds a turn, served (alone) |",
        "| --- | --- | ---: | ---: |",
    ]
    for backend, paths in found.items():
        for name, cell in paths.items():
            alone, served = cell["alone"], cell["served"]
            ratio = served["turn_ms"] / alone["turn_ms"]
            lines.append(
                f"| {backend} | {name} | {ratio:.2f}× ({served['turn_ms']:.1f} ÷ "
                f"{alone['turn_ms']:.1f} ms) | {served['rebuilds_per_turn']:.2f} "
                f"({alone['rebuilds_per_turn']:.2f}) |"
            )
    return "\n".join(lines)


def table(found: dict[str, Any]) -> str:
    """One row an agent on a backend: stored ÷ added at each length measured, what it stores
    at the longest, and a turn's time in each window."""
    lengths = sorted(
        {int(n) for agents in found.values() for f in agents.values() for n in f["sizes"]}
    )
    windows = list(
        dict.fromkeys(w for a in found.values() for f in a.values() for w in f["turn_ms"])
    )
    lines = [
        "| backend | agent | stored ÷ added at "
        + " / ".join(f"{n:,}" for n in lengths)
        + " turns | stored at the longest | turn (ms) at "
        + " / ".join(w.replace("-", "–") for w in windows)
        + " |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for backend, agents in found.items():
        for name, figures in agents.items():
            sizes = {int(n): size for n, size in figures["sizes"].items()}
            ratios = " / ".join(
                f"{sizes[n]['stored'] / sizes[n]['added']:,.1f}×" if n in sizes else "—"
                for n in lengths
            )
            longest = sizes[max(sizes)]["stored"] / 1e6
            ms = " / ".join(
                f"{figures['turn_ms'][w]:.1f}" if w in figures["turn_ms"] else "—" for w in windows
            )
            lines.append(f"| {backend} | {name} | {ratios} | {longest:,.1f} MB | {ms} |")
    return "\n".join(lines)


COMPARED = {"library": "plain", "middleware": "plain create_agent"}
"""Each library path and the plain agent it is measured against."""


def restart_table(found: dict[str, Any]) -> str:
    """The first run start after a restart: each library path's head read against its plain
    agent's at the same turn, the worst ratio over the thread (the far end of a snapshot
    cycle) and at the last turn both reached."""
    lines = [
        "| backend | agent ÷ plain | worst (turn: ms ÷ ms) | last turn both reached |",
        "| --- | --- | ---: | ---: |",
    ]
    for backend, agents in found.items():
        for name, plain in COMPARED.items():
            if name not in agents or plain not in agents:
                continue
            ours = {int(t): ms for t, ms in agents[name].get("restart_ms", {}).items()}
            theirs = {int(t): ms for t, ms in agents[plain].get("restart_ms", {}).items()}
            shared = sorted(set(ours) & set(theirs))
            if not shared:
                continue
            worst = max(shared, key=lambda t: ours[t] / theirs[t])
            last = shared[-1]

            def cell(t: int) -> str:
                return f"{ours[t] / theirs[t]:.2f}× ({t}: {ours[t]:.1f} ÷ {theirs[t]:.1f})"

            lines.append(f"| {backend} | {name} ÷ {plain} | {cell(worst)} | {cell(last)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.thread")
    parser.add_argument("--turns", type=int, default=None, help="default 1000")
    parser.add_argument("--quick", action="store_true", help="--turns 100")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--agent",
        action="append",
        dest="agents",
        help="an agent to run (repeat for several; default all): " + "; ".join(AGENTS),
    )
    args = parser.parse_args()
    if args.turns is None:
        args.turns = 100 if args.quick else 1000
    workdir = RESULTS / "work-thread"
    workdir.mkdir(parents=True, exist_ok=True)
    agents = args.agents or list(AGENTS)
    unknown = [name for name in agents if name not in AGENTS]
    if unknown:
        parser.error(f"unknown agents {unknown}; known: {', '.join(AGENTS)}")
    try:
        found = asyncio.run(measure(args.backends.split(","), args.turns, workdir, agents))
    finally:  # the whole-list agents' files run to gigabytes
        shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        served = asyncio.run(
            measure_served(args.backends.split(","), 20 if args.quick else 100, workdir)
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "thread.json").write_text(json.dumps({**found, "served": served}, indent=1))
    print(table(found))
    print(f"\n{SERVED} conversations served at once by one process:\n")
    print(served_table(served))
    print("\nThe first run start after a restart (ms to load the head's state):\n")
    print(restart_table(found))
    if plot_thread(found, RESULTS / "thread.png"):
        print(f"plot: {RESULTS / 'thread.png'}")


if __name__ == "__main__":
    main()
