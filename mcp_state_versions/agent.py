"""Agent wiring: the tools an agent gets, the graph it runs in, and how a turn is started.

:func:`with_session_state` is the narrow entry point for a host that builds its own graph: it
hands back the host's tools plus exactly one ``inspect_state``, wired to the checkpointer's
history when one is given. :func:`build_agent` is the whole loop for a host that does not:
a ``StateGraph`` with ``messages`` and versioned ``tool_state``, a model node and a ``ToolNode``
(LangGraph's prebuilt ``create_react_agent`` is deprecated since LangGraph 1.0, and its
replacement lives in a separate package; the loop is four lines of graph anyway).

:func:`run_turn` starts a turn with its number stamped into the run's checkpoint metadata. The
number is derivable from messages, so nothing depends on the stamp, but a checkpoint walk that
finds it can locate a turn from metadata alone instead of reading every checkpoint's messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from .history import ThreadHistory
from .inspect_tool import make_inspect_state
from .state import (
    DEFAULT_BUDGET_BYTES,
    TURN_METADATA_KEY,
    count_turns,
    make_merge_tool_state,
    make_session_state,
)

__all__ = ["AUTO", "build_agent", "run_turn", "turn_config", "with_session_state"]

DEFAULT_SYSTEM_PROMPT = (
    "Your tools publish their results into session state and reply with "
    "'[state updated: <key>, ...]'. Read state with inspect_state. When a key is marked "
    "'rewritten', it held other values in earlier turns: to compare with an earlier result, "
    "read it with turn=N (or versions=true) rather than reading the current value twice."
)


AUTO: Literal["auto"] = "auto"
"""``history=AUTO`` (the default): walk the given checkpointer's history, if one is given."""


def _history_for(
    checkpointer: BaseCheckpointSaver | None, history: ThreadHistory | Literal["auto"] | None
) -> ThreadHistory | None:
    if history != AUTO or checkpointer is None:
        return history  # type: ignore[return-value]
    from .checkpoint_walk import CheckpointHistory

    return CheckpointHistory(checkpointer)


def with_session_state(
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver | None = None,
    *,
    allowed_keys: Sequence[str] | None = None,
    history: ThreadHistory | Literal["auto"] | None = AUTO,
) -> list[BaseTool]:
    """Return ``tools`` plus one ``inspect_state`` tool.

    With a ``checkpointer``, ``inspect_state(turn=N)`` falls back to walking its history
    (through :class:`~mcp_state_versions.checkpoint_walk.CheckpointHistory`) when a key's ring
    no longer holds the version asked for; pass ``history`` to use another
    :class:`~mcp_state_versions.history.ThreadHistory`, or ``history=None`` to read the ring
    only. Without history, such reads answer that this deployment keeps no turn history.
    """
    tools = list(tools)
    clash = [t.name for t in tools if t.name == "inspect_state"]
    if clash:
        raise ValueError(
            "tools already include an 'inspect_state'; with_session_state adds its own. "
            "Rename or remove the other one."
        )
    return [*tools, make_inspect_state(allowed_keys, _history_for(checkpointer, history))]


def build_agent(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    *,
    checkpointer: BaseCheckpointSaver | None = None,
    allowed_keys: Sequence[str] | None = None,
    history: ThreadHistory | Literal["auto"] | None = AUTO,
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
    ring_size: int = 8,
    ring_bytes: int = 256 * 1024,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    reducer: Callable[..., dict[str, Any]] | None = None,
) -> CompiledStateGraph:
    """A compiled tool-calling agent whose tools publish into versioned ``tool_state``.

    ``model`` is any chat model that supports ``bind_tools``. The ring bounds and budget
    configure the ``tool_state`` reducer (:func:`~mcp_state_versions.state.make_merge_tool_state`);
    ``reducer`` replaces it outright (the benchmarks compare with last-write-wins this way).
    ``system_prompt`` is prepended to every model call (not stored in state); ``None`` omits it.
    """
    all_tools = with_session_state(tools, checkpointer, allowed_keys=allowed_keys, history=history)
    reducer = reducer or make_merge_tool_state(ring_size, ring_bytes, budget_bytes)
    bound = model.bind_tools(all_tools)
    prefix = [SystemMessage(system_prompt)] if system_prompt else []

    def call_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [bound.invoke([*prefix, *state["messages"]], config)]}

    async def acall_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke([*prefix, *state["messages"]], config)]}

    graph = StateGraph(make_session_state(reducer))
    # Both forms, so the agent runs under invoke() as well as ainvoke()/astream().
    graph.add_node("agent", RunnableLambda(call_model, afunc=acall_model, name="agent"))
    graph.add_node("tools", ToolNode(all_tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def turn_config(thread_id: str, turn: int, **configurable: Any) -> RunnableConfig:
    """The run config for turn ``turn`` of ``thread_id``, with the turn in checkpoint metadata."""
    return {
        "configurable": {"thread_id": thread_id, **configurable},
        "metadata": {TURN_METADATA_KEY: turn},
    }


async def run_turn(
    agent: CompiledStateGraph, thread_id: str, text: str, **configurable: Any
) -> dict[str, Any]:
    """Send one user message to ``agent`` on ``thread_id`` and run the turn to its end.

    Reads the thread's current turn count from its state, so the new turn is numbered the way
    every reader of this library counts turns (human messages), and returns the final state.
    """
    base: RunnableConfig = {"configurable": {"thread_id": thread_id, **configurable}}
    snapshot = await agent.aget_state(base)
    turn = count_turns((snapshot.values or {}).get("messages")) + 1
    return await agent.ainvoke(
        {"messages": [HumanMessage(text)]}, turn_config(thread_id, turn, **configurable)
    )
