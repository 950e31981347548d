"""What a tool sees of session state: ``tool_state`` as a read-only mapping.

A tool gets graph state through ``ToolRuntime`` or ``InjectedState``; in a graph built by
:func:`~mcp_state_versions.agent.build.build_agent` or run with ``SessionStateMiddleware``, its
``tool_state`` is a ``types.MappingProxyType`` over the channel's own dict: reads, ``in``,
``.get``, ``.items()`` and ``dict(...)`` work as on the dict; assignment and deletion raise
``TypeError``. A tool changes state by what it returns (``publish``, or a ``Command`` that
writes ``tool_state``), never in place.

Why read-only: the dict a tool is handed is the value the channel holds, not a copy. A tool
that changed it in place would change what the rest of the run sees without recording a write,
so the run would go on with a state that no checkpoint holds and a reload would not rebuild:
live execution right, the reload wrong. The view turns that mistake into an error at the line
that makes it. It is shallow: the entries are the channel's own dicts and must be treated as
read-only too.

Why it costs less than the dict: LangChain validates a tool's arguments and then dumps them
(``model_dump``) on every call, runtime state included, only to learn their names. A dict of
entries is copied value by value; a mapping proxy is not a type pydantic walks, so it is passed
through as it is (at 500 keys, 0.06 ms instead of 0.46 ms a call).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import MappingProxyType
from typing import Any

from langgraph.prebuilt.tool_node import ToolCallRequest

__all__ = ["ReadOnlyToolState"]


class ReadOnlyToolState:
    """A tool-call layer (``wrap_tool_call`` / ``awrap_tool_call``, as
    :func:`~mcp_state_versions.agent.capture.tool_call_wrappers` chains them; first of
    :func:`~mcp_state_versions.agent.capture.session_tool_wrappers`) that hands the call a state
    whose ``tool_state`` is a read-only view of the channel's dict; see the module's docstring.
    A state that is not a dict, or holds no ``tool_state`` dict, passes unchanged."""

    def wrap_tool_call(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]
    ) -> Any:
        return execute(read_only(request))

    async def awrap_tool_call(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        return await execute(read_only(request))


def read_only(request: ToolCallRequest) -> ToolCallRequest:
    """``request`` with its state's ``tool_state`` (and so ``runtime.state``'s) as a
    ``MappingProxyType``; the state dict itself is a shallow copy, so the graph's is untouched."""
    state = request.state
    if not isinstance(state, dict):
        return request
    tool_state = state.get("tool_state")
    if not isinstance(tool_state, dict):
        return request
    return request.override(state={**state, "tool_state": MappingProxyType(tool_state)})
