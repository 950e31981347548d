"""``SessionStateMiddleware``: versioned session state for ``langchain.agents.create_agent``.

LangGraph 1.x moved agent users to ``create_agent``, where behaviour is added as middleware. One
middleware gives such an agent everything :func:`~mcp_state_versions.agent.build_agent` has:

* the ``tool_state`` channel with the versioning reducer, declared as its **state schema** (so
  no ``state_schema=`` is needed, and no publish is dropped for want of a channel);
* the **turn clock**: ``before_agent`` ticks it on a new user message, ``after_agent`` closes
  the turn, so summarization or trimming (``SummarizationMiddleware`` in the same agent) never
  renumbers turns, and a resumed interrupt does not count as a turn;
* exactly one ``inspect_state`` **tool**, reading the history of the run's own checkpointer;
* the **guidance** (:data:`~mcp_state_versions.agent.SESSION_STATE_PROMPT`) appended to the
  system prompt of every model call;
* **capture**: a tool that returns structured data (a dict, a pydantic model, a dataclass, an
  MCP tool's structured content, a ``ToolMessage`` artifact) has it published into
  ``tool_state`` as ``<toolset>/<tool>/<field>``, and the model gets the breadcrumb instead of
  the payload, with no change to the tools. Tools that publish themselves (they return a
  ``Command``) pass through.

Why capture works on the tool's own output rather than its message: LangChain turns a tool's
return value into message text before any middleware sees it, and text is not data (a pydantic
model becomes ``a=1 b=2``). So for a plain ``StructuredTool`` the call runs on a copy that
returns the value also as the message's artifact; the value itself is untouched.
"""

import functools
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain_core.messages import SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from pydantic import BaseModel

from .agent import SESSION_STATE_PROMPT
from .clock import close_turn, current_turn, open_turn
from .handles import StateHandles
from .history import AUTO, HistoryOption
from .publish import SECRET_NAMES, noted_messages, publication, tool_state_writes, withheld
from .render import dumps
from .state import DEFAULT_BUDGET_BYTES, make_merge_tool_state
from .storage import DEFAULT_SNAPSHOT_FREQUENCY, tool_state_channel
from .tool import make_inspect_state

__all__ = ["DEFAULT_INLINE_LIMIT", "SessionStateMiddleware"]

DEFAULT_INLINE_LIMIT = 1000
"""Captured results whose JSON is at most this many characters stay in the message after the
breadcrumb, so the model can act on a small result without reading state; larger ones are
replaced by the breadcrumb alone."""


def _session_schema(reducer: Callable[..., Any], snapshot_frequency: int) -> type:
    channel = tool_state_channel(reducer, snapshot_frequency)

    class SessionAgentState(AgentState):
        """``create_agent`` state with versioned ``tool_state`` (and its turn clock)."""

        tool_state: NotRequired[channel]  # type: ignore[valid-type]

    return SessionAgentState


