"""Capture: a tool's result published into session state, with no change to the tool.

A tool that returns structured data (a dict, a pydantic model, a dataclass, an MCP tool's
structured content, a ``ToolMessage`` artifact) has it published into ``tool_state`` as
``<toolset>/<tool>/<field>``; text, a number, a list or a bool is published as
``<toolset>/<tool>/result``. The model gets the breadcrumb, followed by the result itself when
it is small (``inline_limit``). Most LangChain tools return text, and a result left out of
session state has no versions: a later call replaces it in the model's view with nothing to
compare against. Tools that publish themselves (they return a ``Command``) pass through, as do
errors.

Why capture works on the tool's own output rather than its message: LangChain turns a tool's
return value into message text before any wrapper sees it, and text is not data (a pydantic
model becomes ``a=1 b=2``). So for a plain ``StructuredTool`` the call runs on a copy that
returns the value also as the message's artifact; the value itself is untouched.

:class:`Capture` wraps tool calls the way ``ToolNode`` takes them (``wrap_tool_call``,
``awrap_tool_call``); ``build_agent`` and ``SessionStateMiddleware`` install one, and
:func:`tool_call_wrappers` chains it after ``@state:`` handle resolution.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from pydantic import BaseModel

from ..state.credentials import secret_paths
from ..state.reducer import ToolStateError
from ..walk.history import HistoryOption
from .handles import StateHandles
from .publish import (
    DEFAULT_INLINE_LIMIT,
    SECRET_NAMES,
    holds_fields,
    inlined,
    publication_of,
)
from .view import ReadOnlyToolState

__all__ = [
    "DEFAULT_INLINE_LIMIT",
    "Capture",
    "CaptureOption",
    "session_tool_wrappers",
    "tool_call_wrappers",
]


CaptureOption = bool | Sequence[str] | Callable[[BaseTool], bool]
"""Which tools' results are captured: ``True`` (all), ``False`` (none), tool names, or a
function of the tool (``lambda t: t.name != "greet"`` opts one out)."""

Execute = Callable[[ToolCallRequest], Any]
AsyncExecute = Callable[[ToolCallRequest], Awaitable[Any]]


class Capture:
    """Publish the results of tool calls into ``tool_state`` (see the module's docstring).

    ``toolset`` is the first part of captured keys: a string (default ``"tools"``) or a
    function of the tool. Fields whose names match ``secret_names``
    (:data:`~mcp_state_versions.agent.publish.SECRET_NAMES`; ``None``: none) are never stored, nor
    kept in the message; the breadcrumb names them as withheld.
    """

    def __init__(
        self,
        capture: CaptureOption = True,
        *,
        toolset: str | Callable[[BaseTool], str] = "tools",
        inline_limit: int = DEFAULT_INLINE_LIMIT,
        secret_names: str | None = SECRET_NAMES,
    ) -> None:
        self.capture = capture
        self.toolset = toolset
        self.inline_limit = inline_limit
        self.secret_names = secret_names
        self._copies: dict[int, BaseTool] = {}

    def captures(self, tool: BaseTool | None) -> bool:
        """Whether ``tool``'s results are captured (``inspect_state``'s never are)."""
        if tool is None or tool.name == "inspect_state" or self.capture is False:
            return False
        if callable(self.capture):
            return bool(self.capture(tool))
        return self.capture is True or tool.name in self.capture

    def wrap_tool_call(self, request: ToolCallRequest, execute: Execute) -> Any:
        return self._captured(request, execute(self._prepared(request)))

    async def awrap_tool_call(self, request: ToolCallRequest, execute: AsyncExecute) -> Any:
        return self._captured(request, await execute(self._prepared(request)))

    def _prepared(self, request: ToolCallRequest) -> ToolCallRequest:
        tool = request.tool
        if not self.captures(tool) or not isinstance(tool, StructuredTool):
            return request
        copy = self._copies.get(id(tool))
        if copy is None:
            copy = self._copies[id(tool)] = _keeping_output(tool)
        return request.override(tool=copy)

    def _captured(self, request: ToolCallRequest, result: Any) -> Any:
        if isinstance(result, Command) and self.secret_names:
            _refuse_secrets_in(result, self.secret_names)
        if not self.captures(request.tool) or not isinstance(result, ToolMessage):
            return result
        if result.status == "error":
            return result
        fields = _structured(result.artifact)
        if fields is None:
            return _restored(result)
        assert request.tool is not None
        toolset = self.toolset if isinstance(self.toolset, str) else self.toolset(request.tool)
        name = _key_part(request.tool.name)
        try:
            published = publication_of(
                toolset, name, fields, request.runtime, secret_names=self.secret_names
            )
        except TypeError as refused:  # a value with no JSON form, or too deep to store
            return _not_captured(_restored(result), refused)
        own = _plain_content(result.artifact)
        if own is not None:  # text (or a number, a list) as the tool returned it, unwrapped
            text = published.text if len(own) > self.inline_limit else f"{published.text} {own}"
        else:
            text = inlined(published.text, published.fields, self.inline_limit)
        before, after = _around(result)
        message = ToolMessage(
            f"{before}{text}{after}", tool_call_id=result.tool_call_id, name=result.name
        )
        return Command(update=published.update(message))


def _refuse_secrets_in(command: Command, secret_names: str) -> None:
    """Refuse a tool's own ``Command`` that writes a field named like a credential into
    ``tool_state``: the tool call fails, before LangGraph stores any of the step's writes."""
    update = command.update
    writes = update.get("tool_state") if isinstance(update, Mapping) else None
    if not isinstance(writes, Mapping):
        return
    for key, write in writes.items():
        if isinstance(key, str) and isinstance(write, Mapping) and "value" in write:
            found = secret_paths(write["value"], key, secret_names)
            if found:
                raise ToolStateError(
                    f"tool_state write for {key!r} holds {', '.join(found[:5])}, named like a "
                    "credential: secrets are never stored. Leave them out (publish does, and "
                    "says so in the breadcrumb), or pass secret_names=None to store them"
                )


