"""Tools from MCP servers, with their results published into session state.

An MCP tool that returns structured content (``structuredContent``), or a long text, would
otherwise hand the whole payload to the model as its message. Loaded through
:func:`load_publishing_tools`, the same tools publish each top-level field into ``tool_state``
as ``<server>/<tool>/<field>`` (a long text as ``<server>/<tool>/result``) and reply with the
``[state updated: ...]`` breadcrumb, exactly as a local tool using
:func:`mcp_state_versions.agent.publish.publish` does; ``@state:`` handles in their arguments are
resolved before the server is called. ``with_session_state`` then gives the agent the MCP tools
plus one ``inspect_state``, and rewrites across turns are versioned like any other.

The hooks are the MCP adapters' own extension point, tool-call interceptors
(:class:`~mcp_state_versions.agent.handles.ResolveStateHandles`, :class:`PublishStructuredResults`),
so nothing about how tools are discovered, called or authenticated changes. Short text
results, errors, and calls made outside an agent (no runtime to publish into) pass through
untouched. Install with the ``mcp`` extra.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.tools import BaseTool

try:
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.interceptors import MCPToolCallRequest
    from mcp.types import CallToolResult, TextContent
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "MCP tools need the 'mcp' extra: pip install 'mcp-state-versions[mcp]'"
    ) from error

from .capture import DEFAULT_INLINE_LIMIT
from .handles import ResolveStateHandles
from .publish import SECRET_NAMES, holds_fields, publish

__all__ = ["PublishStructuredResults", "ResolveStateHandles", "load_publishing_tools"]


class PublishStructuredResults:
    """A tool-call interceptor that publishes an MCP result into ``tool_state``.

    A structured result (``structuredContent``) publishes each top-level field. A result of
    text alone (many servers return JSON as text, or long prose) is published when it is longer
    than ``publish_above`` characters: a JSON object by its fields, anything else as
    ``<server>/<tool>/result``; a shorter one stays in the message as it is, where the model
    can act on it at once. The toolset part of each key is the server's name as registered
    with the client. Fields whose names match ``secret_names`` are never stored.
    """

    def __init__(
        self,
        *,
        publish_above: int = DEFAULT_INLINE_LIMIT,
        secret_names: str | None = SECRET_NAMES,
    ) -> None:
        self.publish_above = publish_above
        self.secret_names = secret_names

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
            or runtime is None
            or getattr(runtime, "tool_call_id", None) is None
        ):
            return result
        fields = result.structuredContent or self._large_text(result)
        if not isinstance(fields, dict) or not fields:
            return result
        return publish(
            runtime,  # type: ignore[arg-type]
            request.server_name,
            request.name,
            fields,
            secret_names=self.secret_names,
        )

    def _large_text(self, result: CallToolResult) -> dict[str, Any] | None:
        """The fields to publish of a text-only result longer than ``publish_above``."""
        if not result.content or not all(isinstance(b, TextContent) for b in result.content):
            return None
        text = "\n".join(block.text for block in result.content)  # type: ignore[union-attr]
        if len(text) <= self.publish_above:
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return {"result": text}
        return value if holds_fields(value) else {"result": value}


async def load_publishing_tools(
    connections: Mapping[str, Mapping[str, Any]],
    *,
    tool_name_prefix: bool = False,
    publish_above: int = DEFAULT_INLINE_LIMIT,
) -> list[BaseTool]:
    """Load every tool of the MCP servers in ``connections``, publishing their results.

    ``@state:`` handles in a call's arguments are resolved before the server is called.
    ``connections`` maps a server name (the toolset part of its keys) to a connection, as for
    ``langchain_mcp_adapters.client.MultiServerMCPClient``, e.g.
    ``{"gazet": {"command": "python", "args": ["server.py"], "transport": "stdio"}}``.
    ``tool_name_prefix=True`` names tools ``<server>_<tool>`` where servers share tool names.
    ``publish_above`` is the length past which a text-only result is published rather than
    left in the message (:class:`PublishStructuredResults`).
    """
    client = MultiServerMCPClient(
        dict(connections),  # type: ignore[arg-type]
        tool_interceptors=[
            ResolveStateHandles(),
            PublishStructuredResults(publish_above=publish_above),
        ],
        tool_name_prefix=tool_name_prefix,
    )
    return await client.get_tools()
