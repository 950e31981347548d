"""Writes: what a turn stores and what it costs, against a plain agent, over keys × sizes.

Per cell (``keys`` values of ``size`` JSON bytes), three agents run the same turns side by side
(each turn of each agent in turn, the order rotating):

* **library**: ``build_agent`` (default storage: ``tool_state`` as writes with snapshots) whose
  tool publishes every field each turn;
* **last-write-wins**: a plain agent, ``StateGraph`` + ``ToolNode`` with a dict channel
  (``{**old, **new}``), whose tool returns the same fields into it;
* **no tool_state**: the same plain agent whose tool returns a short text and stores nothing;
* **middleware**: LangChain's ``create_agent`` with ``SessionStateMiddleware`` and
  ``state_schema=SessionAgentState`` (the quick start's agent), whose tool publishes as the
  library's does, invoked as ``create_agent`` agents are (``ainvoke``);
* **plain create_agent**: ``create_agent`` with a last-write-wins dict channel beside
  ``AgentState``'s, whose tool returns the fields into it as the plain agent's does.

Every turn after the first rewrites two fields (the same two, so their rings fill) and
republishes the others unchanged. Measured per turn after the first:

* ``tool_state`` bytes stored (the channel's writes and its snapshots, or the dict channel's
  writes and stored values), over the JSON bytes of the two values that changed. The
  library's figure is over one whole snapshot cycle, as its thread took it: everything stored
  from the end of the first turn (which snapshots what it published) to the end of the turn
  that took the next snapshot, over those turns. Its thread goes on past the measured turns,
  untimed, until that snapshot is taken;
* milliseconds per turn (medians) of every agent, and two ratios: the library's to
  last-write-wins, and the middleware's to plain ``create_agent``.

Then, on the library's thread: the time to load its state at run start (``aget_state``, which
replays the writes since the last snapshot) against the plain agent's, after the measured
turns; and, once its cycle is complete, what rebuilding ``tool_state`` cost at the run start
furthest from a snapshot (the one whose turn took the cycle's snapshot): the saver's delta
history read and the replay of its writes, in a process that remembers no earlier read or replay.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any
from uuid import uuid4

import ormsgpack
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, ToolRuntime, tools_condition
from langgraph.types import Command
from typing_extensions import TypedDict

from mcp_state_versions import build_agent, publish, run_turn
from mcp_state_versions.backends import forget_histories
from mcp_state_versions.backends.sqlite import _unpack
from mcp_state_versions.demo.scripted import ScriptedChatModel, call
from mcp_state_versions.storage.tool_state import DEFAULT_SNAPSHOT_FREQUENCY, REPLAYS, replay

from .common import RESULTS, analyzed, create_agent_path, last_write_wins, opened, progress
from .report import _cell

CELLS = [(5, 200), (5, 10_000), (5, 200_000), (50, 200), (50, 10_000), (50, 200_000)]
CELLS += [(500, 200), (500, 10_000)]
"""(keys, bytes per value). 500 × 200 KB (100 MB of state) is left out: the plain agent would
store 100 MB per checkpoint."""

BUDGET = 64 * 1024 * 1024
"""The library's budget for this run: above every cell's state, so nothing is evicted."""


def _value(field: int, turn: int, size: int) -> str:
    """A string whose JSON is ``size`` bytes; fields 0 and 1 change every turn."""
    tag = f"{field}:{turn if field < 2 else 0}:"
    return tag + "x" * (size - len(tag) - 2)


def _fields(keys: int, size: int, turn: int) -> dict[str, str]:
    return {f"f{i}": _value(i, turn, size) for i in range(keys)}


class _Cell:
    keys = 5
    size = 200


@tool
def refresh(turn: int, runtime: ToolRuntime) -> Any:
    """Publish every field (the library's tool)."""
    return publish(runtime, "bench", "refresh", _fields(_Cell.keys, _Cell.size, turn))


@tool
def refresh_plain(turn: int, runtime: ToolRuntime) -> Any:
    """Return every field into a plain dict channel (last-write-wins)."""
    fields = _fields(_Cell.keys, _Cell.size, turn)
    message = ToolMessage(f"updated {len(fields)} fields", tool_call_id=runtime.tool_call_id)
    return Command(update={"tool_state": fields, "messages": [message]})


@tool
def refresh_nothing(turn: int) -> str:
    """Compute the fields and store nothing."""
    return f"computed {len(_fields(_Cell.keys, _Cell.size, turn))} fields"


def _respond(name: str) -> Any:
    def respond(messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            turn = int(str(last.content).split()[-1])
            return AIMessage("", tool_calls=[call(name, f"r{len(messages)}", turn=turn)])
        return AIMessage("ok")

    return respond


class _PlainState(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    tool_state: Annotated[dict[str, Any], last_write_wins]


def _plain_agent(saver: Any, tool_: Any) -> Any:
    model = ScriptedChatModel(respond=_respond(tool_.name))
    graph = StateGraph(_PlainState)
    graph.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode([tool_]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


async def tool_state_bytes(saver: Any, thread_id: str) -> tuple[int, int]:
    """``(writes, values)``: bytes a thread stores for ``tool_state`` in its writes, and in
    stored values (snapshots for the library, every stored value for a dict channel), as the
    backend holds them."""
    if hasattr(saver, "storage"):  # in memory
        writes = sum(
            len(w[2][1])
            for k, ws in saver.writes.items()
            if k[0] == thread_id
            for w in ws.values()
            if w[1] == "tool_state"
        )
        values = sum(
            len(v[1]) for k, v in saver.blobs.items() if k[0] == thread_id and k[2] == "tool_state"
        )
        return writes, values
    if hasattr(saver, "_cursor"):  # PostgreSQL
        found = []
        async with saver._cursor() as cursor:
            for table in ("checkpoint_writes", "checkpoint_blobs"):
                await cursor.execute(
                    f"SELECT COALESCE(SUM(length(blob)), 0) AS n FROM {table} "
                    "WHERE thread_id = %s AND channel = 'tool_state'",
                    (thread_id,),
                )
                found.append(int((await cursor.fetchone())["n"]))
        return found[0], found[1]
    values = 0  # SQLite: writes in their table, values inside each checkpoint row
    async with saver.lock:
        query = "SELECT COALESCE(SUM(length(value)), 0) FROM writes WHERE thread_id = ? AND channel = 'tool_state'"
        async with saver.conn.execute(query, (thread_id,)) as cursor:
            writes = (await cursor.fetchone())[0]
        query = "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ?"
        async with saver.conn.execute(query, (thread_id,)) as cursor:
            async for kind, data in cursor:
                stored = (_unpack(data).get("channel_values") or {}) if kind == "msgpack" else {}
                if "tool_state" in stored:
                    value = stored["tool_state"]
                    values += len(ormsgpack.packb(getattr(value, "value", value)))
    return writes, values


async def measure_cell(
    backend: str, keys: int, size: int, turns: int, workdir: Path
) -> dict[str, Any]:
    """One cell: ``turns`` measured turns of each agent, after one that publishes everything."""
    _Cell.keys, _Cell.size = keys, size
    async with opened(backend, workdir) as (saver, _):
        agents = {
            "library": build_agent(
                ScriptedChatModel(respond=_respond("refresh")),
                [refresh],
                checkpointer=saver,
                budget_bytes=BUDGET,
            ),
            "last-write-wins": _plain_agent(saver, refresh_plain),
            "no tool_state": _plain_agent(saver, refresh_nothing),
            "middleware": create_agent_path(
                saver,
                ScriptedChatModel(respond=_respond("refresh")),
                refresh,
                middleware=True,
                budget_bytes=BUDGET,
            ),
            "plain create_agent": create_agent_path(
                saver,
                ScriptedChatModel(respond=_respond("refresh_plain")),
                refresh_plain,
                middleware=False,
            ),
        }
        threads = {name: f"writes-{name[:3]}-{uuid4().hex}" for name in agents}
        library, config = agents["library"], {"configurable": {"thread_id": threads["library"]}}

        async def turn(name: str, n: int) -> float:
            graph, thread = agents[name], threads[name]
            start = time.perf_counter()
            if name == "library":
                await run_turn(graph, thread, f"refresh {n}")
            else:
                await graph.ainvoke(
                    {"messages": [HumanMessage(f"refresh {n}")]},
                    {"configurable": {"thread_id": thread}},
                )
            return (time.perf_counter() - start) * 1000

        for name in agents:
            await turn(name, 1)
        await analyzed(saver)
        before = {name: await tool_state_bytes(saver, threads[name]) for name in agents}
        # The library's storage is measured over one whole snapshot cycle, as it happens: from
        # the end of the first turn (which snapshots what it published) to the end of the turn
        # that takes the next snapshot, its writes and that snapshot over those turns. A short
        # run may see none, so its thread goes on (untimed) until one is taken; the update cap
        # makes one due within a few hundred turns.
        cycle: dict[str, Any] = {}
        cycle["since"], cycle["head"] = await _since_snapshot(library, config)

        async def watch(n: int) -> None:
            if "end" in cycle:
                return
            since, head = await _since_snapshot(library, config)
            if since is None or (cycle["since"] is not None and since < cycle["since"]):
                cycle["end"], cycle["bytes"] = n, await tool_state_bytes(saver, threads["library"])
                cycle["last start"] = cycle["head"]  # what that turn's run started from
            cycle["since"], cycle["head"] = since, head

        times: dict[str, list[float]] = {name: [] for name in agents}
        names = list(agents)
        for n in range(2, turns + 2):
            for name in names[n % len(names) :] + names[: n % len(names)]:
                times[name].append(await turn(name, n))
                if name == "library":
                    await watch(n)
        after = {name: await tool_state_bytes(saver, threads[name]) for name in agents}
        stored = {name: sum(after[name]) - sum(before[name]) for name in agents}
        changed = 2 * size
        library_writes = (after["library"][0] - before["library"][0]) / turns

        async def load(name: str) -> float:
            start = time.perf_counter()
            await agents[name].aget_state({"configurable": {"thread_id": threads[name]}})
            return (time.perf_counter() - start) * 1000

        loads = {
            name: statistics.median([await load(name) for _ in range(5)])
            for name in ("library", "last-write-wins")
        }
        # (loaded before the library's thread goes on: both threads are as long here)
        for n in range(turns + 2, turns + 3 + DEFAULT_SNAPSHOT_FREQUENCY // 3):
            if "end" in cycle:
                break
            await run_turn(library, threads["library"], f"refresh {n}")
            await watch(n)
        else:
            raise AssertionError("no snapshot within the update cap's worth of turns")
        rebuild = await _rebuild(saver, cycle["last start"])
        between = cycle["end"] - 1
        amortized = (sum(cycle["bytes"]) - sum(before["library"])) / between
        snapshot = cycle["bytes"][1] - before["library"][1]
        ms = {name: statistics.median(samples) for name, samples in times.items()}
        return {
            "changed_per_turn": changed,
            "stored_per_turn": {name: stored[name] / turns for name in agents},
            "library_writes_per_turn": library_writes,
            "library_amortized_per_turn": amortized,
            "snapshot_bytes": snapshot,
            "turns_between_snapshots": between,
            "ratio_stored": amortized / changed,
            "ratio_stored_lww": stored["last-write-wins"] / turns / changed,
            "ms_per_turn": ms,
            "ratio_time_lww": ms["library"] / ms["last-write-wins"],
            "ratio_time_create_agent": ms["middleware"] / ms["plain create_agent"],
            "load_ms": loads,
            "rebuild": rebuild,
        }


async def _since_snapshot(agent: Any, config: Any) -> tuple[int | None, Any]:
    """The updates to ``tool_state`` since its last snapshot at the thread's newest checkpoint
    (LangGraph's counter; ``None`` where that checkpoint holds the snapshot), and its config."""
    found = await agent.checkpointer.aget_tuple(config)
    counters = (found.metadata or {}).get("counters_since_delta_snapshot") or {}
    counter = counters.get("tool_state")
    return (None if counter is None else int(counter[0])), found.config


async def _rebuild(saver: Any, config: Any) -> dict[str, float]:
    """What rebuilding ``tool_state`` costs at the run start furthest from a snapshot (the one
    that took the cycle's snapshot): the saver's delta history read, and the replay of its
    writes, in a process that remembers no earlier read or replay (a restart's first run);
    medians."""
    reads, replays = [], []
    for _ in range(5):
        REPLAYS.clear()
        forget_histories(saver)
        start = time.perf_counter()
        found = await saver.aget_delta_channel_history(config=config, channels=["tool_state"])
        middle = time.perf_counter()
        history = found["tool_state"]
        replay(history.get("seed"), [write[2] for write in history["writes"]])
        reads.append((middle - start) * 1000)
        replays.append((time.perf_counter() - middle) * 1000)
    return {
        "writes": len(history["writes"]),
        "read_ms": statistics.median(reads),
        "replay_ms": statistics.median(replays),
    }


async def measure(
    backend: str, turns: int, workdir: Path, cells: Sequence[tuple[int, int]] = CELLS
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for keys, size in cells:
        progress(f"{backend}: writes, {keys} keys × {size:,} B")
        out[f"{keys}x{size}"] = await measure_cell(backend, keys, size, turns, workdir)
    return out


LARGE = 5 * 1024 * 1024
"""The one large value of :func:`measure_large_value`: 5 MB, rewritten every turn."""


@tool
def publish_large(turn: int, runtime: ToolRuntime) -> Any:
    """Publish one 5 MB value, different every turn."""
    return publish(runtime, "bench", "large", {"value": _value(0, turn, LARGE)})


async def _file_bytes(saver: Any) -> int:
    async with saver.lock:
        found = []
        for pragma in ("page_count", "freelist_count", "page_size"):
            async with saver.conn.execute(f"PRAGMA {pragma}") as cursor:
                found.append((await cursor.fetchone())[0])
    return (found[0] - found[1]) * found[2]


async def measure_large_value(workdir: Path, turns: int = 10) -> dict[str, Any]:
    """One 5 MB value rewritten ``turns`` times on SQLite: the file's growth per turn, the time
    a turn takes, and a history read of turn 1 (the ring keeps no 5 MB value)."""
    from mcp_state_versions import CheckpointHistory, resolve_turn

    from .common import without_ring_values

    key = "bench/large/value"
    async with opened("sqlite", workdir) as (saver, _):
        graph = build_agent(
            ScriptedChatModel(respond=_respond("publish_large")),
            [publish_large],
            checkpointer=saver,
        )
        thread = f"large-{uuid4().hex}"
        await run_turn(graph, thread, "publish_large 1")
        start_bytes = await _file_bytes(saver)
        times = []
        for n in range(2, turns + 2):
            started = time.perf_counter()
            await run_turn(graph, thread, f"publish_large {n}")
            times.append((time.perf_counter() - started) * 1000)
        grown = (await _file_bytes(saver) - start_bytes) / turns
        state = (await graph.aget_state({"configurable": {"thread_id": thread}})).values[
            "tool_state"
        ]
        bare = {**state, key: without_ring_values(state[key])}
        history = CheckpointHistory(saver)

        async def read() -> Any:
            return await resolve_turn(
                bare, key, 1, current_turn=turns + 1, history=history, thread_id=thread
            )

        answer = await read()
        assert answer.value == _value(0, 1, LARGE) and answer.source == "history", answer
        reads = []
        for _ in range(3):
            started = time.perf_counter()
            await read()
            reads.append((time.perf_counter() - started) * 1000)
        return {
            "value_bytes": LARGE,
            "turns": turns,
            "file_growth_per_turn": grown,
            "ratio_growth": grown / LARGE,
            "ms_per_turn": statistics.median(times),
            "history_read_ms": statistics.median(reads),
        }


def listing_chars(keys: int = 5000) -> int:
    """Characters of the first listing (``key="*"``) of ``keys`` keys in 50 tools of 10
    toolsets: what the model pays to see what state holds."""
    from mcp_state_versions import read_state_key
    from mcp_state_versions.state.reducer import merge_tool_state

    per_tool = keys // 500
    writes = {
        f"set{a}/tool{b}/field{c}": {"value": c, "tool": f"tool{b}"}
        for a in range(10)
        for b in range(50)
        for c in range(per_tool)
    }
    state = {"messages": [HumanMessage("list")], "tool_state": merge_tool_state({}, writes)}
    return len(read_state_key("*", state))


def spread_table(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """A Markdown table of each cell's time ÷ the plain agent in each of ``runs`` (each what
    :func:`measure` returned per backend), with the highest: how much a cell's ratio moves
    between runs of the same code on the same machine."""
    heads = " | ".join(f"run {i}" for i in range(1, len(runs) + 1))
    lines = [
        f"| backend | keys × bytes | {heads} | highest |",
        "| --- | --- |" + " ---: |" * (len(runs) + 1),
    ]
    for backend, cells in runs[0].items():
        for cell in cells:
            ratios = [run[backend][cell]["ratio_time_lww"] for run in runs]
            shown = " | ".join(f"{ratio:.2f}×" for ratio in ratios)
            lines.append(f"| {backend} | {_cell(cell)} | {shown} | {max(ratios):.2f}× |")
    return lines


def main() -> None:
    """``python -m benchmarks.writes``: the write cells alone, ``--runs`` times over."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.writes")
    parser.add_argument("--turns", type=int, default=50, help="measured turns per cell")
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument("--runs", type=int, default=1, help="runs of every cell, one after another")
    args = parser.parse_args()
    workdir = RESULTS / "work-writes"
    runs = []
    for run in range(args.runs):
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        progress(f"run {run + 1} of {args.runs}")
        found = {}
        for backend in args.backends.split(","):
            found[backend] = asyncio.run(measure(backend, args.turns, workdir))
        runs.append(found)
    shutil.rmtree(workdir, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "writes.json").write_text(json.dumps(runs, indent=1))
    print("\n".join(spread_table(runs)))


if __name__ == "__main__":
    main()