def _not_captured(message: ToolMessage, refused: TypeError) -> ToolMessage:
    """The tool's own message, after a line saying why nothing of it was stored: capture
    must never fail the run over what a tool returned."""
    content = message.content
    note = f"[state not updated: {refused}]"
    if isinstance(content, str):
        return message.model_copy(update={"content": f"{note} {content}"})
    return message.model_copy(update={"content": [{"type": "text", "text": note}, *content]})


def tool_call_wrappers(
    *layers: Any,
) -> tuple[Callable[[ToolCallRequest, Execute], Any], Callable[..., Awaitable[Any]]]:
    """``ToolNode``'s ``wrap_tool_call`` and ``awrap_tool_call`` for ``layers``, the first
    outermost (``StateHandles`` then ``Capture``: handles are resolved, then the result of the
    call made with the values is captured)."""

    def wrap(request: ToolCallRequest, execute: Execute) -> Any:
        run = execute
        for layer in reversed(layers):
            run = functools.partial(layer.wrap_tool_call, execute=run)
        return run(request)

    async def awrap(request: ToolCallRequest, execute: AsyncExecute) -> Any:
        run = execute
        for layer in reversed(layers):
            run = functools.partial(layer.awrap_tool_call, execute=run)
        return await run(request)

    return wrap, awrap


def session_tool_wrappers(
    history: HistoryOption, capture: Capture
) -> tuple[Callable[[ToolCallRequest, Execute], Any], Callable[..., Awaitable[Any]]]:
    """The tool-call layers ``build_agent`` and ``SessionStateMiddleware`` install, in one
    order for both: the tool sees ``tool_state`` read-only (:mod:`mcp_state_versions.agent.view`),
    ``@state:`` handles are resolved before it runs, and its result is then captured."""
    return tool_call_wrappers(ReadOnlyToolState(), StateHandles(history), capture)


_KEPT = "__mcp_state_versions_output__"
_OWN = "__mcp_state_versions_content__"
_ARTIFACT = "__mcp_state_versions_artifact__"


def _around(result: ToolMessage) -> tuple[str, str]:
    """The text other middleware put around the tool's own content in ``result`` (before,
    after), so that replacing the content with the breadcrumb keeps it.

    Middleware listed after this one runs inside it and sees the tool's message first:
    ``HumanInTheLoopMiddleware`` prepends its note that a reviewer replaced the call. The
    copy of the tool recorded the content it produced, so whatever else the content holds
    came from them, and stays, wherever this middleware is listed.
    """
    artifact = result.artifact
    own = artifact.get(_OWN) if isinstance(artifact, dict) else None
    content = result.content
    if own is None or content == own:
        return "", ""
    if isinstance(content, str) and isinstance(own, str) and own in content:
        before, _, after = content.partition(own)
        return before, after
    if isinstance(content, list) and isinstance(own, list) and own:
        for start in range(len(content) - len(own) + 1):
            if content[start : start + len(own)] == own:
                return _text(content[:start]), _text(content[start + len(own) :])
    return "", ""


