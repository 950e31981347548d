"""How a tool puts its results into session state.

A tool that returns a large payload as its message fills the model's context with data the model
mostly does not need to read, and the payload is gone from view once the conversation is trimmed.
Publishing instead writes each field into ``tool_state`` under ``<toolset>/<tool>/<field>`` and
leaves a one-line breadcrumb as the tool's message, ``[state updated: gazet/get_aoi/bbox, ...]``,
so the model knows what changed and reads it with ``inspect_state`` when it needs it.

The write carries the tool's name and the turn it ran in, taken from the tool's runtime state,
so the reducer can tell a rewrite in the same turn from a new version in a later one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command
from pydantic_core import PydanticSerializationError, to_jsonable_python

from .state import count_turns, state_field

__all__ = ["publish", "state_key", "tool_state_writes"]


def state_key(toolset: str, tool: str, field: str) -> str:
    """The key ``<toolset>/<tool>/<field>``; each part must be non-empty and free of ``/``."""
    for label, part in (("toolset", toolset), ("tool", tool), ("field", field)):
        if not isinstance(part, str) or not part or "/" in part:
            raise ValueError(f"{label} must be a non-empty string without '/', got {part!r}")
    return f"{toolset}/{tool}/{field}"


def tool_state_writes(
    toolset: str, tool: str, fields: Mapping[str, Any], *, turn: int | None
) -> dict[str, dict[str, Any]]:
    """The ``tool_state`` update that publishes ``fields``: ``{key: {value, tool, turn}}``.

    Values are converted to JSON data first (pydantic models, dataclasses, dates, tuples and
    the like become what their JSON would be), so what is stored is what a checkpointer
    reloads. A value with no JSON form raises ``TypeError`` naming its field.
    """
    writes: dict[str, dict[str, Any]] = {}
    for field, value in fields.items():
        key = state_key(toolset, tool, field)
        try:
            data = to_jsonable_python(value)
        except PydanticSerializationError as error:
            raise TypeError(
                f"cannot publish field {field!r} of {toolset}/{tool}: {type(value).__name__} has "
                f"no JSON form ({error}); publish a dict, list, string or number instead"
            ) from None
        writes[key] = {"value": data, "tool": tool, "turn": turn}
    return writes


def publish(
    runtime: ToolRuntime,
    toolset: str,
    tool: str,
    fields: Mapping[str, Any],
    *,
    note: str | None = None,
) -> Command:
    """Return the ``Command`` a tool returns to publish ``fields`` into ``tool_state``.

    The tool's message becomes ``[state updated: <key>, ...]`` followed by ``note`` if given
    (a short summary the model should see right away, such as the place name found).

    Example::

        @tool
        def get_aoi(place: str, runtime: ToolRuntime) -> Command:
            '''Find the area of interest for a place name.'''
            found = gazetteer.lookup(place)
            return publish(runtime, "gazet", "get_aoi", {"bbox": found.bbox, "name": found.name})
    """
    if not fields:
        raise ValueError("publish needs at least one field")
    turn = count_turns(state_field(runtime.state, "messages"))
    writes = tool_state_writes(toolset, tool, fields, turn=turn)
    crumb = f"[state updated: {', '.join(writes)}]"
    content = f"{crumb} {note}" if note else crumb
    return Command(
        update={
            "tool_state": writes,
            "messages": [ToolMessage(content=content, tool_call_id=runtime.tool_call_id)],
        }
    )
