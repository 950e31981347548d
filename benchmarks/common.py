"""What every measurement shares: the workload, the backends, threads, timing.

The workload is a real agent (``build_agent`` with a scripted model) whose one tool rewrites
``bench/measure/value`` every turn and republishes eight static keys, run with ``run_turn`` on
each backend; five checkpoints per turn. Times are medians of repeated runs after a warm-up,
with their spread (min–max) kept in the JSON.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any
from uuid import uuid4

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolRuntime

from mcp_state_versions import build_agent, count_turns, publish, run_turn
from mcp_state_versions.demo.scripted import ScriptedChatModel, call
from mcp_state_versions.savers.specs import open_checkpointer
from mcp_state_versions.state.clock import current_turn

KEY = "bench/measure/value"
STATIC_KEYS = 8
RESULTS = Path(__file__).parent / "results"
PG_DSN = os.environ.get("MCP_STATE_VERSIONS_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def expected(turn: int) -> dict[str, Any]:
    """The value ``KEY`` holds at the end of ``turn``."""
    return {"turn": turn, "reading": [turn * 0.5] * 8}


@tool
def measure(turn: int, runtime: ToolRuntime) -> Any:
    """Publish this turn's measurement (rewritten every turn) and the static keys."""
    fields: dict[str, Any] = {"value": expected(turn)}
    fields.update({f"static_{i}": {"unit": "m", "scale": i} for i in range(STATIC_KEYS)})
    return publish(runtime, "bench", "measure", fields)


def respond(messages: Sequence[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, HumanMessage):
        turn = int(str(last.content).split()[-1])
        return AIMessage("", tool_calls=[call("measure", f"m{len(messages)}", turn=turn)])
    return AIMessage("ok" if isinstance(last, ToolMessage) else "noted")


def agent(saver: Any, **options: Any) -> Any:
    return build_agent(ScriptedChatModel(respond=respond), [measure], checkpointer=saver, **options)


async def grow(agent_: Any, thread_id: str, turns: int) -> None:
    """Run turns until the thread has ``turns``, then refresh the planner's statistics."""
    state = (await agent_.aget_state({"configurable": {"thread_id": thread_id}})).values or {}
    for turn in range(current_turn(state) + 1, turns + 1):
        await run_turn(agent_, thread_id, f"measure {turn}")
        if turn % 100 == 0:
            progress(f"built {turn}/{turns} turns")
    await analyzed(agent_.checkpointer)


async def analyzed(saver: Any) -> None:
    """On PostgreSQL, refresh the planner's statistics of the checkpoint tables, as autovacuum
    does in a deployment once a table has grown (PostgreSQL's default).

    This machine runs PostgreSQL with autovacuum off. Without statistics the planner takes the
    tables for nearly empty and finds a thread's writes for a few checkpoints by scanning all
    of the thread's writes (5-10 ms at 1,000 turns instead of well under one), in the
    library's walk, in the hand-written floor and in LangGraph's own reads alike."""
    if hasattr(saver, "_cursor"):
        async with saver._cursor() as cursor:
            await cursor.execute("ANALYZE checkpoints, checkpoint_blobs, checkpoint_writes")


def spec(backend: str, workdir: Path) -> str:
    return {
        "memory": "memory",
        "sqlite": f"sqlite:{workdir / f'{uuid4().hex}.sqlite'}",
        "postgres": f"postgres:{PG_DSN}",
    }[backend]


@asynccontextmanager
async def opened(backend: str, workdir: Path) -> AsyncIterator[tuple[Any, str]]:
    """An open saver of ``backend`` (a new SQLite file each time) and its spec."""
    chosen = spec(backend, workdir)
    async with open_checkpointer(chosen) as saver:
        yield saver, chosen


def progress(text: str) -> None:
    print(f"  … {text}", file=sys.stderr, flush=True)


def summary(samples: Sequence[float]) -> dict[str, float]:
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "n": len(samples),
    }


