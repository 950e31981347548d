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
  for (:func:`mcp_state_versions.retention.sweep.sweeping`).
* ``library_checkpointer``: the library's SQLite saver, for ``langgraph.sqlite.json``, which
  names it as the server's checkpointer (``"checkpointer": {"backend": "custom", ...}``): the
  server then stores every thread in the file ``$MCP_STATE_VERSIONS_SERVER_SQLITE`` names,
  ``tool_state`` and ``messages`` as what each step added, and the app reads and sweeps the
  same file.

The chat model is scripted (no provider, no network); swap in any tool-calling model.
"""

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

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
from mcp_state_versions.demo.run import get_aoi
from mcp_state_versions.retention.sweep import sweeping
from mcp_state_versions.savers.sqlite import PruningSqliteSaver

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


SQLITE_FILE = os.environ.get("MCP_STATE_VERSIONS_SERVER_SQLITE")
"""The SQLite file the server stores threads in (``langgraph.sqlite.json`` sets it); unset:
the server's own checkpointer."""


@asynccontextmanager
async def library_checkpointer() -> AsyncIterator[PruningSqliteSaver]:
    """The library's SQLite saver on :data:`SQLITE_FILE`: what ``langgraph.sqlite.json`` gives
    the server as its checkpointer. The server enters it once per event loop it runs."""
    async with PruningSqliteSaver.from_conn_string(SQLITE_FILE or "threads.sqlite") as saver:
        await saver.setup()
        yield saver


OPENED: dict[str, PruningSqliteSaver] = {}
"""The app's own connection to :data:`SQLITE_FILE`, while its lifespan runs."""


def server_checkpointer() -> Any:
    """What the app reads and sweeps: the server's own checkpointer (the in-memory runtime's,
    under ``langgraph dev``), or the library's saver on the server's SQLite file."""
    if SQLITE_FILE:
        return OPENED["saver"]
    from langgraph_runtime.checkpoint import Checkpointer

    return Checkpointer()


@asynccontextmanager
async def lifespan(_: Starlette) -> AsyncIterator[None]:
    """Opens the app's connection to the server's SQLite file (if it has one) and runs the
    background sweeper the environment asks for: when MCP_STATE_VERSIONS_SWEEP_EVERY is set (in
    the environment, or under "env" in langgraph.json), with the policy the other
    MCP_STATE_VERSIONS_SWEEP_* variables give; otherwise no sweeper runs."""
    if not SQLITE_FILE:
        async with sweeping(server_checkpointer):
            yield
        return
    async with library_checkpointer() as saver:
        OPENED["saver"] = saver
        try:
            async with sweeping(server_checkpointer):
                yield
        finally:
            del OPENED["saver"]


app = Starlette(
    routes=[Mount("/session-state", app=create_app(server_checkpointer))],
    lifespan=lifespan,
)
