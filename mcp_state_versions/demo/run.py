"""The demo: the rewritten-key conversation, run through the real agent loop.

The chat model is scripted (its replies are written in advance, so the demo needs no provider
and prints the same thing every time); everything else is the library as a host runs it: the
agent graph, ``ToolNode``, the reducer, the checkpointer, ``inspect_state`` and the checkpoint
walk. What is printed under ``tool ←`` is exactly the text the model received.

Act 1 is the reported failure, fixed: Copenhagen in turn 1, a question in turn 2, Aarhus in
turn 3; the listing marks the key rewritten, ``turn=1`` returns Copenhagen from the entry's
ring, a miscounted turn is answered as such, and the comparison is made between two areas.
Act 2 is retention: the thread is pruned to its last turn; the ring still answers turn 1, and a
deployment that keeps no ring (``ring_size=0``) is told turn 1 is no longer retained instead of
being handed the current value.
"""

# No ``from __future__ import annotations``: this module defines LangChain tools, whose
# annotations LangChain would re-evaluate from strings on every call.

import asyncio
import json
import sys
import textwrap
from collections.abc import Callable
from typing import Any
from uuid import uuid4

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from ..agent.build import build_agent, run_turn
from ..agent.publish import publish
from ..agent.runtime import LeanToolRuntime
from ..retention.prune import prune_thread
from ..savers.specs import open_checkpointer
from ..state.clock import current_turn
from ..walk.history import turn_span
from .scripted import ScriptedChatModel, call

__all__ = ["GAZETTEER", "chat_model", "get_aoi", "main", "run_demo"]

BBOX = "gazet/get_aoi/bbox"

GAZETTEER: dict[str, dict[str, Any]] = {
    "copenhagen": {"name": "Copenhagen", "country": "DK", "bbox": [12.4, 55.5, 12.7, 55.8]},
    "aarhus": {"name": "Aarhus", "country": "DK", "bbox": [9.9, 56.1, 10.3, 56.2]},
    "oslo": {"name": "Oslo", "country": "NO", "bbox": [10.6, 59.8, 10.9, 60.0]},
}
"""A three-place gazetteer: enough for the demo, the tests and the benchmarks."""


@tool
def get_aoi(place: str, runtime: LeanToolRuntime) -> Command | str:
    """Find the area of interest (bounding box: west, south, east, north) for a place name."""
    found = GAZETTEER.get(place.strip().lower())
    if found is None:
        return f"No area of interest known for {place!r}; known places: Copenhagen, Aarhus, Oslo."
    fields = {"bbox": found["bbox"], "name": found["name"], "country": found["country"]}
    return publish(runtime, "gazet", "get_aoi", fields, note=found["name"])


def _act_one_script() -> list[AIMessage]:
    comparison = (
        "The first area, Copenhagen, spans 12.4–12.7°E and 55.5–55.8°N (0.3° × 0.3°). "
        "Aarhus spans 9.9–10.3°E and 56.1–56.2°N (0.4° × 0.1°): wider east–west, a third "
        "of the north–south extent, and about 2.5° further west."
    )
    return [
        AIMessage("", tool_calls=[call("get_aoi", "c1", place="Copenhagen")]),
        AIMessage("I found Copenhagen and published its area to gazet/get_aoi/bbox."),
        AIMessage("Copenhagen is in Denmark."),
        AIMessage("", tool_calls=[call("get_aoi", "c2", place="Aarhus")]),
        AIMessage("", tool_calls=[call("inspect_state", "c3", key="*")]),
        AIMessage("", tool_calls=[call("inspect_state", "c4", key=BBOX, turn=1)]),
        AIMessage("", tool_calls=[call("inspect_state", "c5", key=BBOX, turn=7)]),
        AIMessage("", tool_calls=[call("inspect_state", "c6", key=BBOX)]),
        AIMessage(comparison),
        AIMessage("", tool_calls=[call("inspect_state", "c7", key=BBOX, turn=1)]),
        AIMessage("The first area was Copenhagen: [12.4, 55.5, 12.7, 55.8]."),
    ]


