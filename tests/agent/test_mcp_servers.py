"""The MCP path for real: a FastMCP server over stdio, its results published and versioned."""

from __future__ import annotations

import sys

from langchain_core.messages import AIMessage, ToolMessage

from mcp_state_versions import ScriptedChatModel, build_agent, run_turn
from mcp_state_versions.agent.mcp_servers import load_publishing_tools
from mcp_state_versions.demo.scripted import call
from mcp_state_versions.savers.memory import PruningInMemorySaver

BBOX = "gazet/get_aoi/bbox"


async def test_two_calls_over_stdio_are_published_and_versioned() -> None:
    tools = await load_publishing_tools(
        {
            "gazet": {
                "command": sys.executable,
                "args": ["-m", "mcp_state_versions.demo.gazetteer"],
                "transport": "stdio",
            }
        }
    )
    assert [t.name for t in tools] == ["get_aoi", "compare_areas", "describe"]
    script = [
        AIMessage("", tool_calls=[call("get_aoi", "a", place="Copenhagen")]),
        AIMessage("found"),
        AIMessage("", tool_calls=[call("get_aoi", "b", place="Aarhus")]),
        AIMessage(
            "",
            tool_calls=[
                call("inspect_state", "c", key="*"),
                call("inspect_state", "d", key=BBOX, turn=1),
                call("get_aoi", "e", place="Atlantis"),
            ],
        ),
        AIMessage("compared"),
    ]
    agent = build_agent(
        ScriptedChatModel(replies=script), tools, checkpointer=PruningInMemorySaver()
    )
    await run_turn(agent, "t", "Find Copenhagen")
    state = await run_turn(agent, "t", "Now Aarhus; compare with the first")
    replies = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert replies["a"].content.startswith("[state updated: gazet/get_aoi/")
    # a small structured result stays in the message after the breadcrumb, as a captured one
    assert (
        BBOX in replies["a"].content and '"bbox": [12.4, 55.5, 12.7, 55.8]' in replies["a"].content
    )
    assert f"{BBOX}: list[4] of 9.9 — rewritten, 2 versions" in replies["c"].content
    assert replies["d"].content.endswith("[12.4, 55.5, 12.7, 55.8]")
    # A tool error is passed through to the model, not published.
    assert "no area of interest known for 'Atlantis'" in str(replies["e"].content)
    assert state["tool_state"][BBOX]["tool"] == "get_aoi"


async def test_a_long_text_result_is_published_and_a_short_one_stays() -> None:
    """describe returns about 2 KB of plain text (no structured content): above publish_above
    it is published as gazet/describe/result and the model gets the breadcrumb; with a higher
    threshold it stays in the message as it was."""
    server = {
        "gazet": {
            "command": sys.executable,
            "args": ["-m", "mcp_state_versions.demo.gazetteer"],
            "transport": "stdio",
        }
    }
    for publish_above, published in [(1000, True), (100_000, False)]:
        tools = await load_publishing_tools(server, publish_above=publish_above)
        script = [
            AIMessage("", tool_calls=[call("describe", "a", place="Oslo")]),
            AIMessage("described"),
        ]
        agent = build_agent(
            ScriptedChatModel(replies=script), tools, checkpointer=PruningInMemorySaver()
        )
        state = await run_turn(agent, "t", "Describe Oslo")
        reply = next(m for m in state["messages"] if isinstance(m, ToolMessage))
        key = "gazet/describe/result"
        if published:
            assert reply.content == f"[state updated: {key}]"
            assert state["tool_state"][key]["value"].startswith("Oslo (NO): west 10.6")
            assert len(state["tool_state"][key]["value"]) > 1000
        else:
            assert key not in state.get("tool_state", {})
            assert "Survey note 39" in str(reply.content)
