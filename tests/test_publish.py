"""Publishing: keys, turn stamping, JSON conversion and the breadcrumb a tool leaves."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import BaseModel

from mcp_state_versions.publish import publish, state_key, tool_state_writes

from .conftest import runtime_for


class Place(BaseModel):
    name: str
    founded: datetime.date


def test_publish_stamps_the_turn_and_leaves_a_breadcrumb() -> None:
    state = {"messages": [HumanMessage("a"), AIMessage("b"), HumanMessage("c")], "tool_state": {}}
    command = publish(
        runtime_for(state),
        "gazet",
        "get_aoi",
        {"bbox": (1, 2, 3, 4), "place": Place(name="Aarhus", founded=datetime.date(770, 1, 1))},
        note="Aarhus",
    )
    writes: dict[str, Any] = command.update["tool_state"]
    assert writes == {
        "gazet/get_aoi/bbox": {"value": [1, 2, 3, 4], "tool": "get_aoi", "turn": 2},
        "gazet/get_aoi/place": {
            "value": {"name": "Aarhus", "founded": "0770-01-01"},
            "tool": "get_aoi",
            "turn": 2,
        },
    }
    (message,) = command.update["messages"]
    assert message.content == "[state updated: gazet/get_aoi/bbox, gazet/get_aoi/place] Aarhus"
    assert message.tool_call_id == "call-1"


def test_values_without_a_json_form_are_refused_by_field() -> None:
    with pytest.raises(TypeError, match="cannot publish field 'blob' of gazet/get_aoi"):
        tool_state_writes("gazet", "get_aoi", {"blob": object()}, turn=1)


@pytest.mark.parametrize(
    ("parts", "label"),
    [(("", "t", "f"), "toolset"), (("s", "a/b", "f"), "tool"), (("s", "t", ""), "field")],
)
def test_key_parts_are_checked(parts: tuple[str, str, str], label: str) -> None:
    with pytest.raises(ValueError, match=f"{label} must be a non-empty string without '/'"):
        state_key(*parts)


def test_publish_needs_a_field() -> None:
    with pytest.raises(ValueError, match="at least one field"):
        publish(runtime_for({"messages": []}), "s", "t", {})


def test_publish_into_a_state_without_the_channel_fails_loudly() -> None:
    """LangGraph drops an update to a channel the graph does not have, without a word."""
    from mcp_state_versions.state import ToolStateError

    with pytest.raises(ToolStateError, match="SessionStateMiddleware"):
        publish(runtime_for({"messages": [HumanMessage("a")]}), "t", "t", {"k": 1})
