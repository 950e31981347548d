"""Agent wiring: the tools an agent gets, the graph it runs in, and how a turn is started.

:func:`with_session_state` is the narrow entry point for a host that builds its own graph: it
hands back the host's tools plus exactly one ``inspect_state``, wired to the checkpointer's
history when one is given. :func:`build_agent` is the whole loop for a host that does not:
a ``StateGraph`` with ``messages`` and versioned ``tool_state``, a model node and a ``ToolNode``
(LangGraph's prebuilt ``create_react_agent`` is deprecated since LangGraph 1.0, and its
replacement lives in a separate package; the loop is four lines of graph anyway).

The graph runs the turn clock (:mod:`mcp_state_versions.state.clock`) in its model node: the turn
opens when the node answers a new user message and closes with the reply that calls no tools
(:func:`~mcp_state_versions.state.clock.ticks_around`), so any client that sends
``{"messages": [...]}`` gets its turns counted, whatever later trims or summarizes the
messages.

:func:`run_turn` is a convenience: it sends one user message with the turn's number stamped into
the run's checkpoint metadata. Nothing depends on the stamp (the clock is the definition), but
a checkpoint walk uses it to find a turn's checkpoints from metadata alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import uuid4

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph._internal._runnable import RunnableCallable
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from ..backends import NeedsAsync, backend_for, stamp_turn
from ..savers.stamps import NEXT_TURN, continues_stamped, stamps_at_put
from ..state.clock import current_turn, ticks_around
from ..state.reducer import (
    DEFAULT_BUDGET_BYTES,
    TURN_METADATA_KEY,
    ToolStateReducer,
    make_merge_tool_state,
)
from ..storage.channels import make_session_state
from ..storage.messages import MessagesOption
from ..storage.tool_state import DEFAULT_SNAPSHOT_FREQUENCY
from ..walk.history import AUTO, HistoryOption
from .capture import DEFAULT_INLINE_LIMIT, Capture, CaptureOption, session_tool_wrappers
from .inspect_state import make_inspect_state
from .publish import SECRET_NAMES, noted_messages

__all__ = [
    "AUTO",
    "SESSION_STATE_PROMPT",
    "build_agent",
    "run_turn",
    "turn_config",
    "with_session_state",
]

SESSION_STATE_PROMPT = (
    "Your tools publish their results into session state and reply with "
    "'[state updated: <key>, ...]'. Read state with inspect_state. When a key is marked "
    "'rewritten', it held other values in earlier turns: to compare with an earlier result, "
    "read it with turn=N (or versions=true) rather than reading the current value twice. "
    "When the listing says turns were summarized out of the conversation, read what was said "
    'in one with inspect_state(key="@conversation", turn=N) rather than guessing.'
)
"""The guidance a model needs to use session state; ``build_agent`` and
``SessionStateMiddleware`` put it in the system prompt."""

DEFAULT_SYSTEM_PROMPT = SESSION_STATE_PROMPT


def with_session_state(
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver | None = None,
    *,
    allowed_keys: Sequence[str] | None = None,
    history: HistoryOption = AUTO,
) -> list[BaseTool]:
    """Return ``tools`` plus one ``inspect_state`` tool.

    ``inspect_state(turn=N)`` falls back to checkpoint history when a key's ring no longer
    holds the version asked for. With ``history=AUTO`` (the default) that is the history of the
    checkpointer the run is using, found at call time, so it is right however the checkpointer
    was attached (``compile``, ``graph.copy``, the Agent Server); ``checkpointer`` is accepted
    for compatibility and not needed. Pass a :class:`~mcp_state_versions.walk.history.ThreadHistory`
    to use another store, or ``None`` to read the rings only. Without history, such reads
    answer that this deployment keeps no turn history.
    """
    tools = list(tools)
    clash = [t.name for t in tools if t.name == "inspect_state"]
    if clash:
        raise ValueError(
            "tools already include an 'inspect_state'; with_session_state adds its own. "
            "Rename or remove the other one."
        )
    return [*tools, make_inspect_state(allowed_keys, history)]


def build_agent(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    *,
    checkpointer: BaseCheckpointSaver | bool | None = None,
    allowed_keys: Sequence[str] | None = None,
    history: HistoryOption = AUTO,
    system_prompt: str | None = SESSION_STATE_PROMPT,
    ring_size: int = 8,
    ring_bytes: int = 256 * 1024,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    reducer: Callable[..., dict[str, Any]] | None = None,
    snapshot_frequency: int = DEFAULT_SNAPSHOT_FREQUENCY,
    messages: MessagesOption = "delta",
    capture: CaptureOption = True,
    toolset: str | Callable[[BaseTool], str] = "tools",
    inline_limit: int = DEFAULT_INLINE_LIMIT,
    secret_names: str | None = SECRET_NAMES,
) -> CompiledStateGraph:
    """A compiled tool-calling agent whose tools publish into versioned ``tool_state``.

    ``model`` is any chat model that supports ``bind_tools``. The ring bounds and budget
    configure the ``tool_state`` reducer
    (:func:`~mcp_state_versions.state.reducer.make_merge_tool_state`); ``reducer`` replaces it
    outright. ``tool_state`` is stored as writes with a whole snapshot every ``snapshot_frequency``
    updates (:mod:`mcp_state_versions.storage.tool_state`), and so is ``messages``
    (:mod:`mcp_state_versions.storage.messages`): a turn stores what it added, not the whole
    conversation again; ``messages="whole"`` keeps LangGraph's ``add_messages`` channel.
    ``system_prompt`` is prepended to every model call (not stored in state); ``None`` omits it.

    The graph is ``agent <-> tools``: the agent node ticks the turn clock on each new user
    message, whoever sends it, and closes the turn with its final reply. ``checkpointer`` may
    be left out and attached later (as the LangGraph Agent Server does); ``history=AUTO``
    follows whichever saver runs. A tool argument ``"@state:<key>"`` or
    ``"@state:<key>@turn=N"`` is replaced by that value before the tool runs
    (:mod:`mcp_state_versions.agent.handles`). ``capture``, ``toolset``, ``inline_limit`` and
    ``secret_names`` choose which tools' results are published and how
    (:class:`~mcp_state_versions.agent.capture.Capture`): by default every tool's, so a tool that
    returns text is versioned too, as ``tools/<tool>/result``.
    """
    all_tools = with_session_state(tools, allowed_keys=allowed_keys, history=history)
    reducer = reducer or make_merge_tool_state(ring_size, ring_bytes, budget_bytes)
    bound = model.bind_tools(all_tools)
    prefix = [SystemMessage(system_prompt)] if system_prompt else []

    bounds = reducer.bounds if isinstance(reducer, ToolStateReducer) else None

    def replied(state: dict[str, Any], reply: Any, config: RunnableConfig) -> dict[str, Any]:
        # The turn clock runs in this node (clock.ticks_around), not in nodes of its own.
        if getattr(reply, "id", None) is None:
            reply.id = f"run-{uuid4()}"
        return {"messages": [reply], **ticks_around(state, reply, config, bounds=bounds)}

    def call_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        messages = [*prefix, *noted_messages(state["messages"])]
        return replied(state, bound.invoke(messages, config), config)

    async def acall_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        reply = await bound.ainvoke([*prefix, *noted_messages(state["messages"])], config)
        return replied(state, reply, config)

    graph: StateGraph[Any] = StateGraph(
        make_session_state(reducer, snapshot_frequency=snapshot_frequency, messages=messages)
    )
    # Both forms, so the agent runs under invoke() as well as ainvoke()/astream(); LangGraph's
    # own node runnable (as create_agent's model node), which reads the functions' signatures
    # once, where a RunnableLambda reads them again on every call.
    graph.add_node("agent", RunnableCallable(call_model, acall_model, name="agent"))
    captured = Capture(
        capture, toolset=toolset, inline_limit=inline_limit, secret_names=secret_names
    )
    wrap, awrap = session_tool_wrappers(history, captured)
    tools_node = ToolNode(all_tools, wrap_tool_call=wrap, awrap_tool_call=awrap)
    graph.add_node("tools", tools_node)
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

    Stamps the run's checkpoints with the turn it opens (a hint for the checkpoint walk), and
    returns the final state. Any other way of invoking the agent with a user message counts the
    turn just the same.

    The turn comes from the stamp of the checkpoint the run continues, when a run of this
    function ended it (a hint is all the stamp is for, and the walk checks it against the
    clock); otherwise from the thread's clock, which means rebuilding its state. On a saver
    that settles stamps as it stores (the library's database savers,
    :mod:`mcp_state_versions.savers.stamps`), a run continuing a stamped run reads nothing
    first: the saver takes the turn after the stamp of the checkpoint the run really continues.
    """
    base: RunnableConfig = {"configurable": {"thread_id": thread_id, **configurable}}
    message = {"messages": [HumanMessage(text)]}
    saver = agent.checkpointer
    if (
        "checkpoint_id" not in configurable
        and stamps_at_put(saver)
        and continues_stamped(saver, thread_id, str(configurable.get("checkpoint_ns") or ""))
    ):
        # The saver stamps the run as it stores it, from the checkpoint the run continues
        # (savers.stamps): no read of the head before the run.
        return await agent.ainvoke(message, {**base, "metadata": {TURN_METADATA_KEY: NEXT_TURN}})
    turn = await _stamped_turn(agent, base)
    if turn is None:
        snapshot = await agent.aget_state(base)
        turn = current_turn(snapshot.values or {})
    return await agent.ainvoke(message, turn_config(thread_id, turn + 1, **configurable))


async def _stamped_turn(agent: CompiledStateGraph, config: RunnableConfig) -> int | None:
    """The turn stamped on the checkpoint a run on ``config`` continues (0 for a new thread),
    when that checkpoint ended a stamped run; ``None`` when it did not."""
    saver = agent.checkpointer
    if not isinstance(saver, BaseCheckpointSaver):
        return None
    configurable = config["configurable"]
    backend = backend_for(saver)
    thread_id, namespace = (
        str(configurable["thread_id"]),
        str(configurable.get("checkpoint_ns") or ""),
    )
    chosen = configurable.get("checkpoint_id")
    try:
        if chosen is None:  # the run continues the head (the usual case): see Backend.run_start
            link = await backend.run_start(thread_id, namespace)
        else:
            link = await backend.link(thread_id, namespace, chosen)
    except NeedsAsync:
        return None
    if link is None:
        return 0
    return stamp_turn(link.stamp) if link.source == "loop" else None
