"""A chat model that follows a script, for demos, tests and benchmarks without a provider.

It is a real LangChain chat model (it goes through the same agent loop, tool binding and
callbacks as any other), but its replies are written in advance: either a list consumed in
order, or a function of the conversation so far. Running off the end of a list raises instead
of wrapping around, so a script that no longer matches the agent's behaviour fails loudly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

__all__ = ["ScriptExhausted", "ScriptedChatModel", "call"]


class ScriptExhausted(RuntimeError):
    """The agent asked the scripted model for more replies than the script has."""


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    """A tool call for an :class:`~langchain_core.messages.AIMessage` in a script."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


class ScriptedChatModel(BaseChatModel):
    """Replies from ``replies`` in order, or from ``respond(messages)`` when given.

    ``bind_tools`` returns the model itself: the script already decides which tools to call.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    replies: list[AIMessage] = Field(default_factory=list)
    respond: Callable[[Sequence[BaseMessage]], AIMessage] | None = None
    _position: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.respond is not None:
            reply = self.respond(messages)
        else:
            if self._position >= len(self.replies):
                raise ScriptExhausted(
                    f"the script has {len(self.replies)} replies and all were used; "
                    "add replies for the turns the agent is running"
                )
            reply = self.replies[self._position]
            self._position += 1
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # A script is read, not fetched: answered in the event loop, where LangChain's default
        # would hand the call to a worker thread and back (a model served over the network
        # has its own async client; a thread hop here would be a cost no real model has).
        return self._generate(messages, stop, **kwargs)
