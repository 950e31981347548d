"""``SessionStateMiddleware``: versioned session state for ``langchain.agents.create_agent``.

LangGraph 1.x moved agent users to ``create_agent``, where behaviour is added as middleware. One
middleware gives such an agent everything :func:`~mcp_state_versions.agent.build.build_agent` has:

* the ``tool_state`` channel with the versioning reducer, declared as its **state schema** (so
  no ``state_schema=`` is needed, and no publish is dropped for want of a channel);
* the **turn clock**: ``before_agent`` ticks it on a new user message, so summarization or
  trimming (``SummarizationMiddleware`` in the same agent, whose summary is a human message
  written later in the run) never renumbers turns, and a resumed interrupt does not count as a
  turn; the model call that gives the turn's final reply closes it, in the model's own step
  (``ExtendedModelResponse``), as ``build_agent``'s model node does: a node of its own after the
  agent was one more step and one more checkpoint a turn. A run that ends without a final
  reply (an interrupt, a middleware ending the run before the model answers) leaves its turn
  open, as a failed run does; the next user message opens the next one;
* exactly one ``inspect_state`` **tool**, reading the history of the run's own checkpointer;
* the **guidance** (:data:`~mcp_state_versions.agent.build.SESSION_STATE_PROMPT`) appended to the
  system prompt of every model call;
* **capture** (:mod:`mcp_state_versions.agent.capture`): a tool's result is published into
  ``tool_state`` (structured data as ``<toolset>/<tool>/<field>``, text and other plain
  values as ``<toolset>/<tool>/result``) and the model gets the breadcrumb, with no change to
  the tools;
* **handles** (:mod:`mcp_state_versions.agent.handles`): ``@state:<key>[@turn=N]`` arguments are
  replaced by their values before a tool runs.
"""

import sys
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import FrameType
from typing import Any, NotRequired, Required, get_args, get_origin, get_type_hints
from uuid import uuid4

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.channels.delta import DeltaChannel
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ..state.clock import open_turn, ticks_around
from ..state.reducer import DEFAULT_BUDGET_BYTES, make_merge_tool_state
from ..storage.channels import MessagesOption, messages_channel, tool_state_channel
from ..storage.messages import MESSAGES
from ..storage.tool_state import DEFAULT_SNAPSHOT_FREQUENCY
from ..walk.history import AUTO, HistoryOption
from .build import SESSION_STATE_PROMPT
from .capture import DEFAULT_INLINE_LIMIT, Capture, CaptureOption, session_tool_wrappers
from .inspect_state import make_inspect_state
from .publish import SECRET_NAMES, noted_messages

__all__ = [
    "DEFAULT_INLINE_LIMIT",
    "WHOLE_MESSAGES_WARNING",
    "SessionAgentState",
    "SessionStateMiddleware",
]


class SessionAgentState(AgentState):
    """``create_agent``'s state with ``messages`` stored as writes
    (:mod:`mcp_state_versions.storage.messages`): pass it as ``state_schema=``.

    ``AgentState``'s ``messages`` stores the whole conversation at every checkpoint, so a
    thread's storage grows with the square of its length. A middleware cannot change that
    channel (``create_agent`` keeps ``AgentState``'s over a middleware's), but the agent's own
    ``state_schema`` can, so the library offers this one.

    Example::

        agent = create_agent(
            model,
            tools,
            state_schema=SessionAgentState,
            middleware=[SessionStateMiddleware()],
            checkpointer=saver,
        )
    """

    messages: Required[messages_channel()]  # type: ignore[valid-type]


def _session_schema(reducer: Callable[..., Any], snapshot_frequency: int) -> type:
    channel = tool_state_channel(reducer, snapshot_frequency)

    class ToolStateAgentState(AgentState):
        """``create_agent`` state with versioned ``tool_state`` (and its turn clock)."""

        tool_state: NotRequired[channel]  # type: ignore[valid-type]

    return ToolStateAgentState


