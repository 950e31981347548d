"""``LeanToolRuntime``: a tool's ``runtime`` argument that LangChain does not serialize.

A tool that publishes takes ``runtime: ToolRuntime``, which carries the graph state. On every
call LangChain validates the tool's arguments with the tool's pydantic schema and then dumps
the validated model to a dict (``BaseTool._parse_input``), injected arguments included, and
reads only the dict's keys (langchain-ai/langchain#34770, open). With a ``ToolRuntime`` field
that dump walks the whole state, every message of the conversation: 12 ms a call at 4,000
messages, so a tool call costs more with every turn of the thread.

``runtime: LeanToolRuntime`` is the same argument without that cost. LangGraph's tool node
injects it exactly as it injects ``ToolRuntime`` (it is a subclass, so both the tool node and
LangChain's schema see an injected argument, hidden from the model), and the tool receives
that very ``ToolRuntime``; only its place in the tool's schema differs: the value passes
through unvalidated (it is built by the tool node, never by the model) and is dumped as
``None``. To a type checker it *is* ``ToolRuntime``.

Example:
    ```python
    from langchain_core.tools import tool

    from mcp_state_versions import LeanToolRuntime, publish

    @tool
    def get_aoi(place: str, runtime: LeanToolRuntime):
        '''Find the area of interest for a place name.'''
        return publish(runtime, "gazet", "get_aoi", {"name": place})
    ```
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph.prebuilt import ToolRuntime

__all__ = ["LeanToolRuntime"]


def _not_dumped(_runtime: Any) -> None:
    return None


if TYPE_CHECKING:
    LeanToolRuntime = ToolRuntime
else:

    class LeanToolRuntime(ToolRuntime):
        """``ToolRuntime`` for a tool's signature, kept out of LangChain's per-call dump of
        the tool's arguments (see the module's docstring). The tool receives the tool node's
        ``ToolRuntime``."""

        __slots__ = ()

        def __class_getitem__(cls, _parameters: Any) -> type[LeanToolRuntime]:
            # ``LeanToolRuntime[Context, State]`` types the state for a type checker, which
            # reads this as ``ToolRuntime[Context, State]``; at run time the parameters are
            # dropped, since pydantic asks a parametrized class for its schema by the class'
            # fields (a dataclass's), not by the hook below.
            return cls

        @classmethod
        def __get_pydantic_core_schema__(cls, _source: Any, _handler: Any) -> Any:
            from pydantic_core import core_schema

            return core_schema.any_schema(
                serialization=core_schema.plain_serializer_function_ser_schema(_not_dumped)
            )
