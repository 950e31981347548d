"""Two agents for the LangGraph Agent Server, and the session-state API mounted beside them.

``langgraph dev`` (or any deployment behind the Agent Server) imports this module through
``langgraph.json``: the server compiles the graphs without a checkpointer and attaches its own
at run time, which is why neither graph brings one, and why ``history=AUTO`` (the default)
matters: ``inspect_state`` reads the history of whichever saver the run uses.

* ``build_agent``: :func:`mcp_state_versions.build_agent`, with a ring of 8 versions per key;
* ``create_agent``: LangChain's ``create_agent`` with ``SessionStateMiddleware(ring_size=0)``,
  so every read of an earlier version walks the server's checkpoints, and
  ``state_schema=SessionAgentState``, so the conversation is stored as what each step added;
* ``app``: the library's HTTP API under ``/session-state``, reading the server's checkpointer.
  It is mounted under a prefix on purpose: a custom app at the root would shadow the server's
  own ``/threads/{id}/state``. Its lifespan runs the background sweeper the environment asks
  for (:func:`mcp_state_versions.sweep.sweeping`).

The chat model is scripted (no provider, no network); swap in any tool-calling model.
"""

from collections.abc import Sequence

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from starlette.applications import Starlette
from starlette.routing import Mount

from mcp_state_versions import (
    ScriptedChatModel,
    SessionAgentState,
    SessionStateMiddleware,
    build_agent,
    call,
)
from mcp_state_versions.api import create_app
from mcp_state_versions.demo import get_aoi
from mcp_state_versions.sweep import sweeping

BBOX = "gazet/get_aoi/bbox"


def respond(messages: Sequence[BaseMessage]) -> AIMessage:
    """``find <place>`` publishes its area; ``list`` lists state; ``turn <N>`` reads the box
    as of turn N; a tool result is acknowledged."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage("done")
    text = str(last.content) if isinstance(last, HumanMessage) else ""
    n = len(messages)
    if text.startswith("find "):
        return AIMessage("", tool_calls=[call("get_aoi", f"g{n}", place=text[5:])])
    if text == "list":
        return AIMessage("", tool_calls=[call("inspect_state", f"l{n}", key="*")])
    if text.startswith("turn "):
        turn = int(text[5:])
        return AIMessage("", tool_calls=[call("inspect_state", f"t{n}", key=BBOX, turn=turn)])
    return AIMessage("noted")


graph_with_ring = build_agent(ScriptedChatModel(respond=respond), [get_aoi])

graph_with_middleware = create_agent(
    ScriptedChatModel(respond=respond),
    [get_aoi],
    middleware=[SessionStateMiddleware(ring_size=0)],
    state_schema=SessionAgentState,  # messages stored as what each step added, as build_agent
)


def server_checkpointer():  # type: ignore[no-untyped-def]
    """The Agent Server's own checkpointer (the in-memory runtime's, under ``langgraph dev``)."""
    from langgraph_runtime.checkpoint import Checkpointer

    return Checkpointer()


# The lifespan runs a background sweeper when MCP_STATE_VERSIONS_SWEEP_EVERY is set (in the
# environment, or under "env" in langgraph.json), with the policy the other
# MCP_STATE_VERSIONS_SWEEP_* variables give; otherwise it does nothing.
app = Starlette(
    routes=[Mount("/session-state", app=create_app(server_checkpointer))],
    lifespan=lambda _: sweeping(server_checkpointer),
)