def _text(blocks: Sequence[Any]) -> str:
    """Content blocks as lines of text, each ending in a newline (``""`` for none)."""
    texts = [b if isinstance(b, str) else str(b.get("text", "")) for b in blocks]
    return "".join(f"{text}\n" for text in texts if text)


def _restored(message: ToolMessage) -> ToolMessage:
    """``message`` with the artifact the tool itself gave (none, for a plain tool)."""
    artifact = message.artifact
    if isinstance(artifact, dict) and _ARTIFACT in artifact:
        return message.model_copy(update={"artifact": artifact[_ARTIFACT]})
    if isinstance(artifact, dict) and _KEPT in artifact:
        return message.model_copy(update={"artifact": None})
    return message


def _keeping_output(tool: StructuredTool) -> StructuredTool:
    """A copy of ``tool`` whose message also carries the raw return value as its artifact
    (for a tool with an artifact of its own, that artifact), with the content it produced."""

    def keep(output: Any) -> tuple[Any, Any]:
        if isinstance(output, Command | ToolMessage):
            return output, None
        if tool.response_format == "content_and_artifact":
            content, artifact = output
            return content, {_ARTIFACT: artifact, _OWN: content}
        content = _as_content(output)
        return content, {_KEPT: output, _OWN: content}

    func = coroutine = None
    if tool.func is not None:
        original = tool.func

        @functools.wraps(original)
        def func(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
            return keep(original(*args, **kwargs))

    if tool.coroutine is not None:
        original_coroutine = tool.coroutine

        @functools.wraps(original_coroutine)
        async def coroutine(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
            return keep(await original_coroutine(*args, **kwargs))

    return tool.model_copy(
        update={"response_format": "content_and_artifact", "func": func, "coroutine": coroutine}
    )


def _as_content(output: Any) -> Any:
    """The message content LangChain makes of a tool's return value (text stays text, content
    blocks stay blocks, anything else becomes its JSON), to know it again in the message."""
    if isinstance(output, str):
        return output
    if isinstance(output, list) and all(isinstance(b, str | dict) for b in output):
        return output
    try:
        try:
            return json.dumps(output, ensure_ascii=False)
        except (TypeError, ValueError):
            return str(output)
    except RecursionError:  # nested deeper than Python recurses: nothing can show it
        return f"({type(output).__name__} nested too deep to show)"


def _plain_content(artifact: Any) -> str | None:
    """The message text a plain result (text, a number, a list: what :func:`_structured`
    publishes as ``result``) was given, to show the model after the breadcrumb as the tool
    wrote it rather than wrapped in ``{"result": ...}``; ``None`` for a structured result."""
    if not (isinstance(artifact, Mapping) and _KEPT in artifact):
        return None
    output, own = artifact[_KEPT], artifact.get(_OWN)
    if not isinstance(output, _PLAIN) or output == "" or not isinstance(own, str):
        return None
    return own


_PLAIN = (str, int, float, bool, list, tuple)
"""What a tool returns that is published whole as ``<toolset>/<tool>/result``."""


def _structured(artifact: Any) -> dict[str, Any] | None:
    """The fields of a result: a structured one's own, or ``{"result": ...}`` for text, a
    number, a list or a bool a plain tool returned (most LangChain tools return text, and a
    result left out of session state has no versions), and for a mapping whose keys cannot be
    fields; ``None`` for anything else."""
    if isinstance(artifact, Mapping) and _KEPT in artifact:
        output = artifact[_KEPT]
        if isinstance(output, _PLAIN) and output != "":
            return {"result": list(output) if isinstance(output, tuple) else output}
    if isinstance(artifact, Mapping) and _ARTIFACT in artifact:
        artifact = artifact[_ARTIFACT]
    if isinstance(artifact, Mapping) and _KEPT in artifact:
        artifact = artifact[_KEPT]
    elif isinstance(artifact, Mapping) and isinstance(artifact.get("structured_content"), dict):
        artifact = artifact["structured_content"]  # langchain-mcp-adapters' MCPToolArtifact
    if isinstance(artifact, BaseModel):
        artifact = artifact.model_dump(mode="json")
    elif is_dataclass(artifact) and not isinstance(artifact, type):
        artifact = asdict(artifact)
    if holds_fields(artifact):
        return dict(artifact)
    if isinstance(artifact, Mapping) and artifact:
        # keys that cannot be parts of a key ("a/b", "", 7): the mapping is one value, stored
        # (its secret-named fields withheld) rather than left whole in the message only
        return {"result": dict(artifact)}
    return None


def _key_part(name: str) -> str:
    return name.replace("/", "_") or "tool"
