"""A turn's conversation read back after summaries removed it from state: its cost against the
one-statement floor, and the tokens it hands the model.

    python -m benchmarks.conversation [--turns 1000] [--quick]

A ``create_agent`` agent with ``SessionStateMiddleware`` and LangChain's
``SummarizationMiddleware(trigger=60 messages, keep=20)`` runs ``--turns`` turns on the
library's SQLite saver (each ``run_turn``, so its checkpoints carry turn stamps), one tool call
and a reply a turn. Then, at the thread's end:

* **read**: ``inspect_state(key="@conversation", turn=1)``, as the model calls it (the tool's
  whole path: the turn count, the end of turn 1 on the branch, its messages and clock);
* **floor**: one SQL statement fetching the ``messages`` writes of the checkpoints stamped with
  turn 1 (located by their stamp; nothing confirmed, no reducer), decoded: the least a read of
  that turn's messages can cost on this storage;
* **tokens**: the answer's length in tokens as LangChain counts them approximately
  (``count_tokens_approximately``), for a typical turn (turn 1: a question, one call, a reply).

Ratios are of medians measured side by side (interleaved), so the machine's load falls on both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.prebuilt import ToolRuntime

from mcp_state_versions import (
    CheckpointHistory,
    PruningSqliteSaver,
    SessionAgentState,
    SessionStateMiddleware,
    call,
    make_inspect_state,
    run_turn,
)
from mcp_state_versions.backends.sqlite import _unpack
from mcp_state_versions.demo.run import get_aoi
from mcp_state_versions.demo.scripted import ScriptedChatModel
from mcp_state_versions.state.reducer import TURN_METADATA_KEY

from .common import RESULTS, progress, ratio, timed_side_by_side

PLACES = ["Copenhagen", "Aarhus", "Oslo"]


def _respond(messages: Sequence[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if "Messages to summarize" in str(last.content):
        return AIMessage("the user looked up places; areas are in session state")
    if isinstance(last, ToolMessage):
        return AIMessage("found it")
    return AIMessage("", tool_calls=[call("get_aoi", f"c{len(messages)}", place=PLACES[0])])


def _agent(saver: Any) -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware

    summarizer = SummarizationMiddleware(
        ScriptedChatModel(respond=_respond), trigger=("messages", 60), keep=("messages", 20)
    )
    return create_agent(
        ScriptedChatModel(respond=_respond),
        [get_aoi],
        middleware=[SessionStateMiddleware(), summarizer],
        state_schema=SessionAgentState,
        checkpointer=saver,
    )


async def _floor(saver: Any, thread_id: str, turn: int) -> list[Any]:
    """The ``messages`` writes of the checkpoints stamped with ``turn``, in one statement."""
    async with saver.lock:
        rows = await saver.conn.execute_fetchall(
            "SELECT w.value FROM writes w JOIN checkpoints c ON c.thread_id = w.thread_id "
            "AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id "
            "WHERE w.thread_id = ? AND w.checkpoint_ns = '' AND w.channel = 'messages' "
            f"AND json_extract(CAST(c.metadata AS TEXT), '$.{TURN_METADATA_KEY}') = ?",
            (thread_id, turn),
        )
    return [_unpack(row[0]) for row in rows]


async def measure(turns: int, repeat: int, workdir: Path) -> dict[str, Any]:
    path = workdir / "conversation.sqlite"
    async with PruningSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()
        agent = _agent(saver)
        thread_id = f"conversation-bench-{uuid4().hex[:8]}"
        for turn in range(1, turns + 1):
            await run_turn(agent, thread_id, f"find {PLACES[turn % 3]} ({turn})")
            if turn % 250 == 0:
                progress(f"conversation: {turn:,} of {turns:,} turns")
        config = {"configurable": {"thread_id": thread_id}}
        state = (await agent.aget_state(config)).values
        assert not any(m.content == "find Aarhus (1)" for m in state["messages"])  # summarized
        tool = make_inspect_state(history=CheckpointHistory(saver))
        runtime = ToolRuntime(
            state=state,
            context=None,
            config={"configurable": {"thread_id": thread_id}},
            stream_writer=lambda _: None,
            tool_call_id="bench",
            store=None,
        )

        async def read() -> Any:
            return await tool.coroutine(key="@conversation", turn=1, runtime=runtime)

        answer = await read()
        assert "find Aarhus (1)" in answer, answer
        assert await _floor(saver, thread_id, 1), "no writes stamped with turn 1"
        timed = await timed_side_by_side(
            {"read": read, "floor": lambda: _floor(saver, thread_id, 1)}, repeat
        )
        ours, floor = timed["read"], timed["floor"]
    return {
        "turns": turns,
        "read_ms": ours,
        "floor_ms": floor,
        "ratio": ratio(ours, floor),
        "tokens": count_tokens_approximately([HumanMessage(answer)]),
        "chars": len(answer),
    }


def table(found: dict[str, Any]) -> str:
    return "\n".join(
        [
            "| thread | `@conversation`, turn 1 | one-statement floor | ÷ floor | tokens handed over |",
            "| --- | ---: | ---: | ---: | ---: |",
            f"| {found['turns']:,} turns, summarized | {found['read_ms']['median']:.2f} ms | "
            f"{found['floor_ms']['median']:.2f} ms | {found['ratio']['median']:.2f}× | "
            f"{found['tokens']} ({found['chars']} characters) |",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.conversation")
    parser.add_argument("--turns", type=int, default=None, help="default 1000 (--quick: 200)")
    parser.add_argument("--quick", action="store_true", help="a 200-turn thread, fewer repeats")
    args = parser.parse_args()
    turns = args.turns or (200 if args.quick else 1000)
    workdir = Path(tempfile.mkdtemp(prefix="bench-conversation-"))
    try:
        found = asyncio.run(measure(turns, 5 if args.quick else 21, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "conversation.json").write_text(json.dumps(found, indent=2))
    print(table(found))


if __name__ == "__main__":
    main()