async def timed(fn: Callable[[], Awaitable[Any]], repeat: int) -> dict[str, float]:
    """Median and spread, in ms, of ``repeat`` runs (callers run ``fn`` once first, to check
    its answer: that run is the warm-up)."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1000)
    return summary(samples)


async def timed_side_by_side(
    fns: Mapping[str, Callable[[], Awaitable[Any]]], repeat: int
) -> dict[str, dict[str, float]]:
    """As :func:`timed` for several ``fns`` at once, run in turn within each repetition (the
    order rotating), so whatever else the machine does weighs on all of them alike and their
    ratio is not skewed by when each happened to run."""
    names = list(fns)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(repeat):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            start = time.perf_counter()
            await fns[name]()
            samples[name].append((time.perf_counter() - start) * 1000)
    return {name: summary(samples[name]) for name in names}


def timed_sync(fn: Callable[[], Any], repeat: int, *, unit: float = 1000) -> dict[str, float]:
    """As :func:`timed`, for a synchronous ``fn``; ``unit`` 1000 for ms, 1e6 for µs."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * unit)
    return summary(samples)


def ratio(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """``a / b`` by medians, with the spread the two spreads allow."""
    return {
        "median": a["median"] / b["median"],
        "min": a["min"] / b["max"],
        "max": a["max"] / b["min"],
    }


def without_ring_values(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` as a ``ring_size=0`` deployment would hold it: every older read walks."""
    ring = [{k: v for k, v in item.items() if k not in ("value", "size")} for item in entry["ring"]]
    return {**entry, "ring": ring}


async def full_walk_read(graph: Any, thread_id: str, turn: int) -> Any:
    """What a host does without this library: walk all history, newest first, and take the
    first checkpoint with N human messages."""
    async for snapshot in graph.aget_state_history({"configurable": {"thread_id": thread_id}}):
        if count_turns(snapshot.values.get("messages")) == turn:
            return snapshot.values.get("tool_state", {}).get(KEY, {}).get("value")
    return None


def runtime_over(
    tool_state: Mapping[str, Any], call_id: str = "bench", messages: Sequence[Any] | None = None
) -> ToolRuntime:
    """A tool's runtime over ``tool_state`` (and ``messages`` where given), as a ``ToolNode``
    would hand it to a tool."""
    state = (
        {"tool_state": tool_state}
        if messages is None
        else {"tool_state": tool_state, "messages": messages}
    )
    return ToolRuntime(
        state=state,
        context=None,
        config={},
        stream_writer=lambda _: None,
        tool_call_id=call_id,
        store=None,
    )


def quick_repeats(prog: str, full: int, quick: int = 5) -> int:
    """The repetitions a standalone benchmark's command line asks for (``--quick``: fewer)."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    return quick if parser.parse_args().quick else full


def last_write_wins(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """A plain agent's ``tool_state`` reducer: each key's newest value, nothing kept."""
    return {**(old or {}), **(new or {})}


def create_agent_path(
    saver: Any, model: Any, tool_: Any, *, middleware: bool, **options: Any
) -> Any:
    """LangChain's ``create_agent`` as the quick start builds it (``SessionStateMiddleware``
    with ``options``, ``state_schema=SessionAgentState``), or plain: ``AgentState`` with a
    last-write-wins ``tool_state`` beside it, for a tool that returns its fields there."""
    from langchain.agents import AgentState, create_agent

    from mcp_state_versions import SessionAgentState, SessionStateMiddleware

    if middleware:
        return create_agent(
            model,
            [tool_],
            state_schema=SessionAgentState,
            middleware=[SessionStateMiddleware(**options)],
            checkpointer=saver,
        )

    class PlainAgentState(AgentState):  # type: ignore[type-arg]
        tool_state: Annotated[dict[str, Any], last_write_wins]

    return create_agent(model, [tool_], state_schema=PlainAgentState, checkpointer=saver)