def _act_two_script() -> list[AIMessage]:
    return [
        AIMessage("", tool_calls=[call("get_aoi", "d1", place="Copenhagen")]),
        AIMessage("Found Copenhagen."),
        AIMessage("", tool_calls=[call("get_aoi", "d2", place="Oslo")]),
        AIMessage("Found Oslo."),
        AIMessage("", tool_calls=[call("inspect_state", "d3", key=BBOX, turn=1)]),
        AIMessage(
            "I can't tell you: the area from turn 1 is no longer retained in this "
            "deployment, and I won't guess it from the current one (Oslo)."
        ),
    ]


def _wrap(text: str, prefix: str) -> str:
    lines = []
    for line in text.splitlines() or [""]:
        wrapped = textwrap.wrap(line, 96) or [""]
        lines.extend(wrapped)
    pad = " " * len(prefix)
    return "\n".join((prefix if i == 0 else pad) + line for i, line in enumerate(lines))


def _format_call(tool_call: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in tool_call["args"].items())
    return f"{tool_call['name']}({args})"


Record = Callable[[dict[str, Any]], None]
"""Takes each turn as data (``demo --json`` prints one JSON line per turn)."""


async def _turn(
    agent: CompiledStateGraph,
    thread_id: str,
    text: str,
    out: Callable[[str], None],
    record: Record | None,
) -> None:
    before = await agent.aget_state({"configurable": {"thread_id": thread_id}})
    seen = len((before.values or {}).get("messages", []))
    state = await run_turn(agent, thread_id, text)
    turn = current_turn(state)
    steps: list[dict[str, Any]] = []
    for message in state["messages"][seen + 1 :]:
        if isinstance(message, AIMessage):
            for tool_call in message.tool_calls:
                steps.append({"call": tool_call["name"], "args": tool_call["args"]})
            if message.content:
                steps.append({"model": str(message.content)})
        elif isinstance(message, ToolMessage):
            steps.append({"tool": str(message.content)})
    if record is not None:
        record({"thread_id": thread_id, "turn": turn, "user": text, "steps": steps})
        return
    out(_wrap(text, f"\n── turn {turn} · user: "))
    for step in steps:
        if "call" in step:
            out(_wrap(_format_call({"name": step["call"], "args": step["args"]}), "   model → "))
        elif "model" in step:
            out(_wrap(step["model"], "   model: "))
        else:
            out(_wrap(step["tool"], "   tool  ← "))


async def run_demo(
    checkpointer: BaseCheckpointSaver,
    out: Callable[[str], None] = print,
    model: BaseChatModel | None = None,
    record: Record | None = None,
) -> tuple[str, str]:
    """Run both acts on ``checkpointer``, printing what the model saw through ``out``.

    Returns the two acts' thread ids. With ``record``, each turn goes to it as data instead
    (the thread, the turn, the user's text, and the calls, replies and tool answers in order),
    and ``out`` gets only the narration between turns.

    ``model`` replaces the scripted model with a real one: the user's messages stay the same,
    and what the model does with them is its own.
    """
    tools: list[BaseTool] = [get_aoi]
    if model is None:
        out("A scripted chat model drives the real agent loop; 'tool ←' lines are what it read.")
    else:
        out(f"{type(model).__name__} drives the agent loop; 'tool ←' lines are what it read.")
    out("\nAct 1 — a key rewritten in a later turn, read as of the turn that set it first.")
    agent = build_agent(
        model or ScriptedChatModel(replies=_act_one_script()), tools, checkpointer=checkpointer
    )
    thread = first = f"demo-act-1-{uuid4().hex[:8]}"
    await _turn(agent, thread, "Find the area of interest for Copenhagen.", out, record)
    await _turn(agent, thread, "Which country is it in?", out, record)
    await _turn(
        agent,
        thread,
        "Now find Aarhus. How does the area you found first compare with this one?",
        out,
        record,
    )

    out("\nAct 2 — retention. The operator prunes act 1's thread to its last turn:")
    result = await prune_thread(checkpointer, thread, keep_turns=1)
    out(
        f"   prune_thread(keep_turns=1): {result.deleted} checkpoints removed; retained turns "
        f"{turn_span(result.retained_turns)} of {result.total_turns}."
    )
    out("   The key's ring still holds turn 1's version, so the answer survives pruning:")
    await _turn(agent, thread, "Remind me, what was the first area?", out, record)

    out("\n   A deployment configured with ring_size=0 keeps no prior values with the key:")
    bare = build_agent(
        model or ScriptedChatModel(replies=_act_two_script()),
        tools,
        checkpointer=checkpointer,
        ring_size=0,
    )
    thread = f"demo-act-2-{uuid4().hex[:8]}"
    await _turn(bare, thread, "Find Copenhagen.", out, record)
    await _turn(bare, thread, "Now find Oslo.", out, record)
    result = await prune_thread(checkpointer, thread, keep_turns=1)
    out(f"   prune_thread(keep_turns=1): {result.deleted} checkpoints removed.")
    await _turn(bare, thread, "What was the first area?", out, record)
    return first, thread