class SessionStateMiddleware(AgentMiddleware):
    """Versioned ``tool_state``, the turn clock, ``inspect_state`` and capture for
    ``create_agent``.

    ``ring_size``, ``ring_bytes`` and ``budget_bytes`` configure the reducer
    (:func:`~mcp_state_versions.state.make_merge_tool_state`); ``allowed_keys`` and ``history``
    configure ``inspect_state`` as for :func:`~mcp_state_versions.agent.build_agent`.

    ``capture`` chooses which tools' results are published: ``True`` (all, the default),
    ``False`` (none), tool names, or a function of the tool (``lambda t: t.name != "greet"``
    opts one out). A structured result publishes its fields; text, a number, a list or a bool
    publishes as ``<toolset>/<tool>/result``. ``toolset`` is the first part of captured keys:
    a string (default ``"tools"``) or a function of the tool. ``inline_limit`` is the JSON size
    up to which a captured result also stays in the message (:data:`DEFAULT_INLINE_LIMIT`).
    ``system_prompt`` is the guidance appended to the agent's system prompt (``None``: none).
    ``tool_state`` is stored as writes with a whole snapshot every ``snapshot_frequency``
    updates (:mod:`mcp_state_versions.storage`). Captured fields whose names match
    ``secret_names`` (:data:`~mcp_state_versions.publish.SECRET_NAMES`; ``None``: none) are
    never stored, nor kept in the message; the breadcrumb names them as withheld. Tool
    arguments that are ``@state:`` handles are resolved before the tool runs
    (:mod:`mcp_state_versions.handles`).
    """

    def __init__(
        self,
        *,
        ring_size: int = 8,
        ring_bytes: int = 256 * 1024,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        allowed_keys: Sequence[str] | None = None,
        history: HistoryOption = AUTO,
        capture: bool | Sequence[str] | Callable[[BaseTool], bool] = True,
        toolset: str | Callable[[BaseTool], str] = "tools",
        inline_limit: int = DEFAULT_INLINE_LIMIT,
        system_prompt: str | None = SESSION_STATE_PROMPT,
        snapshot_frequency: int = DEFAULT_SNAPSHOT_FREQUENCY,
        secret_names: str | None = SECRET_NAMES,
    ) -> None:
        super().__init__()
        self.secret_names = secret_names
        reducer = make_merge_tool_state(ring_size, ring_bytes, budget_bytes)
        self.state_schema = _session_schema(reducer, snapshot_frequency)
        self._bounds = reducer.bounds  # type: ignore[attr-defined]
        self.tools = [make_inspect_state(allowed_keys, history)]
        self.capture = capture
        self.toolset = toolset
        self.inline_limit = inline_limit
        self.system_prompt = system_prompt
        self._copies: dict[int, BaseTool] = {}
        self._handles = StateHandles(history)

    # -- the turn clock -----------------------------------------------------------------------

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return open_turn(state, bounds=self._bounds) or None

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return close_turn(state, get_config()) or None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)

    # -- the guidance -------------------------------------------------------------------------

    def _guided(self, request: ModelRequest) -> ModelRequest:
        noted = noted_messages(request.messages)
        if any(new is not old for new, old in zip(noted, request.messages, strict=True)):
            request = request.override(messages=noted)
        if not self.system_prompt:
            return request
        current = request.system_prompt
        text = f"{current}\n\n{self.system_prompt}" if current else self.system_prompt
        return request.override(system_message=SystemMessage(text))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[..., Any]) -> Any:
        return handler(self._guided(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[..., Awaitable[Any]]
    ) -> Any:
        return await handler(self._guided(request))

    # -- capture ------------------------------------------------------------------------------

    def _captures(self, tool: BaseTool | None) -> bool:
        if tool is None or tool.name == "inspect_state" or self.capture is False:
            return False
        if callable(self.capture):
            return bool(self.capture(tool))
        return self.capture is True or tool.name in self.capture

    def _prepared(self, request: ToolCallRequest) -> ToolCallRequest:
        tool = request.tool
        if not self._captures(tool) or not isinstance(tool, StructuredTool):
            return request
        copy = self._copies.get(id(tool))
        if copy is None:
            copy = self._copies[id(tool)] = _keeping_output(tool)
        return request.override(tool=copy)

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[..., Any]) -> Any:
        def run(resolved: ToolCallRequest) -> Any:
            return self._captured(resolved, handler(self._prepared(resolved)))

        return self._handles.wrap_tool_call(request, run)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[..., Awaitable[Any]]
    ) -> Any:
        async def run(resolved: ToolCallRequest) -> Any:
            return self._captured(resolved, await handler(self._prepared(resolved)))

        return await self._handles.awrap_tool_call(request, run)

    def _captured(self, request: ToolCallRequest, result: Any) -> Any:
        if not self._captures(request.tool) or not isinstance(result, ToolMessage):
            return result
        if result.status == "error":
            return result
        fields = _structured(result.artifact)
        if fields is None:
            return _restored(result)
        assert request.tool is not None
        toolset = self.toolset if isinstance(self.toolset, str) else self.toolset(request.tool)
        name = _key_part(request.tool.name)
        fields, secrets = withheld(fields, self.secret_names)
        writes = tool_state_writes(toolset, name, fields, turn=current_turn(request.state))
        published = publication(
            writes, request.runtime, withheld=[f"{toolset}/{name}/{s}" for s in secrets]
        )
        text, payload = published.text, dumps(fields)
        if len(payload) <= self.inline_limit:
            text = f"{text} {payload}"
        before, after = _around(result)
        message = ToolMessage(
            f"{before}{text}{after}", tool_call_id=result.tool_call_id, name=result.name
        )
        return Command(update=published.update(message))


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
        return output, {_KEPT: output, _OWN: _as_content(output)}

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
        return json.dumps(output, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(output)


def _structured(artifact: Any) -> dict[str, Any] | None:
    """The fields of a result: a structured one's own, or ``{"result": ...}`` for text, a
    number, a list or a bool a plain tool returned (most LangChain tools return text, and a
    result left out of session state has no versions); ``None`` for anything else."""
    if isinstance(artifact, Mapping) and _KEPT in artifact:
        output = artifact[_KEPT]
        if isinstance(output, str | int | float | bool | list | tuple) and output != "":
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
    if (
        isinstance(artifact, Mapping)
        and artifact
        and all(isinstance(k, str) and k and "/" not in k for k in artifact)
    ):
        return dict(artifact)
    return None


def _key_part(name: str) -> str:
    return name.replace("/", "_") or "tool"
