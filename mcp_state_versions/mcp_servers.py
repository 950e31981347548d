"""Tools from MCP servers, with their structured results published into session state.

An MCP tool that returns structured content (``structuredContent``) would otherwise hand the
whole payload to the model as its message. Loaded through :func:`load_publishing_tools`, the
same tools publish each top-level field into ``tool_state`` as ``<server>/<tool>/<field>`` and
reply with the ``[state updated: ...]`` breadcrumb, exactly as a local tool using
:func:`mcp_state_versions.publish.publish` does. ``with_session_state`` then gives the agent the
MCP tools plus one ``inspect_state``, and rewrites across turns are versioned like any other.

The hook is the MCP adapters' own extension point, a tool-call interceptor
(:class:`PublishStructuredResults`), so nothing about how tools are discovered, called or
authenticated changes. Results without structured content, errors, and calls made outside an
agent (no runtime to publish into) pass through untouched. Install with the ``mcp`` extra.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.tools import BaseTool

try:
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.interceptors import MCPToolCallRequest
    from mcp.types import CallToolResult
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "MCP tools need the 'mcp' extra: pip install 'mcp-state-versions[mcp]'"
    ) from error

from .handles import ResolveStateHandles
from .publish import publish

__all__ = ["PublishStructuredResults", "ResolveStateHandles", "load_publishing_tools"]


class PublishStructuredResults:
    """A tool-call interceptor that publishes a structured MCP result into ``tool_state``.

    The toolset part of each key is the server's name as registered with the client.
    """

    async def __call__(
        self,
        request: MCPToolCallRequest,
        handler: Callable[[MCPToolCallRequest], Awaitable[Any]],
    ) -> Any:
        result = await handler(request)
        runtime = request.runtime
        if (
            not isinstance(result, CallToolResult)
            or result.isError
            or not isinstance(result.structuredContent, dict)
            or not result.structuredContent
            or runtime is None
            or getattr(runtime, "tool_call_id", None) is None
        ):
            return result
        return publish(runtime, request.server_name, request.name, result.structuredContent)  # type: ignore[arg-type]


async def load_publishing_tools(
    connections: Mapping[str, Mapping[str, Any]], *, tool_name_prefix: bool = False
) -> list[BaseTool]:
    """Load every tool of the MCP servers in ``connections``, publishing their structured results.

    ``@state:`` handles in a call's arguments are resolved before the server is called.

    ``connections`` maps a server name (the toolset part of its keys) to a connection, as for
    ``langchain_mcp_adapters.client.MultiServerMCPClient``, e.g.
    ``{"gazet": {"command": "python", "args": ["server.py"], "transport": "stdio"}}``.
    ``tool_name_prefix=True`` names tools ``<server>_<tool>`` where servers share tool names.
    """
    client = MultiServerMCPClient(
        dict(connections),  # type: ignore[arg-type]
        tool_interceptors=[ResolveStateHandles(), PublishStructuredResults()],
        tool_name_prefix=tool_name_prefix,
    )
    return await client.get_tools()