def chat_model(spec: str) -> BaseChatModel:
    """A real chat model from ``provider:name`` through LangChain's ``init_chat_model``.

    Needs the ``agents`` extra (``langchain``) and the provider's own package and credentials.
    """
    try:
        from langchain.chat_models import init_chat_model
    except ImportError:
        raise ValueError(
            "--model needs LangChain's init_chat_model: pip install 'mcp-state-versions[agents]' "
            "and the provider's package (e.g. langchain-openai)"
        ) from None
    try:
        return init_chat_model(spec)
    except ImportError as error:
        raise ValueError(f"cannot load {spec!r}: {error}") from None


DEFAULT_DB = "demo.sqlite"
"""Where the demo keeps its threads unless told otherwise: a SQLite file in the working
directory, so the operator commands it prints afterwards work as printed."""


async def _main(spec: str | None, model: str | None, as_json: bool) -> None:
    chosen = chat_model(model) if model else None
    spec = spec or f"sqlite:{DEFAULT_DB}"
    if as_json:  # the turns on standard output, one JSON object a line; nothing else there

        def record(turn: dict[str, Any]) -> None:
            print(json.dumps(turn), flush=True)

        async with open_checkpointer(spec) as checkpointer:
            await run_demo(checkpointer, out=_nothing, model=chosen, record=record)
        return
    print(f"checkpointer: {spec}")
    async with open_checkpointer(spec) as checkpointer:
        first, second = await run_demo(checkpointer, model=chosen)
    if not spec.startswith("memory"):
        print(
            f"\nThe threads {first} and {second} stay in the checkpointer. "
            "Read one as an operator would:\n"
            f"  {_program()} inspect --checkpointer {spec} --thread {first} "
            "gazet/get_aoi/bbox --versions"
        )


def _program() -> str:
    """The command as the person ran it (``.venv/bin/mcp-state-versions`` after the README's
    install), so the hint runs as printed; ``mcp-state-versions`` otherwise."""
    import os

    invoked = sys.argv[0] if sys.argv else ""
    if os.path.basename(invoked) != "mcp-state-versions":
        return "mcp-state-versions"
    relative = os.path.relpath(invoked)
    return relative if not relative.startswith("..") else invoked


def _nothing(text: str) -> None:
    """Narration is for a person; ``--json`` output is for a program."""


def main(spec: str | None = None, *, model: str | None = None, as_json: bool = False) -> None:
    """Run the demo on the checkpointer ``spec`` (default: ``sqlite:demo.sqlite``).

    ``model`` (``provider:name``) runs it with a real chat model instead of the scripted one;
    ``as_json`` prints each turn as a line of JSON instead of the transcript.
    """
    asyncio.run(_main(spec, model, as_json))