def _create_agent_frame() -> FrameType | None:
    """The frame of the ``create_agent`` call reading this middleware, if one is."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "create_agent" and frame.f_globals.get("__name__", "").startswith(
            "langchain.agents"
        ):
            return frame
        frame = frame.f_back
    return None


def _stores_messages_whole(schema: Any) -> bool:
    """Whether an agent built on ``schema`` (``create_agent``'s ``state_schema``; ``None``:
    ``AgentState``) stores its whole conversation at every checkpoint."""
    hint = get_type_hints(schema or AgentState, include_extras=True).get(MESSAGES)
    while get_origin(hint) in (Required, NotRequired):
        (hint,) = get_args(hint)
    metadata = getattr(hint, "__metadata__", ())
    return not any(isinstance(item, DeltaChannel) for item in metadata)


WHOLE_MESSAGES_WARNING = (
    "SessionStateMiddleware: this agent's state stores the whole conversation at every "
    "checkpoint (AgentState's messages), so a thread's storage grows with the square of its "
    "length. Pass state_schema=SessionAgentState to create_agent to store messages as what "
    "each step added, or SessionStateMiddleware(messages='whole') to keep them whole and "
    "silence this warning."
)
"""What :class:`SessionStateMiddleware` warns, once, when ``create_agent`` builds an agent whose
``messages`` channel stores the whole list."""


class SessionStateMiddleware(AgentMiddleware):
    """Versioned ``tool_state``, the turn clock, ``inspect_state`` and capture for
    ``create_agent``.

    ``ring_size``, ``ring_bytes`` and ``budget_bytes`` configure the reducer
    (:func:`~mcp_state_versions.state.reducer.make_merge_tool_state`); ``allowed_keys`` and
    ``history`` configure ``inspect_state`` as for
    :func:`~mcp_state_versions.agent.build.build_agent`.

    ``capture`` chooses which tools' results are published: ``True`` (all, the default),
    ``False`` (none), tool names, or a function of the tool (``lambda t: t.name != "greet"``
    opts one out). A structured result publishes its fields; text, a number, a list or a bool
    publishes as ``<toolset>/<tool>/result``. ``toolset`` is the first part of captured keys:
    a string (default ``"tools"``) or a function of the tool. ``inline_limit`` is the JSON size
    up to which a captured result also stays in the message (:data:`DEFAULT_INLINE_LIMIT`).
    ``system_prompt`` is the guidance appended to the agent's system prompt (``None``: none).
    ``tool_state`` is stored as writes with a whole snapshot every ``snapshot_frequency``
    updates (:mod:`mcp_state_versions.storage.tool_state`). Captured fields whose names match
    ``secret_names`` (:data:`~mcp_state_versions.agent.publish.SECRET_NAMES`; ``None``: none) are
    never stored, nor kept in the message; the breadcrumb names them as withheld. Tool
    arguments that are ``@state:`` handles are resolved before the tool runs
    (:mod:`mcp_state_versions.agent.handles`).

    ``messages`` says how the agent stores its conversation: ``"delta"`` (the default) expects
    ``create_agent(..., state_schema=SessionAgentState)``, and ``create_agent`` without it
    warns once, as it builds the agent (:data:`WHOLE_MESSAGES_WARNING`); ``"whole"`` says the
    agent keeps ``AgentState``'s channel on purpose. A middleware cannot choose the channel
    itself: ``create_agent`` keeps the agent's ``state_schema`` over a middleware's.

    Example::

        agent = create_agent(
            model,
            tools,
            state_schema=SessionAgentState,
            middleware=[SessionStateMiddleware(ring_size=8)],
            checkpointer=saver,
        )
    """

    def __init__(
        self,
        *,
        ring_size: int = 8,
        ring_bytes: int = 256 * 1024,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        allowed_keys: Sequence[str] | None = None,
        history: HistoryOption = AUTO,
        capture: CaptureOption = True,
        toolset: str | Callable[[BaseTool], str] = "tools",
        inline_limit: int = DEFAULT_INLINE_LIMIT,
        system_prompt: str | None = SESSION_STATE_PROMPT,
        snapshot_frequency: int = DEFAULT_SNAPSHOT_FREQUENCY,
        secret_names: str | None = SECRET_NAMES,
        messages: MessagesOption = "delta",
    ) -> None:
        super().__init__()
        if messages not in ("delta", "whole"):
            raise ValueError(f"messages must be 'delta' or 'whole', got {messages!r}")
        reducer = make_merge_tool_state(ring_size, ring_bytes, budget_bytes)
        self._state_schema = _session_schema(reducer, snapshot_frequency)
        self._messages = messages
        self._bounds = reducer.bounds
        self.tools = [make_inspect_state(allowed_keys, history)]
        self.system_prompt = system_prompt
        self.capture = Capture(
            capture, toolset=toolset, inline_limit=inline_limit, secret_names=secret_names
        )
        self._wrap, self._awrap = session_tool_wrappers(history, self.capture)

    @property
    def state_schema(self) -> type:  # type: ignore[override]  # a plain attribute upstream
        """The ``tool_state`` channel's schema. ``create_agent`` reads it as it builds the
        agent, which is the one moment the agent's own ``state_schema`` can be seen: the
        read warns there if that schema stores the whole conversation and ``messages`` did
        not say so."""
        if self._messages == "delta":
            building = _create_agent_frame()
            if building is not None and _stores_messages_whole(building.f_locals["state_schema"]):
                depth, frame = 1, sys._getframe(1)
                while frame is not building and frame.f_back is not None:
                    depth, frame = depth + 1, frame.f_back
                warnings.warn(WHOLE_MESSAGES_WARNING, UserWarning, stacklevel=depth + 2)
        return self._state_schema

    # -- the turn clock -----------------------------------------------------------------------

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return open_turn(state, bounds=self._bounds) or None

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    def _closing(self, request: ModelRequest, response: ModelResponse | AIMessage) -> Any:
        """``response``, with the clock's close of the turn where it is the turn's final
        reply (no tool calls, or a structured response, which ends the agent)."""
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        replies = [m for m in response.result if isinstance(m, AIMessage)]
        if not replies:
            return response
        reply = replies[-1]
        ends = not reply.tool_calls or response.structured_response is not None
        if not ends:
            return response
        if reply.id is None:  # the close records the last message seen, by its id
            reply.id = f"run-{uuid4()}"
        update = ticks_around(request.state, reply, get_config(), opens=False, ends=True)
        if not update:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    # -- the guidance -------------------------------------------------------------------------

    def _guided(self, request: ModelRequest) -> ModelRequest:
        # (create_agent hands a copy of the stored list: the stored one's look-up serves)
        stored = request.state.get(MESSAGES) if isinstance(request.state, Mapping) else None
        noted = noted_messages(request.messages, stored if isinstance(stored, list) else None)
        if noted is not request.messages:
            request = request.override(messages=noted)
        if not self.system_prompt:
            return request
        current = request.system_prompt
        text = f"{current}\n\n{self.system_prompt}" if current else self.system_prompt
        return request.override(system_message=SystemMessage(text))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[..., Any]) -> Any:
        return self._closing(request, handler(self._guided(request)))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[..., Awaitable[Any]]
    ) -> Any:
        return self._closing(request, await handler(self._guided(request)))

    # -- tool calls: capture.session_tool_wrappers ------------------------------------------

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[..., Any]) -> Any:
        return self._wrap(request, handler)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[..., Awaitable[Any]]
    ) -> Any:
        return await self._awrap(request, handler)
